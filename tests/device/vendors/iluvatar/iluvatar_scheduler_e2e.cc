// Iluvatar end to end through the real hami-scheduler on the chart's default device-config.yaml
// (the `iluvatars` list: MR-V100, MR-V50, BI-V150, BI-V100): /webhook adds the container-name
// env and whole-card cores, /filter (NodeNames form) places a BI-V150 pod on the BI-V150 device
// with that chip's keys, and reports HAMi's reasons.
#include "support/vendor_scheduler.h"

namespace hami::device::iluvatar {
namespace {

class IluvatarScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("iluvatars:"); }
};

TEST_F(IluvatarScheduler, WebhookAndFilter) {
  CreateNode("ilu-node",
             {{"hami.io/node-BI-V150-register", "ilu-0,10,32768,100,BI-V150,0,true:"},
              {"hami.io/node-MR-V100-register", "ilu-1,10,16384,100,MR-V100,0,true:"}},
             {{"iluvatar.ai/BI-V150-vgpu", "10"}, {"iluvatar.ai/MR-V100-vgpu", "10"}});
  Start();
  json pod =
      Admit(Pod("ilu", {{"iluvatar.ai/BI-V150-vgpu", "1"}, {"iluvatar.ai/BI-V150.vMem", "16"}}));
  EXPECT_EQ(pod["spec"]["containers"][0]["env"],
            json::parse(R"([{"name":"SOL_CONTINER_NAME","value":"main"}])"))
      << pod;
  json res = Filter("ilu", {"ilu-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"ilu-node"})) << res;
  auto annos = Annotations("ilu");
  EXPECT_EQ(annos["hami.io/BI-V150-devices-to-allocate"], "ilu-0,BI-V150,4096,0:;");
  EXPECT_EQ(annos["hami.io/BI-V150-devices-allocated"], "ilu-0,BI-V150,4096,0:;");
  EXPECT_EQ(annos.count("hami.io/MR-V100-devices-allocated"), 0u);

  // Two BI-V150 cards asked for: the webhook sets 200 % cores; the node has one such card.
  json two = Admit(Pod("two", {{"iluvatar.ai/BI-V150-vgpu", "2"}}));
  EXPECT_EQ(two["spec"]["containers"][0]["resources"]["limits"]["iluvatar.ai/BI-V150.vCore"], "200")
      << two;
  res = Filter("two", {"ilu-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["ilu-node"], "NodeInsufficientDevice") << res;
}

}  // namespace
}  // namespace hami::device::iluvatar
