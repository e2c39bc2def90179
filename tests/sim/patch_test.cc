#include "sim/apiserver/patch.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

using Json = nlohmann::json;

const Json kPod = Json::parse(R"({
  "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
  "spec": {"containers": [
    {"name": "c1", "image": "i1", "env": [{"name": "X", "value": "1"}]},
    {"name": "c2", "image": "i2"}]}})");

TEST(StrategicMerge, MergesContainersByName) {
  Json patch = Json::parse(R"({"spec": {"containers": [
      {"name": "c2", "image": "new"}, {"name": "c3", "image": "i3"}]}})");
  Json out = StrategicMerge(kPod, patch);
  ASSERT_EQ(out["spec"]["containers"].size(), 3u);
  EXPECT_EQ(out["spec"]["containers"][0], kPod["spec"]["containers"][0]);
  EXPECT_EQ(out["spec"]["containers"][1]["image"], "new");
  EXPECT_EQ(out["spec"]["containers"][2]["name"], "c3");
}

TEST(StrategicMerge, DirectivesAndNulls) {
  Json patch = Json::parse(R"({
      "metadata": {"labels": {"a": null, "c": "3"}},
      "$setElementOrder/containers": [{"name": "c1"}],
      "spec": {"containers": [{"name": "c2", "$patch": "delete"},
                              {"name": "c1", "env": [{"name": "Y", "value": "2"}]}]}})");
  Json out = StrategicMerge(kPod, patch);
  EXPECT_EQ(out["metadata"]["labels"], Json::parse(R"({"b": "2", "c": "3"})"));
  ASSERT_EQ(out["spec"]["containers"].size(), 1u);
  EXPECT_EQ(out["spec"]["containers"][0]["env"].size(), 2u);
  EXPECT_FALSE(out.contains("$setElementOrder/containers"));
  Json replace =
      StrategicMerge(kPod, Json::parse(R"({"metadata": {"$patch": "replace", "name": "p"}})"));
  EXPECT_EQ(replace["metadata"], Json::parse(R"({"name": "p"})"));
}

// The patches helm's three-way merge sends on upgrade (docs/SIM_APISERVER.md).
const Json kDeployment = Json::parse(R"({"spec": {
  "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
  "template": {"spec": {
    "containers": [
      {"name": "a", "image": "a:1", "args": ["--x", "--y"],
       "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 9090, "name": "m"}],
       "volumeMounts": [{"mountPath": "/a", "name": "va"}, {"mountPath": "/b", "name": "vb"}],
       "env": [{"name": "E1", "value": "1"}, {"name": "E2", "value": "2"}]},
      {"name": "b", "image": "b:1"}],
    "volumes": [{"name": "va", "hostPath": {"path": "/a"}}, {"name": "vb", "emptyDir": {}}]}}}})");

TEST(StrategicMerge, SetElementOrderReordersKeyedLists) {
  Json patch = Json::parse(R"({"spec": {"template": {"spec": {
      "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
      "containers": [{"name": "a", "image": "a:2"}]}}}})");
  Json out = StrategicMerge(kDeployment, patch);
  const Json& c = out["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]["name"], "b");
  EXPECT_EQ(c[1]["name"], "a");
  EXPECT_EQ(c[1]["image"], "a:2");
  EXPECT_EQ(c[1]["env"].size(), 2u);  // untouched fields of a merged item stay
  EXPECT_FALSE(out["spec"]["template"]["spec"].contains("$setElementOrder/containers"));
}

TEST(StrategicMerge, NestedKeyedListsAndUnkeyedReplace) {
  Json patch = Json::parse(R"({"spec": {"template": {"spec": {"containers": [{"name": "a",
      "args": ["--z"],
      "$setElementOrder/env": [{"name": "E2"}, {"name": "E3"}],
      "env": [{"name": "E1", "$patch": "delete"}, {"name": "E3", "value": "3"}],
      "ports": [{"containerPort": 9090, "name": "metrics"}],
      "volumeMounts": [{"mountPath": "/b", "readOnly": true}]}]}}}})");
  Json out = StrategicMerge(kDeployment, patch);
  const Json& a = out["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(a["args"], Json::parse(R"(["--z"])"));  // unkeyed: replaced
  EXPECT_EQ(a["env"],
            Json::parse(R"([{"name": "E2", "value": "2"}, {"name": "E3", "value": "3"}])"));
  ASSERT_EQ(a["ports"].size(), 2u);  // merged by containerPort
  EXPECT_EQ(a["ports"][1]["name"], "metrics");
  EXPECT_EQ(a["volumeMounts"][1],
            Json::parse(R"({"mountPath": "/b", "name": "vb", "readOnly": true})"));
}

