// `hami-sim run` end to end, in-process: the demo scenario's placements (the real webhook,
// extender, kube-scheduler loop, kubelets and device plugins), and a run under API fault
// injection that must end with every pod running or reported unschedulable and no GPU
// over-committed.
#include "sim/runner.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "sim/example_run.h"

namespace hami::sim {
namespace {

const PodReport* Find(const Report& r, const std::string& name) {
  for (const PodReport& p : r.pods) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string Uuid(const Report& r, const std::string& pod, size_t device = 0) {
  const PodReport* p = Find(r, pod);
  if (!p || p->devices.size() <= device) return "<none>";
  return p->devices[device].device.uuid;
}

TEST(RunTest, DemoPlacements) {
  auto scenario = LoadScenarioFile(ExamplePath("demo.yaml"));
  ASSERT_TRUE(scenario.ok()) << scenario.error();
  // The demo spaces pods 250 ms apart for a human; 100 ms keeps the order and the test short.
  for (Workload& w : scenario->workloads) {
    w.arrival = w.arrival * 2 / 5;
    w.interval = w.interval * 2 / 5;
  }
  auto report = RunToReport(std::move(*scenario));
  ASSERT_TRUE(report.ok()) << report.error();
  const Report& r = *report;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.pods_total, 12);
  EXPECT_EQ(r.pods_running, 11) << RenderText(r, false);
  EXPECT_EQ(r.pods_unschedulable, 1);
  EXPECT_EQ(r.overcommitted_devices, 0);
  EXPECT_EQ(r.unknown_device_allocations, 0);
  EXPECT_EQ(r.pods_allocating, 0);

  // Memory slicing: binpack puts both 10000 MiB slices on one V100.
  EXPECT_EQ(Find(r, "mem-slice-0")->node, "gpu-node-v100");
  EXPECT_EQ(Uuid(r, "mem-slice-0"), Uuid(r, "mem-slice-1"));
  EXPECT_EQ(Find(r, "mem-slice-0")->devices[0].device.usedmem, 10000);
  // Core shares: both on the T4, 50 % each.
  EXPECT_EQ(Find(r, "core-share-0")->node, "gpu-node-t4");
  EXPECT_EQ(Find(r, "core-share-1")->node, "gpu-node-t4");
  EXPECT_EQ(Find(r, "core-share-1")->devices[0].device.usedcores, 50);
  // Exclusive: a whole A100 (all cores, all memory), nobody else on it.
  const std::string exclusive = Uuid(r, "exclusive");
  EXPECT_EQ(Find(r, "exclusive")->node, "gpu-node-a100");
  EXPECT_EQ(Find(r, "exclusive")->devices[0].device.usedcores, 100);
  EXPECT_EQ(Find(r, "exclusive")->devices[0].device.usedmem, 81920);
  // UUID selection.
  EXPECT_EQ(Uuid(r, "pinned"), "GPU-a1000000-0000-4000-8000-000000000000");
  // Binpack shares one A100; spread uses two different ones; none shares the exclusive GPU.
  EXPECT_EQ(Uuid(r, "packed-0"), Uuid(r, "packed-1"));
  EXPECT_NE(Uuid(r, "spread-0"), Uuid(r, "spread-1"));
  for (const char* pod : {"pinned", "packed-0", "spread-0", "spread-1"}) {
    EXPECT_EQ(Find(r, pod)->node, "gpu-node-a100") << pod;
    EXPECT_NE(Uuid(r, pod), exclusive) << pod;
  }
  // Multi-GPU: two different V100s in one container.
  const PodReport* multi = Find(r, "multi-gpu");
  ASSERT_EQ(multi->devices.size(), 2u);
  EXPECT_EQ(multi->node, "gpu-node-v100");
  EXPECT_NE(multi->devices[0].device.uuid, multi->devices[1].device.uuid);
  // The pod that cannot fit, with kube-scheduler's reason.
  const PodReport* big = Find(r, "too-big");
  EXPECT_EQ(big->state, PodState::kUnschedulable);
  EXPECT_NE(big->reason.find("CardInsufficientMemory"), std::string::npos) << big->reason;
}

// The issue's criterion: 5 % of API requests fail and watches drop every 25 events, and the run
// still settles with all 32 fitting pods Running, the 3 others unschedulable (no GPU has 40000
// MiB, whatever the faults), no GPU over-committed, no allocation on a GPU the node lacks, none
// left in bind-phase allocating. kube-scheduler's backoff is shortened (100 ms doubling to 1 s)
// so the test settles in seconds; the faults and the components are the real ones.
TEST(RunTest, FaultInjectionEveryFittingPodRunsAndNoGpuIsOvercommitted) {
  auto scenario = ParseScenario(R"(
name: faults
timing: {kubeletLatency: 0s, podInitialBackoff: 100ms, podMaxBackoff: 1s, timeout: 60s}
faults: {errorRate: 0.05, dropWatchEvery: 25}
nodes:
  - name: node-{i}
    count: 4
    gpus: [{model: Tesla V100-PCIE-32GB, memory: 32768, count: 2}]
workloads:
  - name: fits
    replicas: 32
    interval: 5ms
    containers: [{name: c, resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}}]
  - name: extra
    replicas: 3
    arrival: 100ms
    containers: [{name: c, resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 40000}}]
)");
  ASSERT_TRUE(scenario.ok()) << scenario.error();
  Runner runner(std::move(*scenario), RunOptions{});
  auto report = runner.Run();
  EXPECT_TRUE(runner.monitors().empty());  // no container declares usage: no monitor to read
  runner.Stop();
  ASSERT_TRUE(report.ok()) << report.error();
  const Report& r = *report;
  const std::string text = RenderText(r, false);
  EXPECT_FALSE(r.timed_out) << text;
  EXPECT_EQ(r.pods_total, 35);
  EXPECT_EQ(r.pods_running, 32) << text;
  EXPECT_EQ(r.pods_unschedulable, 3) << text;
  EXPECT_EQ(r.pods_allocating, 0) << text;
  EXPECT_EQ(r.overcommitted_devices, 0) << text;
  EXPECT_EQ(r.unknown_device_allocations, 0) << text;
  for (const PodReport& p : r.pods) {
    if (p.name.rfind("extra", 0) == 0) {
      EXPECT_TRUE(p.devices.empty()) << p.name;
      EXPECT_EQ(p.state, PodState::kUnschedulable) << p.name;
    }
  }
}

}  // namespace
}  // namespace hami::sim
