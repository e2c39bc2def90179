// The webhook in DRA mode (issue 28 item 1): pods asking HAMi's resources get claims from
// ResourceClaimTemplates, the resources stripped, the label hami.io/dra=true.
#include "scheduler/dra_webhook.h"

#include <gtest/gtest.h>

#include "device/config.h"
#include "device/device.h"
#include "k8s/base64.h"
#include "scheduler/json_patch.h"
#include "scheduler/webhook.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

json Pod(const json& limits, const json& annotations = json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"annotations", annotations}}},
          {"spec",
           {{"containers",
             json::array(
                 {{{"name", "main"}, {"image", "cuda"}, {"resources", {{"limits", limits}}}}})}}}};
}

json Apply(const json& pod, const DraPlan& plan) { return pod.patch(plan.patch); }

TEST(DraWebhook, AGpumemPodGetsAClaimFromATemplate) {
  json pod = Pod({{"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}, {"cpu", "1"}});
  auto plan = PlanDraAdmission(pod, "ml", {});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->templates.size(), 1u);
  EXPECT_EQ(plan->templates[0], json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "hami-gpu-1x3000mi-30c", "namespace": "ml",
                 "labels": {"hami.io/dra": "true"}},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
      "deviceClassName": "hami-core-gpu.project-hami.io", "allocationMode": "ExactCount",
      "count": 1,
      "selectors": [{"cel": {"expression":
        "device.attributes[\"hami-core-gpu.project-hami.io\"].type == \"hami-gpu\""}}],
      "capacity": {"requests": {"memory": "3000Mi", "cores": "30"}}}}]}}}})"));
  json mutated = Apply(pod, *plan);
  EXPECT_EQ(mutated["spec"]["resourceClaims"],
            json::parse(
                R"([{"name": "hami-c0", "resourceClaimTemplateName": "hami-gpu-1x3000mi-30c"}])"));
  EXPECT_EQ(mutated["spec"]["containers"][0]["resources"],
            json::parse(R"({"limits": {"cpu": "1"}, "claims": [{"name": "hami-c0"}]})"));
  EXPECT_EQ(mutated["metadata"]["labels"]["hami.io/dra"], "true");
}

// nvidia.com/gpu: 2 is two GPUs (a distinctAttribute constraint), each whole in memory, no cores
// reserved (HAMi's defaults: 100 % memory, 0 cores).
TEST(DraWebhook, TwoWholeGpusAreTwoDistinctDevices) {
  auto plan = PlanDraAdmission(Pod({{"nvidia.com/gpu", "2"}}), "ml", {});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->templates.size(), 1u);
  const json& t = plan->templates[0];
  EXPECT_EQ(t["metadata"]["name"], "hami-gpu-2xall-0c");
  const json& devices = t["spec"]["spec"]["devices"];
  EXPECT_EQ(devices["requests"][0]["exactly"]["count"], 2);
  EXPECT_EQ(devices["requests"][0]["exactly"]["capacity"]["requests"], json({{"cores", "0"}}));
  EXPECT_EQ(devices["constraints"], json::parse(R"([{"requests": ["gpu"],
      "distinctAttribute": "hami-core-gpu.project-hami.io/uuid"}])"));
}

