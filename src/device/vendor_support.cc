#include "device/vendor_support.h"

#include <algorithm>

#include "common/strings.h"
#include "device/yaml_error.h"
#include "protocol/quantity.h"
#include "protocol/reason.h"

namespace hami::device {

Status ReadResourceNames(const YAML::Node& section, const std::string& path,
                         std::initializer_list<std::pair<const char*, std::string*>> fields) {
  for (auto [key, field] : fields) {
    YAML::Node value = section[key];
    if (!value || value.IsNull()) continue;
    if (!value.IsScalar() || Trim(value.Scalar()).empty()) {
      return FieldError(path + "." + key, "a resource name", Describe(value));
    }
    *field = value.Scalar();
  }
  return OkStatus();
}

Status ReadVendorSection(const YAML::Node& section, std::string_view name, std::string* count,
                         std::string* memory, std::string* core) {
  if (!section || section.IsNull()) return OkStatus();
  if (!section.IsMap()) return FieldError(std::string(name), "a map", Describe(section));
  return ReadResourceNames(
      section, std::string(name),
      {{"resourceCountName", count}, {"resourceMemoryName", memory}, {"resourceCoreName", core}});
}

bool LimitsContain(const nlohmann::json& container, const std::string& resource) {
  const nlohmann::json* limits = &container;
  for (const char* key : {"resources", "limits"}) {
    if (!limits->is_object() || !limits->contains(key)) return false;
    limits = &(*limits)[key];
  }
  return limits->is_object() && limits->contains(resource);
}

Result<int32_t> CapacityCount(const StringMap& capacity, const std::string& resource) {
  const std::string* value = FindValue(capacity, resource);
  if (!value) return 0;
  auto count = protocol::ParseDeviceCount(resource, *value);
  if (!count) return Error{"capacity " + resource + ": " + count.error()};
  return count;
}

std::optional<std::string_view> CheckShare(const DeviceUsage& dev, const DeviceRequest& request,
                                           const FitContext& ctx,
                                           protocol::ContainerDevice* chosen) {
  if (dev.count <= dev.used) return protocol::kCardTimeSlicingExhausted;
  if (ctx.policy.mutex && dev.used > 0) return protocol::kExclusiveDeviceAllocateConflict;
  int32_t cores = std::min(request.coresreq, 100);
  int32_t memreq = std::max(request.memreq, 0);
  if (request.mem_percentage != kPercentUnset && request.memreq == 0) {
    memreq =
        static_cast<int32_t>(static_cast<int64_t>(dev.totalmem) * request.mem_percentage / 100);
  }
  if (dev.totalmem - dev.usedmem < memreq) return protocol::kCardInsufficientMemory;
  if (dev.totalcore - dev.usedcores < cores) return protocol::kCardInsufficientCore;
  if (dev.totalcore == 100 && cores == 100 && dev.used > 0) {
    return protocol::kExclusiveDeviceAllocateConflict;
  }
  if (dev.totalcore != 0 && dev.usedcores == dev.totalcore && cores == 0) {
    return protocol::kCardComputeUnitsExhausted;
  }
  *chosen = protocol::ContainerDevice{dev.id, request.type, memreq, cores};
  return std::nullopt;
}

void ScanCandidates(const std::vector<const DeviceUsage*>& candidates, int32_t nums,
                    const DeviceCheck& check, FitResult* r) {
  protocol::ContainerDevices picked;
  for (size_t k = candidates.size(); k-- > 0;) {
    protocol::ContainerDevice chosen;
    if (auto reason = check(*candidates[k], &chosen)) {
      r->reasons[std::string(*reason)] += 1;
      continue;
    }
    picked.push_back(std::move(chosen));
    if (static_cast<int32_t>(picked.size()) == nums) {
      r->fit = true;
      r->devices = std::move(picked);
      return;
    }
  }
  if (!picked.empty()) {
    r->reasons[std::string(protocol::kAllocatedCardsInsufficientRequest)] += picked.size();
  }
}

}  // namespace hami::device
