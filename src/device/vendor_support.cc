#include "device/vendor_support.h"

#include <algorithm>
#include <limits>

#include "common/strings.h"
#include "device/quota.h"
#include "device/usage.h"
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

Result<std::vector<DeviceUsage>> CapacityCardRows(const NodeView& node,
                                                  const CapacityCards& cards) {
  std::vector<DeviceUsage> out;
  auto cores = CapacityCount(node.capacity, cards.core_resource);
  if (!cores) return std::move(cores).take_error();
  if (*cores == 0) return out;
  auto memory_units = CapacityCount(node.capacity, cards.memory_resource);
  if (!memory_units) return std::move(memory_units).take_error();
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  int64_t memory = *memory_units;
  int64_t devmem =
      std::min<int64_t>(memory * cards.memory_factor * cards.cores_per_card / *cores, kInt32Max);
  for (int64_t i = 0; i * cards.cores_per_card < *cores; ++i) {
    out.push_back(
        DeviceUsage{.id = node.name + "-" + std::string(cards.id_infix) + "-" + std::to_string(i),
                    .index = static_cast<uint64_t>(i),
                    .type = std::string(cards.vendor),
                    .vendor = std::string(cards.vendor),
                    .health = true,
                    .count = 100,
                    .totalmem = static_cast<int32_t>(devmem),
                    .totalcore = static_cast<int32_t>(cards.cores_per_card)});
  }
  return out;
}

std::optional<std::string_view> CheckQuota(const FitContext& ctx, const protocol::VendorInfo& info,
                                           int64_t memory_factor,
                                           const protocol::ContainerDevices& picked,
                                           const protocol::ContainerDevice& candidate) {
  if (!ctx.quota) return std::nullopt;
  protocol::PodDevices pod = ctx.earlier ? *ctx.earlier : protocol::PodDevices{};
  pod.push_back(picked);
  pod.back().push_back(candidate);
  int64_t mem = 0, cores = 0;
  for (const auto& d : CollapsePodDevices(pod, ctx.init_count, false)) {
    mem += d.usedmem;
    cores += d.usedcores;
  }
  if (!FitQuota(*ctx.quota, info.memory_resource, mem, info.core_resource, cores, memory_factor)) {
    return protocol::kResourceQuotaNotFit;
  }
  return std::nullopt;
}

std::optional<std::string_view> CheckShare(const DeviceUsage& dev, const DeviceRequest& request,
                                           const FitContext& ctx, protocol::ContainerDevice* chosen,
                                           const QuotaStep* quota) {
  if (dev.count <= dev.used) return protocol::kCardTimeSlicingExhausted;
  if (ctx.policy.mutex && dev.used > 0) return protocol::kExclusiveDeviceAllocateConflict;
  int32_t cores = std::min(request.coresreq, 100);
  int32_t memreq = std::max(request.memreq, 0);
  if (request.mem_percentage != kPercentUnset && request.memreq == 0) {
    memreq =
        static_cast<int32_t>(static_cast<int64_t>(dev.totalmem) * request.mem_percentage / 100);
  }
  *chosen = protocol::ContainerDevice{dev.id, request.type, memreq, cores};
  if (quota) {
    if (auto reason = CheckQuota(ctx, quota->info, quota->memory_factor, quota->picked, *chosen)) {
      return reason;
    }
  }
  if (dev.totalmem - dev.usedmem < memreq) return protocol::kCardInsufficientMemory;
  if (dev.totalcore - dev.usedcores < cores) return protocol::kCardInsufficientCore;
  if (dev.totalcore == 100 && cores == 100 && dev.used > 0) {
    return protocol::kExclusiveDeviceAllocateConflict;
  }
  if (dev.totalcore != 0 && dev.usedcores == dev.totalcore && cores == 0) {
    return protocol::kCardComputeUnitsExhausted;
  }
  return std::nullopt;
}

void ScanCandidates(const std::vector<const DeviceUsage*>& candidates, int32_t nums,
                    const DeviceCheck& check, FitResult* r) {
  protocol::ContainerDevices picked;
  for (size_t k = candidates.size(); k-- > 0;) {
    protocol::ContainerDevice chosen;
    if (auto reason = check(*candidates[k], picked, &chosen)) {
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
