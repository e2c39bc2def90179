// Process faults in `hami-sim run` (docs/RELIABILITY.md), end to end in-process: hami-scheduler
// killed mid-burst (no clean-up) and restarted, with one replica and with two electing a
// leader on a Lease; each run must end as a calm one does (every fitting pod Running, the others
// unschedulable, nothing over-committed, nothing stuck allocating) and with the live scheduler
// counting every Running pod's devices. Leases are short (1 s) so failover takes about a second.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "k8s/client.h"
#include "k8s/object.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/store.h"
#include "sim/example_run.h"
#include "sim/runner.h"
#include "sim/scheduler_set.h"

namespace hami::sim {
namespace {

using std::chrono::milliseconds;

// 6 nodes x 2 V100s, 4 slices of 8000 MiB each: 48 pods fill them exactly; 2 fit nowhere.
std::string Cluster(const std::string& extra) {
  return R"(
name: chaos-small
timing: {kubeletLatency: 2ms, timeout: 90s, podInitialBackoff: 100ms, podMaxBackoff: 500ms}
nodes:
  - name: node-{i}
    count: 6
    gpus:
      - {model: Tesla V100-PCIE-32GB, memory: 32768, count: 2}
workloads:
  - name: fits
    replicas: 48
    interval: 20ms
    containers:
      - name: main
        resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}
  - name: too-big
    replicas: 2
    arrival: 50ms
    containers:
      - name: main
        resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 40000}
)" + extra;
}

Report RunScenario(const std::string& yaml) {
  auto scenario = ParseScenario(yaml);
  EXPECT_TRUE(scenario.ok()) << scenario.error();
  if (!scenario.ok()) return Report{};
  auto report = RunToReport(std::move(*scenario), milliseconds(2));
  EXPECT_TRUE(report.ok()) << report.error();
  return report.ok() ? *report : Report{};
}

void ExpectNothingLost(const Report& r) {
  const std::string text = RenderText(r, false);
  EXPECT_FALSE(r.timed_out) << text;
  EXPECT_EQ(r.pods_running, 48) << text;
  EXPECT_EQ(r.pods_unschedulable, 2) << text;
  EXPECT_EQ(r.pods_failed, 0) << text;
  EXPECT_EQ(r.pods_allocating, 0) << text;
  EXPECT_EQ(r.overcommitted_devices, 0) << text;
  EXPECT_EQ(r.unknown_device_allocations, 0) << text;
  EXPECT_EQ(r.lost_allocations, 0) << text;
}

