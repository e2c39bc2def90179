// Issue 30 item 6/2 against the real hami-scheduler: a topology-aware pod asking 8..28 vGPUs of a
// node with 8 A100s in MIG mode (56 passing instances). HAMi's exhaustive search would go through
// C(56, k) combinations (10^9 at k = 8, 10^15 at k = 28) and never answer; each retry pinned
// another worker. /filter now answers, within the client's 10 s, with the node.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "binary_fixture.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "scheduler_process.h"
#include "test_env.h"

namespace hami {
namespace {

using nlohmann::json;
using scheduler::testing::GpuPod;
using scheduler::testing::Node;

// Eight A100 40 GB in MIG mode, each offering seven 1g.5gb instances, as the plugin registers
// them (docs/MIG.md).
std::string EightMigA100s() {
  json list = json::array();
  for (int i = 0; i < 8; ++i) {
    json placements = json::array();
    for (int s = 0; s < 7; ++s) placements.push_back({{"start", s}, {"size", 1}});
    list.push_back({{"id", "GPU-a100-" + std::to_string(i)},
                    {"index", i},
                    {"count", 7},
                    {"devmem", 40960},
                    {"devcore", 100},
                    {"type", "NVIDIA A100-SXM4-40GB"},
                    {"mode", "mig"},
                    {"health", true},
                    {"migProfiles",
                     {{{"name", "1g.5gb"},
                       {"memoryMB", 4864},
                       {"core", 14},
                       {"sliceCount", 1},
                       {"placements", placements}}}}});
  }
  return list.dump();
}

class TopologySearchTest : public scheduler::testing::SchedulerBinaryTest {};

TEST_F(TopologySearchTest, TopologyAwarePodOnEightMigA100sIsAnswered) {
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("mig-node", EightMigA100s())).ok());
  StartScheduler();
  http_->set_read_timeout(std::chrono::seconds(10));
  for (int k : {8, 16, 28}) {
    json pod = GpuPod("topo-" + std::to_string(k), 4000);
    pod["metadata"]["annotations"]["hami.io/gpu-scheduler-policy"] = "topology-aware";
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(k);
    auto created = client_->Create(k8s::resources::kPods, "default", pod);
    ASSERT_TRUE(created.ok());
    const auto start = std::chrono::steady_clock::now();
    auto res = http_->Post("/filter", json{{"Pod", *created}, {"NodeNames", {"mig-node"}}}.dump(),
                           "application/json");
    ASSERT_TRUE(res) << "k = " << k << ": /filter did not answer within 10 s\n" << sched_->log();
    ASSERT_EQ(res->status, 200) << res->body;
    json reply = json::parse(res->body, nullptr, false);
    EXPECT_EQ(reply["NodeNames"], json::array({"mig-node"})) << "k = " << k << ": " << reply;
    RecordProperty("filter_ms_k" + std::to_string(k),
                   static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - start)
                                        .count()));
  }
  // The scheduler still answers its health check: no worker is left searching.
  auto health = http_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace hami
