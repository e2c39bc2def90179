#include "device/schedule.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "common/strings.h"
#include "protocol/keys.h"

namespace hami::device {
namespace {

char LowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// ToLower(haystack).find(ToLower(needle)) != npos, without the two copies.
bool ContainsIgnoreCase(std::string_view haystack, std::string_view needle) {
  if (needle.size() > haystack.size()) return false;
  for (size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    size_t j = 0;
    while (j < needle.size() && LowerAscii(haystack[i + j]) == LowerAscii(needle[j])) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

// Lists reused across the containers and nodes of one Schedule call, so that a filter over
// many nodes does not allocate them per node.
struct Scratch {
  const Registry* registry = nullptr;  // the backends, for Find
  SearchBudget* budget = nullptr;      // the Schedule call's search budget; null = per node only
  std::vector<double> scores;
  std::vector<ScoredDevice> sorted;
  std::vector<const DeviceUsage*> candidates;
  std::map<std::string, protocol::PodDevices> picks;  // a candidate's picks (not kept)
  std::vector<const Device*> scored;                  // the backends ScoreNode asks
  protocol::PodDevices no_picks;                      // one empty entry per container
  // The backend of the vendor key last asked for, by the key's address: the keys are those of
  // the call's PodRequests, which live as long as the Scratch and do not change.
  const std::string* backend_key = nullptr;
  const Device* backend = nullptr;
  const Device* BackendOf(const std::string& vendor) {
    if (&vendor != backend_key) {
      backend_key = &vendor;
      backend = registry->Find(vendor);
    }
    return backend;
  }
};

// The devices containers are fitted against. Until a pick has to be remembered (a later
// container, a later vendor or usage_after reads it) these are the node's own rows, read in
// place; the first remembered pick makes a private copy. Most pods have one container, so most
// candidate nodes are never copied.
class WorkingDevices {
 public:
  explicit WorkingDevices(const std::vector<DeviceUsage>& base) : base_(&base) {}
  const std::vector<DeviceUsage>& Get() const { return copy_ ? *copy_ : *base_; }
  std::vector<DeviceUsage>& Mutable() {
    if (!copy_) copy_.emplace(*base_);
    return *copy_;
  }

 private:
  const std::vector<DeviceUsage>* base_;
  std::optional<std::vector<DeviceUsage>> copy_;
};

// Adds `chosen` to the usage of its device in `usage` (HAMi AddResourceUsage); `backend` may
// count it itself (Device::AddPickUsage: a MIG instance is chosen too and returned). nullopt
// with `*failed` when nothing fits any more.
std::optional<MigInstance> AddUsage(const Device& backend, std::vector<DeviceUsage>* usage,
                                    protocol::ContainerDevice* chosen, bool* failed) {
  for (auto& d : *usage) {
    if (d.id != chosen->uuid) continue;
    if (auto own = backend.AddPickUsage(&d, chosen)) {
      *failed = !own->added;
      return std::move(own->instance);
    }
    d.used += 1;
    d.usedmem += chosen->usedmem;
    d.usedcores += chosen->usedcores;
    break;
  }
  return std::nullopt;
}

// Fits container `index` onto `devices` and records the picks in `alloc`; with `record` the
// picks are also added to the devices' usage (later containers see them) and the MIG instances
// they reserve to `mig` (when not null). Returns the reason on failure.
std::optional<std::string> FitContainer(const PodView& pod, const PodRequests& requests,
                                        size_t index, const NodeUsage& node,
                                        const PodPolicy& policy, const NamespaceQuota* quota,
                                        bool record, WorkingDevices* devices, Scratch* s,
                                        std::map<std::string, protocol::PodDevices>* alloc,
                                        std::vector<protocol::MigAllocation>* mig) {
  const ContainerRequests& reqs = requests.containers[index];
  s->scores.clear();
  for (const auto& d : devices->Get()) s->scores.push_back(DeviceScore(d, reqs, policy.weights));
  size_t vendors_left = 0;
  for (const auto& [vendor, req] : reqs) vendors_left += req.nums > 0 ? 1 : 0;
  for (const auto& [vendor, req] : reqs) {
    if (req.nums <= 0) continue;
    --vendors_left;
    const Device* backend = s->BackendOf(vendor);
    if (!backend) return "Device type not found";
    const std::vector<DeviceUsage>& current = devices->Get();
    s->sorted.clear();
    // SortDevices only reads the devices; the non-const pointer is its signature's.
    for (size_t j = 0; j < current.size(); ++j) {
      s->sorted.push_back({const_cast<DeviceUsage*>(&current[j]), s->scores[j]});
    }
    SortDevices(policy.gpu_policy, policy.numa_bind, &s->sorted);
    s->candidates.clear();
    for (const auto& sd : s->sorted) {
      if (IsCandidateDevice(*sd.device, vendor)) s->candidates.push_back(sd.device);
    }
    // A MIG GPU may give one container several instances (docs/protocol.md#mig).
    if (static_cast<size_t>(req.nums) > s->candidates.size() &&
        !backend->MayShareOneDevice(req, s->candidates, pod)) {
      return std::string(protocol::kNodeInsufficientDevice);
    }
    protocol::PodDevices& pod_devices = (*alloc)[vendor];
    // The quota check and the custom filter rules (MetaX, Moore Threads) read the earlier
    // containers' picks, quota or not.
    protocol::PodDevices earlier(pod_devices.begin(), pod_devices.begin() + index);
    FitContext ctx{.pod = &pod,
                   .node = &node,
                   .policy = policy.gpu_policy,
                   .quota = quota,
                   .earlier = &earlier,
                   .init_count = requests.init_count,
                   .search_budget = s->budget};
    FitResult fit = backend->Fit(s->candidates, req, ctx);
    if (!fit.fit) return fit.Reason();
    if (record || vendors_left > 0) {
      std::vector<DeviceUsage>& usage = devices->Mutable();
      for (size_t k = 0; k < fit.devices.size(); ++k) {
        protocol::ContainerDevice& chosen = fit.devices[k];
        bool failed = false;
        auto instance = AddUsage(*backend, &usage, &chosen, &failed);
        if (failed) return "AddResourceUsage failed for device " + chosen.uuid;
        if (instance && mig) {
          mig->push_back(protocol::MigAllocation{.container_index = static_cast<int64_t>(index),
                                                 .device_index = static_cast<int64_t>(k),
                                                 .gpu_uuid = chosen.uuid,
                                                 .profile = instance->profile,
                                                 .placement = instance->placement});
        }
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

// The MIG instances `fitted` reserved beyond `base`'s, added to `base` (same devices in order).
void KeepMigInstances(const std::vector<DeviceUsage>& fitted, WorkingDevices* base) {
  for (size_t i = 0; i < fitted.size() && i < base->Get().size(); ++i) {
    if (fitted[i].mig_in_use.size() <= base->Get()[i].mig_in_use.size()) continue;
    base->Mutable()[i].mig_in_use = fitted[i].mig_in_use;
  }
}

// HAMi OverrideScore's device part: ScoreNode of every backend the pod took devices from (its
// picks) and of every backend whose vendor key is the type of a device on the node (HAMi scores
// the node's device types too, with empty picks), summed in vendor-key order. Backends that
// score every node 0 (Device::ScoresNodes false: NVIDIA, Hygon, ...) are left out: adding
// their zeros changes no sum.
double VendorScores(const PodView& pod, const NodeUsage& node,
                    const std::map<std::string, protocol::PodDevices>& picks, size_t total,
                    NodePolicy policy, Scratch* s) {
  s->scored.clear();
  auto add = [&](const Device* d) {
    if (d && std::find(s->scored.begin(), s->scored.end(), d) == s->scored.end()) {
      s->scored.push_back(d);
    }
  };
  for (const auto& [vendor, devices] : picks) {
    if (devices.size() == total) add(s->registry->FindScoring(vendor));
  }
  // Every device type that is a vendor key (add() keeps each backend once).
  for (const DeviceUsage& d : node.devices) add(s->registry->FindScoring(d.type));
  if (s->scored.empty()) return 0;
  std::sort(s->scored.begin(), s->scored.end(),
            [](const Device* a, const Device* b) { return a->VendorKey() < b->VendorKey(); });
  double sum = 0;
  for (const Device* d : s->scored) {
    auto it = picks.find(d->VendorKey());
    bool has = it != picks.end() && it->second.size() == total;
    if (!has && s->no_picks.size() != total) s->no_picks.assign(total, {});
    ScoreContext ctx{
        .node = &node, .picks = has ? &it->second : &s->no_picks, .policy = policy, .pod = &pod};
    sum += d->ScoreNode(ctx);
  }
  return sum;
}

// FitPodOnNode into `*result` (default-constructed: Schedule builds it in place in its list).
// Only with `complete` does the result carry the picks (`devices`) and usage_after: Schedule
// reads them for the chosen node only, so its pass over the candidates keeps the picks in the
// reused scratch map and fits the chosen node once more, completely.
void FitOnNode(const PodView& pod, const PodRequests& requests, const NodeUsage& node,
               const PodPolicy& policy, const NamespaceQuota* quota, bool complete, Scratch* s,
               NodeFit* result) {
  NodeFit& out = *result;
  out.node = node.name;
  out.score = NodeScore(node.devices);
  size_t total = requests.containers.size();
  std::map<std::string, protocol::PodDevices>& picks = complete ? out.devices : s->picks;
  for (auto& [vendor, devices] : picks) devices.clear();
  for (const auto& c : requests.containers) {
    for (const auto& [vendor, req] : c) picks[vendor].resize(total);
  }
  std::vector<protocol::MigAllocation>* mig = complete ? &out.mig_allocations : nullptr;
  auto fail = [&](std::string reason) {
    out.devices.clear();
    out.mig_allocations.clear();
    out.reason = std::move(reason);
  };
  // Init containers run one after another, so each sees only the node's current usage; their
  // peak only matters to usage_after. Their MIG instances, though, live as long as the pod (the
  // device plugin destroys instances of gone pods only): every later container sees them.
  std::optional<std::vector<DeviceUsage>> peak;
  if (complete && requests.init_count > 0) peak.emplace(node.devices);
  WorkingDevices base(node.devices);
  for (size_t i = 0; i < requests.init_count && i < total; ++i) {
    WorkingDevices scratch(base.Get());
    if (auto reason = FitContainer(pod, requests, i, node, policy, quota,
                                   /*record=*/true, &scratch, s, &picks, mig)) {
      return fail(std::move(*reason));
    }
    if (peak) MaxInto(scratch.Get(), &*peak);
    KeepMigInstances(scratch.Get(), &base);
  }
  WorkingDevices running(base.Get());
  for (size_t i = requests.init_count; i < total; ++i) {
    bool record = complete || i + 1 < total;
    if (auto reason =
            FitContainer(pod, requests, i, node, policy, quota, record, &running, s, &picks, mig)) {
      return fail(std::move(*reason));
    }
  }
  if (complete) {
    out.usage_after = running.Get();
    MaxInto(peak ? *peak : node.devices, &out.usage_after);
  }
  out.score += VendorScores(pod, node, picks, total, policy.node_policy, s);
  out.fit = true;
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
  if (const std::string* v = FindValue(a, protocol::kNodeSchedulerPolicyKey)) {
    if (auto p = ParseNodePolicy(*v)) policy.node_policy = *p;
  }
  if (const std::string* v = FindValue(a, protocol::kGpuSchedulerPolicyKey)) {
    policy.gpu_policy = *ParseGpuPolicy(*v, /*strict=*/false);
  }
  if (const std::string* v = FindValue(a, protocol::kNumaBindKey)) {
    policy.numa_bind = ParseBool(*v).value_or(false);
  }
  if (const std::string* v = FindValue(a, protocol::kDeviceScoringWeightsKey)) {
    auto w = protocol::ParseScoringWeights(*v);
    if (!w) {
      return Error{"pod " + Quote(pod.Key()) + ": annotation " +
                   std::string(protocol::kDeviceScoringWeightsKey) + ": " + w.error()};
    }
    policy.weights = *w;
  }
  return policy;
}

bool IsCandidateDevice(const DeviceUsage& d, std::string_view vendor) {
  // Byte by byte rather than through memcmp: vendor keys are a few bytes, and this runs for
  // every device of every candidate node.
  const std::string_view own = d.vendor;
  bool same = own.size() == vendor.size();
  for (size_t i = 0; same && i < own.size(); ++i) same = own[i] == vendor[i];
  return same || ContainsIgnoreCase(d.type, vendor);
}

NodeFit FitPodOnNode(const Registry& registry, const PodView& pod, const PodRequests& requests,
                     const NodeUsage& node, const PodPolicy& policy, const NamespaceQuota* quota) {
  Scratch s;
  s.registry = &registry;
  NodeFit out;
  FitOnNode(pod, requests, node, policy, quota, /*complete=*/true, &s, &out);
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

namespace {

// Prefetches for the pass over the candidates. Their rows are spread over the heap (5,000 nodes
// x 8 devices: ~13 MB with the devices' strings, among the pods' allocations), so the pass is
// bound by memory latency, not by its arithmetic: while one node is fitted, the next nodes'
// rows are fetched, in three steps because each needs the pointers the step before brought in.
void PrefetchNode(const NodeUsage* node) {
  const char* p = reinterpret_cast<const char*>(node);
  __builtin_prefetch(p);
  __builtin_prefetch(p + sizeof(NodeUsage) - 1);  // `devices` may lie in the next line
}
void PrefetchDevices(const NodeUsage* node) {
  __builtin_prefetch(node->name.data());  // copied into NodeFit::node (a long name is on the heap)
  for (const DeviceUsage& d : node->devices) {
    const char* p = reinterpret_cast<const char*>(&d);
    const char* end = reinterpret_cast<const char*>(&d.mig_profiles);
    for (; p < end; p += 64) __builtin_prefetch(p);
  }
}
// The device ids: the fitted device's is copied into the pick (ids are longer than the
// in-place buffer of a string).
void PrefetchIds(const NodeUsage* node) {
  for (const DeviceUsage& d : node->devices) __builtin_prefetch(d.id.data());
}

Result<ScheduleDecision> ScheduleRows(const Registry& registry, const PodView& pod,
                                      const std::vector<const NodeUsage*>& nodes,
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
  Scratch s;
  s.registry = &registry;
  SearchBudget budget(options.search_steps);
  s.budget = &budget;
  // The budget left before each node: the chosen node is fitted again from its own figure, so
  // that its picks are the ones its pass made.
  std::vector<uint64_t> budget_before(nodes.size());
  decision.nodes.reserve(nodes.size() + unregistered.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i + 3 < nodes.size()) PrefetchNode(nodes[i + 3]);
    if (i + 2 < nodes.size()) PrefetchDevices(nodes[i + 2]);
    if (i + 1 < nodes.size()) PrefetchIds(nodes[i + 1]);
    budget_before[i] = budget.left();
    FitOnNode(pod, decision.requests, *nodes[i], *policy, options.quota, /*complete=*/false, &s,
              &decision.nodes.emplace_back());
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
  // Only the chosen node's picks and usage_after are read: fit it once more, completely (same
  // inputs, same picks). Unregistered names never fit, so the chosen index is a row's.
  if (decision.chosen) {
    NodeFit& chosen = decision.nodes[*decision.chosen];
    chosen = NodeFit{};
    SearchBudget again(budget_before[*decision.chosen]);
    s.budget = &again;
    FitOnNode(pod, decision.requests, *nodes[*decision.chosen], *policy, options.quota,
              /*complete=*/true, &s, &chosen);
  }
  return decision;
}

}  // namespace

Result<ScheduleDecision> Schedule(const Registry& registry, const PodView& pod,
                                  const std::vector<NodeUsage>& nodes,
                                  const std::vector<std::string>& unregistered,
                                  const ScheduleOptions& options) {
  std::vector<const NodeUsage*> rows;
  rows.reserve(nodes.size());
  for (const auto& n : nodes) rows.push_back(&n);
  return ScheduleRows(registry, pod, rows, unregistered, options);
}

Result<ScheduleDecision> Schedule(const Registry& registry, const PodView& pod,
                                  const std::vector<std::shared_ptr<const NodeUsage>>& nodes,
                                  const std::vector<std::string>& unregistered,
                                  const ScheduleOptions& options) {
  std::vector<const NodeUsage*> rows;
  rows.reserve(nodes.size());
  for (const auto& n : nodes) rows.push_back(n.get());
  return ScheduleRows(registry, pod, rows, unregistered, options);
}

std::map<std::string, std::string> AllocationAnnotations(const Registry& registry,
                                                         const ScheduleDecision& decision) {
  return AllocationAnnotations(registry, PodView{}, decision);
}

std::map<std::string, std::string> AllocationAnnotations(const Registry& registry,
                                                         const PodView& pod,
                                                         const ScheduleDecision& decision) {
  return AllocationAnnotations(registry, pod, decision, std::nullopt);
}

std::map<std::string, std::string> AllocationAnnotations(const Registry& registry,
                                                         const PodView& pod,
                                                         const ScheduleDecision& decision,
                                                         std::optional<SystemTime> now) {
  std::map<std::string, std::string> out;
  const NodeFit* chosen = decision.Chosen();
  if (!chosen) return out;
  out[std::string(protocol::kVgpuNodeKey)] = chosen->node;
  const AllocationContext context{
      .pod = &pod, .node = chosen->node, .devices = &chosen->usage_after, .now = now};
  for (const auto& [vendor, devices] : chosen->devices) {
    const Device* backend = registry.Find(vendor);
    if (!backend) continue;
    for (auto& [key, value] : backend->AllocationAnnotations(context, devices)) out[key] = value;
  }
  if (!chosen->mig_allocations.empty()) {
    out[std::string(protocol::kVgpuMigAllocationsKey)] =
        protocol::EncodeMigAllocations(chosen->mig_allocations);
  } else if (FindValue(pod.annotations, protocol::kVgpuMigAllocationsKey)) {
    // A re-filtered pod must not keep reservations of an earlier decision: with them, the usage
    // index would read its new (non-MIG) GPU as inconsistent.
    out[std::string(protocol::kVgpuMigAllocationsKey)] = "[]";
  }
  return out;
}

}  // namespace hami::device