TEST(ChaosRunTest, KilledSchedulerRestartsAndLosesNothing) {
  const Report r = RunScenario(Cluster(R"(
faults:
  killScheduler: {every: 250ms, start: 100ms, count: 4, down: 100ms}
)"));
  ExpectNothingLost(r);
  EXPECT_GE(r.faults_injected.count("killScheduler") ? r.faults_injected.at("killScheduler") : 0,
            1);
  EXPECT_EQ(r.scheduler_restarts,
            r.faults_injected.count("killScheduler") ? r.faults_injected.at("killScheduler") : 0);
  // One replica: each restarted process that serves is a new leader.
  EXPECT_EQ(r.leader_changes, r.scheduler_restarts);
  // Down 100 ms, then a registration pass; well under the lease-based bound.
  EXPECT_LT(r.failover_seconds_max, 10.0);
}

TEST(ChaosRunTest, KilledLeaderFailsOverToTheOtherReplica) {
  const Report r = RunScenario(Cluster(R"(
schedulerReplicas: 2
leaderElection: {leaseDuration: 1s, renewDeadline: 500ms, retryPeriod: 100ms}
faults:
  killScheduler: {at: [150ms], down: 300ms, target: leader}
)"));
  ExpectNothingLost(r);
  ASSERT_EQ(r.faults_injected.count("killScheduler"), 1u);
  EXPECT_EQ(r.faults_injected.at("killScheduler"), 1);
  EXPECT_EQ(r.scheduler_restarts, 1);
  EXPECT_GE(r.leader_changes, 1);
  // The 1 s lease runs out, the follower takes it and registers at once.
  EXPECT_GT(r.failover_seconds_max, 0.5);
  EXPECT_LT(r.failover_seconds_max, 10.0);
}

int Strikes(const Report& r, const std::string& fault) {
  return r.faults_injected.count(fault) ? r.faults_injected.at(fault) : 0;
}

// A node's plugin killed four times mid-burst, 200 ms each: pods the kubelet admits meanwhile
// fail and are re-created as a ReplicaSet would; every restarted plugin registers again.
TEST(ChaosRunTest, KilledPluginsRestartAndEveryFittingPodRuns) {
  const Report r = RunScenario(Cluster(R"(
faults:
  seed: 3
  killPlugin: {every: 200ms, start: 100ms, count: 4, down: 200ms}
)"));
  ExpectNothingLost(r);
  EXPECT_EQ(Strikes(r, "killPlugin"), 4);
  EXPECT_EQ(r.plugin_restarts, Strikes(r, "killPlugin"));
  EXPECT_EQ(r.scheduler_restarts, 0);
}

// Kubelets restarted mid-burst: the plugins register again, running pods stay running.
TEST(ChaosRunTest, RestartedKubeletsLoseNothing) {
  const Report r = RunScenario(Cluster(R"(
faults:
  seed: 5
  restartKubelet: {every: 200ms, start: 100ms, count: 3, down: 100ms}
)"));
  ExpectNothingLost(r);
  EXPECT_EQ(Strikes(r, "restartKubelet"), 3);
  EXPECT_EQ(r.plugin_restarts, 0);
}

// restartApiServer, on the server alone: while down nothing answers; afterwards the objects are
// there on the same port, and a watch from a resourceVersion before the restart gets 410 (the
// client relists), while one from the current resourceVersion is served.
TEST(ApiServerRestartTest, KeepsObjectsAndLosesWatchHistory) {
  ApiServer api{ApiServerOptions{}};
  ASSERT_TRUE(api.Start().ok());
  k8s::RestConfig cfg;
  cfg.server = api.url();
  cfg.qps = 0;
  k8s::Client client(cfg);
  const nlohmann::json pod = {{"apiVersion", "v1"},
                              {"kind", "Pod"},
                              {"metadata", {{"name", "p"}, {"namespace", "default"}}}};
  ASSERT_TRUE(client.Create(k8s::resources::kPods, "default", pod).ok());
  const std::string before = std::to_string(api.store().resource_version());
  nlohmann::json later = pod;
  later["metadata"]["name"] = "q";
  ASSERT_TRUE(client.Create(k8s::resources::kPods, "default", later).ok());
  const int port = api.port();

  api.StopServing();
  auto down = client.Get(k8s::resources::kPods, "default", "p");
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(k8s::IsTransient(down.error())) << down.error().ToString();
  ASSERT_TRUE(api.ResumeServing().ok());
  EXPECT_EQ(api.port(), port);
  EXPECT_EQ(api.restarts(), 1);
  EXPECT_TRUE(client.Get(k8s::resources::kPods, "default", "q").ok());

  k8s::WatchOptions old;
  old.resource_version = before;
  old.timeout_seconds = 1;
  int events = 0;
  auto st = client.Watch(k8s::resources::kPods, "default", old, [&](const k8s::WatchEvent&) {
    ++events;
    return true;
  });
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(k8s::IsGone(st.error())) << st.error().ToString();
  EXPECT_EQ(events, 0);

  k8s::WatchOptions current;
  current.resource_version = std::to_string(api.store().resource_version());
  current.timeout_seconds = 1;
  EXPECT_TRUE(client
                  .Watch(k8s::resources::kPods, "default", current,
                         [](const k8s::WatchEvent&) { return true; })
                  .ok());
  api.Stop();
}

// The API server restarted twice mid-burst (200 ms down each): every client's watch relists, and
// nothing is lost.
TEST(ChaosRunTest, RestartedApiServerLosesNothing) {
  const Report r = RunScenario(Cluster(R"(
faults:
  restartApiServer: {at: [300ms, 800ms], down: 200ms}
)"));
  ExpectNothingLost(r);
  EXPECT_EQ(Strikes(r, "restartApiServer"), 2);
}

// deleteNode mid-burst (never back): its pods are deleted as the node lifecycle controller does,
// replaced elsewhere as the ReplicaSet does; 36 pods fit the 5 nodes left. Nothing runs on the
// deleted node, nothing is left allocating or counted twice.
TEST(ChaosRunTest, DeletedNodesPodsAreReplacedOnTheOthers) {
  auto scenario = ParseScenario(R"(
name: chaos-delete-node
timing: {kubeletLatency: 2ms, timeout: 90s, podInitialBackoff: 100ms, podMaxBackoff: 500ms}
nodes:
  - name: node-{i}
    count: 6
    gpus:
      - {model: Tesla V100-PCIE-32GB, memory: 32768, count: 2}
workloads:
  - name: fits
    replicas: 36
    interval: 20ms
    containers:
      - name: main
        resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}
faults:
  seed: 7
  deleteNode: {at: [400ms]}
)");
  ASSERT_TRUE(scenario.ok()) << scenario.error();
  RunOptions options;
  options.kubelet_latency = milliseconds(2);
  Runner runner(std::move(*scenario), options);
  auto report = runner.Run();
  ASSERT_TRUE(report.ok()) << report.error();
  const Report& r = *report;
  const std::string text = RenderText(r, false);
  EXPECT_FALSE(r.timed_out) << text;
  EXPECT_EQ(r.pods_running, 36) << text;
  EXPECT_EQ(r.pods_failed, 0) << text;
  EXPECT_EQ(r.pods_allocating, 0) << text;
  EXPECT_EQ(r.overcommitted_devices, 0) << text;
  EXPECT_EQ(r.lost_allocations, 0) << text;
  EXPECT_EQ(Strikes(r, "deleteNode"), 1);
  k8s::RestConfig cfg;
  cfg.server = runner.api()->url();
  cfg.token = runner.api()->token();
  k8s::Client client(cfg);
  auto listed = client.ListAll(k8s::resources::kNodes, "", {});
  ASSERT_TRUE(listed.ok()) << listed.error().ToString();
  std::set<std::string> nodes;
  for (const nlohmann::json& n : listed->items) nodes.insert(k8s::Name(n));
  EXPECT_EQ(nodes.size(), 5u);
  for (const PodReport& p : r.pods) {
    if (p.state == PodState::kRunning) {
      EXPECT_EQ(nodes.count(p.node), 1u) << p.name << text;
    }
  }
  runner.Stop();
}

// clockSkew: the plugins' clock 6 minutes behind, the scheduler's 6 minutes ahead (more than the
// node lock's 5-minute expiry between them): nothing is lost or over-committed.
TEST(ChaosRunTest, SkewedClocksLoseNothing) {
  const Report r = RunScenario(Cluster(R"(
faults:
  clockSkew: {plugins: -6m, scheduler: 6m}
)"));
  ExpectNothingLost(r);
}

TEST(ChaosRunTest, CountedAllocationsReadTheUsageIndexSeries) {
  const auto counted = CountedAllocations(
      "# TYPE hami_vgpu_memory_allocated_bytes gauge\n"
      "hami_vgpu_memory_allocated_bytes{namespace=\"default\",node=\"n\",pod=\"a\","
      "container_index=\"0\",device_uuid=\"GPU-1\",zone=\"vGPU\"} 1.048576e+09\n"
      "hami_vgpu_memory_allocated_bytes{namespace=\"default\",node=\"n\",pod=\"a\","
      "container_index=\"0\",device_uuid=\"GPU-2\",zone=\"vGPU\"} 1\n"
      "hami_vgpu_core_allocated_ratio{namespace=\"default\",node=\"n\",pod=\"b\","
      "container_index=\"0\",device_uuid=\"GPU-3\",zone=\"vGPU\"} 30\n"
      "hami_vgpu_memory_allocated_bytes{namespace=\"x\",pod=\"broken\"\n");
  ASSERT_EQ(counted.size(), 1u);
  EXPECT_EQ(counted.at("default/a"), (std::set<std::string>{"GPU-1", "GPU-2"}));
}

}  // namespace
}  // namespace hami::sim
