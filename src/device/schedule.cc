#include "device/schedule.h"

#include <algorithm>

#include "common/strings.h"
#include "protocol/keys.h"

namespace hami::device {
namespace {

const std::string* FindAnnotation(const StringMap& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? nullptr : &it->second;
}

bool IsCandidate(const DeviceUsage& d, const std::string& vendor) {
  return d.vendor == vendor || ToLower(d.type).find(ToLower(vendor)) != std::string::npos;
}

// Fits container `index` onto `devices` (whose usage it then updates) and records the picks in
// `alloc`. Returns the reason on failure.
std::optional<std::string> FitContainer(const Registry& registry, const PodView& pod,
                                        const PodRequests& requests, size_t index,
                                        const NodeUsage& node, const PodPolicy& policy,
                                        const NamespaceQuota* quota,
                                        std::vector<DeviceUsage>* devices,
                                        std::map<std::string, protocol::PodDevices>* alloc) {
  const ContainerRequests& reqs = requests.containers[index];
  std::vector<double> scores;
  scores.reserve(devices->size());
  for (const auto& d : *devices) scores.push_back(DeviceScore(d, reqs, policy.weights));
  for (const auto& [vendor, req] : reqs) {
    if (req.nums <= 0) continue;
    const Device* backend = registry.Find(vendor);
    if (!backend) return "Device type not found";
    std::vector<ScoredDevice> sorted;
    for (size_t j = 0; j < devices->size(); ++j) sorted.push_back({&(*devices)[j], scores[j]});
    SortDevices(policy.gpu_policy, policy.numa_bind, &sorted);
    std::vector<const DeviceUsage*> candidates;
    for (const auto& s : sorted) {
      if (IsCandidate(*s.device, vendor)) candidates.push_back(s.device);
    }
    if (static_cast<size_t>(req.nums) > candidates.size()) {
      return std::string(protocol::kNodeInsufficientDevice);
    }
    protocol::PodDevices& pod_devices = (*alloc)[vendor];
    // Only the quota check reads the earlier containers' picks.
    protocol::PodDevices earlier;
    if (quota) earlier.assign(pod_devices.begin(), pod_devices.begin() + index);
    FitContext ctx{.pod = &pod,
                   .node = &node,
                   .policy = policy.gpu_policy,
                   .quota = quota,
                   .earlier = quota ? &earlier : nullptr,
                   .init_count = requests.init_count};
    FitResult fit = backend->Fit(candidates, req, ctx);
    if (!fit.fit) return fit.Reason();
    for (const auto& chosen : fit.devices) {
      for (auto& d : *devices) {
        if (d.id != chosen.uuid) continue;
        d.used += 1;
        d.usedmem += chosen.usedmem;
        d.usedcores += chosen.usedcores;
        break;
      }
    }
    pod_devices[index] = std::move(fit.devices);
  }
  return std::nullopt;
}

// Per device and field: (*into) = max(*into, from). Both lists hold the same devices in order.
void MaxInto(const std::vector<DeviceUsage>& from, std::vector<DeviceUsage>* into) {
  for (size_t i = 0; i < from.size() && i < into->size(); ++i) {
    DeviceUsage& d = (*into)[i];
    d.used = std::max(d.used, from[i].used);
    d.usedmem = std::max(d.usedmem, from[i].usedmem);
    d.usedcores = std::max(d.usedcores, from[i].usedcores);
  }
}

}  // namespace

Result<PodRequests> NormalizePodRequests(const Registry& registry, const PodView& pod) {
  PodRequests out;
  out.init_count = pod.init_containers.size();
  for (const ContainerView* c : pod.AllContainers()) {
    ContainerRequests reqs;
    for (const Device* device : registry.All()) {
      auto req = device->NormalizeRequest(*c);
      if (!req) return Error{"pod " + Quote(pod.Key()) + ": " + req.error()};
      if (req->nums > 0) reqs[device->VendorKey()] = std::move(*req);
    }
    out.containers.push_back(std::move(reqs));
  }
  return out;
}

Result<PodPolicy> ResolvePodPolicy(const PodView& pod, NodePolicy default_node_policy,
                                   const GpuPolicy& default_gpu_policy) {
  PodPolicy policy;
  policy.node_policy = default_node_policy;
  policy.gpu_policy = default_gpu_policy;
  const StringMap& a = pod.annotations;
  if (const std::string* v = FindAnnotation(a, protocol::kNodeSchedulerPolicyKey)) {
    if (auto p = ParseNodePolicy(*v)) policy.node_policy = *p;
  }
  if (const std::string* v = FindAnnotation(a, protocol::kGpuSchedulerPolicyKey)) {
    policy.gpu_policy = *ParseGpuPolicy(*v, /*strict=*/false);
  }
  if (const std::string* v = FindAnnotation(a, protocol::kNumaBindKey)) {
    policy.numa_bind = ParseBool(*v).value_or(false);
  }
  if (const std::string* v = FindAnnotation(a, protocol::kDeviceScoringWeightsKey)) {
    auto w = protocol::ParseScoringWeights(*v);
    if (!w) {
      return Error{"pod " + Quote(pod.Key()) + ": annotation " +
                   std::string(protocol::kDeviceScoringWeightsKey) + ": " + w.error()};
    }
    policy.weights = *w;
  }
  return policy;
}

NodeFit FitPodOnNode(const Registry& registry, const PodView& pod, const PodRequests& requests,
                     const NodeUsage& node, const PodPolicy& policy, const NamespaceQuota* quota) {
  NodeFit out;
  out.node = node.name;
  out.score = NodeScore(node.devices);
  for (const Device* d : registry.All()) out.score += d->NodeScoreBonus(node, policy.node_policy);
  size_t total = requests.containers.size();
  for (const auto& c : requests.containers) {
    for (const auto& [vendor, req] : c) out.devices[vendor].resize(total);
  }
  // Init containers run one after another, so each sees only the node's current usage.
  std::vector<DeviceUsage> peak = node.devices;
  for (size_t i = 0; i < requests.init_count && i < total; ++i) {
    std::vector<DeviceUsage> scratch = node.devices;
    if (auto reason =
            FitContainer(registry, pod, requests, i, node, policy, quota, &scratch, &out.devices)) {
      out.devices.clear();
      out.reason = std::move(*reason);
      return out;
    }
    MaxInto(scratch, &peak);
  }
  std::vector<DeviceUsage> running = node.devices;
  for (size_t i = requests.init_count; i < total; ++i) {
    if (auto reason =
            FitContainer(registry, pod, requests, i, node, policy, quota, &running, &out.devices)) {
      out.devices.clear();
      out.reason = std::move(*reason);
      return out;
    }
  }
  MaxInto(peak, &running);
  out.usage_after = std::move(running);
  out.fit = true;
  return out;
}

Result<ScheduleOptions> ScheduleOptionsFromConfig(const SchedulerPolicyConfig& config) {
  ScheduleOptions options;
  auto node = ParseNodePolicy(config.node_scheduler_policy);
  if (!node) {
    return Error{"node scheduler policy " + Quote(config.node_scheduler_policy) +
                 ": want binpack or spread"};
  }
  options.node_policy = *node;
  auto gpu = ParseGpuPolicy(config.gpu_scheduler_policy, /*strict=*/true);
  if (!gpu) return std::move(gpu).take_error();
  options.gpu_policy = *gpu;
  return options;
}

std::map<std::string, std::string> ScheduleDecision::FailedNodes() const {
  std::map<std::string, std::string> out;
  for (const auto& n : nodes) {
    if (!n.fit) out[n.node] = n.reason;
  }
  return out;
}

Result<ScheduleDecision> Schedule(const Registry& registry, const PodView& pod,
                                  const std::vector<NodeUsage>& nodes,
                                  const std::vector<std::string>& unregistered,
                                  const ScheduleOptions& options) {
  ScheduleDecision decision;
  auto requests = NormalizePodRequests(registry, pod);
  if (!requests) return std::move(requests).take_error();
  decision.requests = std::move(*requests);
  if (decision.requests.Empty()) {
    decision.pass_through = true;
    return decision;
  }
  auto policy = ResolvePodPolicy(pod, options.node_policy, options.gpu_policy);
  if (!policy) return std::move(policy).take_error();
  for (const auto& node : nodes) {
    decision.nodes.push_back(
        FitPodOnNode(registry, pod, decision.requests, node, *policy, options.quota));
  }
  for (const auto& name : unregistered) {
    decision.nodes.push_back(NodeFit{.node = name, .reason = std::string(kNodeUnregistered)});
  }
  bool binpack = policy->node_policy == NodePolicy::kBinpack;
  for (size_t i = 0; i < decision.nodes.size(); ++i) {
    const NodeFit& n = decision.nodes[i];
    if (!n.fit) continue;
    if (!decision.chosen) {
      decision.chosen = i;
      continue;
    }
    const NodeFit& best = decision.nodes[*decision.chosen];
    bool better = binpack ? n.score > best.score : n.score < best.score;
    if (better || (n.score == best.score && n.node < best.node)) decision.chosen = i;
  }
  return decision;
}

std::map<std::string, std::string> AllocationAnnotations(const Registry& registry,
                                                         const ScheduleDecision& decision) {
  std::map<std::string, std::string> out;
  const NodeFit* chosen = decision.Chosen();
  if (!chosen) return out;
  out[std::string(protocol::kVgpuNodeKey)] = chosen->node;
  for (const auto& [vendor, devices] : chosen->devices) {
    const Device* backend = registry.Find(vendor);
    if (!backend) continue;
    std::string value = protocol::EncodePodDevices(devices);
    const protocol::VendorInfo& info = backend->Info();
    if (!info.to_allocate_key.empty()) out[info.to_allocate_key] = value;
    if (!info.allocated_key.empty()) out[info.allocated_key] = value;
  }
  return out;
}

}  // namespace hami::device
