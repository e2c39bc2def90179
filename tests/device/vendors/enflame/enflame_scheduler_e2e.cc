// Enflame end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API
// server: /webhook admits GCU and DRS pods (DRS requests copied to limits), /filter in the
// NodeNames form places them with the allocation keys HAMi writes, and reports HAMi's reasons.
#include "support/vendor_scheduler.h"

namespace hami::device::enflame {
namespace {

using nlohmann::json;

class EnflameScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("enflame:"); }
};

TEST_F(EnflameScheduler, GcuWholeDevices) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "gcu-node"}}}};
  node["status"]["capacity"]["enflame.com/gcu"] = "2";
  node["status"]["allocatable"]["enflame.com/gcu"] = "2";
  CreateNode(node);
  Start();

  json review = Review(Pod("gcu", {{"enflame.com/gcu", "2"}}));
  EXPECT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["spec"]["schedulerName"], "hami-scheduler") << review;
  CreatePod(review["pod"]);
  json res = Filter("gcu", {"gcu-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"gcu-node"})) << res;
  auto annos = k8s::Annotations(GetPod("gcu"));
  EXPECT_EQ(annos["hami.io/enflame-gcu-devices-to-allocate"],
            "gcu-node-GCU-1,GCU,100,100:gcu-node-GCU-0,GCU,100,100:;");
  EXPECT_EQ(annos["hami.io/enflame-gcu-devices-allocated"],
            annos["hami.io/enflame-gcu-devices-to-allocate"]);

  // Three devices on a two-device node: HAMi's reason.
  CreatePod(Review(Pod("gcu3", {{"enflame.com/gcu", "3"}}))["pod"]);
  res = Filter("gcu3", {"gcu-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_NE(res["FailedNodes"]["gcu-node"].get<std::string>().find("NodeInsufficientDevice"),
            std::string::npos)
      << res;
}

TEST_F(EnflameScheduler, DrsSlices) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "drs-node"}}}};
  node["metadata"]["annotations"]["enflame.com/gcu-drs-capacity"] =
      R"({"devices":[{"index":"0","minor":"0","capacity":6}],)"
      R"("profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}})";
  node["status"]["capacity"]["enflame.com/drs-gcu"] = "1";
  CreateNode(node);
  Start();

  // An empty limits map beside the requests (Pod leaves an empty one out).
  json drs = Pod("drs", json::object(), {{"enflame.com/drs-gcu", "3"}});
  drs["spec"]["containers"][0]["resources"]["limits"] = json::object();
  json review = Review(drs);
  EXPECT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["spec"]["containers"][0]["resources"]["limits"]["enflame.com/drs-gcu"],
            "3")
      << review;
  json zero = Review(Pod("zero", {{"enflame.com/drs-gcu", "0"}}));
  EXPECT_EQ(zero["allowed"], false) << zero;
  EXPECT_NE(zero.dump().find("enflame.com/drs-gcu must be greater than 0"), std::string::npos)
      << zero;

  CreatePod(review["pod"]);
  json res = Filter("drs", {"drs-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"drs-node"})) << res;
  auto annos = k8s::Annotations(GetPod("drs"));
  EXPECT_EQ(annos["hami.io/enflame-vgpu-devices-allocated"],
            "drs-node-enflame-drs-0,Enflame,20480,50:;");
  EXPECT_EQ(annos["enflame.com/gcu-assigned"], "false");
  // The profile Fit chose, the node row's minor and the decision's time (HAMi PatchAnnotations).
  EXPECT_EQ(annos["assigned-containers"],
            R"({"main":{"allocated":false,"request":3,"profileID":"1","profileName":"3g.20gb"}})");
  EXPECT_EQ(annos["enflame.com/gcu-assigned-minor"], "0");
  EXPECT_EQ(annos["enflame.com/gcu-assigned-index"], "0");
  EXPECT_EQ(annos["enflame.com/gcu-request-size"], "3");
  EXPECT_TRUE(
      testing::SameSecond(annos["enflame.com/gcu-assigned-time"], annos["hami.io/vgpu-time"]))
      << annos["enflame.com/gcu-assigned-time"];

  // A 4-slice request names no profile of the node: ModeNotFit.
  CreatePod(Review(Pod("drs4", {{"enflame.com/drs-gcu", "4"}}))["pod"]);
  res = Filter("drs4", {"drs-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["drs-node"], "1/1 ModeNotFit") << res;
}

}  // namespace
}  // namespace hami::device::enflame
