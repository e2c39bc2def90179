#include "scheduler/webhook.h"

#include <pthread.h>

#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/base64.h"
#include "scheduler/json_patch.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

json Review(const json& pod, const std::string& version = "admission.k8s.io/v1") {
  return {{"apiVersion", version},
          {"kind", "AdmissionReview"},
          {"request", {{"uid", "u-1"}, {"namespace", "default"}, {"object", pod}}}};
}

json GpuPod(const json& limits) {
  json ctr = json::object();
  ctr["name"] = "main";
  ctr["resources"]["limits"] = limits;
  json pod = json::object();
  pod["metadata"] = {{"name", "p"}, {"namespace", "default"}};
  pod["spec"]["containers"] = json::array();
  pod["spec"]["containers"].push_back(ctr);
  return pod;
}

struct Outcome {
  int status = 0;
  json review;
  json patch;  // decoded ops, or null
};

Outcome Admit(const json& pod, WebhookOptions opts = {"hami-scheduler", true},
              const std::string& version = "admission.k8s.io/v1") {
  device::Registry registry = device::MakeRegistry(device::DefaultDeviceConfig());
  HttpReply r = HandleAdmissionReview(Review(pod, version).dump(), registry, opts, nullptr);
  Outcome o{r.status, json::parse(r.body), nullptr};
  const json& resp = o.review["response"];
  if (resp.contains("patch")) {
    o.patch = json::parse(*k8s::Base64Decode(resp["patch"].get<std::string>()));
  }
  return o;
}

json Applied(json pod, const json& ops) { return pod.patch(ops); }

// Vector 7: webhook defaults.
TEST(WebhookTest, DefaultsVector7) {
  struct Case {
    const char* name;
    json limits;
    json want_limits;
  };
  const Case cases[] = {
      {"gpu only => exclusive cores",
       {{"nvidia.com/gpu", "1"}},
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "100"}}},
      {"gpumem only => gpu 1, no cores",
       {{"nvidia.com/gpumem", "1000"}},
       {{"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpu", "1"}}},
      {"pct 100 => cores 100",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "100"}},
       {{"nvidia.com/gpu", "1"},
        {"nvidia.com/gpumem-percentage", "100"},
        {"nvidia.com/gpucores", "100"}}},
      {"pct 50 => unchanged",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}},
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}}},
  };
  for (const Case& c : cases) {
    json pod = GpuPod(c.limits);
    Outcome o = Admit(pod);
    ASSERT_EQ(o.status, 200) << c.name;
    EXPECT_TRUE(o.review["response"]["allowed"].get<bool>()) << c.name;
    ASSERT_FALSE(o.patch.is_null()) << c.name;
    json out = Applied(pod, o.patch);
    EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"], c.want_limits) << c.name;
    EXPECT_EQ(out["spec"]["schedulerName"], "hami-scheduler") << c.name;
  }
}

