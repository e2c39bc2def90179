// MetaX end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API server:
// /webhook adds the sGPU QoS policy and checks app classes, /filter in the NodeNames form places
// whole GPUs (from capacity) and sGPU slices (from metax-tech.com/node-gpu-devices) with the
// allocation keys HAMi writes, and reports HAMi's reasons.
#include <stdio.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "binary_fixture.h"
#include "k8s/base64.h"
#include "k8s/client.h"
#include "k8s/object.h"

namespace hami::device::metax {
namespace {

using nlohmann::json;

// The chart's default device-config.yaml, or "" when helm is not there.
std::string ChartDeviceConfig() {
  const char* env = getenv("HAMI_HELM");
  std::string helm = env ? env : HAMI_HELM_BIN;
  if (!std::filesystem::exists(helm)) return "";
  std::string cmd = helm + " template hami " + HAMI_SOURCE_DIR +
                    "/charts/hami --show-only templates/scheduler/device-configmap.yaml";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) return "";
  return YAML::Load(out)["data"]["device-config.yaml"].as<std::string>();
}

class MetaxScheduler : public scheduler::testing::SchedulerBinaryTest {
 protected:
  void SetUp() override {
    SchedulerBinaryTest::SetUp();
    if (HasFatalFailure()) return;
    std::string config = ChartDeviceConfig();
    if (config.empty()) GTEST_SKIP() << "helm not found (scripts/bootstrap installs it)";
    ASSERT_NE(config.find("metax:"), std::string::npos) << config;
    config_file_ = dir_ + "/device-config.yaml";
    std::ofstream(config_file_) << config;
  }
  void TearDown() override {
    if (sched_) sched_->Kill(SIGTERM);
    if (!config_file_.empty()) unlink(config_file_.c_str());
    SchedulerBinaryTest::TearDown();
  }
  void Start() {
    sched_ = std::make_unique<scheduler::testing::SchedulerProcess>(
        HAMI_SCHEDULER_BIN, SchedulerArgs({"--device-config-file=" + config_file_}));
    ASSERT_TRUE(sched_->started());
    int port = sched_->WaitForPort();
    ASSERT_GT(port, 0) << sched_->log();
    http_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    http_->set_read_timeout(std::chrono::seconds(30));
  }
  json Post(const std::string& path, const json& body) {
    auto res = http_->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << path << " " << res->body;
    return json::parse(res->body, nullptr, false);
  }
  // The webhook's answer for `pod`, with the JSON Patch decoded into "patch" (null: none).
  json Review(const json& pod) {
    json review = {{"apiVersion", "admission.k8s.io/v1"},
                   {"kind", "AdmissionReview"},
                   {"request", {{"uid", "u"}, {"namespace", "default"}, {"object", pod}}}};
    json resp = Post("/webhook", review)["response"];
    json patched = pod;
    if (resp.contains("patch")) {
      patched = pod.patch(json::parse(*k8s::Base64Decode(resp["patch"].get<std::string>())));
    }
    resp["pod"] = patched;
    return resp;
  }
  void CreateNode(const json& node) {
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", node).ok());
  }
  void CreatePod(const json& pod) {
    ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", pod).ok());
  }
  json GetPod(const std::string& name) {
    auto r = client_->Get(k8s::resources::kPods, "default", name);
    return r ? *r : json();
  }
  json Filter(const std::string& pod, const std::vector<std::string>& nodes) {
    return Post("/filter", json{{"Pod", GetPod(pod)}, {"NodeNames", nodes}});
  }
  std::string config_file_;
};

json Pod(const std::string& name, const json& limits, const json& requests = json::object()) {
  json ctr = {{"name", "main"}, {"image", "busybox"}};
  ctr["resources"]["limits"] = limits;
  if (!requests.empty()) ctr["resources"]["requests"] = requests;
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}};
  pod["spec"]["containers"] = json::array({ctr});
  return pod;
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

}  // namespace
}  // namespace hami::device::metax