TEST(DraWebhook, SelectionAnnotationsBecomeCelSelectors) {
  json pod = Pod({{"nvidia.com/gpumem", "1024"}},
                 {{"nvidia.com/use-gpuuuid", "GPU-a, GPU-b"}, {"nvidia.com/nouse-gputype", "A10"}});
  auto plan = PlanDraAdmission(pod, "ml", {});
  ASSERT_TRUE(plan) << plan.error();
  const json& t = plan->templates[0];
  EXPECT_EQ(t["metadata"]["name"].get<std::string>().rfind("hami-gpu-1x1024mi-0c-", 0), 0u)
      << t["metadata"]["name"];
  EXPECT_EQ(t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"], json::parse(R"J([
    {"cel": {"expression": "device.attributes[\"hami-core-gpu.project-hami.io\"].type == \"hami-gpu\""}},
    {"cel": {"expression": "device.attributes[\"hami-core-gpu.project-hami.io\"].uuid in [\"GPU-a\", \"GPU-b\"]"}},
    {"cel": {"expression": "!(device.attributes[\"hami-core-gpu.project-hami.io\"].productName in [\"A10\"])"
}
}])J"));
  // Another selection is another template; the same one is the same name.
  json other = Pod({{"nvidia.com/gpumem", "1024"}}, {{"nvidia.com/use-gpuuuid", "GPU-a"}});
  auto plan2 = PlanDraAdmission(other, "ml", {});
  ASSERT_TRUE(plan2);
  EXPECT_NE(plan2->templates[0]["metadata"]["name"], t["metadata"]["name"]);
  EXPECT_EQ(PlanDraAdmission(pod, "ml", {})->templates[0]["metadata"]["name"],
            t["metadata"]["name"]);
}

TEST(DraWebhook, WhatCannotBeClaimedIsAnErrorNamingIt) {
  auto empty = PlanDraAdmission(
      Pod({{"nvidia.com/gpumem", "1024"}}, {{"nvidia.com/use-gpuuuid", " , "}}), "ml", {});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error(),
            "nvidia.com/use-gpuuuid: empty, no GPU could match (remove the annotation to allow "
            "any)");
  auto pct = PlanDraAdmission(Pod({{"nvidia.com/gpumem-percentage", "50"}}), "ml", {});
  ASSERT_FALSE(pct);
  EXPECT_EQ(
      pct.error(),
      R"(container "main": nvidia.com/gpumem-percentage: "50": not supported in DRA mode (a claim asks for bytes); use nvidia.com/gpumem)");
  auto cores = PlanDraAdmission(Pod({{"nvidia.com/gpucores", "130"}}), "ml", {});
  ASSERT_FALSE(cores);
  EXPECT_EQ(cores.error(), R"(container "main": nvidia.com/gpucores: want 0..100, got "130")");
  auto bad = PlanDraAdmission(Pod({{"nvidia.com/gpumem", "lots"}}), "ml", {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(
      bad.error(),
      R"(container "main": resource nvidia.com/gpumem value "lots": quantity "lots": no digits)");
}

TEST(DraWebhook, PodsWithoutGpusOrWithClaimsPassUnchanged) {
  auto none = PlanDraAdmission(Pod({{"cpu", "1"}}), "ml", {});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->templates.empty());
  EXPECT_TRUE(none->patch.empty());
  json claimed = Pod({{"nvidia.com/gpumem", "1024"}});
  claimed["spec"]["resourceClaims"] =
      json::parse(R"([{"name": "mine", "resourceClaimName": "x"}])");
  auto kept = PlanDraAdmission(claimed, "ml", {});
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->patch.empty());
  auto zero = PlanDraAdmission(Pod({{"nvidia.com/gpu", "0"}}), "ml", {});
  ASSERT_TRUE(zero);
  EXPECT_TRUE(zero->templates.empty());
}

// Two containers of one shape share a template; each gets its own claim.
TEST(DraWebhook, ContainersOfOneShapeShareATemplate) {
  json pod = Pod({{"nvidia.com/gpumem", "2000"}});
  pod["spec"]["containers"].push_back(
      {{"name", "side"}, {"resources", {{"limits", {{"nvidia.com/gpumem", "2000"}}}}}});
  pod["spec"]["initContainers"] = json::array(
      {{{"name", "init"}, {"resources", {{"requests", {{"nvidia.com/gpucores", "10"}}}}}}});
  auto plan = PlanDraAdmission(pod, "ml", {});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->templates.size(), 2u);
  json mutated = Apply(pod, *plan);
  EXPECT_EQ(mutated["spec"]["resourceClaims"], json::parse(R"([
    {"name": "hami-i0", "resourceClaimTemplateName": "hami-gpu-1xall-10c"},
    {"name": "hami-c0", "resourceClaimTemplateName": "hami-gpu-1x2000mi-0c"},
    {"name": "hami-c1", "resourceClaimTemplateName": "hami-gpu-1x2000mi-0c"}])"));
  EXPECT_EQ(mutated["spec"]["initContainers"][0]["resources"],
            json::parse(R"({"requests": {}, "claims": [{"name": "hami-i0"}]})"));
}

TEST(DraWebhook, TheReviewEnsuresTemplatesBeforeAllowing) {
  json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "u1"}, {"namespace", "ml"}, {"object", Pod({{"nvidia.com/gpumem", "3000"}})}}}};
  std::vector<std::string> ensured;
  HttpReply ok = HandleDraAdmissionReview(review.dump(), {}, [&](const json& t) -> Status {
    ensured.push_back(t["metadata"]["name"]);
    return OkStatus();
  });
  EXPECT_EQ(ok.status, 200);
  json answer = json::parse(ok.body);
  EXPECT_EQ(answer["response"]["uid"], "u1");
  EXPECT_EQ(answer["response"]["allowed"], true);
  EXPECT_EQ(answer["response"]["patchType"], "JSONPatch");
  auto patch = k8s::Base64Decode(answer["response"]["patch"].get<std::string>());
  ASSERT_TRUE(patch);
  EXPECT_NE(patch->find("hami-gpu-1x3000mi-0c"), std::string::npos);
  EXPECT_EQ(ensured, std::vector<std::string>{"hami-gpu-1x3000mi-0c"});
  HttpReply refused = HandleDraAdmissionReview(review.dump(), {}, [](const json&) -> Status {
    return Error{"create resourceclaimtemplate \"hami-gpu-1x3000mi-0c\": 403 Forbidden"};
  });
  json denied = json::parse(refused.body);
  EXPECT_EQ(denied["response"]["allowed"], false);
  EXPECT_EQ(denied["response"]["status"]["code"], 500);
  EXPECT_FALSE(denied["response"].contains("patch"));
  HttpReply garbage = HandleDraAdmissionReview("{", {}, nullptr);
  EXPECT_EQ(json::parse(garbage.body)["response"]["status"]["code"], 400);
}

