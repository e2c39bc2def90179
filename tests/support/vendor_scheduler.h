// A vendor backend end to end: the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm), against the sim API
// server. Helpers post AdmissionReviews to /webhook (the JSON Patch applied to the pod) and
// ExtenderArgs in the NodeNames form to /filter. The including target defines
// HAMI_SCHEDULER_BIN, HAMI_HELM_BIN and HAMI_SOURCE_DIR and sees tests/scheduler/ (see
// tests/support/vendor_scheduler_test.cmake).
#ifndef HAMI_TESTS_SUPPORT_VENDOR_SCHEDULER_H_
#define HAMI_TESTS_SUPPORT_VENDOR_SCHEDULER_H_

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "binary_fixture.h"
#include "k8s/base64.h"
#include "k8s/client.h"
#include "k8s/object.h"

namespace hami::testing {

// Whether a nanosecond timestamp (a vendor's allocation annotation) falls in the second a
// seconds timestamp (hami.io/vgpu-time) names: both come from the filter's one clock reading.
inline bool SameSecond(const std::string& nanos, const std::string& seconds) {
  return !nanos.empty() && !seconds.empty() &&
         std::stoll(nanos) / 1000000000 == std::stoll(seconds);
}

// The chart's default device-config.yaml, or "" when helm is not there.
inline std::string ChartDeviceConfig() {
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

class VendorSchedulerTest : public scheduler::testing::SchedulerBinaryTest {
 protected:
  using json = nlohmann::json;

  // `section`: the device-config.yaml section the test needs present (e.g. "hygon:").
  void SetUpWithSection(const std::string& section) {
    SchedulerBinaryTest::SetUp();
    if (HasFatalFailure()) return;
    std::string config = ChartDeviceConfig();
    if (config.empty()) GTEST_SKIP() << "helm not found (scripts/bootstrap installs it)";
    ASSERT_NE(config.find(section), std::string::npos) << config;
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
  // The webhook's answer for `pod`, with the patched pod under "pod".
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
  // A node with `annotations` and `capacity` (also as allocatable).
  void CreateNode(const std::string& name, const std::map<std::string, std::string>& annotations,
                  const std::map<std::string, std::string>& capacity) {
    json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
    for (const auto& [k, v] : annotations) node["metadata"]["annotations"][k] = v;
    for (const auto& [k, v] : capacity) {
      node["status"]["capacity"][k] = v;
      node["status"]["allocatable"][k] = v;
    }
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", node).ok());
  }
  // A node as given.
  void CreateNode(const json& node) {
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", node).ok());
  }
  void CreatePod(const json& pod) {
    ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", pod).ok());
  }
  // Reviews `pod`, expects it admitted for hami-scheduler, and creates what the webhook made.
  json Admit(const json& pod) {
    json review = Review(pod);
    EXPECT_EQ(review["allowed"], true) << review;
    EXPECT_EQ(review["pod"]["spec"]["schedulerName"], "hami-scheduler") << review;
    EXPECT_TRUE(client_->Create(k8s::resources::kPods, "default", review["pod"]).ok());
    return review["pod"];
  }
  json GetPod(const std::string& name) {
    auto r = client_->Get(k8s::resources::kPods, "default", name);
    return r ? *r : json();
  }
  // The filter answers once the decision is counted; its patch of the pod lands in the
  // background (--async-decision-write, the default), and kube-scheduler's bind waits for it.
  // So does this: a filter that chose one node returns once the pod names that node.
  json Filter(const std::string& pod, const std::vector<std::string>& nodes) {
    json res = Post("/filter", json{{"Pod", GetPod(pod)}, {"NodeNames", nodes}});
    const json* chosen = res.is_object() && res.contains("NodeNames") ? &res["NodeNames"] : nullptr;
    if (chosen != nullptr && chosen->is_array() && chosen->size() == 1 &&
        (*chosen)[0].is_string()) {
      const std::string node = (*chosen)[0].get<std::string>();
      EXPECT_EQ(AwaitPodAnnotation(pod, "hami.io/vgpu-node", node), node)
          << pod << ": the decision for " << node << " was not written";
    }
    return res;
  }
  // kube-scheduler's bind call for `pod` onto `node`; the ExtenderBindingResult.
  json Bind(const std::string& pod, const std::string& node) {
    return Post("/bind", json{{"PodName", pod},
                              {"PodNamespace", "default"},
                              {"PodUID", k8s::Uid(GetPod(pod))},
                              {"Node", node}});
  }
  std::map<std::string, std::string> NodeAnnotations(const std::string& node) {
    auto r = client_->Get(k8s::resources::kNodes, "", node);
    auto a = k8s::Annotations(r ? *r : json());
    return std::map<std::string, std::string>(a.begin(), a.end());
  }
  std::map<std::string, std::string> Annotations(const std::string& pod) {
    auto a = k8s::Annotations(GetPod(pod));
    return std::map<std::string, std::string>(a.begin(), a.end());
  }

  // A one-container pod.
  static json Pod(const std::string& name, const json& limits,
                  const json& requests = json::object()) {
    json ctr = {{"name", "main"}, {"image", "busybox"}};
    if (!limits.empty()) ctr["resources"]["limits"] = limits;
    if (!requests.empty()) ctr["resources"]["requests"] = requests;
    json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    pod["metadata"] = {{"name", name}, {"namespace", "default"}};
    pod["spec"]["containers"] = json::array({ctr});
    return pod;
  }

  std::string config_file_;
};

}  // namespace hami::testing

#endif  // HAMI_TESTS_SUPPORT_VENDOR_SCHEDULER_H_
