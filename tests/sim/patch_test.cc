#include "sim/patch.h"

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