TEST(StrategicMerge, ServicePortsMergeByPortAndWebhooksByName) {
  Json svc = Json::parse(R"({"spec": {"ports": [{"port": 443, "targetPort": 9443},
                                                 {"port": 80, "targetPort": 8080}]}})");
  Json out =
      StrategicMerge(svc, Json::parse(R"({"spec": {"ports": [{"port": 80, "nodePort": 31998}]}})"));
  ASSERT_EQ(out["spec"]["ports"].size(), 2u);
  EXPECT_EQ(out["spec"]["ports"][1],
            Json::parse(R"({"port": 80, "targetPort": 8080, "nodePort": 31998})"));
  Json mwc = Json::parse(R"({"webhooks": [{"name": "w", "clientConfig": {"caBundle": "Q0E="},
                                            "rules": [{"operations": ["CREATE"]}]}]})");
  out = StrategicMerge(mwc, Json::parse(R"({"webhooks": [{"name": "w",
      "rules": [{"operations": ["CREATE", "UPDATE"]}]}]})"));
  ASSERT_EQ(out["webhooks"].size(), 1u);
  EXPECT_EQ(out["webhooks"][0]["clientConfig"]["caBundle"], "Q0E=");
  EXPECT_EQ(out["webhooks"][0]["rules"][0]["operations"].size(), 2u);
}

TEST(StrategicMerge, RetainKeysAndListReplace) {
  // Recreate strategy: rollingUpdate must go although the patch does not null it.
  Json out = StrategicMerge(kDeployment, Json::parse(R"({"spec": {"strategy": {
      "$retainKeys": ["type"], "type": "Recreate"}}})"));
  EXPECT_EQ(out["spec"]["strategy"], Json::parse(R"({"type": "Recreate"})"));
  // A volume switching source: hostPath -> configMap.
  out = StrategicMerge(kDeployment, Json::parse(R"({"spec": {"template": {"spec": {"volumes": [
      {"name": "va", "$retainKeys": ["configMap", "name"], "configMap": {"name": "cm"}}]}}}})"));
  EXPECT_EQ(out["spec"]["template"]["spec"]["volumes"][0],
            Json::parse(R"({"name": "va", "configMap": {"name": "cm"}})"));
  out = StrategicMerge(kDeployment, Json::parse(R"({"spec": {"template": {"spec": {"volumes": [
      {"$patch": "replace"}, {"name": "vc", "emptyDir": {}}]}}}})"));
  EXPECT_EQ(out["spec"]["template"]["spec"]["volumes"],
            Json::parse(R"([{"name": "vc", "emptyDir": {}}])"));
}

TEST(StrategicMerge, ScalarSetLists) {
  Json obj = Json::parse(R"({"metadata": {"finalizers": ["a", "b"]}})");
  Json out = StrategicMerge(obj, Json::parse(R"({"metadata": {"finalizers": ["c", "a"]}})"));
  EXPECT_EQ(out["metadata"]["finalizers"], Json::parse(R"(["a", "b", "c"])"));
  out = StrategicMerge(
      obj,
      Json::parse(
          R"({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "$setElementOrder/finalizers": ["b"]}})"));
  EXPECT_EQ(out["metadata"]["finalizers"], Json::parse(R"(["b"])"));
}

TEST(ApplyPatch, TypesAndErrors) {
  auto merge = ApplyPatch(kPod, PatchType::kMerge, R"({"spec": {"containers": []}})");
  ASSERT_TRUE(merge);
  EXPECT_TRUE((*merge)["spec"]["containers"].empty());  // RFC 7386 replaces lists
  auto json_patch = ApplyPatch(kPod, PatchType::kJsonPatch,
                               R"([{"op": "remove", "path": "/metadata/labels/a"}])");
  ASSERT_TRUE(json_patch);
  EXPECT_FALSE((*json_patch)["metadata"]["labels"].contains("a"));
  EXPECT_EQ(ApplyPatch(kPod, PatchType::kMerge, "{").error().code, 400);
  EXPECT_EQ(ApplyPatch(kPod, PatchType::kMerge, "[]").error().code, 400);
  EXPECT_EQ(ApplyPatch(kPod, PatchType::kJsonPatch, "{}").error().code, 400);
  EXPECT_EQ(ApplyPatch(kPod, PatchType::kJsonPatch, R"([{"op": "bogus"}])").error().code, 422);
  EXPECT_EQ(ApplyPatch(kPod, PatchType::kJsonPatch,
                       R"([{"op": "replace", "path": "/nope/x", "value": 1}])")
                .error()
                .code,
            422);
}

TEST(PatchType, FromContentType) {
  EXPECT_EQ(*PatchTypeFromContentType("application/merge-patch+json"), PatchType::kMerge);
  EXPECT_EQ(*PatchTypeFromContentType("application/strategic-merge-patch+json; charset=utf-8"),
            PatchType::kStrategicMerge);
  EXPECT_EQ(*PatchTypeFromContentType("application/json-patch+json"), PatchType::kJsonPatch);
  EXPECT_EQ(PatchTypeFromContentType("application/apply-patch+yaml").error().code, 415);
  EXPECT_EQ(PatchTypeFromContentType("").error().code, 415);
}

}  // namespace
}  // namespace hami::sim
