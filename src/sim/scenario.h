// A `hami-sim run` scenario: the simulated cluster (nodes and their GPUs), the workloads that
// arrive on it, and the knobs of the run (kubelet latency, scheduler policies, API faults, device
// config overrides). Loaded from YAML; every error names the field path and the offending value,
// e.g. `workloads[2].replicas: want an integer >= 0, got "many"`.
//
// Schema (keys are camelCase like device-config.yaml; unknown keys are errors, so a typo is not
// silently ignored):
//   name: demo                      # optional, shown in the report
//   description: ...                # optional
//   timing:   {kubeletLatency: 20ms, timeout: 60s, podCreators: 8, podInitialBackoff: 1s,
//              podMaxBackoff: 10s}
//   policies: {nodeSchedulerPolicy: binpack, gpuSchedulerPolicy: spread}
//   faults:   {errorRate: 0.05, latency: 0ms, dropWatchEvery: 50,
//              seed: 1,                       # which replica/node/GPU a fault picks
//              killScheduler: {every: 3s, start: 1s, count: 5, down: 200ms, target: leader},
//              killPlugin: {every: 2s},  restartKubelet: {at: [1s, 4s]},
//              restartApiServer: {at: [2s]}, deleteNode: {at: [3s], down: 2s},
//              unhealthyGpu: {at: [2s]}, clockSkew: {scheduler: 10m, plugins: -1m}}
//              # process faults (docs/RELIABILITY.md): each a schedule, `at` offsets and/or
//              # `every` period from `start` (from the first pod creation) up to `count` times
//              # (0 = until the end); `down`: how long the component stays away
//   schedulerReplicas: 2            # hami-scheduler instances; > 1 elect a leader on a Lease
//   monitors: auto                  # hami-vgpu-monitor on every NVIDIA node: on, off, or auto
//                                   # (default: on when a container declares `usage:` or the
//                                   # run --serve's; each monitor watches pods, so 1,000 of them
//                                   # cost the scale scenario more than the rest of the sim)
//   leaderElection: {leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
//   deviceConfig: {nvidia: {deviceSplitCount: 10}}    # device-config.yaml text, inline
//   nodes:
//     - name: gpu-node-{i}          # {i} = 0..count-1; without {i} count must be 1
//       count: 100
//       labels: {pool: a}
//       gpus:                       # one or more GPU kinds per node
//         - {model: Tesla V100-PCIE-32GB, memory: 32768, count: 2, numa: 0,
//            uuids: [GPU-...]}      # uuids: optional, only when the group has one node
//         - {model: NVIDIA A100-SXM4-40GB, memory: 40960, mode: mig,
//            profiles: [1g.5gb, 3g.20gb]}   # MIG (docs/MIG.md): the node's plugin runs in
//                                           # operatingmode mig; profiles default to the
//                                           # migProfileAllowlist entry of the model
//         - {model: Hygon Z100, memory: 32768, count: 2, vendor: DCU}
//                                           # another vendor's devices (its HAMi vendor key;
//                                           # default NVIDIA): hami-sim's generic plugin for
//                                           # it (docs/VENDORS.md); the vendor's section must
//                                           # be in deviceConfig
//   workloads:
//     - name: train                 # pods are <name>-<i> when replicas > 1, else <name>
//       namespace: default
//       replicas: 3
//       arrival: 0s                 # offset of the first replica from the start of the run
//       interval: 10ms              # between consecutive replicas
//       duration: 0s                # run time once Running; 0 = runs until the end
//       annotations: {hami.io/gpu-scheduler-policy: binpack}
//       containers:
//         - name: main
//           resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 4000}
//           usage: {memory: 2000, utilization: 40}   # optional: simulated use on each of its
//                                                    # GPUs (MiB, percent; sim/usage.h)
//           claims: [gpu]           # DRA: resources.claims, names of the workload's claims
//       claims:                     # DRA: pod.spec.resourceClaims (docs/DRA.md)
//         - {name: gpu, template: two-shares}    # resourceClaimTemplateName: a claim per pod
//         - {name: shared, claim: shared-gpu}    # resourceClaimName: one claim, many pods
//       deleteAfter: 5s             # the pod is deleted this long after it runs (0: never)
//   dra: true                       # DRA mode (docs/DRA.md): hami-dra-plugin instead of the
//                                   # device plugin on NVIDIA nodes, the webhook's --dra, the
//                                   # kube-scheduler's DRA allocator and no extender, the
//                                   # claim controller
//   resourceClaimTemplates:         # DRA: created before the workloads (spec: the template's
//     - {name: two-shares, namespace: default, spec: {devices: {requests: [...]}}}  # spec.spec)
//   resourceClaims:                 # DRA: standalone claims (spec: the claim's spec)
//     - {name: shared-gpu, namespace: default, spec: {devices: {requests: [...]}}}
#ifndef HAMI_SIM_SCENARIO_H_
#define HAMI_SIM_SCENARIO_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/config.h"
#include "device/policy.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/plugin_config.h"

