#include "device/vendors/metax/metax_device.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <memory>

#include "common/strings.h"
#include "protocol/quantity.h"

namespace hami::device::metax {
namespace {

// resources.limits of a container JSON as quantity texts.
StringMap Limits(const nlohmann::json& container) {
  StringMap out;
  auto res = container.find("resources");
  if (res == container.end() || !res->is_object()) return out;
  auto list = res->find("limits");
  if (list == res->end() || !list->is_object()) return out;
  for (auto it = list->begin(); it != list->end(); ++it) {
    if (it->is_string()) {
      out[it.key()] = it->get<std::string>();
    } else if (it->is_number_integer()) {
      out[it.key()] = it->dump();
    }
  }
  return out;
}

StringMap Annotations(const nlohmann::json& pod) {
  StringMap out;
  auto meta = pod.find("metadata");
  if (meta == pod.end() || !meta->is_object()) return out;
  auto annos = meta->find("annotations");
  if (annos == meta->end() || !annos->is_object()) return out;
  for (auto it = annos->begin(); it != annos->end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

Result<std::vector<std::unique_ptr<Device>>> MakeMetax(const YAML::Node& section,
                                                       const DeviceConfig& /*config*/) {
  auto config = ParseMetaxConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<MetaxGpuDevice>(*config));
  out.push_back(std::make_unique<MetaxSgpuDevice>(*config));
  return out;
}

}  // namespace

// ---- Metax-GPU ----

MetaxGpuDevice::MetaxGpuDevice(MetaxConfig config)
    : config_(std::move(config)), info_(GpuVendor(config_)) {}

Result<std::vector<DeviceUsage>> MetaxGpuDevice::NodeDevices(const NodeView& node) const {
  const std::string* value = FindValue(node.capacity, config_.resource_count_name);
  if (!value) return std::vector<DeviceUsage>{};
  auto count = protocol::ParseDeviceCount(config_.resource_count_name, *value);
  if (!count) return Error{"capacity " + count.error()};
  std::vector<DeviceUsage> rows = GpuNodeDevices(node.name, *count);
  // The node score reads the plugin's topology annotations; the rows are what the scheduler
  // keeps of a node.
  for (std::string_view key : {kLossesKey, kScoresKey}) {
    const std::string* v = FindValue(node.annotations, key);
    if (!v) continue;
    for (DeviceUsage& row : rows) row.custom_info[std::string(key)] = *v;
  }
  return rows;
}

Health MetaxGpuDevice::CheckHealth(const NodeView& node, Health /*handshake*/) const {
  const std::string* value = FindValue(node.capacity, config_.resource_count_name);
  auto count =
      value ? protocol::ParseDeviceCount(config_.resource_count_name, *value) : Result<int32_t>(0);
  return Health{.healthy = count && *count > 0, .need_update = true};
}

Result<bool> MetaxGpuDevice::MutateAdmission(AdmissionEdit& edit) const {
  return Limits(edit.Container()).count(config_.resource_count_name) > 0;
}

Result<DeviceRequest> MetaxGpuDevice::NormalizeRequest(const ContainerView& container) const {
  return GpuRequest(config_, container);
}

FitResult MetaxGpuDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                              const DeviceRequest& request, const FitContext& context) const {
  return GpuFit(candidates, request, context.earlier, context.policy.mutex);
}

double MetaxGpuDevice::ScoreNode(const ScoreContext& context) const {
  StringMap annotations;
  for (const DeviceUsage& d : context.node->devices) {
    if (d.vendor != info_.vendor_key) continue;
    for (std::string_view key : {kLossesKey, kScoresKey}) {
      if (auto it = d.custom_info.find(key); it != d.custom_info.end()) {
        annotations[std::string(key)] = it->second;
      }
    }
    break;
  }
  return GpuScoreNode(annotations, *context.picks, context.policy);
}

NodeRegistration MetaxGpuDevice::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  NodeRegistration out;
  out.capacity[config_.resource_count_name] = std::to_string(devices.size());
  return out;
}

// ---- Metax-SGPU ----

MetaxSgpuDevice::MetaxSgpuDevice(MetaxConfig config)
    : config_(std::move(config)), info_(SgpuVendor(config_)) {}

