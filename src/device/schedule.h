// The scheduling decision for one pod over a set of candidate nodes
// (docs/protocol.md#filter-and-scores): per node a fit or a reason, the node score, the chosen
// node, and the per-vendor PodDevices to write. One pure function, called by the live /filter, by
// the simulation filter (ExtenderArgs.Nodes, usage zero) and by hami-sim.
//
// Determinism: HAMi breaks node-score ties by map order. Here ties go to the node whose name
// sorts first (byte order), whatever the policy; device ties keep the node's registered order
// (see SortDevices), so equal inputs always give equal decisions.
#ifndef HAMI_DEVICE_SCHEDULE_H_
#define HAMI_DEVICE_SCHEDULE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "device/device.h"
#include "device/pod_view.h"
#include "device/policy.h"
#include "device/quota.h"
#include "device/usage.h"
#include "protocol/mig_allocations.h"
#include "protocol/pod_devices.h"
#include "protocol/scoring_weights.h"

namespace hami::device {

// The reason given for a candidate node the usage index does not know.
inline constexpr std::string_view kNodeUnregistered = "node unregistered";

// Every container's requests, init containers first; each backend normalises each container.
// The first bad quantity is the error (naming the container, resource and value).
Result<PodRequests> NormalizePodRequests(const Registry& registry, const PodView& pod);

// The policies that apply to one pod: its annotations over the defaults.
struct PodPolicy {
  NodePolicy node_policy = NodePolicy::kBinpack;
  GpuPolicy gpu_policy{};
  bool numa_bind = false;
  protocol::ScoringWeights weights{1, 1, 1};
};

// hami.io/node-scheduler-policy (binpack|spread; anything else keeps the default),
// hami.io/gpu-scheduler-policy (non-strict; replaces the default when present), nvidia.com/
// numa-bind (Go bool set) and hami.io/device-scoring-weights (an invalid value is an error).
Result<PodPolicy> ResolvePodPolicy(const PodView& pod, NodePolicy default_node_policy,
                                   const GpuPolicy& default_gpu_policy);

struct NodeFit {
  std::string node{};
  bool fit = false;
  std::string reason{};  // why not, when !fit: a GenReason string or NodeInsufficientDevice
  double score = 0;      // node score before the pod, plus the backends' ScoreNode
  // The next two are filled when fit, by FitPodOnNode always and by Schedule for the chosen
  // node only (nothing reads the others', and building them cost more than the decision).
  // Vendor key -> one ContainerDevices per container (init first), index-aligned with the pod's
  // containers, empty for containers that asked for nothing of that vendor.
  std::map<std::string, protocol::PodDevices> devices{};
  // The node's devices with this pod added as the usage index will count it: per device and
  // field, max(peak over the init containers, sum over the regular containers).
  std::vector<DeviceUsage> usage_after{};
  // The MIG instances reserved for the pod (profile and placement per container and device on
  // MIG-mode GPUs; mig.h), filled with `devices`.
  std::vector<protocol::MigAllocation> mig_allocations{};
};

// HAMi's candidate rule: device `d` serves a request of `vendor` when it was registered by that
// vendor or its type contains the vendor key case-insensitively ("nvidia" in "NVIDIA A100").
bool IsCandidateDevice(const DeviceUsage& d, std::string_view vendor);

// Fits every container of the pod on one node (docs/protocol.md#filter-and-scores, step 3): init
// containers each against the node's current usage (they run one after another), then regular
// containers in order, each seeing the usage of those before it. Per container and vendor (in
// vendor-key order): every device is scored (DeviceScore), sorted by the GPU policy (SortDevices),
// and the candidates are the devices registered by that vendor or whose type contains the vendor
// key case-insensitively (HAMi's rule: "nvidia" in "NVIDIA A100"); more devices requested than
// candidates fails with the bare reason "NodeInsufficientDevice", else the backend's Fit decides.
NodeFit FitPodOnNode(const Registry& registry, const PodView& pod, const PodRequests& requests,
                     const NodeUsage& node, const PodPolicy& policy, const NamespaceQuota* quota);

struct ScheduleOptions {
  NodePolicy node_policy = NodePolicy::kBinpack;  // --node-scheduler-policy
  GpuPolicy gpu_policy{};                         // --gpu-scheduler-policy (default: spread)
  const NamespaceQuota* quota = nullptr;          // the pod's namespace; nullptr = unchecked
  // Steps the searches over device combinations of all candidate nodes may spend together
  // (search_budget.h; docs/SECURITY.md#the-filters-work-budget). A node the budget cannot pay
  // for gets a cheaper pick, or fails with the backend's reason; the chosen node's picks are
  // the ones its pass computed.
  uint64_t search_steps = kFilterSearchSteps;
};

// The options for the configured policy defaults (flags or the config's `scheduler` section);
// an unknown node policy or GPU policy name is an error naming it.
Result<ScheduleOptions> ScheduleOptionsFromConfig(const SchedulerPolicyConfig& config);

struct ScheduleDecision {
  bool pass_through = false;  // the pod asks for no device: keep the candidate list as is
  PodRequests requests{};
  std::vector<NodeFit> nodes{};    // the candidates in input order, then the unregistered ones
  std::optional<size_t> chosen{};  // index into nodes

