// MetaX end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API server:
// /webhook adds the sGPU QoS policy and checks app classes, /filter in the NodeNames form places
// whole GPUs (from capacity) and sGPU slices (from metax-tech.com/node-gpu-devices) with the
// allocation keys HAMi writes, and reports HAMi's reasons.
#include "support/vendor_scheduler.h"

namespace hami::device::metax {
namespace {

using nlohmann::json;

class MetaxScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("metax:"); }
};

// HAMi ScoreNode under binpack: 2000 - losses[devices taken]; the node that loses least wins
// although the other's name sorts first.
TEST_F(MetaxScheduler, TopologyLossesChooseTheNode) {
  for (auto [name, losses] :
       {std::pair{"mx-a", R"({"1":300,"2":600})"}, std::pair{"mx-b", R"({"1":100,"2":600})"}}) {
    json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
    node["metadata"]["annotations"]["metax-tech.com/gpu.topology.losses"] = losses;
    node["status"]["capacity"]["metax-tech.com/gpu"] = "2";
    node["status"]["allocatable"]["metax-tech.com/gpu"] = "2";
    CreateNode(node);
  }
  Start();
  CreatePod(Review(Pod("one", {{"metax-tech.com/gpu", "1"}}))["pod"]);
  json res = Filter("one", {"mx-a", "mx-b"});
  EXPECT_EQ(res["NodeNames"], json::array({"mx-b"})) << res;
  // Two devices: losses tie at 600, the name decides.
  CreatePod(Review(Pod("two", {{"metax-tech.com/gpu", "2"}}))["pod"]);
  res = Filter("two", {"mx-b", "mx-a"});
  EXPECT_EQ(res["NodeNames"], json::array({"mx-a"})) << res;
}

