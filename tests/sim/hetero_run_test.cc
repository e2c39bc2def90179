// `hami-sim run examples/hetero.yaml` in-process (issue 15 item 3): one node per vendor, the
// NVIDIA node with the real device plugin, the others with hami-sim's generic vendor plugin
// (sim/vendor_plugin.h). Every pod ends Running or unschedulable with HAMi's reason, the
// vendors' pods run on their vendor's node, and no device is over-committed.
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "device/device.h"
#include "sim/example_run.h"
#include "sim/runner.h"

namespace hami::sim {
namespace {

TEST(HeteroRunTest, EveryVendorsPodsRunOnTheirNodeWithoutOvercommit) {
  auto scenario = LoadScenarioFile(ExamplePath("hetero.yaml"));
  ASSERT_TRUE(scenario.ok()) << scenario.error();
  // Which vendor each node has, and which vendor each workload asks for (the backend whose count
  // resource its first container names).
  std::map<std::string, std::string> vendor_of_node, vendor_of_workload;
  for (const NodeGroup& n : scenario->nodes) {
    ASSERT_EQ(n.count, 1) << n.name_pattern;
    vendor_of_node[n.name_pattern] =
        n.gpus.front().vendor.empty() ? "NVIDIA" : n.gpus.front().vendor;
  }
  const device::Registry registry = device::MakeRegistry(scenario->device_config);
  for (const Workload& w : scenario->workloads) {
    for (const device::Device* d : registry.All()) {
      if (w.containers.front().resources.count(d->Info().count_resource)) {
        vendor_of_workload[w.name] = d->VendorKey();
      }
    }
    EXPECT_TRUE(vendor_of_workload.count(w.name)) << w.name << " asks for no active vendor";
  }
  auto report = RunToReport(std::move(*scenario));
  ASSERT_TRUE(report.ok()) << report.error();
  const Report& r = *report;
  const std::string text = RenderText(r, false);
  EXPECT_FALSE(r.timed_out) << text;
  EXPECT_EQ(r.overcommitted_devices, 0) << text;
  EXPECT_EQ(r.unknown_device_allocations, 0) << text;
  EXPECT_EQ(r.pods_failed, 0) << text;
  EXPECT_EQ(r.pods_denied, 0) << text;
  EXPECT_EQ(r.pods_pending, 0) << text;
  EXPECT_EQ(r.pods_allocating, 0) << text;
  EXPECT_EQ(r.pods_running + r.pods_unschedulable, r.pods_total) << text;
  std::set<std::string> vendors_running;
  for (const PodReport& p : r.pods) {
    if (p.state == PodState::kUnschedulable) {
      // The one pod too big for any GPU, with HAMi's reason.
      EXPECT_EQ(p.workload, "nvidia-too-big") << p.name << ": " << p.reason;
      EXPECT_NE(p.reason.find("CardInsufficientMemory"), std::string::npos) << p.reason;
      continue;
    }
    ASSERT_EQ(p.state, PodState::kRunning) << p.name << ": " << p.reason << "\n" << text;
    EXPECT_EQ(vendor_of_node[p.node], vendor_of_workload[p.workload]) << p.name << " on " << p.node;
    EXPECT_FALSE(p.devices.empty()) << p.name;
    vendors_running.insert(vendor_of_node[p.node]);
  }
  // Every node's vendor has a running pod.
  std::set<std::string> vendors;
  for (const auto& [node, vendor] : vendor_of_node) vendors.insert(vendor);
  EXPECT_EQ(vendors_running, vendors) << text;
  EXPECT_EQ(r.pods_unschedulable, 1) << text;
}

}  // namespace
}  // namespace hami::sim
