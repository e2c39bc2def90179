// Kunlunxin end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API
// server: whole XPUs placed by topology with BAIDU_COM_DEVICE_IDX, vXPUs registered in JSON
// with the handshake, their memory rounded by /webhook and shared by slice size in /filter.
#include "support/vendor_scheduler.h"

namespace hami::device::kunlun {
namespace {

using nlohmann::json;

class KunlunScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("kunlun:"); }
};

TEST_F(KunlunScheduler, WholeDevicesByTopology) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "p800"}}}};
  node["status"]["capacity"]["kunlunxin.com/xpu"] = "8";
  node["status"]["allocatable"]["kunlunxin.com/xpu"] = "8";
  CreateNode(node);
  Start();

  json review = Review(Pod("xpu", {{"kunlunxin.com/xpu", "4"}}));
  EXPECT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["spec"]["schedulerName"], "hami-scheduler") << review;
  CreatePod(review["pod"]);
  json res = Filter("xpu", {"p800"});
  EXPECT_EQ(res["NodeNames"], json::array({"p800"})) << res;
  auto annos = k8s::Annotations(GetPod("xpu"));
  EXPECT_EQ(annos["BAIDU_COM_DEVICE_IDX"], "0,1,2,3") << annos["hami.io/kunlun-allocated"];
  EXPECT_EQ(annos["hami.io/kunlun-allocated"].rfind("p800-kunlun-0,kunlun,98304,100:", 0), 0u)
      << annos["hami.io/kunlun-allocated"];

  // Three is no topology HAMi places.
  CreatePod(Review(Pod("xpu3", {{"kunlunxin.com/xpu", "3"}}))["pod"]);
  res = Filter("xpu3", {"p800"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["p800"], "1/8 NumaNotFit") << res;
}

TEST_F(KunlunScheduler, VirtualXpus) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "vxpu"}}}};
  json devs = json::array();
  for (int i = 0; i < 8; ++i) {
    devs.push_back({{"id", "xpu-" + std::to_string(i)},
                    {"index", i},
                    {"count", 4},
                    {"devmem", 98304},
                    {"devcore", 100},
                    {"type", "P800"},
                    {"health", true}});
  }
  node["metadata"]["annotations"]["hami.io/node-register-xpu"] = devs.dump();
  node["status"]["capacity"]["kunlunxin.com/vxpu"] = "32";
  node["status"]["allocatable"]["kunlunxin.com/vxpu"] = "32";
  CreateNode(node);
  Start();

  json review =
      Review(Pod("v", {{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", "30000"}}));
  EXPECT_EQ(review["allowed"], true) << review;
  const json& res_ = review["pod"]["spec"]["containers"][0]["resources"];
  EXPECT_EQ(res_["limits"]["kunlunxin.com/vxpu-memory"], "49152") << review;
  EXPECT_EQ(res_["requests"]["kunlunxin.com/vxpu-memory"], "49152") << review;
  CreatePod(review["pod"]);
  json res = Filter("v", {"vxpu"});
  EXPECT_EQ(res["NodeNames"], json::array({"vxpu"})) << res;
  auto annos = k8s::Annotations(GetPod("v"));
  EXPECT_EQ(annos["hami.io/xpu-devices-to-allocate"], "xpu-0,XPU,49152,50:;");
  EXPECT_EQ(annos["hami.io/xpu-devices-allocated"], "xpu-0,XPU,49152,50:;");
  EXPECT_TRUE(AwaitNodeAnnotation("vxpu", "hami.io/node-handshake-xpu").has_value());
}

}  // namespace
}  // namespace hami::device::kunlun