TEST_F(MetaxScheduler, WholeGpusFromCapacity) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "mx-node"}}}};
  node["status"]["capacity"]["metax-tech.com/gpu"] = "2";
  node["status"]["allocatable"]["metax-tech.com/gpu"] = "2";
  CreateNode(node);
  Start();
  json review = Review(Pod("gpu", {{"metax-tech.com/gpu", "1"}}));
  ASSERT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["spec"]["schedulerName"], "hami-scheduler") << review;
  CreatePod(review["pod"]);
  json res = Filter("gpu", {"mx-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"mx-node"})) << res;
  auto annos = k8s::Annotations(GetPod("gpu"));
  EXPECT_EQ(annos["hami.io/metax-gpu-devices-to-allocate"],
            "mx-node-metax-1,Metax-GPU,65536,100:;");
  EXPECT_EQ(annos["hami.io/metax-gpu-devices-allocated"],
            annos["hami.io/metax-gpu-devices-to-allocate"]);
  CreatePod(Review(Pod("gpu3", {{"metax-tech.com/gpu", "3"}}))["pod"]);
  res = Filter("gpu3", {"mx-node"});
  EXPECT_TRUE(res["NodeNames"].empty()) << res;
  EXPECT_NE(res["FailedNodes"]["mx-node"].get<std::string>().find("NodeInsufficientDevice"),
            std::string::npos)
      << res;
}

TEST_F(MetaxScheduler, SharedGpus) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "sgpu-node"}}}};
  node["metadata"]["annotations"]["metax-tech.com/node-gpu-devices"] =
      R"([{"uuid":"GPU-1","model":"C500","totalDevCount":16,"totalCompute":100,)"
      R"("totalVRam":65536,"healthy":true,"qosPolicy":"fixed-share"}])";
  node["status"]["capacity"]["metax-tech.com/sgpu"] = "16";
  CreateNode(node);
  Start();
  json review = Review(Pod("s", {{"metax-tech.com/sgpu", "1"},
                                 {"metax-tech.com/vcore", "30"},
                                 {"metax-tech.com/vmemory", "16"}}));
  ASSERT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["metadata"]["annotations"]["metax-tech.com/sgpu-qos-policy"],
            "best-effort")
      << review;
  CreatePod(review["pod"]);
  json res = Filter("s", {"sgpu-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"sgpu-node"})) << res;
  auto annos = k8s::Annotations(GetPod("s"));
  EXPECT_EQ(annos["hami.io/metax-sgpu-devices-allocated"], "GPU-1,Metax-SGPU,16384,30:;");
  EXPECT_EQ(annos["metax-tech.com/gpu-devices-allocated"],
            R"([[{"uuid":"GPU-1","compute":30,"vRam":16384}]])");
  EXPECT_TRUE(
      testing::SameSecond(annos["metax-tech.com/predicate-time"], annos["hami.io/vgpu-time"]))
      << annos["metax-tech.com/predicate-time"];

  json bad = Review(Pod("bad", {{"metax-tech.com/sgpu", "2"}}));
  bad = Review([&] {
    json p = Pod("bad", {{"metax-tech.com/sgpu", "2"}});
    p["metadata"]["annotations"]["metax-tech.com/sgpu-app-class"] = "online";
    return p;
  }());
  EXPECT_EQ(bad["allowed"], false) << bad;
  EXPECT_NE(bad.dump().find("app-class pod must request single device"), std::string::npos) << bad;

  // More memory than the device has: HAMi's reason.
  CreatePod(
      Review(Pod("big", {{"metax-tech.com/sgpu", "1"}, {"metax-tech.com/vmemory", "100"}}))["pod"]);
  res = Filter("big", {"sgpu-node"});
  EXPECT_TRUE(res["NodeNames"].empty()) << res;
  EXPECT_EQ(res["FailedNodes"]["sgpu-node"], "1/1 CardInsufficientMemory") << res;
}

// HAMi's app classes through the scheduler: the filter counts the online and offline pods on
// each sGPU from the pods it placed (their metax-tech.com/sgpu-app-class), an online pod goes to
// the device running fewer online pods (binpack alone would pick the fuller one), and offline
// or ordinary pods stay off devices running online pods.
TEST_F(MetaxScheduler, OnlinePodPrefersTheDeviceWithFewerOnlinePods) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "sgpu-node"}}}};
  node["metadata"]["annotations"]["metax-tech.com/node-gpu-devices"] =
      R"([{"uuid":"GPU-1","totalDevCount":16,"totalCompute":100,"totalVRam":65536,"healthy":true},)"
      R"({"uuid":"GPU-2","totalDevCount":16,"totalCompute":100,"totalVRam":65536,"healthy":true}])";
  node["status"]["capacity"]["metax-tech.com/sgpu"] = "32";
  CreateNode(node);
  Start();
  auto pod = [](const std::string& name, const std::string& app_class, const std::string& uuid) {
    json p = Pod(name, {{"metax-tech.com/sgpu", "1"},
                        {"metax-tech.com/vcore", "10"},
                        {"metax-tech.com/vmemory", "1"}});
    if (!app_class.empty())
      p["metadata"]["annotations"]["metax-tech.com/sgpu-app-class"] = app_class;
    if (!uuid.empty()) p["metadata"]["annotations"]["metax-tech.com/use-gpuuuid"] = uuid;
    p["metadata"]["annotations"]["hami.io/gpu-scheduler-policy"] = "binpack";
    return p;
  };
  auto place = [&](const std::string& name, const std::string& app_class, const std::string& uuid) {
    Admit(pod(name, app_class, uuid));
    json res = Filter(name, {"sgpu-node"});
    EXPECT_EQ(res["NodeNames"], json::array({"sgpu-node"})) << name << " " << res;
    return Annotations(name)["hami.io/metax-sgpu-devices-allocated"];
  };
  // Two online pods on GPU-1, one on GPU-2.
  EXPECT_EQ(place("on-1a", "online", "GPU-1"), "GPU-1,Metax-SGPU,1024,0:;");
  EXPECT_EQ(place("on-1b", "online", "GPU-1"), "GPU-1,Metax-SGPU,1024,0:;");
  EXPECT_EQ(place("on-2a", "online", "GPU-2"), "GPU-2,Metax-SGPU,1024,0:;");
  EXPECT_EQ(place("on-next", "online", ""), "GPU-2,Metax-SGPU,1024,0:;");
  // Both devices run online pods: no offline or ordinary pod joins them.
  for (const char* name : {"off", "plain"}) {
    Admit(pod(name, name == std::string("off") ? "offline" : "", ""));
    json res = Filter(name, {"sgpu-node"});
    EXPECT_TRUE(res["NodeNames"].empty()) << res;
    EXPECT_EQ(res["FailedNodes"]["sgpu-node"], "2/2 CardAppClassMismatch") << res;
  }
}

}  // namespace
}  // namespace hami::device::metax
