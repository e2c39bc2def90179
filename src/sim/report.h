// The result of a `hami-sim run`: what was placed where, how full each GPU is, what stayed
// pending and why, and how fast it went. BuildReport is a pure function of what the runner
// observed, so the arithmetic (over-commit detection above all) is unit-tested on crafted input.
//
// Over-commit is computed independently of the scheduler: from the pods' own
// `hami.io/vgpu-devices-allocated` annotations against each GPU's memory (x memory scaling),
// cores (100 x core scaling) and split count, counting only pods that still hold their devices
// (not Succeeded or Failed). On a GPU in MIG mode the limits are its memory and its largest
// instance count, and the instances come from the pods' `hami.io/vgpu-mig-allocations`:
// overlapping_mig_placements counts the instances whose slices overlap an earlier one's on the
// same GPU (the core shares of MIG profiles are rounded up, so their sum is not checked).
//
// Latencies: schedule = pod created -> bound (queueing, /filter, /bind); bind = bound -> Running
// (the bind phase: the kubelet's admission and the device plugin's Allocate); e2e = created ->
// Running; filter = one POST /filter round trip of the kube-scheduler loop (every attempt).
// wall_seconds runs from the first pod creation until the last pod settled.
#ifndef HAMI_SIM_REPORT_H_
#define HAMI_SIM_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/clock.h"
#include "protocol/pod_devices.h"
#include "sim/apiserver/rbac.h"
#include "sim/percentile.h"
#include "sim/scenario.h"

