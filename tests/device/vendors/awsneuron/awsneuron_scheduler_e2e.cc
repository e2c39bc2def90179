// AWS Neuron end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API
// server: /webhook admits device and core requests and refuses an odd core count in HAMi's
// words; /filter places a contiguous run on an Inferentia node and a single core, with the
// AWS_NEURON_IDS the Neuron plugin reads.
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

namespace hami::device::awsneuron {
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

class NeuronScheduler : public scheduler::testing::SchedulerBinaryTest {
 protected:
  void SetUp() override {
    SchedulerBinaryTest::SetUp();
    if (HasFatalFailure()) return;
    std::string config = ChartDeviceConfig();
    if (config.empty()) GTEST_SKIP() << "helm not found (scripts/bootstrap installs it)";
    ASSERT_NE(config.find("awsneuron:"), std::string::npos) << config;
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

TEST_F(NeuronScheduler, DevicesAndCores) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "inf"}}}};
  node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "inf2.24xlarge";
  node["status"]["capacity"] = {{"aws.amazon.com/neuron", "4"}, {"aws.amazon.com/neuroncore", "8"}};
  node["status"]["allocatable"] = node["status"]["capacity"];
  CreateNode(node);
  Start();

  json odd = Review(Pod("odd", {{"aws.amazon.com/neuroncore", "3"}}));
  EXPECT_EQ(odd["allowed"], false) << odd;
  EXPECT_NE(odd.dump().find("aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"),
            std::string::npos)
      << odd;

  json review = Review(Pod("two", {{"aws.amazon.com/neuron", "2"}}));
  EXPECT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["spec"]["schedulerName"], "hami-scheduler") << review;
  CreatePod(review["pod"]);
  json res = Filter("two", {"inf"});
  EXPECT_EQ(res["NodeNames"], json::array({"inf"})) << res;
  auto annos = k8s::Annotations(GetPod("two"));
  EXPECT_EQ(annos["hami.io/aws-neuron-devices-allocated"],
            "inf-AWSNeuron-0,AWSNeuron,0,3:inf-AWSNeuron-1,AWSNeuron,0,3:;");
  EXPECT_EQ(annos["AWS_NEURON_IDS"], "0,1");
  EXPECT_EQ(annos["aws.amazon.com/predicate-node"], "inf");

  CreatePod(Review(Pod("core", {{"aws.amazon.com/neuroncore", "1"}}))["pod"]);
  res = Filter("core", {"inf"});
  EXPECT_EQ(res["NodeNames"], json::array({"inf"})) << res;
  annos = k8s::Annotations(GetPod("core"));
  EXPECT_EQ(annos["NEURON_RESOURCE_TYPE"], "aws.amazon.com/neuroncore");
  EXPECT_FALSE(annos["AWS_NEURON_IDS"].empty());

  // Sixteen devices on a four-device node.
  CreatePod(Review(Pod("many", {{"aws.amazon.com/neuron", "16"}}))["pod"]);
  res = Filter("many", {"inf"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_NE(res["FailedNodes"]["inf"].get<std::string>().find("NodeInsufficientDevice"),
            std::string::npos)
      << res;
}

}  // namespace
}  // namespace hami::device::awsneuron
