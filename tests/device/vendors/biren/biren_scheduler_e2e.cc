// Biren end to end through the real hami-scheduler on the chart's default device-config.yaml:
// /webhook admits a Biren pod, /filter (NodeNames form) places it on a whole device with the
// allocation keys, and a second pod finds the device taken (HAMi's reason).
#include "support/vendor_scheduler.h"

namespace hami::device::biren {
namespace {

class BirenScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("biren:"); }
};

TEST_F(BirenScheduler, WebhookAndFilter) {
  CreateNode("br-node",
             {{"hami.io/node-biren-register",
               R"([{"id":"br-0","count":1,"devmem":65536,"type":"Biren","health":true}])"}},
             {{"birentech.com/gpu", "1"}});
  Start();
  Admit(Pod("br", {{"birentech.com/gpu", "1"}}));
  json res = Filter("br", {"br-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"br-node"})) << res;
  auto annos = Annotations("br");
  EXPECT_EQ(annos["hami.io/Biren-devices-to-allocate"], "br-0,Biren,0,0:;");
  EXPECT_EQ(annos["hami.io/Biren-devices-allocated"], "br-0,Biren,0,0:;");

  Admit(Pod("second", {{"birentech.com/gpu", "1"}}));
  res = Filter("second", {"br-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["br-node"], "1/1 CardTimeSlicingExhausted") << res;
}

}  // namespace
}  // namespace hami::device::biren
