// Ascend end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API server:
// /webhook rounds a vNPU memory request up to its template and pairs 910C requests, /filter in
// the NodeNames form places pods with the allocation keys and the huawei.com/<word> runtime list
// HAMi writes, and reports HAMi's reasons.
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

namespace hami::device::ascend {
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

class AscendScheduler : public scheduler::testing::SchedulerBinaryTest {
 protected:
  void SetUp() override {
    SchedulerBinaryTest::SetUp();
    if (HasFatalFailure()) return;
    std::string config = ChartDeviceConfig();
    if (config.empty()) GTEST_SKIP() << "helm not found (scripts/bootstrap installs it)";
    ASSERT_NE(config.find("vnpus:"), std::string::npos) << config;
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

// `n` NPUs with indices 0, step, 2 x step, ...
json AscendNode(const std::string& name, const std::string& word, int n, int mem, int step = 1) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
  std::string reg = "[";
  for (int k = 0; k < n; ++k) {
    int i = k * step;
    if (k > 0) reg += ",";
    reg += R"({"id":")" + name + "-npu-" + std::to_string(i) + R"(","index":)" + std::to_string(i) +
           R"(,"count":4,"devmem":)" + std::to_string(mem) + R"(,"devcore":100,"type":")" + word +
           R"(","health":true})";
  }
  node["metadata"]["annotations"]["hami.io/node-register-" + word] = reg + "]";
  node["status"]["capacity"]["huawei.com/" + word] = std::to_string(n * 4);
  node["status"]["allocatable"]["huawei.com/" + word] = std::to_string(n * 4);
  return node;
}

TEST_F(AscendScheduler, TemplatesAndRuntimeList) {
  CreateNode(AscendNode("b3-node", "Ascend910B3", 2, 65536));
  Start();

  json review = Review(
      Pod("vnpu", {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "9000"}}));
  ASSERT_EQ(review["allowed"], true) << review;
  json res_limits = review["pod"]["spec"]["containers"][0]["resources"];
  EXPECT_EQ(res_limits["limits"]["huawei.com/Ascend910B3-memory"], "16384") << review;
  EXPECT_EQ(res_limits["requests"]["huawei.com/Ascend910B3-memory"], "16384") << review;
  EXPECT_EQ(review["pod"]["spec"]["schedulerName"], "hami-scheduler") << review;
  CreatePod(review["pod"]);
  json res = Filter("vnpu", {"b3-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"b3-node"})) << res;
  auto annos = k8s::Annotations(GetPod("vnpu"));
  EXPECT_EQ(annos["hami.io/Ascend910B3-devices-to-allocate"],
            "b3-node-npu-1,Ascend910B3,16384,0:;");
  EXPECT_EQ(annos["hami.io/Ascend910B3-devices-allocated"],
            annos["hami.io/Ascend910B3-devices-to-allocate"]);
  EXPECT_EQ(annos["huawei.com/Ascend910B3"],
            R"([{"UUID":"b3-node-npu-1","temp":"vir05_1c_16g","memory":16384}])");

  // Hard split refuses a -core request; the webhook answers code 500 with HAMi's words.
  json core =
      Review(Pod("core", {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-core", "5"}}));
  EXPECT_EQ(core["allowed"], false) << core;
  EXPECT_NE(core.dump().find("is only supported in hami-core (soft split) mode"), std::string::npos)
      << core;

  // A soft-split pod on a node without hami-vnpu-core: ModeNotFit.
  json soft =
      Pod("soft", {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "1000"}});
  soft["metadata"]["annotations"]["huawei.com/vnpu-mode"] = "hami-core";
  CreatePod(Review(soft)["pod"]);
  res = Filter("soft", {"b3-node"});
  EXPECT_TRUE(res["NodeNames"].empty()) << res;
  EXPECT_EQ(res["FailedNodes"]["b3-node"], "1/2 ModeNotFit") << res;
}

TEST_F(AscendScheduler, Ascend910CPairs) {
  CreateNode(AscendNode("c-node", "Ascend910C", 3, 65536));
  CreateNode(AscendNode("gap-node", "Ascend910C", 3, 65536, 2));
  Start();
  json review = Review(Pod("pair", {{"huawei.com/Ascend910C", "1"}}));
  ASSERT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910C"],
            "2")
      << review;
  json odd = Review(Pod("odd", {{"huawei.com/Ascend910C", "3"}}));
  EXPECT_EQ(odd["allowed"], false) << odd;
  EXPECT_NE(odd.dump().find("Ascend910C device request must be 1 or 2*n, got 3"), std::string::npos)
      << odd;
  CreatePod(review["pod"]);
  json res = Filter("pair", {"c-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"c-node"})) << res;
  EXPECT_EQ(k8s::Annotations(GetPod("pair"))["hami.io/Ascend910C-devices-allocated"],
            "c-node-npu-1,Ascend910C,65536,0:c-node-npu-0,Ascend910C,65536,0:;");
  // Four NPUs on a node of three: HAMi's early reason.
  CreatePod(Review(Pod("four", {{"huawei.com/Ascend910C", "4"}}))["pod"]);
  res = Filter("four", {"c-node"});
  EXPECT_TRUE(res["NodeNames"].empty()) << res;
  EXPECT_EQ(res["FailedNodes"]["c-node"], "NodeInsufficientDevice") << res;
  // NPUs 0, 2 and 4 make no whole module.
  CreatePod(Review(Pod("gap", {{"huawei.com/Ascend910C", "2"}}))["pod"]);
  res = Filter("gap", {"gap-node"});
  EXPECT_TRUE(res["NodeNames"].empty()) << res;
  EXPECT_EQ(res["FailedNodes"]["gap-node"], "3/2 AllocatedCardsInsufficientRequest") << res;
}

}  // namespace
}  // namespace hami::device::ascend
