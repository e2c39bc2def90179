#include "common/strings.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/result.h"

namespace hami {
namespace {

TEST(Split, KeepsEverySegment) {
  EXPECT_EQ(Split("a;;", ';'), (std::vector<std::string_view>{"a", "", ""}));
  EXPECT_EQ(Split("", ';'), (std::vector<std::string_view>{""}));
  EXPECT_EQ(Split("abc", ';'), (std::vector<std::string_view>{"abc"}));
}

TEST(SplitNonEmpty, TrimsAndDropsEmptyItems) {
  EXPECT_EQ(SplitNonEmpty(" a, b,,c ,", ','), (std::vector<std::string_view>{"a", "b", "c"}));
  EXPECT_TRUE(SplitNonEmpty("", ',').empty());
  EXPECT_TRUE(SplitNonEmpty(" , ,", ',').empty());
}

TEST(Trim, BothEnds) {
  EXPECT_EQ(Trim("  a b \t\n"), "a b");
  EXPECT_EQ(Trim("   "), "");
  EXPECT_EQ(Trim(""), "");
}

TEST(ParseInt, StrictAndInRange) {
  EXPECT_EQ(ParseInt32("3000"), 3000);
  EXPECT_EQ(ParseInt32("-5"), -5);
  EXPECT_EQ(ParseInt32("2147483647"), 2147483647);
  EXPECT_FALSE(ParseInt32("2147483648"));
  EXPECT_FALSE(ParseInt32(""));
  EXPECT_FALSE(ParseInt32("+1"));
  EXPECT_FALSE(ParseInt32(" 1"));
  EXPECT_FALSE(ParseInt32("1x"));
  EXPECT_EQ(ParseInt64("4294967346"), 4294967346LL);
  EXPECT_FALSE(ParseUint64("-1"));
  EXPECT_EQ(ParseUint64("18446744073709551615"), 18446744073709551615ULL);
}

TEST(ParseBool, GoSet) {
  for (auto s : {"1", "t", "T", "TRUE", "true", "True"}) EXPECT_EQ(ParseBool(s), true) << s;
  for (auto s : {"0", "f", "F", "FALSE", "false", "False"}) EXPECT_EQ(ParseBool(s), false) << s;
  EXPECT_FALSE(ParseBool("yes"));
  EXPECT_FALSE(ParseBool(""));
}

TEST(Quote, EscapesAndCuts) {
  EXPECT_EQ(Quote("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(Quote(std::string_view("\x01", 1)), "\"\\x01\"");
  EXPECT_EQ(Quote(std::string(200, 'x')).size(), 120u + 2 + 3);
}

TEST(Result, ValueAndError) {
  Result<int> ok(5);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 5);
  Result<int> bad(Error{"field \"x\": bad"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "field \"x\": bad");
  Status s = OkStatus();
  EXPECT_TRUE(s.ok());
}

TEST(FakeClock, MovesOnlyWhenTold) {
  FakeClock clock(SystemTime(std::chrono::seconds(100)));
  EXPECT_EQ(clock.Now(), SystemTime(std::chrono::seconds(100)));
  clock.Advance(std::chrono::seconds(15));
  EXPECT_EQ(clock.Now(), SystemTime(std::chrono::seconds(115)));
}

}  // namespace
}  // namespace hami
