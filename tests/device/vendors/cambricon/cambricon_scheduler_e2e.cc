// Cambricon MLU end to end through the real hami-scheduler on the chart's default
// device-config.yaml: devices from node capacity, /webhook admits an MLU pod, /filter (NodeNames
// form) places it with the allocation keys and the DSMLU profile, and reports HAMi's reason.
#include <regex>

#include "support/vendor_scheduler.h"

namespace hami::device::cambricon {
namespace {

class CambriconScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("cambricon:"); }
};

TEST_F(CambriconScheduler, WebhookAndFilter) {
  // Two cards of 16 GiB: vcore 200, vmemory 128 units of 256 MiB.
  CreateNode("mlu-node", {},
             {{"cambricon.com/vmlu", "200"},
              {"cambricon.com/mlu.smlu.vcore", "200"},
              {"cambricon.com/mlu.smlu.vmemory", "128"}});
  Start();
  Admit(Pod("mlu", {{"cambricon.com/vmlu", "1"},
                    {"cambricon.com/mlu.smlu.vmemory", "16"},
                    {"cambricon.com/mlu.smlu.vcore", "50"}}));
  json res = Filter("mlu", {"mlu-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"mlu-node"})) << res;
  auto annos = Annotations("mlu");
  std::string value = annos["hami.io/cambricon-mlu-devices-to-allocate"];
  EXPECT_TRUE(value == "mlu-node-cambricon-mlu-0,MLU,4096,50:;" ||
              value == "mlu-node-cambricon-mlu-1,MLU,4096,50:;")
      << value;
  EXPECT_EQ(annos["hami.io/cambricon-mlu-devices-allocated"], value);
  std::string index = value.substr(std::string("mlu-node-cambricon-mlu-").size(), 1);
  EXPECT_EQ(annos["CAMBRICON_DSMLU_PROFILE"], index + "_50_16");
  EXPECT_EQ(annos["CAMBRICON_DSMLU_ASSIGNED"], "false");

  // 100 units (25600 MiB) exceed both 16 GiB cards.
  Admit(Pod("big", {{"cambricon.com/vmlu", "1"}, {"cambricon.com/mlu.smlu.vmemory", "100"}}));
  res = Filter("big", {"mlu-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["mlu-node"], "2/2 CardInsufficientMemory") << res;
}

// HAMi's Cambricon LockNode: a bind takes cambricon.com/dsmlu.lock (not hami.io/mutex.lock,
// which Cambricon's plugin never removes); a second bind within 2 minutes is refused in HAMi's
// words and leaves the first lock in place.
TEST_F(CambriconScheduler, BindTakesTheDsmluLockAndASecondBindWaits) {
  CreateNode("mlu-node", {},
             {{"cambricon.com/vmlu", "200"},
              {"cambricon.com/mlu.smlu.vcore", "200"},
              {"cambricon.com/mlu.smlu.vmemory", "128"}});
  Start();
  for (const char* name : {"first", "second"}) {
    Admit(Pod(name, {{"cambricon.com/vmlu", "1"}, {"cambricon.com/mlu.smlu.vmemory", "8"}}));
    ASSERT_EQ(Filter(name, {"mlu-node"})["NodeNames"], json::array({"mlu-node"}));
  }
  json first = Bind("first", "mlu-node");
  EXPECT_EQ(first["Error"], "") << first;
  auto node = NodeAnnotations("mlu-node");
  ASSERT_EQ(node.count("cambricon.com/dsmlu.lock"), 1u) << ::testing::PrintToString(node);
  const std::string lock = node["cambricon.com/dsmlu.lock"];
  EXPECT_TRUE(
      std::regex_match(lock, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d))")))
      << lock;
  EXPECT_EQ(node.count("hami.io/mutex.lock"), 0u) << ::testing::PrintToString(node);
  EXPECT_EQ(GetPod("first")["spec"]["nodeName"], "mlu-node");

  json second = Bind("second", "mlu-node");
  EXPECT_EQ(second["Error"], "node mlu-node has been locked within 2 minutes") << second;
  EXPECT_EQ(NodeAnnotations("mlu-node")["cambricon.com/dsmlu.lock"], lock);
  EXPECT_FALSE(GetPod("second")["spec"].contains("nodeName"));
}

}  // namespace
}  // namespace hami::device::cambricon
