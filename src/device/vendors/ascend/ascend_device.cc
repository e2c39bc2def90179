#include "device/vendors/ascend/ascend_device.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "common/strings.h"

namespace hami::device::ascend {
namespace {

// resources.<section> of a container JSON as quantity texts (strings, or integers as decimal).
StringMap ResourceList(const nlohmann::json& container, const char* section) {
  StringMap out;
  auto res = container.find("resources");
  if (res == container.end() || !res->is_object()) return out;
  auto list = res->find(section);
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

bool HasRuntimeClass(const nlohmann::json& pod) {
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return false;
  auto rc = spec->find("runtimeClassName");
  return rc != spec->end() && !rc->is_null();
}

Result<std::vector<std::unique_ptr<Device>>> MakeAscend(const YAML::Node& section,
                                                        const DeviceConfig& /*config*/) {
  auto vnpus = ParseVnpus(section);
  if (!vnpus) return std::move(vnpus).take_error();
  std::vector<std::unique_ptr<Device>> out;
  for (auto& c : vnpus->configs) {
    out.push_back(std::make_unique<AscendDevice>(std::move(c), vnpus->hami_vnpu_core));
  }
  return out;
}

}  // namespace

AscendDevice::AscendDevice(VnpuConfig config, bool hami_vnpu_core)
    : config_(std::move(config)), hami_vnpu_core_(hami_vnpu_core), info_(AscendInfo(config_)) {}

int32_t AscendDevice::MemoryFactor() const { return std::max(config_.memory_factor, 1); }

Result<std::vector<DeviceUsage>> AscendDevice::NodeDevices(const NodeView& node) const {
  std::vector<DeviceUsage> out;
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return out;
  auto devices = DecodeRegister(*value);
  if (!devices) return Error{"annotation " + info_.register_key + ": " + devices.error()};
  bool soft = hami_vnpu_core_;
  if (const std::string* v = FindValue(node.annotations, kNodeHamiCoreKey)) soft = *v == "true";
  for (const auto& d : *devices) {
    DeviceUsage row = UsageFromDeviceInfo(d.info, info_.vendor_key);
    row.mode = std::string(soft ? kModeSoftSplit : kModeTemplates);
    if (d.network_id) {
      row.custom_info[std::string(kNetworkIdKey)] = std::to_string(*d.network_id);
    }
    out.push_back(std::move(row));
  }
  return out;
}

Result<bool> AscendDevice::MutateAdmission(AdmissionEdit& edit) const {
  const nlohmann::json& ctr = edit.Container();
  ContainerView view;
  if (auto name = ctr.find("name"); name != ctr.end() && name->is_string()) {
    view.name = name->get<std::string>();
  }
  view.limits = ResourceList(ctr, "limits");
  view.requests = ResourceList(ctr, "requests");
  Admission a =
      ascend::MutateAdmission(config_, view, Annotations(edit.Pod()), HasRuntimeClass(edit.Pod()));
  if (a.error) return Error{*a.error};
  for (const auto& [name, value] : a.limits) edit.Set({"resources", "limits", name}, value);
  for (const auto& [name, value] : a.requests) edit.Set({"resources", "requests", name}, value);
  for (const auto& [name, value] : a.env) edit.Append({"env"}, {{"name", name}, {"value", value}});
  if (!a.runtime_class.empty()) edit.SetPod({"spec", "runtimeClassName"}, a.runtime_class);
  return a.asks;
}

Result<DeviceRequest> AscendDevice::NormalizeRequest(const ContainerView& container) const {
  return ascend::NormalizeRequest(config_, container);
}

FitResult AscendDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                            const DeviceRequest& request, const FitContext& context) const {
  std::vector<Candidate> cands;
  cands.reserve(candidates.size());
  bool node_soft = !candidates.empty();
  for (const DeviceUsage* d : candidates) {
    Candidate c{d, std::nullopt};
    if (auto it = d->custom_info.find(kNetworkIdKey); it != d->custom_info.end()) {
      c.network_id = ParseInt64(it->second);
    }
    node_soft = node_soft && d->mode == kModeSoftSplit;
    cands.push_back(c);
  }
  const StringMap node = {{std::string(kNodeHamiCoreKey), node_soft ? "true" : "false"}};
  FitInput in{.pod_annotations = context.pod ? &context.pod->annotations : nullptr,
              .node_annotations = &node,
              .hami_vnpu_core = hami_vnpu_core_,
              .mutex = context.policy.mutex};
  return ascend::Fit(config_, cands, request, in);
}

double AscendDevice::ScoreNode(const ScoreContext& context) const {
  std::map<std::string, int64_t> network_ids;
  for (const DeviceUsage& d : context.node->devices) {
    if (d.vendor != info_.vendor_key) continue;
    auto it = d.custom_info.find(kNetworkIdKey);
    if (it == d.custom_info.end()) continue;
    if (auto id = ParseInt64(it->second)) network_ids[d.id] = *id;
  }
  return ascend::ScoreNode(config_, *context.picks, network_ids);
}

StringMap AscendDevice::AllocationAnnotations(const AllocationContext& context,
                                              const protocol::PodDevices& devices) const {
  static const PodView kNoPod;
  const PodView& pod = context.pod ? *context.pod : kNoPod;
  StringMap out = PatchAnnotations(config_, pod.annotations, devices);
  if (!out.empty() && context.now) {
    out[std::string(kPredicateTimeKey)] = std::to_string(
        std::chrono::duration_cast<std::chrono::seconds>(context.now->time_since_epoch()).count());
  }
  return out;
}

HAMI_REGISTER_VENDOR(ascend, "vnpus", MakeAscend);

}  // namespace hami::device::ascend
