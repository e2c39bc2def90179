#include "device/vendors/vastai/vastai.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/strings.h"
#include "device/vendor_support.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::vastai {
namespace {

protocol::VendorInfo MakeInfo(const VastaiConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kVendorKey);
  info.count_resource = config.resource_count_name;
  return info;
}

const std::string* Lookup(const ContainerView& container, const std::string& resource) {
  if (const std::string* v = FindValue(container.limits, resource)) return v;
  return FindValue(container.requests, resource);
}

// An entry's custominfo object (Go matches the key case-insensitively), or null.
const nlohmann::json* CustomInfo(const nlohmann::json& entry) {
  if (!entry.is_object()) return nullptr;
  const nlohmann::json* found = nullptr;
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (it.key() == "custominfo") return it->is_object() ? &*it : nullptr;
    if (!found && ToLower(it.key()) == "custominfo") found = &*it;
  }
  return found && found->is_object() ? found : nullptr;
}

std::optional<std::string> StringField(const nlohmann::json& info, const char* key) {
  auto it = info.find(key);
  if (it == info.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<std::string> Custom(const DeviceUsage& dev, std::string_view key) {
  auto it = dev.custom_info.find(key);
  if (it == dev.custom_info.end()) return std::nullopt;
  return it->second;
}

}  // namespace

std::vector<size_t> BestDieCombination(const std::vector<std::optional<std::string>>& aic,
                                       size_t nums) {
  std::vector<std::string> cards;  // in first-pick order
  std::map<std::string, std::vector<size_t>> dies;
  for (size_t i = 0; i < aic.size(); ++i) {
    if (!aic[i]) continue;
    if (dies.find(*aic[i]) == dies.end()) cards.push_back(*aic[i]);
    dies[*aic[i]].push_back(i);
  }
  std::stable_sort(cards.begin(), cards.end(), [&](const std::string& a, const std::string& b) {
    return dies[a].size() > dies[b].size();
  });
  std::vector<size_t> out;
  for (const std::string& card : cards) {
    for (size_t pos : dies[card]) {
      if (out.size() == nums) return out;
      out.push_back(pos);
    }
  }
  return out;
}

Result<VastaiConfig> ParseVastaiConfig(const YAML::Node& section) {
  VastaiConfig config;
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

VastaiDevice::VastaiDevice(VastaiConfig config)
    : config_(std::move(config)), info_(MakeInfo(config_)) {}

Result<std::vector<DeviceUsage>> VastaiDevice::NodeDevices(const NodeView& node) const {
  std::vector<DeviceUsage> out;
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return out;
  auto devices = protocol::DecodeNodeRegister(*value, {.require_id = true});
  if (!devices) return Error{"annotation " + info_.register_key + ": " + devices.error()};
  // The decoder keeps no custominfo; the value decoded, so it is a JSON list (or null).
  nlohmann::json list = ParseJsonOrNull(*value);
  for (size_t i = 0; i < devices->size(); ++i) {
    protocol::DeviceInfo info = (*devices)[i];
    info.devcore = 100;
    DeviceUsage row = UsageFromDeviceInfo(info, info_.vendor_key);
    const nlohmann::json* custom =
        list.is_array() && i < list.size() ? CustomInfo(list[i]) : nullptr;
    if (custom) {
      for (std::string_view key : {kStrategyKey, kAicKey}) {
        if (auto text = StringField(*custom, std::string(key).c_str())) {
          row.custom_info[std::string(key)] = *text;
        }
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

Result<bool> VastaiDevice::MutateAdmission(AdmissionEdit& edit) const {
  return LimitsContain(edit.Container(), config_.resource_count_name);
}

Result<DeviceRequest> VastaiDevice::NormalizeRequest(const ContainerView& container) const {
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

FitResult VastaiDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                            const DeviceRequest& request, const FitContext& ctx) const {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  static const StringMap kNone;
  const StringMap& annos = ctx.pod ? ctx.pod->annotations : kNone;
  bool die_mode = !candidates.empty() && Custom(*candidates.front(), kStrategyKey) == kDieStrategy;
  std::set<std::string> occupied;  // cards with a die in use (mutex, die mode)
  if (ctx.policy.mutex && die_mode) {
    for (const DeviceUsage* d : candidates) {
      if (auto aic = Custom(*d, kAicKey); aic && d->used > 0) occupied.insert(*aic);
    }
  }
  auto check = [&](const DeviceUsage& dev) -> std::optional<std::string_view> {
    if (!dev.health) return protocol::kCardNotHealth;
    if (request.type != kVendorKey) return protocol::kCardTypeMismatch;
    if (!nvidia::CheckUuid(annos, info_.use_uuid_key, info_.nouse_uuid_key, dev.id)) {
      return protocol::kCardUuidMismatch;
    }
    if (dev.count <= dev.used) return protocol::kCardTimeSlicingExhausted;
    if (ctx.policy.mutex) {
      auto aic = Custom(dev, kAicKey);
      if (dev.used > 0 || (die_mode && aic && occupied.count(*aic))) {
        return protocol::kExclusiveDeviceAllocateConflict;
      }
    }
    return std::nullopt;
  };
  protocol::ContainerDevices picked;
  std::vector<std::optional<std::string>> picked_aic;
  for (size_t k = candidates.size(); k-- > 0;) {
    const DeviceUsage& dev = *candidates[k];
    if (auto reason = check(dev)) {
      r.reasons[std::string(*reason)] += 1;
      continue;
    }
    picked.push_back(protocol::ContainerDevice{dev.id, request.type, 0, request.coresreq});
    picked_aic.push_back(Custom(dev, kAicKey));
    if (!die_mode && static_cast<int32_t>(picked.size()) == request.nums) {
      r.fit = true;
      r.devices = std::move(picked);
      return r;
    }
  }
  size_t nums = static_cast<size_t>(request.nums);
  if (die_mode && picked.size() >= nums) {
    std::vector<size_t> chosen;
    if (picked.size() == nums) {
      for (size_t i = 0; i < nums; ++i) chosen.push_back(i);
    } else if (nums == 1) {
      chosen = {0};
    } else {
      chosen = BestDieCombination(picked_aic, nums);
    }
    if (chosen.size() == nums) {
      for (size_t pos : chosen) r.devices.push_back(picked[pos]);
      r.fit = true;
      return r;
    }
  }
  if (!picked.empty()) {
    r.reasons[std::string(protocol::kAllocatedCardsInsufficientRequest)] += picked.size();
  }
  return r;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeVastai(const YAML::Node& section,
                                                        const DeviceConfig& /*config*/) {
  auto config = ParseVastaiConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<VastaiDevice>(std::move(*config)));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(vastai, "vastai", MakeVastai);

double VastaiDevice::ScoreNode(const ScoreContext& context) const {
  std::map<std::string_view, const DeviceUsage*> rows;
  for (const DeviceUsage& d : context.node->devices) rows.emplace(d.id, &d);
  float score = 0;  // HAMi sums in float32
  for (const auto& ctr : *context.picks) {
    if (ctr.empty()) continue;
    std::map<std::string_view, int> per_card;
    for (const auto& pick : ctr) {
      auto row = rows.find(pick.uuid);
      if (row == rows.end()) return 0;
      const auto& info = row->second->custom_info;
      auto strategy = info.find(kStrategyKey);
      if (strategy != info.end() && strategy->second != kDieStrategy) return 0;
      auto aic = info.find(kAicKey);
      if (aic == info.end()) return 0;
      per_card[aic->second] += 1;
    }
    int most = 0, total = 0;
    for (const auto& [card, n] : per_card) {
      most = std::max(most, n);
      total += n;
    }
    if (total > 0) score += static_cast<float>(most) / static_cast<float>(total);
  }
  return static_cast<double>(score);
}

}  // namespace hami::device::vastai
