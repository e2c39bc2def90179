#include "device/vendors/cambricon/cambricon.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendor_support.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/quantity.h"

namespace hami::device::cambricon {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

protocol::VendorInfo MakeInfo(const CambriconConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kVendorKey);
  info.count_resource = config.resource_count_name;
  info.memory_resource = config.resource_memory_name;
  info.core_resource = config.resource_core_name;
  return info;
}

const std::string* Lookup(const ContainerView& container, const std::string& resource) {
  if (const std::string* v = FindValue(container.limits, resource)) return v;
  return FindValue(container.requests, resource);
}

// The number ending "<node>-cambricon-mlu-<i>", else 0.
int64_t IndexFromId(std::string_view id) {
  size_t dash = id.rfind('-');
  if (dash == std::string_view::npos) return 0;
  return ParseInt64(id.substr(dash + 1)).value_or(0);
}

}  // namespace

std::string EncodeDsmluProfile(const DsmluProfile& profile) {
  return std::to_string(profile.index) + "_" + std::to_string(profile.cores) + "_" +
         std::to_string(profile.memory_units);
}

Result<DsmluProfile> DecodeDsmluProfile(std::string_view value) {
  auto fail = [&] {
    return Error{std::string(kProfileKey) + ": want <index>_<cores>_<memory units>, got " +
                 Quote(value)};
  };
  std::vector<std::string_view> parts = Split(value, '_');
  if (parts.size() != 3) return fail();
  for (std::string_view p : parts) {
    if (p.empty() || p.find_first_not_of("0123456789") != std::string_view::npos) return fail();
  }
  auto index = ParseInt64(parts[0]);
  auto cores = ParseInt32(parts[1]);
  auto units = ParseInt32(parts[2]);
  if (!index || !cores || !units) return fail();
  return DsmluProfile{*index, *cores, *units};
}

Result<CambriconConfig> ParseCambriconConfig(const YAML::Node& section) {
  CambriconConfig config;
  if (Status s = ReadVendorSection(section, kSection, &config.resource_count_name,
                                   &config.resource_memory_name, &config.resource_core_name);
      !s) {
    return std::move(s).take_error();
  }
  return config;
}

CambriconDevice::CambriconDevice(CambriconConfig config)
    : config_(std::move(config)), info_(MakeInfo(config_)) {}

Result<std::vector<DeviceUsage>> CambriconDevice::NodeDevices(const NodeView& node) const {
  return CapacityCardRows(node, CapacityCards{.core_resource = config_.resource_core_name,
                                              .memory_resource = config_.resource_memory_name,
                                              .cores_per_card = 100,
                                              .memory_factor = kMemoryFactor,
                                              .id_infix = "cambricon-mlu",
                                              .vendor = info_.vendor_key});
}

Health CambriconDevice::CheckHealth(const NodeView& /*node*/, Health /*handshake*/) const {
  return Health{true, true};
}

Result<bool> CambriconDevice::MutateAdmission(AdmissionEdit& edit) const {
  return LimitsContain(edit.Container(), config_.resource_count_name);
}

Result<DeviceRequest> CambriconDevice::NormalizeRequest(const ContainerView& container) const {
  auto fail = [&](const std::string& why) {
    return Error{"container " + Quote(container.name) + ": " + why};
  };
  DeviceRequest req;
  const std::string* count = Lookup(container, config_.resource_count_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config_.resource_count_name, *count);
  if (!nums) return fail(nums.error());
  if (*nums == 0) return req;
  req.nums = *nums;
  req.type = std::string(kVendorKey);
  req.mem_percentage = 0;
  if (const std::string* mem = Lookup(container, config_.resource_memory_name)) {
    auto units = protocol::ParseDeviceCount(config_.resource_memory_name, *mem);
    if (!units) return fail(units.error());
    if (*units > kInt32Max / kMemoryFactor) {
      return fail("resource " + config_.resource_memory_name + " value " + Quote(*mem) +
                  ": times 256 MiB exceeds 2147483647 MiB");
    }
    req.memreq = *units * kMemoryFactor;
  }
  if (req.memreq == 0) req.mem_percentage = 100;
  req.coresreq = 100;
  if (const std::string* cores = Lookup(container, config_.resource_core_name)) {
    auto c = protocol::ParseDeviceCount(config_.resource_core_name, *cores);
    if (!c) return fail(c.error());
    req.coresreq = *c;
  }
  return req;
}

FitResult CambriconDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                               const DeviceRequest& request, const FitContext& ctx) const {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  static const StringMap kNone;
  const StringMap& annos = ctx.pod ? ctx.pod->annotations : kNone;
  auto check = [&](const DeviceUsage& dev, const protocol::ContainerDevices& picked,
                   protocol::ContainerDevice* chosen) -> std::optional<std::string_view> {
    if (!dev.health) return protocol::kCardNotHealth;
    if (request.type != kVendorKey) return protocol::kCardTypeMismatch;
    if (!nvidia::CheckUuid(annos, info_.use_uuid_key, info_.nouse_uuid_key, dev.id)) {
      return protocol::kCardUuidMismatch;
    }
    const QuotaStep quota{info_, kMemoryFactor, picked};
    return CheckShare(dev, request, ctx, chosen, &quota);
  };
  ScanCandidates(candidates, request.nums, check, &r);
  return r;
}

Result<std::string> DsmluLock(const NodeView& node, SystemTime now, const Zone& zone) {
  const std::string* held = FindValue(node.annotations, kDsmluLockKey);
  if (!held) return FormatRfc3339(now, zone);
  auto since = ParseRfc3339(*held);
  if (!since) {
    return Error{"node " + Quote(node.name) + ": annotation " + std::string(kDsmluLockKey) +
                 ": want an RFC 3339 time, got " + Quote(*held)};
  }
  if (now - since->instant > kDsmluLockExpiry) return FormatRfc3339(now, zone);
  return Error{"node " + node.name + " has been locked within 2 minutes"};
}

Result<std::string> CambriconDevice::TakeVendorLock(const NodeView& node, SystemTime now) const {
  return DsmluLock(node, now, Zone::Local());
}

StringMap CambriconDevice::AllocationAnnotations(const AllocationContext& context,
                                                 const protocol::PodDevices& devices) const {
  StringMap out = Device::AllocationAnnotations(context, devices);
  for (const auto& ctr : devices) {
    if (ctr.empty()) continue;
    const protocol::ContainerDevice& d = ctr.front();
    out[std::string(kAssignedKey)] = "false";
    out[std::string(kProfileKey)] =
        EncodeDsmluProfile({IndexFromId(d.uuid), d.usedcores, d.usedmem / kMemoryFactor});
    break;
  }
  return out;
}

NodeRegistration CambriconDevice::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  NodeRegistration out;
  int64_t count = 0, memory = 0;
  for (const auto& d : devices) {
    count += d.count;
    memory += d.devmem;
  }
  out.capacity[config_.resource_count_name] = std::to_string(count);
  out.capacity[config_.resource_core_name] = std::to_string(100 * devices.size());
  out.capacity[config_.resource_memory_name] = std::to_string(memory / kMemoryFactor);
  return out;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeCambricon(const YAML::Node& section,
                                                           const DeviceConfig& /*config*/) {
  auto config = ParseCambriconConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<CambriconDevice>(std::move(*config)));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(cambricon, "cambricon", MakeCambricon);

}  // namespace hami::device::cambricon
