// `hami-sim run examples/mig.yaml` in-process (issue 16): GPUs in MIG mode register their
// profiles, every pod that fits a profile runs, no GPU is over-committed and no two MIG
// instances of a GPU overlap (the report's own check, from the pods' annotations).
#include <string>

#include <gtest/gtest.h>

#include "protocol/mig_allocations.h"
#include "sim/example_run.h"
#include "sim/runner.h"

namespace hami::sim {
namespace {

TEST(MigRunTest, ExampleRunsWithoutOverlapOrOvercommit) {
  auto scenario = LoadScenarioFile(ExamplePath("mig.yaml"));
  ASSERT_TRUE(scenario.ok()) << scenario.error();
  for (Workload& w : scenario->workloads) {
    w.arrival = w.arrival / 2;
    w.interval = w.interval / 2;
  }
  auto report = RunToReport(std::move(*scenario));
  ASSERT_TRUE(report.ok()) << report.error();
  const Report& r = *report;
  const std::string text = RenderText(r, false);
  EXPECT_FALSE(r.timed_out) << text;
  EXPECT_EQ(r.pods_total, 9);
  EXPECT_EQ(r.pods_running, 8) << text;
  EXPECT_EQ(r.pods_unschedulable, 1) << text;
  EXPECT_EQ(r.overcommitted_devices, 0) << text;
  EXPECT_EQ(r.overlapping_mig_placements, 0) << text;
  EXPECT_EQ(r.unknown_device_allocations, 0);
  EXPECT_EQ(r.pods_allocating, 0);
  EXPECT_NE(text.find("MIG instances per GPU"), std::string::npos);
  // Every running pod's devices are MIG instances: one reservation per device, and the
  // instance count on the GPUs adds up to the devices handed out.
  size_t devices = 0, instances = 0;
  for (const PodReport& p : r.pods) {
    if (p.state == PodState::kRunning) devices += p.devices.size();
  }
  for (const GpuReport& g : r.gpus) {
    EXPECT_EQ(g.mode, "mig");
    instances += g.mig_instances.size();
    EXPECT_LE(g.used_slots, g.slots_limit);
  }
  EXPECT_EQ(devices, instances);
  EXPECT_EQ(devices, 9u);  // large 1, medium 3, small 3, pair 2; too-big none
  // The large pod holds a 7g.40gb of an A100 (all eight memory slices).
  for (const GpuReport& g : r.gpus) {
    for (const auto& m : g.mig_instances) {
      if (m.pod == "default/large") {
        EXPECT_EQ(m.profile, "7g.40gb");
        EXPECT_EQ(m.size, 8u);
      }
    }
  }
  const auto json = ReportToJson(r);
  EXPECT_EQ(json.at("overlapping_mig_placements"), 0);
}

}  // namespace
}  // namespace hami::sim
