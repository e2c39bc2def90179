// Enflame end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API
// server: /webhook admits GCU and DRS pods (DRS requests copied to limits), /filter in the
// NodeNames form places them with the allocation keys HAMi writes, and reports HAMi's reasons.
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

namespace hami::device::enflame {
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

class EnflameScheduler : public scheduler::testing::SchedulerBinaryTest {
 protected:
  void SetUp() override {
    SchedulerBinaryTest::SetUp();
    if (HasFatalFailure()) return;
    std::string config = ChartDeviceConfig();
    if (config.empty()) GTEST_SKIP() << "helm not found (scripts/bootstrap installs it)";
    ASSERT_NE(config.find("enflame:"), std::string::npos) << config;
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

  json review = Review(Pod("drs", json::object(), {{"enflame.com/drs-gcu", "3"}}));
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

  // A 4-slice request names no profile of the node: ModeNotFit.
  CreatePod(Review(Pod("drs4", {{"enflame.com/drs-gcu", "4"}}))["pod"]);
  res = Filter("drs4", {"drs-node"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_EQ(res["FailedNodes"]["drs-node"], "1/1 ModeNotFit") << res;
}

}  // namespace
}  // namespace hami::device::enflame
