#include "k8s/patches.h"

#include <gtest/gtest.h>

namespace hami::k8s {
namespace {

using nlohmann::json;

TEST(Patches, AnnotationMergePatchSetsAndRemoves) {
  json patch = AnnotationsMergePatch({{"hami.io/bind-phase", "allocating"}, {"old", std::nullopt}});
  json obj = json::parse(R"({"metadata":{"annotations":{"old":"x","keep":"y"}}})");
  obj.merge_patch(patch);
  EXPECT_EQ(obj["metadata"]["annotations"],
            json::parse(R"({"hami.io/bind-phase":"allocating","keep":"y"})"));
  EXPECT_EQ(LabelsMergePatch({{"a", "b"}}), json::parse(R"({"metadata":{"labels":{"a":"b"}}})"));
}

TEST(Patches, JsonPointerEscape) {
  EXPECT_EQ(JsonPointerEscape("hami.io/vgpu-node"), "hami.io~1vgpu-node");
  EXPECT_EQ(JsonPointerEscape("a~b/c"), "a~0b~1c");
  EXPECT_EQ(JsonPointerEscape(""), "");
}

TEST(Patches, AddAnnotationsJsonPatchCreatesTheParentFirst) {
  json bare = json::parse(R"({"metadata":{"name":"p"}})");
  json ops = AddAnnotationsJsonPatch(bare, {{"hami.io/vgpu-node", "n1"}, {"a~b", "2"}});
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0]["path"], "/metadata/annotations");
  json patched = bare.patch(ops);
  EXPECT_EQ(patched["metadata"]["annotations"],
            json::parse(R"({"hami.io/vgpu-node":"n1","a~b":"2"})"));
  json with = json::parse(R"({"metadata":{"annotations":{"x":"1"}}})");
  json ops2 = AddAnnotationsJsonPatch(with, {{"x", "2"}});
  ASSERT_EQ(ops2.size(), 1u);
  EXPECT_EQ(with.patch(ops2)["metadata"]["annotations"]["x"], "2");
  EXPECT_TRUE(AddAnnotationsJsonPatch(bare, {}).empty());
}

}  // namespace
}  // namespace hami::k8s
