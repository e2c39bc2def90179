#include "device/vendors/hygon/hygon.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendor_support.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::hygon {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

protocol::VendorInfo MakeInfo(const HygonConfig& config) {
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

// The first failing check of HAMi's DCU fit for one device, or nullopt; on success `*chosen`
// is the device entry to allocate.
std::optional<std::string_view> Check(const DeviceUsage& dev, const DeviceRequest& request,
                                      const FitContext& ctx, const protocol::VendorInfo& info,
                                      const StringMap& annos, protocol::ContainerDevice* chosen) {
  if (!dev.health) return protocol::kCardNotHealth;
  if (request.type != kVendorKey ||
      !nvidia::CheckType(annos, info.use_type_key, info.nouse_type_key, dev.type)) {
    return protocol::kCardTypeMismatch;
  }
  if (!nvidia::CheckUuid(annos, info.use_uuid_key, info.nouse_uuid_key, dev.id)) {
    return protocol::kCardUuidMismatch;
  }
  return CheckShare(dev, request, ctx, chosen);
}

}  // namespace

Result<HygonConfig> ParseHygonConfig(const YAML::Node& section) {
  HygonConfig config;
  if (Status s = ReadVendorSection(section, kSection, &config.resource_count_name,
                                   &config.resource_memory_name, &config.resource_core_name);
      !s) {
    return std::move(s).take_error();
  }
  if (!section || !section.IsMap()) return config;  // null: the defaults
  const std::string prefix = std::string(kSection) + ".";
  if (YAML::Node value = section["memoryFactor"]; value && !value.IsNull()) {
    std::optional<int32_t> factor;
    if (value.IsScalar()) factor = ParseInt32(Trim(value.Scalar()));
    if (!factor || *factor < 1) {
      return FieldError(prefix + "memoryFactor", "a positive integer", Describe(value));
    }
    config.memory_factor = *factor;
  }
  return config;
}

HygonDevice::HygonDevice(HygonConfig config)
    : config_(std::move(config)), info_(MakeInfo(config_)) {}

Result<std::vector<DeviceUsage>> HygonDevice::NodeDevices(const NodeView& node) const {
  std::vector<DeviceUsage> out;
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return out;
  auto devices = protocol::DecodeNodeRegisterLegacy(*value);
  if (!devices) return Error{"annotation " + info_.register_key + ": " + devices.error()};
  for (const auto& info : *devices) out.push_back(UsageFromDeviceInfo(info, info_.vendor_key));
  return out;
}

Result<bool> HygonDevice::MutateAdmission(AdmissionEdit& edit) const {
  return LimitsContain(edit.Container(), config_.resource_count_name);
}

Result<DeviceRequest> HygonDevice::NormalizeRequest(const ContainerView& container) const {
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
    auto mib = protocol::ParseMemoryMiB(config_.resource_memory_name, *mem);
    if (!mib) return fail(mib.error());
    if (*mib > kInt32Max / config_.memory_factor) {
      return fail("resource " + config_.resource_memory_name + " value " + Quote(*mem) +
                  ": times memoryFactor " + std::to_string(config_.memory_factor) +
                  " exceeds 2147483647 MiB");
    }
    req.memreq = *mib * config_.memory_factor;
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

FitResult HygonDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                           const DeviceRequest& request, const FitContext& ctx) const {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  static const StringMap kNone;
  const StringMap& annos = ctx.pod ? ctx.pod->annotations : kNone;
  ScanCandidates(
      candidates, request.nums,
      [&](const DeviceUsage& dev, const protocol::ContainerDevices& /*picked*/,
          protocol::ContainerDevice* chosen) {
        return Check(dev, request, ctx, info_, annos, chosen);
      },
      &r);
  return r;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeHygon(const YAML::Node& section,
                                                       const DeviceConfig& /*config*/) {
  auto config = ParseHygonConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<HygonDevice>(std::move(*config)));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(hygon, "hygon", MakeHygon);

}  // namespace hami::device::hygon
