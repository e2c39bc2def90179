// `hami-sim run examples/dra.yaml` in-process (issue 28): DRA mode end to end. HAMi's
// gpumem/gpucores pods become claims from the webhook's templates, the claim controller makes
// them per pod, the DRA scheduler allocates (shares of GPUs, two shares in one claim, one claim
// for two pods, MIG instances), the kubelets have hami-dra-plugin prepare them, and each
// container runs with the limits of its claim's consumed capacity. Pods deleted after they run
// take their claims along; the pod no GPU can hold is unschedulable with kube-scheduler's reason.
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/example_run.h"
#include "sim/runner.h"

namespace hami::sim {
namespace {

const GpuReport::DraShare* FindShare(const Report& r, const std::string& pod,
                                     const GpuReport** gpu) {
  for (const GpuReport& g : r.gpus) {
    for (const GpuReport::DraShare& s : g.dra_shares) {
      for (const std::string& p : s.pods) {
        if (p != pod) continue;
        *gpu = &g;
        return &s;
      }
    }
  }
  return nullptr;
}

TEST(DraRunTest, ExampleAllocatesEnforcesAndCleansUp) {
  auto scenario = LoadScenarioFile(ExamplePath("dra.yaml"));
  ASSERT_TRUE(scenario.ok()) << scenario.error();
  auto report = RunToReport(std::move(*scenario));
  ASSERT_TRUE(report.ok()) << report.error();
  const Report& r = *report;
  const std::string text = RenderText(r, false);
  EXPECT_FALSE(r.timed_out) << text;
  EXPECT_TRUE(r.dra);
  EXPECT_EQ(r.pods_total, 21);
  EXPECT_EQ(r.pods_running, 16) << text;
  EXPECT_EQ(r.pods_succeeded, 4) << text;  // the batch pods, deleted after they ran
  EXPECT_EQ(r.pods_deleted, 4);
  EXPECT_EQ(r.pods_unschedulable, 1) << text;
  EXPECT_EQ(r.pods_failed, 0) << text;
  EXPECT_EQ(r.overcommitted_devices, 0) << text;
  EXPECT_EQ(r.overlapping_mig_placements, 0) << text;
  EXPECT_EQ(r.unknown_device_allocations, 0) << text;
  // Claims: one per running pod (a shared one for two), none left of the deleted pods.
  EXPECT_EQ(r.dra_claims_orphaned, 0) << text;
  EXPECT_EQ(r.dra_claims_allocated, 15) << text;  // 16 running pods, shared-a and -b share one
  EXPECT_EQ(r.dra_claims_total, 16) << text;      // + too-big's, never allocated
  // Every container with a claim of GPU shares runs with its claim's consumed capacity.
  EXPECT_EQ(r.dra_env_checked, 14) << text;
  EXPECT_EQ(r.dra_env_mismatches, 0) << text;

  for (const PodReport& p : r.pods) {
    if (p.name != "too-big") continue;
    EXPECT_EQ(p.state, PodState::kUnschedulable);
    EXPECT_EQ(p.reason, "0/4 nodes are available: 4 cannot allocate all claims.");
  }
  const GpuReport* gpu = nullptr;
  // gpumem 3000 / gpucores 30 in HAMi's way: a share of 3000Mi and 30 cores.
  const GpuReport::DraShare* train = FindShare(r, "default/train-0", &gpu);
  ASSERT_NE(train, nullptr) << text;
  EXPECT_EQ(train->memory_mib, 3000);
  EXPECT_EQ(train->cores, 30);
  EXPECT_EQ(train->device.rfind("hami-gpu-", 0), 0u);
  EXPECT_NE(train->share_id, "");
  // nvidia.com/gpu: 2 is two GPUs, not two shares of one.
  std::set<std::string> infer_gpus;
  for (const GpuReport& g : r.gpus) {
    for (const GpuReport::DraShare& s : g.dra_shares) {
      if (s.pods == std::vector<std::string>{"default/infer-0"}) infer_gpus.insert(g.uuid);
    }
  }
  EXPECT_EQ(infer_gpus.size(), 2u);
  // One claim for two pods: both on its one share.
  const GpuReport* shared_gpu = nullptr;
  const GpuReport::DraShare* shared = FindShare(r, "default/shared-a", &shared_gpu);
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->claim, "default/shared-gpu");
  EXPECT_EQ(shared->pods, (std::vector<std::string>{"default/shared-a", "default/shared-b"}));
  EXPECT_EQ(shared->memory_mib, 8000);
  // Two shares of one GPU in one claim (matchAttribute uuid).
  int pair_shares = 0;
  std::set<std::string> pair_gpus;
  for (const GpuReport& g : r.gpus) {
    for (const GpuReport::DraShare& s : g.dra_shares) {
      if (s.pods != std::vector<std::string>{"default/pair"}) continue;
      ++pair_shares;
      pair_gpus.insert(g.uuid);
    }
  }
  EXPECT_EQ(pair_shares, 2);
  EXPECT_EQ(pair_gpus.size(), 1u);
  // The MIG pods hold 1g.5gb instances of the GPU in MIG mode.
  const GpuReport::DraShare* mig = FindShare(r, "default/mig-0", &gpu);
  ASSERT_NE(mig, nullptr) << text;
  EXPECT_EQ(gpu->mode, "mig");
  EXPECT_NE(mig->device.find("-mig-1g-5gb-"), std::string::npos);
  EXPECT_EQ(gpu->mig_instances.size(), 2u);

  // The monitors read each claim's region on its own node only: what a GPU measured is the
  // `usage:` (2000 MiB) of the train pods holding a share of it.
  ASSERT_TRUE(r.measured) << text;
  for (const GpuReport& g : r.gpus) {
    int64_t want = 0;
    for (const GpuReport::DraShare& s : g.dra_shares) {
      for (const std::string& p : s.pods) want += p.rfind("default/train-", 0) == 0 ? 2000 : 0;
    }
    EXPECT_EQ(g.measured_memory_mib.value_or(-1), want) << g.node << " " << g.uuid << "\n" << text;
  }

  const nlohmann::json j = ReportToJson(r);
  EXPECT_EQ(j.at("dra_claims_orphaned"), 0);
  EXPECT_EQ(j.at("overcommitted_devices"), 0);
}

}  // namespace
}  // namespace hami::sim
