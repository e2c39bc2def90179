// `hami-sim loadgen` (issue 18 item 3): hami-scheduler's throughput measured apart from the
// simulator. It starts `hami-sim apiserver` and the real `hami-scheduler` (the binaries beside
// hami-sim) as child processes, pre-loads N nodes x 8 GPUs (registered as the device plugin
// registers them, handshake Reported and kept fresh) and M bound pods holding GPU slices, then
// drives the scheduler the way kube-scheduler does for P new pods: one POST /filter at a time
// (the pod and the names of kube-scheduler's default share of the nodes, rotating as
// kube-scheduler's nextStartNodeIndex does), each chosen node's POST /bind handed to a pool of
// concurrent workers (binds to one node in filter order). After a bind it does what the device
// plugin's Allocate does to the API (bind-phase success, the node lock released) so the next bind
// to that node is not held up; nothing else of the device plugin or kubelet runs.
//
// The report: pods per second over the drive, /filter and /bind latency percentiles as the client
// saw them, the scheduler's peak RSS (VmHWM from /proc) and the CPU time each child spent per pod,
// and the over-committed GPUs counted from the pods' hami.io/vgpu-devices-allocated annotations
// against the nodes' register annotations (not from anything the scheduler reports).
//
// The children die with loadgen: they are killed when RunLoadgen returns, when the process gets
// SIGINT/SIGTERM (main.cc), and by PR_SET_PDEATHSIG when loadgen itself is killed.
#ifndef HAMI_SIM_LOADGEN_H_
#define HAMI_SIM_LOADGEN_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hami::sim {

struct LoadgenOptions {
  int nodes = 100;           // N nodes x 8 GPUs (A100 80 GB, split 10)
  int bound_pods = 0;        // M running pods, each holding 4000 MiB / 10 % of one GPU
  int pods = 100;            // P new pods to schedule, each asking for 1 GPU and 3000 MiB
  int bind_workers = 16;     // concurrent binds (the filter is serial)
  int populate_threads = 4;  // API clients creating the pre-loaded objects
  std::string bin_dir;       // holds hami-sim and hami-scheduler; "" = this binary's directory
  std::string work_dir;      // kubeconfig and children's logs; "" = a fresh temp dir, removed
  std::string node_policy = "spread";        // --node-scheduler-policy of the scheduler
  std::vector<std::string> scheduler_flags;  // more hami-scheduler flags
  // Nodes start with handshake Reported_<now> and a device plugin's answer (Reported_<now> on
  // every node that reads Requesting, every 10 s) runs beside the drive: the generic vendors'
  // handshake. Off: nodes start at Requesting_<now> and nothing answers, as an NVIDIA node stays
  // in a steady HAMi v2.8+ cluster (its plugin never writes Reported).
  bool answer_handshakes = false;
  std::chrono::seconds timeout{900};  // the whole run, start-up included
  // Progress lines for a human; may be empty.
  std::function<void(const std::string&)> progress;
};

struct LoadgenReport {
  int nodes = 0, bound_pods = 0, pods = 0;
  size_t candidates_per_filter = 0;  // NodeNames in each /filter
  int pods_bound = 0;                // /bind answered without Error
  int pods_failed = 0;               // a /filter or /bind Error (first few in `errors`)
  std::vector<std::string> errors;
  double populate_seconds = 0;  // creating nodes and pods over the API
  double sync_seconds = 0;      // scheduler start to /readyz 200 (its first LIST + registration)
  double wall_seconds = 0;      // first /filter sent to the last allocation written
  double pods_per_second = 0;
  double filter_latency_p50_ms = 0, filter_latency_p99_ms = 0, filter_latency_max_ms = 0;
  double bind_latency_p50_ms = 0, bind_latency_p99_ms = 0;
  double scheduler_peak_rss_mib = 0;    // VmHWM of the hami-scheduler process
  double scheduler_rss_mib = 0;         // its VmRSS at the end
  double scheduler_synced_rss_mib = 0;  // its VmHWM once ready, before the drive
  double apiserver_peak_rss_mib = 0;
  // CPU (user + system, from /proc/<pid>/stat) spent during the drive, per scheduled pod.
  double scheduler_cpu_ms_per_pod = 0;
  double apiserver_cpu_ms_per_pod = 0;
  double scheduler_sync_cpu_seconds = 0;  // the scheduler's CPU from start to ready
  int nodes_handshake_changed = 0;  // nodes whose handshake value at the end is not the pre-load's
  int gpus = 0;
  int overcommitted_devices = 0;
  int unknown_device_allocations = 0;  // allocations naming a GPU no node registered
};

// Runs the whole load test. Errors: a child that did not start or become ready, a failed
// pre-load, the timeout. Pods that failed to schedule are counted in the report, not errors.
Result<LoadgenReport> RunLoadgen(const LoadgenOptions& options);

// The --report JSON (top-level figures, one key each).
nlohmann::json LoadgenReportToJson(const LoadgenReport& report);

// Over-commit counted from the objects alone: every GPU in the nodes' hami.io/node-nvidia-register
// against the slices (hami.io/vgpu-devices-allocated) of the pods bound to a node (spec.nodeName
// set, not Succeeded/Failed). A GPU is over-committed when its pods' memory, cores or count exceed
// devmem, devcore or the split count. `overcommit` gets one line per such GPU; `unknown` counts
// allocations naming a GPU no node registered.
struct OvercommitCount {
  int gpus = 0;
  int overcommitted = 0;
  int unknown = 0;
  std::vector<std::string> details;  // "<node>/<uuid>: memory 90000 > 81920"
};
OvercommitCount CountOvercommit(const std::vector<nlohmann::json>& nodes,
                                const std::vector<nlohmann::json>& pods);

// Ids of the running children; for main.cc's signal thread (kills them on SIGTERM).
std::vector<pid_t> LoadgenChildren();
// Sends SIGKILL to every running child and reaps it. Safe to call from any thread.
void KillLoadgenChildren();

}  // namespace hami::sim

#endif  // HAMI_SIM_LOADGEN_H_
