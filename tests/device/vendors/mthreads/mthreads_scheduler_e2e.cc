// Moore Threads end to end through the real hami-scheduler on the chart's default
// device-config.yaml: devices from node capacity, /webhook fills in a whole card's cores and
// memory and refuses an illegal memory slice, /filter (NodeNames form) places the pod with the
// allocated key and mthreads.com/gpu-index, and reports HAMi's reason.
#include "support/vendor_scheduler.h"

namespace hami::device::mthreads {
namespace {

class MthreadsScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("mthreads:"); }
};

TEST_F(MthreadsScheduler, WebhookAndFilter) {
  // Two cards: 32 cores, 192 units of 512 MiB (48 GiB each).
  CreateNode("mt-node", {},
             {{"mthreads.com/vgpu", "200"},
              {"mthreads.com/sgpu-core", "32"},
              {"mthreads.com/sgpu-memory", "192"}});
  Start();
  json pod = Admit(Pod("mt", {{"mthreads.com/vgpu", "1"}}));
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["mthreads.com/sgpu-core"], "16")
      << pod;
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["mthreads.com/sgpu-memory"], "96")
      << pod;
  json res = Filter("mt", {"mt-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"mt-node"})) << res;
  auto annos = Annotations("mt");
  std::string value = annos["hami.io/mthreads-vgpu-devices-allocated"];
  EXPECT_TRUE(value == "mt-node-mthreads-0,Mthreads,49152,16:;" ||
              value == "mt-node-mthreads-1,Mthreads,49152,16:;")
      << value;
  EXPECT_EQ(annos["mthreads.com/gpu-index"],
            value.substr(std::string("mt-node-mthreads-").size(), 1));
  EXPECT_EQ(annos.count("hami.io/mthreads-vgpu-devices-to-allocate"), 0u);
  EXPECT_EQ(annos["mthreads.com/predicate-node"], "mt-node");
  EXPECT_TRUE(testing::SameSecond(annos["mthreads.com/predicate-time"], annos["hami.io/vgpu-time"]))
      << annos["mthreads.com/predicate-time"];

  json illegal =
      Review(Pod("illegal", {{"mthreads.com/vgpu", "1"}, {"mthreads.com/sgpu-memory", "3"}}));
  EXPECT_EQ(illegal["allowed"], false) << illegal;
  EXPECT_NE(illegal.dump().find("sGPU memory request value is invalid"), std::string::npos)
      << illegal;

  // Three whole cards on a two-card node.
  Admit(Pod("three", {{"mthreads.com/vgpu", "3"}}));
  res = Filter("three", {"mt-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["mt-node"], "NodeInsufficientDevice") << res;
}

// HAMi's Moore Threads LockNode takes no lock (its plugin releases none): binds to one node
// follow each other without waiting, and the node carries no lock.
TEST_F(MthreadsScheduler, BindTakesNoNodeLock) {
  CreateNode("mt-node", {},
             {{"mthreads.com/vgpu", "200"},
              {"mthreads.com/sgpu-core", "32"},
              {"mthreads.com/sgpu-memory", "192"}});
  Start();
  for (const char* name : {"one", "two"}) {
    Admit(Pod(name, {{"mthreads.com/vgpu", "1"}, {"mthreads.com/sgpu-memory", "8"}}));
    ASSERT_EQ(Filter(name, {"mt-node"})["NodeNames"], json::array({"mt-node"}));
    json bound = Bind(name, "mt-node");
    EXPECT_EQ(bound["Error"], "") << bound;
    EXPECT_EQ(GetPod(name)["spec"]["nodeName"], "mt-node");
  }
  auto node = NodeAnnotations("mt-node");
  EXPECT_EQ(node.count("hami.io/mutex.lock"), 0u) << ::testing::PrintToString(node);
}

}  // namespace
}  // namespace hami::device::mthreads