// Vector 8: webhook verdicts.
TEST(WebhookTest, VerdictsVector8) {
  json no_containers = {{"spec", {{"containers", json::array()}}}};
  Outcome o = Admit(no_containers);
  EXPECT_FALSE(o.review["response"]["allowed"].get<bool>());
  EXPECT_EQ(o.review["response"]["status"]["message"], "pod has no containers");
  EXPECT_EQ(o.review["response"]["status"]["code"], 403);

  json other = GpuPod({{"nvidia.com/gpu", "1"}});
  other["spec"]["schedulerName"] = "different-scheduler";
  o = Admit(other);
  EXPECT_TRUE(o.review["response"]["allowed"].get<bool>());
  EXPECT_TRUE(o.patch.is_null());

  json with_node = GpuPod({{"nvidia.com/gpu", "1"}});
  with_node["spec"]["nodeName"] = "n1";
  o = Admit(with_node);
  EXPECT_FALSE(o.review["response"]["allowed"].get<bool>());
  EXPECT_EQ(o.review["response"]["status"]["message"], "pod has node assigned");

  json privileged = GpuPod({{"nvidia.com/gpu", "1"}});
  privileged["spec"]["containers"].push_back(
      {{"name", "side"}, {"securityContext", {{"privileged", true}}}});
  o = Admit(privileged);
  EXPECT_FALSE(o.review["response"]["allowed"].get<bool>());
  EXPECT_EQ(o.review["response"]["status"]["message"], "container side is privileged");

  json plain = GpuPod({{"cpu", "1"}});
  o = Admit(plain);
  EXPECT_TRUE(o.review["response"]["allowed"].get<bool>());
  EXPECT_TRUE(o.patch.is_null());

  json empty_sched = GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}});
  o = Admit(empty_sched);
  ASSERT_FALSE(o.patch.is_null());
  EXPECT_EQ(o.patch, json::parse(R"([{"op":"add","path":"/spec/schedulerName",
                                      "value":"hami-scheduler"}])"));

  json default_sched = empty_sched;
  default_sched["spec"]["schedulerName"] = "default-scheduler";
  o = Admit(default_sched, {"hami-scheduler", false});
  EXPECT_TRUE(o.patch.is_null());
  EXPECT_EQ(o.review["response"]["status"]["message"],
            "pod already has different scheduler assigned");
}

TEST(WebhookTest, EchoesVersionAndUid) {
  Outcome o = Admit(GpuPod({{"nvidia.com/gpu", "1"}}), {}, "admission.k8s.io/v1beta1");
  EXPECT_EQ(o.review["apiVersion"], "admission.k8s.io/v1beta1");
  EXPECT_EQ(o.review["kind"], "AdmissionReview");
  EXPECT_EQ(o.review["response"]["uid"], "u-1");
  EXPECT_EQ(o.review["response"]["patchType"], "JSONPatch");
}

// As webhook servers answer (controller-runtime): HTTP 200 and an AdmissionReview whose status
// carries 400, so kube-apiserver logs the reason; the uid is echoed when it can be read.
TEST(WebhookTest, MalformedIsStatus400InA200Review) {
  device::Registry registry = device::MakeRegistry(device::DefaultDeviceConfig());
  struct Case {
    const char* body;
    const char* uid;
    const char* message;
  };
  for (const Case& c :
       {Case{"", "", "admission review: not valid JSON"},
        Case{"{", "", "admission review: not valid JSON"}, Case{"[]", "", "request.object"},
        Case{R"({"request":{}})", "", "request.object"},
        Case{R"({"request":{"uid":"u-9","object":1}})", "u-9", "request.object"}}) {
    HttpReply r = HandleAdmissionReview(c.body, registry, {}, nullptr);
    EXPECT_EQ(r.status, 200) << c.body;
    json review = json::parse(r.body);
    EXPECT_EQ(review["kind"], "AdmissionReview") << c.body;
    EXPECT_EQ(review["apiVersion"], "admission.k8s.io/v1") << c.body;
    const json& resp = review["response"];
    EXPECT_EQ(resp["uid"], c.uid) << c.body;
    EXPECT_FALSE(resp["allowed"].get<bool>()) << c.body;
    EXPECT_EQ(resp["status"]["code"], 400) << c.body;
    EXPECT_NE(resp["status"]["message"].get<std::string>().find(c.message), std::string::npos)
        << r.body;
  }
}

// 100,000 levels in a container limit crashed the scheduler as it copied the pod.
TEST(WebhookTest, DeepNestingIsStatus400) {
  device::Registry registry = device::MakeRegistry(device::DefaultDeviceConfig());
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string body = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",)"
                     R"("request":{"uid":"u-1","object":{"spec":{"containers":[{"name":"c",)"
                     R"("resources":{"limits":{"nvidia.com/gpu":)" +
                     deep + "}}}]}}}}";
  HttpReply r = HandleAdmissionReview(body, registry, {}, nullptr);
  EXPECT_EQ(r.status, 200);
  json resp = json::parse(r.body)["response"];
  EXPECT_FALSE(resp["allowed"].get<bool>());
  EXPECT_EQ(resp["status"]["code"], 400);
  EXPECT_NE(resp["status"]["message"].get<std::string>().find("nested deeper than 10000"),
            std::string::npos)
      << r.body;
}