  const NodeFit* Chosen() const { return chosen ? &nodes[*chosen] : nullptr; }
  // node -> reason for every candidate that does not fit (FailedNodes).
  std::map<std::string, std::string> FailedNodes() const;
};

// Decides for `pod` over `nodes` (the candidates' usage rows) and `unregistered` (candidate
// names without a row: they fail with kNodeUnregistered). Errors: a bad request quantity or an
// invalid hami.io/device-scoring-weights.
Result<ScheduleDecision> Schedule(const Registry& registry, const PodView& pod,
                                  const std::vector<NodeUsage>& nodes,
                                  const std::vector<std::string>& unregistered,
                                  const ScheduleOptions& options);
// The same over shared immutable rows (UsageIndex::SharedRows), which are read in place: the
// live /filter's form, with no per-call copy of the candidates' rows.
Result<ScheduleDecision> Schedule(const Registry& registry, const PodView& pod,
                                  const std::vector<std::shared_ptr<const NodeUsage>>& nodes,
                                  const std::vector<std::string>& unregistered,
                                  const ScheduleOptions& options);

// The pod annotations Filter writes for the chosen node: hami.io/vgpu-node and, per vendor with
// a device, its to-allocate and allocated keys (same value), and hami.io/vgpu-mig-allocations
// when MIG instances were reserved (`[]` when none were but the pod carries the key from an
// earlier decision). hami.io/vgpu-time is the caller's
// (it owns the clock). Empty when nothing was chosen.
// Each vendor's keys come from its Device::AllocationAnnotations (HAMi PatchAnnotations), which
// may read the pod (e.g. Ascend's runtime annotation), the chosen node's name and devices (the
// decision's usage_after) and `now`, the decision's time from the caller's clock (Ascend's
// predicate-time, AWS Neuron's NEURON_ALLOC_TIME, Enflame's gcu-assigned-time, MetaX's and Moore
// Threads' predicate-time); without `now` those keys are left out. The first form passes an
// empty pod.
std::map<std::string, std::string> AllocationAnnotations(const Registry& registry,
                                                         const ScheduleDecision& decision);
std::map<std::string, std::string> AllocationAnnotations(const Registry& registry,
                                                         const PodView& pod,
                                                         const ScheduleDecision& decision);
std::map<std::string, std::string> AllocationAnnotations(const Registry& registry,
                                                         const PodView& pod,
                                                         const ScheduleDecision& decision,
                                                         std::optional<SystemTime> now);

}  // namespace hami::device

#endif  // HAMI_DEVICE_SCHEDULE_H_
