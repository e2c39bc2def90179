// AMD end to end through the real hami-scheduler on the chart's default device-config.yaml:
// /webhook admits an AMD pod and refuses a core percentage outside 1..100, /filter (NodeNames
// form) places it with the product type in the allocation, and reports HAMi's reason.
#include "support/vendor_scheduler.h"

namespace hami::device::amd {
namespace {

class AmdScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("amd:"); }
};

TEST_F(AmdScheduler, WebhookAndFilter) {
  CreateNode(
      "amd-node",
      {{"hami.io/node-amd-register",
        R"([{"id":"GPU-0","count":4,"devmem":8192,"devcore":100,"type":"AMD_Instinct_MI300X","health":true}])"}},
      {{"amd.com/gpu", "4"}});
  Start();
  Admit(Pod("amd", {{"amd.com/gpu", "1"}, {"amd.com/gpumem", "2048"}, {"amd.com/gpucores", "25"}}));
  json res = Filter("amd", {"amd-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"amd-node"})) << res;
  auto annos = Annotations("amd");
  EXPECT_EQ(annos["hami.io/amd-devices-to-allocate"], "GPU-0,AMD_Instinct_MI300X,2048,25:;");
  EXPECT_EQ(annos["hami.io/amd-devices-allocated"], "GPU-0,AMD_Instinct_MI300X,2048,25:;");

  json bad = Review(Pod("bad", {{"amd.com/gpu", "1"}, {"amd.com/gpucores", "0"}}));
  EXPECT_EQ(bad["allowed"], false) << bad;
  EXPECT_NE(bad.dump().find("amd.com/gpucores must be an integer percentage between 1 and 100"),
            std::string::npos)
      << bad;

  Admit(Pod("big", {{"amd.com/gpu", "1"}, {"amd.com/gpumem", "10000"}}));
  res = Filter("big", {"amd-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["amd-node"], "1/1 CardInsufficientMemory") << res;
}

}  // namespace
}  // namespace hami::device::amd