namespace hami::sim {

struct GpuGroup {
  std::string model;               // NVML name, e.g. "Tesla V100-PCIE-32GB"
  int64_t memory_mib = 0;          // > 0
  int count = 1;                   // GPUs of this kind per node, >= 1
  int64_t numa = 0;                // NUMA node of these GPUs
  std::vector<std::string> uuids;  // empty: generated (see GpuUuid)
  // `mode`: "" (the plugin's operating mode) or "mig"; all groups of a node agree. `profiles`:
  // the MIG profiles offered (mode mig only); empty = the allowlist's for the model.
  std::string mode;
  std::vector<std::string> mig_profiles;
  // `vendor`: the HAMi vendor key of these devices ("DCU", "MLU", "Ascend910B3", ...); "" =
  // NVIDIA. Its backend must be active (its section in deviceConfig); all groups of a node
  // agree. Such a node runs hami-sim's generic vendor plugin (sim/vendor_plugin.h,
  // docs/VENDORS.md); `model` is the device type it registers.
  std::string vendor{};
};

struct NodeGroup {
  std::string name_pattern;  // "{i}" replaced by the node's index in the group
  int count = 1;
  std::map<std::string, std::string> labels;
  std::vector<GpuGroup> gpus;
};

// What a container's processes use on each of its GPUs (the sim kubelet writes it into the
// container's region file; the node's monitor reads it back).
struct SimUsage {
  int64_t memory_mib = 0;   // >= 0
  int64_t utilization = 0;  // SM percent, [0, 100]
  bool operator==(const SimUsage&) const = default;
};

struct ContainerSpec {
  std::string name;
  std::map<std::string, std::string> resources;  // resource name -> quantity, as limits
  std::optional<SimUsage> usage;                 // `usage:`; absent: nothing simulated
  std::vector<std::string> claims{};             // DRA: resources.claims[].name
};

// DRA: an entry of pod.spec.resourceClaims. Exactly one of `claim_template` and `claim` is set.
struct PodClaim {
  std::string name;
  std::string claim_template;  // resourceClaimTemplateName
  std::string claim;           // resourceClaimName
};

// DRA: a ResourceClaimTemplate or ResourceClaim the scenario creates before its workloads.
struct ClaimObject {
  std::string ns = "default";
  std::string name;
  std::string spec_json;  // the template's spec.spec / the claim's spec, as JSON text
};

struct Workload {
  std::string name;
  std::string ns = "default";
  int replicas = 1;
  std::chrono::milliseconds arrival{0};
  std::chrono::milliseconds interval{0};
  double duration_seconds = 0;  // 0 = runs forever
  std::map<std::string, std::string> annotations;
  std::vector<ContainerSpec> containers;
  std::vector<PodClaim> claims{};             // DRA: pod.spec.resourceClaims
  std::chrono::milliseconds delete_after{0};  // deleted this long after Running; 0 = never
};

// When a process fault strikes, relative to the first pod creation: every offset of `at`, plus
// (with `every` > 0) start, start + every, ... at most `count` times (0: until the run ends).
// `down`: how long the component stays away before it is started again.
struct FaultSchedule {
  std::vector<std::chrono::milliseconds> at;
  std::chrono::milliseconds every{0};
  std::chrono::milliseconds start{0};
  int count = 0;
  std::chrono::milliseconds down{0};
  bool enabled() const { return !at.empty() || every.count() > 0; }
  // The strike times up to `horizon`, sorted.
  std::vector<std::chrono::milliseconds> Times(std::chrono::milliseconds horizon) const;
};

// Which hami-scheduler replica killScheduler strikes.
enum class KillTarget { kAny, kLeader, kFollower };

struct ProcessFaults {
  uint64_t seed = 1;  // picks the replica, node or GPU of each strike
  FaultSchedule kill_scheduler;
  KillTarget kill_scheduler_target = KillTarget::kAny;
  FaultSchedule kill_plugin;
  FaultSchedule restart_kubelet;
  FaultSchedule restart_api_server;
  FaultSchedule delete_node;
  FaultSchedule unhealthy_gpu;
  // Offsets of the components' clocks from the real one (may be negative): the node lock's
  // timestamps and its 5-minute expiry are read on them.
  std::chrono::milliseconds scheduler_clock_skew{0};
  std::chrono::milliseconds plugin_clock_skew{0};
  bool any() const {
    return kill_scheduler.enabled() || kill_plugin.enabled() || restart_kubelet.enabled() ||
           restart_api_server.enabled() || delete_node.enabled() || unhealthy_gpu.enabled();
  }
};

// The Lease timing of schedulerReplicas > 1 (kube-scheduler's --leader-elect-* flags).
struct LeaderElectionTiming {
  std::chrono::seconds lease_duration{15};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

struct Scenario {
  std::string name;
  std::string description;
  std::chrono::milliseconds kubelet_latency{20};
  std::chrono::milliseconds timeout{120000};            // the whole run, after setup
  int pod_creators = 8;                                 // concurrent webhook + create callers
  std::chrono::milliseconds pod_initial_backoff{1000};  // a failed attempt's backoff, doubling
  std::chrono::milliseconds pod_max_backoff{10000};     // ... up to this
  std::string node_scheduler_policy = "binpack";
  std::string gpu_scheduler_policy = "spread";
  double fault_error_rate = 0;
  std::chrono::milliseconds fault_latency{0};
  int fault_drop_watch_every = 0;
  ProcessFaults process_faults;
  int scheduler_replicas = 1;  // 1..3
  // `monitors`: hami-vgpu-monitor on every NVIDIA node.
  enum class Monitors { kAuto, kOn, kOff };
  Monitors monitors = Monitors::kAuto;
  LeaderElectionTiming leader_election;
  // The device config both the scheduler and the device plugins run with: the chart defaults
  // with `deviceConfig` applied; the `deviceConfig` text itself (empty when absent).
  device::DeviceConfig device_config = device::DefaultDeviceConfig();
  std::string device_config_yaml;
  std::vector<NodeGroup> nodes;
  std::vector<Workload> workloads;
  // DRA mode (docs/DRA.md).
  bool dra = false;
  std::vector<ClaimObject> claim_templates;  // `resourceClaimTemplates`
  std::vector<ClaimObject> claims;           // `resourceClaims`
};

// One simulated node after expanding a NodeGroup.
struct ExpandedNode {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<deviceplugin::GpuDevice> gpus;  // in MIG mode with their mig_profiles
  std::string mode;                           // the plugin's operating mode; "" = the config's
  std::string vendor{};                       // GpuGroup::vendor of its gpus; "" = NVIDIA
};

// One pod after expanding a Workload's replicas.
struct PlannedPod {
  std::string ns;
  std::string name;
  std::string workload;
  std::chrono::milliseconds arrival{0};
  size_t workload_index = 0;  // into Scenario::workloads
};

// Parses scenario YAML. Never throws.
Result<Scenario> ParseScenario(std::string_view yaml_text);
// Reads and parses a file; the error names the path.
Result<Scenario> LoadScenarioFile(const std::string& path);

// A deterministic UUID for GPU `index` of node `node` ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"),
// so two runs of one scenario place pods on the same UUIDs.
std::string GpuUuid(std::string_view node, uint64_t index);

// The nodes in group order, each group's nodes by index. GPUs get their node-local index in
// declaration order.
std::vector<ExpandedNode> ExpandNodes(const Scenario& scenario);
// The pods sorted by arrival (stable: declaration order within one instant).
std::vector<PlannedPod> ExpandPods(const Scenario& scenario);

// Whether the run starts a hami-vgpu-monitor on every NVIDIA node: `monitors: on`, or `auto`
// when some container declares `usage:` or `serving` (a --serve run, for kubectl hami top).
bool RunsMonitors(const Scenario& scenario, bool serving);

// The device plugin's configuration for this scenario (split count, scalings, ...).
Result<deviceplugin::PluginConfig> PluginConfigFor(const Scenario& scenario);

}  // namespace hami::sim

#endif  // HAMI_SIM_SCENARIO_H_