// The envelope's fields of the wrong type (a number for apiVersion, uid or namespace) are read as
// absent: the json library's value() threw on them and took the webhook down with the request.
TEST(DraWebhook, EnvelopeFieldsOfTheWrongTypeAreAbsentNotAThrow) {
  for (const char* body :
       {R"({"apiVersion":5,"request":{"uid":"u","object":{"spec":{"containers":[]}}}})",
        R"({"apiVersion":"admission.k8s.io/v1","request":{"uid":7,"namespace":[1],"object":{}}})",
        R"({"request":{"uid":"u","namespace":{},"object":[]}})"}) {
    HttpReply r = HandleDraAdmissionReview(body, {}, nullptr);
    EXPECT_EQ(r.status, 200) << body;
    json answer = json::parse(r.body);
    EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1") << body;
    EXPECT_TRUE(answer["response"]["uid"].is_string()) << body;
  }
  HttpReply r = HandleDraAdmissionReview(
      R"({"apiVersion":5,"request":{"uid":7,"object":{"spec":{"containers":[]}}}})", {}, nullptr);
  json answer = json::parse(r.body);
  EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(answer["response"]["uid"], "");
  EXPECT_EQ(answer["response"]["allowed"], true);
}

// ResourceQuota on nvidia.com/gpumem still holds in DRA mode (DRA's own quota counts claims).
TEST(DraWebhook, AQuotaOnGpumemStillDenies) {
  json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "u1"}, {"namespace", "ml"}, {"object", Pod({{"nvidia.com/gpumem", "3000"}})}}}};
  device::Registry registry = device::MakeRegistry(device::DefaultDeviceConfig());
  QuotaLookup quota = [](const std::string&) {
    device::NamespaceQuota q;
    q["nvidia.com/gpumem"] = device::QuotaEntry{0, 2000, true};
    return q;
  };
  bool ensured = false;
  HttpReply r = HandleDraAdmissionReview(
      review.dump(), {},
      [&](const json&) -> Status {
        ensured = true;
        return OkStatus();
      },
      [&](const json& pod, const std::string& ns) {
        return PodFitsQuota(registry, pod, ns, quota);
      });
  json resp = json::parse(r.body)["response"];
  EXPECT_FALSE(resp["allowed"].get<bool>());
  EXPECT_EQ(resp["status"]["message"], "exceeding resource quota");
  EXPECT_FALSE(ensured);  // nothing created for a pod that is refused
  // Within the quota: allowed.
  QuotaLookup roomy = [](const std::string&) {
    device::NamespaceQuota q;
    q["nvidia.com/gpumem"] = device::QuotaEntry{0, 8000, true};
    return q;
  };
  r = HandleDraAdmissionReview(
      review.dump(), {}, [](const json&) { return OkStatus(); },
      [&](const json& pod, const std::string& ns) {
        return PodFitsQuota(registry, pod, ns, roomy);
      });
  EXPECT_TRUE(json::parse(r.body)["response"]["allowed"].get<bool>());
}

TEST(JsonPatchBuilder, RemoveRecordsOnlyWhatExists) {
  json doc = json::parse(R"({"a": {"b": 1, "c": 2}, "l": [{"x": 1}]})");
  json copy = doc;
  JsonPatchBuilder patch(&copy);
  patch.Remove({PathStep::Key("a"), PathStep::Key("b")});
  patch.Remove({PathStep::Key("a"), PathStep::Key("zz")});
  patch.Remove({PathStep::Key("l"), PathStep::Index(3), PathStep::Key("x")});
  patch.Remove({PathStep::Key("l"), PathStep::Index(0), PathStep::Key("x")});
  EXPECT_EQ(patch.Ops(), json::parse(R"([{"op": "remove", "path": "/a/b"},
                                         {"op": "remove", "path": "/l/0/x"}])"));
  EXPECT_EQ(doc.patch(patch.Ops()), copy);
}

}  // namespace
}  // namespace hami::scheduler
