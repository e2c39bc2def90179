#include "device/vendors/iluvatar/iluvatar.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendor_support.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::iluvatar {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

protocol::VendorInfo MakeInfo(const IluvatarConfig& config) {
  protocol::VendorInfo info = protocol::IluvatarVendor(config.common_word);
  if (!config.resource_count_name.empty()) info.count_resource = config.resource_count_name;
  if (!config.resource_memory_name.empty()) info.memory_resource = config.resource_memory_name;
  if (!config.resource_core_name.empty()) info.core_resource = config.resource_core_name;
  return info;
}

const std::string* Lookup(const ContainerView& container, const std::string& resource) {
  if (const std::string* v = FindValue(container.limits, resource)) return v;
  return FindValue(container.requests, resource);
}

Result<IluvatarConfig> ParseEntry(const YAML::Node& entry, const std::string& path) {
  IluvatarConfig config;
  if (!entry.IsMap()) return FieldError(path, "a map", Describe(entry));
  for (auto [key, field] :
       {std::pair{"commonWord", &config.common_word}, std::pair{"chipName", &config.chip_name},
        std::pair{"resourceCountName", &config.resource_count_name},
        std::pair{"resourceMemoryName", &config.resource_memory_name},
        std::pair{"resourceCoreName", &config.resource_core_name}}) {
    YAML::Node value = entry[key];
    if (!value || value.IsNull()) continue;
    if (!value.IsScalar() || Trim(value.Scalar()).empty()) {
      return FieldError(path + "." + key, "a non-empty string", Describe(value));
    }
    *field = value.Scalar();
  }
  if (config.common_word.empty()) {
    return FieldError(path + ".commonWord", "a non-empty string", Describe(entry["commonWord"]));
  }
  return config;
}

}  // namespace

std::vector<IluvatarConfig> DefaultIluvatarConfigs() {
  std::vector<IluvatarConfig> out;
  for (const char* chip : {"MR-V100", "MR-V50", "BI-V150", "BI-V100"}) {
    out.push_back(IluvatarConfig{.common_word = chip, .chip_name = chip});
  }
  return out;
}

Result<std::vector<IluvatarConfig>> ParseIluvatarConfigs(const YAML::Node& section) {
  if (!section || section.IsNull()) return DefaultIluvatarConfigs();
  std::vector<IluvatarConfig> out;
  if (!section.IsSequence()) return FieldError(std::string(kSection), "a list", Describe(section));
  std::set<std::string> words;
  for (size_t i = 0; i < section.size(); ++i) {
    std::string path = std::string(kSection) + "[" + std::to_string(i) + "]";
    auto entry = ParseEntry(section[i], path);
    if (!entry) return std::move(entry).take_error();
    if (!words.insert(entry->common_word).second) {
      return FieldError(path + ".commonWord", "a word not listed before", entry->common_word);
    }
    out.push_back(std::move(*entry));
  }
  return out;
}

IluvatarDevice::IluvatarDevice(IluvatarConfig config)
    : config_(std::move(config)), info_(MakeInfo(config_)) {}

Result<std::vector<DeviceUsage>> IluvatarDevice::NodeDevices(const NodeView& node) const {
  std::vector<DeviceUsage> out;
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return out;
  auto devices = protocol::DecodeNodeRegisterLegacy(*value);
  if (!devices) return Error{"annotation " + info_.register_key + ": " + devices.error()};
  for (const auto& info : *devices) out.push_back(UsageFromDeviceInfo(info, info_.vendor_key));
  return out;
}

Result<bool> IluvatarDevice::MutateAdmission(AdmissionEdit& edit) const {
  const nlohmann::json& ctr = edit.Container();
  const nlohmann::json* limits = &ctr;
  for (const char* key : {"resources", "limits"}) {
    if (!limits->is_object() || !limits->contains(key)) return false;
    limits = &(*limits)[key];
  }
  if (!limits->is_object()) return false;
  auto it = limits->find(info_.count_resource);
  if (it == limits->end()) return false;
  std::string text = it->is_string() ? it->get<std::string>() : it->dump();
  auto count = protocol::ParseDeviceCount(info_.count_resource, text);
  if (!count) return std::move(count).take_error();
  if (*count > 1) {
    edit.Set({"resources", "limits", info_.core_resource},
             std::to_string(static_cast<int64_t>(*count) * 100));
  }
  std::string name;
  if (auto n = ctr.find("name"); n != ctr.end() && n->is_string()) name = n->get<std::string>();
  bool has_env = false;
  if (auto env = ctr.find("env"); env != ctr.end() && env->is_array()) {
    for (const auto& e : *env) {
      if (e.is_object() && e.value("name", std::string()) == kContainerNameEnv) has_env = true;
    }
  }
  if (!has_env && !name.empty()) {
    edit.Append({"env"}, nlohmann::json{{"name", kContainerNameEnv}, {"value", name}});
  }
  return true;
}

Result<DeviceRequest> IluvatarDevice::NormalizeRequest(const ContainerView& container) const {
  auto fail = [&](const std::string& why) {
    return Error{"container " + Quote(container.name) + ": " + why};
  };
  DeviceRequest req;
  const std::string* count = Lookup(container, info_.count_resource);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(info_.count_resource, *count);
  if (!nums) return fail(nums.error());
  if (*nums == 0) return req;
  req.nums = *nums;
  req.type = info_.vendor_key;
  req.mem_percentage = 0;
  if (const std::string* mem = Lookup(container, info_.memory_resource)) {
    auto units = protocol::ParseDeviceCount(info_.memory_resource, *mem);
    if (!units) return fail(units.error());
    if (*units > kInt32Max / kMemoryFactor) {
      return fail("resource " + info_.memory_resource + " value " + Quote(*mem) +
                  ": times 256 MiB exceeds 2147483647 MiB");
    }
    req.memreq = *units * kMemoryFactor;
  }
  if (req.memreq == 0) req.mem_percentage = 100;
  if (const std::string* cores = Lookup(container, info_.core_resource)) {
    auto c = protocol::ParseDeviceCount(info_.core_resource, *cores);
    if (!c) return fail(c.error());
    req.coresreq = *c;
  }
  return req;
}

FitResult IluvatarDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                              const DeviceRequest& request, const FitContext& ctx) const {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  static const StringMap kNone;
  const StringMap& annos = ctx.pod ? ctx.pod->annotations : kNone;
  auto check = [&](const DeviceUsage& dev, const protocol::ContainerDevices& /*picked*/,
                   protocol::ContainerDevice* chosen) -> std::optional<std::string_view> {
    if (!dev.health) return protocol::kCardNotHealth;
    if (request.type != info_.vendor_key) return protocol::kCardTypeMismatch;
    if (!nvidia::CheckUuid(annos, info_.use_uuid_key, info_.nouse_uuid_key, dev.id)) {
      return protocol::kCardUuidMismatch;
    }
    return CheckShare(dev, request, ctx, chosen);
  };
  ScanCandidates(candidates, request.nums, check, &r);
  return r;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeIluvatars(const YAML::Node& section,
                                                           const DeviceConfig& /*config*/) {
  auto configs = ParseIluvatarConfigs(section);
  if (!configs) return std::move(configs).take_error();
  std::vector<std::unique_ptr<Device>> out;
  for (auto& c : *configs) out.push_back(std::make_unique<IluvatarDevice>(std::move(c)));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(iluvatar, "iluvatars", MakeIluvatars);

}  // namespace hami::device::iluvatar
