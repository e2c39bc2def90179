#include "device/vendors/biren/biren.h"

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendor_support.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::biren {
namespace {

protocol::VendorInfo MakeInfo(const BirenConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kVendorKey);
  info.count_resource = config.resource_count_name;
  return info;
}

const std::string* Lookup(const ContainerView& container, const std::string& resource) {
  if (const std::string* v = FindValue(container.limits, resource)) return v;
  return FindValue(container.requests, resource);
}

}  // namespace

Result<BirenConfig> ParseBirenConfig(const YAML::Node& section) {
  BirenConfig config;
  if (!section || section.IsNull()) return config;
  if (!section.IsMap()) return FieldError(std::string(kSection), "a map", Describe(section));
  YAML::Node value = section["resourceCountName"];
  if (value && !value.IsNull()) {
    if (!value.IsScalar() || Trim(value.Scalar()).empty()) {
      return FieldError(std::string(kSection) + ".resourceCountName", "a resource name",
                        Describe(value));
    }
    config.resource_count_name = value.Scalar();
  }
  return config;
}

BirenDevice::BirenDevice(BirenConfig config)
    : config_(std::move(config)), info_(MakeInfo(config_)) {}

Result<std::vector<DeviceUsage>> BirenDevice::NodeDevices(const NodeView& node) const {
  std::vector<DeviceUsage> out;
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return out;
  auto devices = protocol::DecodeNodeRegister(*value, {.require_id = true});
  if (!devices) return Error{"annotation " + info_.register_key + ": " + devices.error()};
  for (auto info : *devices) {
    info.devcore = 100;
    out.push_back(UsageFromDeviceInfo(info, info_.vendor_key));
  }
  return out;
}

Result<bool> BirenDevice::MutateAdmission(AdmissionEdit& edit) const {
  return LimitsContain(edit.Container(), config_.resource_count_name);
}

Result<DeviceRequest> BirenDevice::NormalizeRequest(const ContainerView& container) const {
  DeviceRequest req;
  const std::string* count = Lookup(container, config_.resource_count_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config_.resource_count_name, *count);
  if (!nums) return Error{"container " + Quote(container.name) + ": " + nums.error()};
  if (*nums == 0) return req;
  req.nums = *nums;
  req.type = std::string(kVendorKey);
  req.mem_percentage = 100;
  return req;
}

FitResult BirenDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                           const DeviceRequest& request, const FitContext& ctx) const {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  static const StringMap kNone;
  const StringMap& annos = ctx.pod ? ctx.pod->annotations : kNone;
  auto check = [&](const DeviceUsage& dev, const protocol::ContainerDevices& /*picked*/,
                   protocol::ContainerDevice* chosen) -> std::optional<std::string_view> {
    if (!dev.health) return protocol::kCardNotHealth;
    if (request.type != kVendorKey) return protocol::kCardTypeMismatch;
    if (!nvidia::CheckUuid(annos, info_.use_uuid_key, info_.nouse_uuid_key, dev.id)) {
      return protocol::kCardUuidMismatch;
    }
    if (dev.count <= dev.used) return protocol::kCardTimeSlicingExhausted;
    if (ctx.policy.mutex && dev.used > 0) return protocol::kExclusiveDeviceAllocateConflict;
    *chosen = protocol::ContainerDevice{dev.id, request.type, 0, request.coresreq};
    return std::nullopt;
  };
  ScanCandidates(candidates, request.nums, check, &r);
  return r;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeBiren(const YAML::Node& section,
                                                       const DeviceConfig& /*config*/) {
  auto config = ParseBirenConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<BirenDevice>(std::move(*config)));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(biren, "biren", MakeBiren);

}  // namespace hami::device::biren
