// Hygon DCU end to end through the real hami-scheduler on the chart's default
// device-config.yaml: /webhook admits a DCU pod, /filter (NodeNames form) places it and writes
// the seed's hami.io/hcu-devices-to-allocate with hami.io/dcu-devices-allocated, and reports
// HAMi's reason for a request that does not fit.
#include "support/vendor_scheduler.h"

namespace hami::device::hygon {
namespace {

class HygonScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("hygon:"); }
};

TEST_F(HygonScheduler, WebhookAndFilter) {
  CreateNode("dcu-node", {{"hami.io/node-dcu-register", "dcu-0,4,16384,100,DCU-Z100,0,true:"}},
             {{"hygon.com/dcunum", "4"}});
  Start();
  Admit(
      Pod("dcu",
          {{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "2000"}, {"hygon.com/dcucores", "30"}}));
  json res = Filter("dcu", {"dcu-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"dcu-node"})) << res;
  auto annos = Annotations("dcu");
  EXPECT_EQ(annos["hami.io/hcu-devices-to-allocate"], "dcu-0,DCU,2000,30:;");
  EXPECT_EQ(annos["hami.io/dcu-devices-allocated"], "dcu-0,DCU,2000,30:;");
  EXPECT_EQ(annos.count("hami.io/dcu-devices-to-allocate"), 0u);
  EXPECT_EQ(annos["hami.io/vgpu-node"], "dcu-node");

  Admit(Pod("big", {{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "20000"}}));
  res = Filter("big", {"dcu-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["dcu-node"], "1/1 CardInsufficientMemory") << res;
}

}  // namespace
}  // namespace hami::device::hygon
