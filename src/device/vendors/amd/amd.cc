#include "device/vendors/amd/amd.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendor_support.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::amd {
namespace {

protocol::VendorInfo MakeInfo(const AmdConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kVendorKey);
  info.count_resource = config.resource_count_name;
  info.memory_resource = config.resource_memory_name;
  info.core_resource = config.resource_core_name;
  return info;
}

// container.resources.limits[name], or null.
const nlohmann::json* Limit(const nlohmann::json& ctr, const std::string& name) {
  if (name.empty()) return nullptr;
  const nlohmann::json* v = &ctr;
  for (const char* key : {"resources", "limits"}) {
    if (!v->is_object() || !v->contains(key)) return nullptr;
    v = &(*v)[key];
  }
  if (!v->is_object()) return nullptr;
  auto it = v->find(name);
  return it == v->end() ? nullptr : &*it;
}

std::string Text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// A core percentage: a whole number in 1..100.
std::optional<int32_t> Percentage(std::string_view resource, std::string_view value) {
  auto p = protocol::ParseDeviceCount(resource, value);
  if (!p || *p < 1 || *p > 100) return std::nullopt;
  return *p;
}

}  // namespace

bool CheckAmdType(const StringMap& annotations, std::string_view card_type) {
  std::string card = ToLower(card_type);
  auto matches = [&](std::string_view list) {
    for (std::string_view item : Split(list, ',')) {
      item = Trim(item);
      if (!item.empty() && card.find(ToLower(item)) != std::string::npos) return true;
    }
    return false;
  };
  if (const std::string* use = FindValue(annotations, "amd.com/use-gputype");
      use && !Trim(*use).empty() && !matches(*use)) {
    return false;
  }
  if (const std::string* nouse = FindValue(annotations, "amd.com/nouse-gputype");
      nouse && !Trim(*nouse).empty() && matches(*nouse)) {
    return false;
  }
  return true;
}

Result<AmdConfig> ParseAmdConfig(const YAML::Node& section) {
  AmdConfig config;
  if (Status s = ReadVendorSection(section, kSection, &config.resource_count_name,
                                   &config.resource_memory_name, &config.resource_core_name);
      !s) {
    return std::move(s).take_error();
  }
  return config;
}

AmdDevice::AmdDevice(AmdConfig config) : config_(std::move(config)), info_(MakeInfo(config_)) {}

Result<std::vector<DeviceUsage>> AmdDevice::NodeDevices(const NodeView& node) const {
  std::vector<DeviceUsage> out;
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return out;
  auto devices = protocol::DecodeNodeRegister(*value, {.require_id = true});
  if (!devices) return Error{"annotation " + info_.register_key + ": " + devices.error()};
  for (const auto& info : *devices) out.push_back(UsageFromDeviceInfo(info, info_.vendor_key));
  return out;
}

Health AmdDevice::CheckHealth(const NodeView& node, Health /*handshake*/) const {
  const std::string* count = FindValue(node.capacity, config_.resource_count_name);
  if (!count) return Health{false, false};
  auto n = protocol::ParseDeviceCount(config_.resource_count_name, *count);
  if (!n || *n == 0) return Health{false, false};
  return Health{true, true};
}

Result<bool> AmdDevice::MutateAdmission(AdmissionEdit& edit) const {
  const nlohmann::json& ctr = edit.Container();
  if (Limit(ctr, config_.resource_count_name)) {
    if (const nlohmann::json* core = Limit(ctr, config_.resource_core_name)) {
      if (!Percentage(config_.resource_core_name, Text(*core))) {
        return Error{config_.resource_core_name +
                     " must be an integer percentage between 1 and 100, got " + Quote(Text(*core))};
      }
    }
    return true;
  }
  return Limit(ctr, config_.resource_memory_name) != nullptr ||
         Limit(ctr, config_.resource_core_name) != nullptr;
}

Result<DeviceRequest> AmdDevice::NormalizeRequest(const ContainerView& container) const {
  auto fail = [&](const std::string& why) {
    return Error{"container " + Quote(container.name) + ": " + why};
  };
  DeviceRequest req;
  const std::string* count = FindValue(container.limits, config_.resource_count_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config_.resource_count_name, *count);
  if (!nums) return fail(nums.error());
  if (*nums == 0) return req;
  req.nums = *nums;
  req.type = std::string(kVendorKey);
  req.mem_percentage = 0;
  if (const std::string* mem = FindValue(container.limits, config_.resource_memory_name)) {
    auto mib = protocol::ParseMemoryMiB(config_.resource_memory_name, *mem);
    if (!mib) return fail(mib.error());
    req.memreq = *mib;
  }
  req.coresreq = 100;
  if (const std::string* core = FindValue(container.limits, config_.resource_core_name)) {
    auto pct = Percentage(config_.resource_core_name, *core);
    if (!pct) {
      return fail("resource " + config_.resource_core_name + " value " + Quote(*core) +
                  ": want an integer percentage between 1 and 100");
    }
    req.coresreq = *pct;
  }
  return req;
}

FitResult AmdDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                         const DeviceRequest& request, const FitContext& ctx) const {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  static const StringMap kNone;
  const StringMap& annos = ctx.pod ? ctx.pod->annotations : kNone;
  bool amd_request = ToLower(request.type) == ToLower(kVendorKey);
  auto check = [&](const DeviceUsage& dev, const protocol::ContainerDevices& /*picked*/,
                   protocol::ContainerDevice* chosen) -> std::optional<std::string_view> {
    if (!dev.health) return protocol::kCardNotHealth;
    if (!amd_request || !CheckAmdType(annos, dev.type)) {
      return protocol::kCardTypeMismatch;
    }
    if (!nvidia::CheckUuid(annos, info_.use_uuid_key, info_.nouse_uuid_key, dev.id)) {
      return protocol::kCardUuidMismatch;
    }
    if (dev.count <= dev.used) return protocol::kCardTimeSlicingExhausted;
    if (ctx.policy.mutex && dev.used > 0) return protocol::kExclusiveDeviceAllocateConflict;
    int32_t memreq = request.memreq;
    if (memreq <= 0 && dev.totalmem > 0) memreq = dev.totalmem;
    if (dev.totalmem - dev.usedmem < memreq) return protocol::kCardInsufficientMemory;
    int32_t cores = 0;
    if (request.coresreq > 0) {
      if (dev.totalcore <= 0) return protocol::kCardInsufficientCore;
      int64_t units = static_cast<int64_t>(dev.totalcore) * request.coresreq / 100;
      cores = static_cast<int32_t>(std::clamp<int64_t>(units, 1, dev.totalcore));
    } else if (dev.totalmem > 0 && memreq >= dev.totalmem) {
      cores = dev.totalcore;
    }
    if (dev.totalcore - dev.usedcores < cores) return protocol::kCardInsufficientCore;
    *chosen = protocol::ContainerDevice{dev.id, dev.type, memreq, cores};
    return std::nullopt;
  };
  ScanCandidates(candidates, request.nums, check, &r);
  return r;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeAmd(const YAML::Node& section,
                                                     const DeviceConfig& /*config*/) {
  auto config = ParseAmdConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<AmdDevice>(std::move(*config)));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(amd, "amd", MakeAmd);

}  // namespace hami::device::amd