namespace hami::sim {

// One scenario pod as the runner saw it at the end of the run.
struct PodObservation {
  std::string ns, name, workload;
  bool created = false;
  bool denied = false;          // the webhook refused it; `message` says why
  std::string message;          // webhook denial, create error, or the kubelet's failure
  SystemTime created_at{};      // valid iff created
  std::string phase;            // status.phase ("" when not created)
  std::string node;             // spec.nodeName
  std::string scheduler_name;   // spec.schedulerName after the webhook
  std::string allocated;        // hami.io/vgpu-devices-allocated
  std::string mig_allocations;  // hami.io/vgpu-mig-allocations
  std::string bind_phase;       // hami.io/bind-phase
  // From the kube-scheduler loop.
  bool bound = false;
  SystemTime bound_at{};
  int attempts = 0;
  std::string last_failure;  // the last filter failure, "" once bound
  // From the kubelet.
  bool running = false;
  SystemTime running_at{};
  // How many pods a ReplicaSet created before this one for the same replica (the kubelet
  // failed each: its plugin was away); this pod's name ends in -r<recreated> when > 0.
  int recreated = 0;
  // DRA mode: each container's env from its claims' CDI edits (init containers first), and the
  // claims ("ns/name") its resources.claims name.
  std::vector<std::map<std::string, std::string>> container_envs;
  std::vector<std::vector<std::string>> container_claims;
  // Deleted by the run after it ran (`deleteAfter`); reported as Succeeded.
  bool deleted = false;
};

// DRA mode: one allocation result of a claim at the end of the run (hami-dra-plugin's driver).
struct DraShareObservation {
  std::string claim;   // ns/name
  std::string node;    // the pool: hami-dra-plugin's pool is its node
  std::string device;  // hami-gpu-<minor>, or a MIG device hami-gpu-<minor>-mig-...
  std::string request, share_id;
  int64_t memory_bytes = -1;      // consumedCapacity memory; -1: none (the whole GPU)
  int64_t cores = -1;             // consumedCapacity cores; -1: none
  std::vector<std::string> pods;  // status.reservedFor, ns/name
};

// DRA mode: what the run's ResourceClaims say at the end (ObserveDraClaims).
struct DraObservation {
  std::vector<DraShareObservation> shares;
  int claims_total = 0;
  int claims_allocated = 0;
  std::vector<std::string> orphaned;  // claims ("ns/name") whose owner pod is gone
};

// Reads `claims` (ResourceClaim objects) against the pods that still exist (their UIDs).
DraObservation ObserveDraClaims(const std::vector<nlohmann::json>& claims,
                                const std::set<std::string>& live_pod_uids);

struct ReportInput {
  std::string scenario_name;
  std::vector<ExpandedNode> nodes;
  int split_count = 10;
  double memory_scaling = 1.0;
  double core_scaling = 1.0;
  std::vector<PodObservation> pods;
  SystemTime first_created{};
  SystemTime settled_at{};
  double setup_seconds = 0;  // API server, kubelets and scheduler start, before the first pod
  bool timed_out = false;
  // Why the cluster never came up ("" when it did): under `run --manifests` a missing rule can
  // stop it, and the run still reports.
  std::string setup_error;
  // `run --manifests`: RBAC was enforced on the components; what it denied.
  bool rbac_enforced = false;
  uint64_t forbidden_requests = 0;
  std::vector<rbac::ForbiddenRequest> forbidden;  // distinct, in the order first seen
  // What the nodes' monitors measured (hami_vgpu_memory_used_bytes summed per GPU, MiB); only
  // when `measured` (the monitors answered). A GPU absent from the map measured 0.
  bool measured = false;
  std::map<std::string, int64_t> measured_memory_mib;  // by GPU uuid
  // Vendor nodes' devices (scenario `vendor:`): their slots as the vendor's backend registered
  // them, by device id; a device absent here has split_count slots.
  std::map<std::string, int64_t> slots_by_uuid;
  // What the live (serving) hami-scheduler's usage index counts, read from its /metrics
  // (hami_vgpu_memory_allocated_bytes): pod "ns/name" -> device uuids. Absent when no replica
  // served at the end; then lost_allocations is not computed.
  std::optional<std::map<std::string, std::set<std::string>>> scheduler_counted;
  // Process faults (docs/RELIABILITY.md).
  int scheduler_restarts = 0;
  int plugin_restarts = 0;
  int leader_changes = 0;
  double failover_seconds_max = 0;
  std::map<std::string, int> faults_injected;  // by scenario key ("killScheduler", ...)
  int pods_recreated = 0;  // rejected by a kubelet and created again, as a ReplicaSet would
  // Every POST /filter round trip the kube-scheduler loop made (ms, its clock), retries included.
  std::vector<double> filter_latencies_ms;
  // DRA mode (docs/DRA.md): the GPUs' use comes from the claims' allocations, not annotations.
  bool dra = false;
  DraObservation dra_claims;
};

struct PlacedDevice {
  size_t container = 0;  // index into init + regular containers
  protocol::ContainerDevice device;
};

enum class PodState { kRunning, kSucceeded, kFailed, kUnschedulable, kDenied, kPending };
const char* PodStateName(PodState state);

struct PodReport {
  std::string ns, name, workload, node;
  // DRA mode: per container, the limits its claims' CDI edits set (CUDA_DEVICE_MEMORY_LIMIT_<i>,
  // CUDA_DEVICE_SM_LIMIT_<i>, NVIDIA_VISIBLE_DEVICES), as the container starts with them.
  std::vector<std::map<std::string, std::string>> limits_env;
  PodState state = PodState::kPending;
  std::string reason;  // why it is not running ("" when running)
  std::vector<PlacedDevice> devices;
  std::string bind_phase;
  int attempts = 0;
  std::optional<double> schedule_ms, bind_ms, e2e_ms;
};

struct GpuReport {
  std::string node, uuid, model;
  int64_t numa = 0;
  int64_t memory_limit_mib = 0;  // memory x scaling
  int64_t cores_limit = 100;     // 100 x core scaling
  int slots_limit = 10;          // split count
  int64_t used_memory_mib = 0;   // what the scheduler handed out (allocated)
  // What the node's monitor read from the containers' regions (their `usage:`); absent when the
  // monitors did not answer.
  std::optional<int64_t> measured_memory_mib;
  int64_t used_cores = 0;
  int used_slots = 0;
  std::vector<std::string> pods;  // ns/name of the holders
  // Non-empty when over-committed, e.g. "memory 36000 > 32768 MiB".
  std::vector<std::string> overcommit;
  std::string mode;  // "mig" for a GPU split into MIG instances, else ""
  struct MigInstance {
    std::string pod;  // ns/name
    std::string profile;
    uint32_t start = 0, size = 0;
  };
  std::vector<MigInstance> mig_instances;  // held by live pods, in pod order
  // DRA mode: the shares of this GPU that allocated claims hold (MIG devices of it included).
  struct DraShare {
    std::string claim, device, share_id;
    std::vector<std::string> pods;
    int64_t memory_mib = 0, cores = 0;
  };
  std::vector<DraShare> dra_shares;
};

struct LatencyStats {
  size_t count = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
};

struct Report {
  std::string scenario_name;
  int pods_total = 0;
  int pods_running = 0;  // Running
  int pods_succeeded = 0;
  int pods_deleted = 0;  // of the succeeded: deleted after they ran (`deleteAfter`)
  int pods_failed = 0;
  int pods_unschedulable = 0;
  int pods_denied = 0;
  int pods_pending = 0;     // none of the above (only when the run timed out)
  int pods_allocating = 0;  // bind-phase still "allocating" at the end
  int overcommitted_devices = 0;
  // Allocations naming a UUID that is not on the pod's node (a scheduler bug if non-zero).
  int unknown_device_allocations = 0;
  // MIG instances overlapping an earlier instance on the same GPU (must be 0).
  int overlapping_mig_placements = 0;
  // Running pods holding devices that the live scheduler's usage index does not count on those
  // devices (must be 0: a scheduler restart or failover loses nothing); -1 when no replica
  // served at the end to ask.
  int lost_allocations = 0;
  std::vector<std::string> lost;  // their ns/name
  int scheduler_restarts = 0;
  int plugin_restarts = 0;
  int leader_changes = 0;
  double failover_seconds_max = 0;  // the longest time with no leader serving
  std::map<std::string, int> faults_injected;
  int pods_recreated = 0;
  double wall_seconds = 0;
  double setup_seconds = 0;
  double pods_per_second = 0;  // (running + succeeded) / wall_seconds
  bool timed_out = false;
  LatencyStats schedule, bind, e2e;
  LatencyStats filter;      // POST /filter round trips as the kube-scheduler loop saw them
  std::string setup_error;  // "" unless the cluster never came up
  bool rbac_enforced = false;
  uint64_t forbidden_requests = 0;  // every 403 RBAC answered
  std::vector<rbac::ForbiddenRequest> forbidden;
  bool measured = false;  // the GPUs carry measured_memory_mib (the monitors answered)
  // DRA mode: claims with an allocation at the end, claims whose owner pod is gone (must be 0),
  // and containers whose limits env differs from their claim's consumed capacity (must be 0).
  bool dra = false;
  int dra_claims_total = 0;
  int dra_claims_allocated = 0;
  int dra_claims_orphaned = 0;
  std::vector<std::string> dra_orphaned;
  int dra_env_checked = 0;
  int dra_env_mismatches = 0;
  std::vector<std::string> dra_env_mismatch;  // "ns/pod container c: CUDA_DEVICE_... = x, want y"
  std::vector<PodReport> pods;                // in input order
  std::vector<GpuReport> gpus;                // node order, then GPU index
};

Report BuildReport(const ReportInput& input);

// The human-readable report: sections with a one-line explanation each. `color` adds ANSI bold.
std::string RenderText(const Report& report, bool color);

// The --report JSON: the summary fields at top level, plus "pods" and "gpus" detail.
nlohmann::json ReportToJson(const Report& report);

// "GPU-0fc3eda5-e98b-..." -> "GPU-0fc3eda5" (the first group), for tables.
std::string ShortUuid(const std::string& uuid);

// `[#####.....]` of `width` cells, filled in proportion used/limit (capped at full; '!' cells
// when over).
std::string UsageBar(int64_t used, int64_t limit, int width);

}  // namespace hami::sim

#endif  // HAMI_SIM_REPORT_H_