// Runs `fn` on a thread with a 64 MiB stack. nlohmann copies, prints and compares recursively:
// 10,000 levels take about 2 MiB of stack at -O3 but about 16 MiB under ASan
// (docs/INPUT_LIMITS.md).
void OnLargeStack(std::function<void()> fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 20);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    (*static_cast<std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, &fn), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

// At the limit the review is read, copied and answered (the copy and the patch recurse per level).
TEST(WebhookTest, NestingAtTheLimitIsAnswered) {
  OnLargeStack([] {
    device::Registry registry = device::MakeRegistry(device::DefaultDeviceConfig());
    const size_t depth =
        10000 - 8;  // the review, request, object, spec, containers, [0], resources, limits
    std::string body = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",)"
                       R"("request":{"uid":"u-1","object":{"spec":{"containers":[{"name":"c",)"
                       R"("resources":{"limits":{"x":)" +
                       std::string(depth, '[') + std::string(depth, ']') + "}}}]}}}}";
    HttpReply r = HandleAdmissionReview(body, registry, {}, nullptr);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(json::parse(r.body)["response"]["uid"], "u-1") << r.body.substr(0, 300);
  });
}

TEST(WebhookTest, BadPercentageIs500) {
  Outcome o = Admit(GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "150"}}));
  EXPECT_FALSE(o.review["response"]["allowed"].get<bool>());
  EXPECT_EQ(o.review["response"]["status"]["code"], 500);
}

TEST(WebhookTest, QuotaDenies) {
  device::Registry registry = device::MakeRegistry(device::DefaultDeviceConfig());
  QuotaLookup quota = [](const std::string& ns) {
    EXPECT_EQ(ns, "default");
    device::NamespaceQuota q;
    q["nvidia.com/gpumem"] = device::QuotaEntry{0, 2000, true};
    return q;
  };
  json pod = GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}});
  HttpReply r = HandleAdmissionReview(Review(pod).dump(), registry, {}, quota);
  json resp = json::parse(r.body)["response"];
  EXPECT_FALSE(resp["allowed"].get<bool>());
  EXPECT_EQ(resp["status"]["message"], "exceeding resource quota");
}

TEST(JsonPatchTest, EscapesAndCreatesParents) {
  EXPECT_EQ(EscapeJsonPointer("hami.io/vgpu-node"), "hami.io~1vgpu-node");
  EXPECT_EQ(EscapeJsonPointer("a~b"), "a~0b");
  json doc = {{"metadata", {{"name", "p"}}}};
  json original = doc;
  JsonPatchBuilder b(&doc);
  b.Set(
      {PathStep::Key("metadata"), PathStep::Key("annotations"), PathStep::Key("hami.io/vgpu-node")},
      "n1");
  b.Append({PathStep::Key("spec"), PathStep::Key("env")}, 1);
  b.Append({PathStep::Key("spec"), PathStep::Key("env")}, 2);
  EXPECT_EQ(b.Ops(), json::parse(R"([
    {"op":"add","path":"/metadata/annotations","value":{}},
    {"op":"add","path":"/metadata/annotations/hami.io~1vgpu-node","value":"n1"},
    {"op":"add","path":"/spec","value":{}},
    {"op":"add","path":"/spec/env","value":[1]},
    {"op":"add","path":"/spec/env/-","value":2}])"));
  EXPECT_EQ(original.patch(b.Ops()), doc);
}

}  // namespace
}  // namespace hami::scheduler