Result<std::vector<DeviceUsage>> MetaxSgpuDevice::NodeDevices(const NodeView& node) const {
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return std::vector<DeviceUsage>{};
  auto devices = DecodeSDevices(*value);
  if (!devices) return Error{"annotation " + info_.register_key + ": " + devices.error()};
  return SgpuRows(*devices);
}

Health MetaxSgpuDevice::CheckHealth(const NodeView& node, Health /*handshake*/) const {
  auto rows = NodeDevices(node);
  return Health{.healthy = rows && !rows->empty(), .need_update = true};
}

Result<bool> MetaxSgpuDevice::MutateAdmission(AdmissionEdit& edit) const {
  ContainerView view;
  const nlohmann::json& ctr = edit.Container();
  if (auto name = ctr.find("name"); name != ctr.end() && name->is_string()) {
    view.name = name->get<std::string>();
  }
  view.limits = Limits(ctr);
  SgpuAdmission a = SgpuMutate(config_, view, Annotations(edit.Pod()));
  if (a.error) return Error{*a.error};
  if (a.set_qos_policy) {
    edit.SetPod({"metadata", "annotations", std::string(kQosPolicyKey)}, *a.set_qos_policy);
  }
  return a.asks;
}

Result<DeviceRequest> MetaxSgpuDevice::NormalizeRequest(const ContainerView& container) const {
  return SgpuRequest(config_, container);
}

FitResult MetaxSgpuDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                               const DeviceRequest& request, const FitContext& context) const {
  static const StringMap kNone;
  return SgpuFit(candidates, request, context.pod ? context.pod->annotations : kNone,
                 context.policy.mutex);
}

double MetaxSgpuDevice::ScoreNode(const ScoreContext& context) const {
  static const StringMap kNone;
  const StringMap& annotations = context.pod ? context.pod->annotations : kNone;
  const std::string* app_class = FindValue(annotations, kAppClassKey);
  // HAMi topologyAwareEnable: decided at the first pick of a whole device; none: off.
  bool whole = false;
  for (const auto& ctr : *context.picks) {
    for (const auto& d : ctr) whole = whole || d.usedcores == 100;
  }
  bool aware = whole && config_.topology_aware;
  if (const std::string* v = FindValue(annotations, kTopologyAwareKey); whole && v) {
    if (auto b = ParseBool(*v)) aware = *b;
  }
  bool picked = std::any_of(context.picks->begin(), context.picks->end(),
                            [](const protocol::ContainerDevices& c) { return !c.empty(); });
  double weight =
      context.policy == NodePolicy::kSpread ? -kPolicyNeutralWeight : kPolicyNeutralWeight;
  if (picked && app_class && *app_class == kOnline) {
    return weight * SgpuOnlineScore(*context.picks, context.node->devices);
  }
  if (!aware) return 0;
  return weight * SgpuExclusiveScore(*context.picks, context.node->devices);
}

std::string MetaxSgpuDevice::UsageTag(const StringMap& pod_annotations) const {
  return SgpuAppClass(pod_annotations);
}

StringMap MetaxSgpuDevice::AllocationAnnotations(const AllocationContext& context,
                                                 const protocol::PodDevices& devices) const {
  StringMap out = SgpuAnnotations(devices);
  if (!out.empty() && context.now) {
    out[std::string(kPredicateTimeKey)] = std::to_string(
        std::chrono::duration_cast<std::chrono::nanoseconds>(context.now->time_since_epoch())
            .count());
  }
  return out;
}

NodeRegistration MetaxSgpuDevice::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  std::vector<SDeviceInfo> sdevices;
  int64_t count = 0;
  for (const auto& d : devices) {
    sdevices.push_back(SDeviceInfo{.uuid = d.id,
                                   .model = d.type,
                                   .total_dev_count = d.count,
                                   .total_compute = d.devcore,
                                   .total_vram = d.devmem,
                                   .available_dev_count = d.count,
                                   .available_compute = d.devcore,
                                   .available_vram = d.devmem,
                                   .numa = static_cast<int32_t>(d.numa),
                                   .healthy = d.health});
    count += d.count;
  }
  NodeRegistration out;
  out.annotations[info_.register_key] = EncodeSDevices(sdevices);
  out.capacity[info_.count_resource] = std::to_string(count);
  return out;
}

HAMI_REGISTER_VENDOR(metax, "metax", MakeMetax);

}  // namespace hami::device::metax
