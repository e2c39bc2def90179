// VastAI end to end through the real hami-scheduler on the chart's default device-config.yaml:
// /webhook admits a VastAI pod, /filter (NodeNames form) places it on a whole device with the
// allocation keys, and reports HAMi's reason for more devices than the node has.
#include "support/vendor_scheduler.h"

namespace hami::device::vastai {
namespace {

class VastaiScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("vastai:"); }
};

TEST_F(VastaiScheduler, WebhookAndFilter) {
  CreateNode(
      "va-node",
      {{"hami.io/node-va-register",
        R"([{"id":"va-0","count":1,"type":"Vastai","health":true},{"id":"va-1","index":1,"count":1,"type":"Vastai","health":true}])"}},
      {{"vastaitech.com/va", "2"}});
  Start();
  Admit(Pod("va", {{"vastaitech.com/va", "2"}}));
  json res = Filter("va", {"va-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"va-node"})) << res;
  auto annos = Annotations("va");
  std::string value = annos["hami.io/Vastai-devices-to-allocate"];
  EXPECT_TRUE(value == "va-0,Vastai,0,0:va-1,Vastai,0,0:;" ||
              value == "va-1,Vastai,0,0:va-0,Vastai,0,0:;")
      << value;
  EXPECT_EQ(annos["hami.io/Vastai-devices-allocated"], value);

  Admit(Pod("three", {{"vastaitech.com/va", "3"}}));
  res = Filter("three", {"va-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["va-node"], "NodeInsufficientDevice") << res;
}

}  // namespace
}  // namespace hami::device::vastai
