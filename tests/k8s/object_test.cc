// Object helpers that read metadata without throwing: resourceVersion as a number.
#include "k8s/object.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::k8s {
namespace {

Json WithVersion(const Json& rv) {
  return {{"metadata", {{"name", "p"}, {"resourceVersion", rv}}}};
}

TEST(ResourceVersionNumberTest, ADecimalVersionElseZero) {
  EXPECT_EQ(ResourceVersionNumber(WithVersion("12")), 12u);
  EXPECT_EQ(ResourceVersionNumber(WithVersion("9007199254740993")), 9007199254740993u);
  EXPECT_EQ(ResourceVersionNumber(Json{{"metadata", {{"name", "p"}}}}), 0u);  // absent
  EXPECT_EQ(ResourceVersionNumber(Json::object()), 0u);                       // no metadata
  EXPECT_EQ(ResourceVersionNumber(WithVersion("")), 0u);
  EXPECT_EQ(ResourceVersionNumber(WithVersion("abc")), 0u);
  EXPECT_EQ(ResourceVersionNumber(WithVersion("-3")), 0u);  // not negative: not a version
  EXPECT_EQ(ResourceVersionNumber(WithVersion(12)), 0u);    // a number, not a string
  EXPECT_EQ(ResourceVersionNumber(Json("not an object")), 0u);
}

}  // namespace
}  // namespace hami::k8s
