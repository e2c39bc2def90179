// `hami-sim run`: one scenario on an embedded cluster made of the real pieces. The in-process
// ApiServer; the real scheduler::Server (extender and webhook over loopback HTTP, as
// hami-scheduler serves them); a KubeletFleet whose nodes run the real device plugin over gRPC;
// a KubeSchedulerLoop that drives the extender as kube-scheduler does. Each pod passes through
// the scheduler's /webhook (AdmissionReview v1 over HTTP, its JSON patch applied, a denial
// recorded with the webhook's message) and is then created at its arrival time. The run ends
// when every pod is Running, Succeeded, Failed, denied or unschedulable with the scheduling loop
// idle, or at the scenario's timeout; the report is built from the pods' final objects and the
// loops' records.
#ifndef HAMI_SIM_RUNNER_H_
#define HAMI_SIM_RUNNER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sim/manifests.h"
#include "sim/monitors.h"
#include "sim/report.h"
#include "sim/scenario.h"

namespace hami::sim {

class ApiServer;

struct RunOptions {
  int api_port = 0;  // the embedded API server's port (0: any free one)
  // Overrides the scenario's timing.kubeletLatency (tests run with 0).
  std::optional<std::chrono::milliseconds> kubelet_latency;
  // Unix sockets of the device plugins go under a fresh directory here, removed at Stop().
  std::string temp_root = "/tmp";
  // A --serve run (the cluster stays up for kubectl): with the scenario's `monitors: auto` the
  // nodes get their hami-vgpu-monitor, so that `kubectl hami top` has something to read.
  bool serving = false;
  // Progress lines for a human ("starting 100 kubelets ..."); may be empty.
  std::function<void(const std::string&)> progress;
  // `--manifests`: the API server enforces RBAC (docs/RBAC.md). The RBAC objects are created
  // first; hami-scheduler and the kube-scheduler loop then run with a token of the scheduler's
  // ServiceAccount, the device plugins with one of theirs, the kubelets as system:node:hami-sim
  // (group system:nodes), and the runner itself as the admin. The report lists what was denied.
  std::optional<ManifestRbac> manifests;
};

class Runner {
 public:
  Runner(Scenario scenario, RunOptions options);
  ~Runner();  // Stop()s
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Starts the cluster, runs the scenario and returns its report. The cluster keeps running
  // afterwards (for --serve) until Stop(). Call once. Errors are setup failures (a port, the
  // sockets, nodes that never registered); pods that did not run are in the report, not errors.
  Result<Report> Run();

  // Stops every component and removes the socket directory. Idempotent.
  void Stop();
  // For --serve, after Run(): every pod created through the API server from now on (kubectl's)
  // goes through hami-scheduler's webhook first, as a scenario pod does; the simulated
  // kube-scheduler and kubelets then take it as they take the scenario's. A denial answers the
  // create with 400; an unreachable webhook stores the pod as sent (the chart's failurePolicy
  // Ignore).
  void AdmitApiPods();

  // The embedded API server; null before Run().
  ApiServer* api();

  // Each node's hami-vgpu-monitor (its /metrics on 127.0.0.1:port); empty before Run().
  std::vector<MonitorAddress> monitors() const;
  // hami-scheduler's /metrics on 127.0.0.1; 0 before Run().
  int scheduler_metrics_port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_RUNNER_H_
