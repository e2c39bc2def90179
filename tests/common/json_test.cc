#include "common/json.h"

#include <string>

#include <gtest/gtest.h>

namespace hami {
namespace {

std::string Nested(size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(JsonTest, DepthUpToTheLimitParses) {
  Result<nlohmann::json> j = ParseJson(Nested(kMaxJsonDepth));
  ASSERT_TRUE(j) << j.error();
  EXPECT_TRUE(j->is_array());
}

TEST(JsonTest, OneLevelOverTheLimitIsRefused) {
  Result<nlohmann::json> j = ParseJson(Nested(kMaxJsonDepth + 1));
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error(), "nested deeper than 10000 levels at byte 10000");
}

TEST(JsonTest, ListsMayWrapObjectsAtTheLimit) {
  EXPECT_TRUE(ParseJson(Nested(kMaxJsonListDepth), kMaxJsonListDepth));
  EXPECT_FALSE(ParseJson(Nested(kMaxJsonListDepth + 1), kMaxJsonListDepth));
  EXPECT_FALSE(ParseJson(Nested(kMaxJsonListDepth)));
}

// 100,000 levels used to overflow the stack of whoever copied or dumped the value.
TEST(JsonTest, HundredThousandLevelsAreACleanError) {
  for (std::string text : {Nested(100000), std::string(100000, '{'),
                           "{\"a\":" + Nested(100000) + "}", std::string(100000, '[')}) {
    Result<nlohmann::ordered_json> j = ParseJson<nlohmann::ordered_json>(text);
    ASSERT_FALSE(j);
    EXPECT_NE(j.error().find("nested deeper than 10000 levels"), std::string::npos) << j.error();
  }
}

TEST(JsonTest, ObjectsAndArraysCountTogether) {
  std::string text;
  for (int i = 0; i < 5; ++i) text += "{\"k\":[";
  text += "1";
  for (int i = 0; i < 5; ++i) text += "]}";
  EXPECT_TRUE(CheckJsonDepth(text, 10));
  EXPECT_FALSE(CheckJsonDepth(text, 9));
}

TEST(JsonTest, BracketsInStringsDoNotCount) {
  std::string text = "[\"" + std::string(50, '[') + "\\\"[[[\\\\\", {\"]]]\": \"{{{\"}]";
  EXPECT_TRUE(CheckJsonDepth(text, 2)) << text;
  EXPECT_FALSE(CheckJsonDepth(text, 1));
  Result<nlohmann::json> j = ParseJson(text);
  ASSERT_TRUE(j) << j.error();
  EXPECT_EQ((*j)[0].get<std::string>(), std::string(50, '[') + "\"[[[\\");
}

TEST(JsonTest, EscapedBackslashEndsBeforeTheQuote) {
  // "\\" is one backslash; the quote after it closes the string, so the `[` after counts.
  EXPECT_FALSE(CheckJsonDepth(R"(["\\", [[1]]])", 2));
  EXPECT_TRUE(CheckJsonDepth(R"(["\\", [[1]]])", 3));
}

TEST(JsonTest, InvalidJsonIsAnError) {
  for (const char* text : {"", "{", "[1,]", "nul", "\"abc"}) {
    Result<nlohmann::json> j = ParseJson(text);
    ASSERT_FALSE(j) << text;
    EXPECT_EQ(j.error(), "not valid JSON") << text;
  }
  EXPECT_TRUE(ParseJsonOrNull(Nested(100000)).is_null());
  EXPECT_EQ(ParseJsonOrNull("[1]").size(), 1u);
}

}  // namespace
}  // namespace hami
