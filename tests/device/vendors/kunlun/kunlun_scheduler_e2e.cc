// Kunlunxin end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API
// server: whole XPUs placed by topology with BAIDU_COM_DEVICE_IDX, vXPUs registered in JSON
// with the handshake, their memory rounded by /webhook and shared by slice size in /filter.
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

namespace hami::device::kunlun {
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

class KunlunScheduler : public scheduler::testing::SchedulerBinaryTest {
 protected:
  void SetUp() override {
    SchedulerBinaryTest::SetUp();
    if (HasFatalFailure()) return;
    std::string config = ChartDeviceConfig();
    if (config.empty()) GTEST_SKIP() << "helm not found (scripts/bootstrap installs it)";
    ASSERT_NE(config.find("kunlun:"), std::string::npos) << config;
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
  auto hs = client_->Get(k8s::resources::kNodes, "", "vxpu");
  ASSERT_TRUE(hs);
  EXPECT_TRUE(k8s::Annotation(*hs, "hami.io/node-handshake-xpu").has_value());
}

}  // namespace
}  // namespace hami::device::kunlun
