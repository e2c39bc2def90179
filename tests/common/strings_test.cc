#include "common/strings.h"
#include "common/uuid.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/result.h"
#include "common/utf8.h"

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

// Issue 30 item 11/5: C0, DEL and C1 controls as JSON-style escapes, stray bytes as \xNN, the
// rest of UTF-8 unchanged; newlines kept only when asked.
TEST(EscapeTerminal, ControlCharactersBecomeVisible) {
  EXPECT_EQ(EscapeTerminal("GPU-a NVIDIA A100"), "GPU-a NVIDIA A100");
  EXPECT_EQ(EscapeTerminal("a\x1b[2Jb\x07"), "a\\u001b[2Jb\\u0007");
  EXPECT_EQ(EscapeTerminal("l1\r\nl2\t"), "l1\\r\\nl2\\t");
  EXPECT_EQ(EscapeTerminal("l1\r\nl2", /*keep_newlines=*/true), "l1\\r\nl2");
  EXPECT_EQ(EscapeTerminal(std::string("nul\0x", 5)), "nul\\u0000x");
  EXPECT_EQ(EscapeTerminal("del\x7f"), "del\\u007f");
  EXPECT_EQ(EscapeTerminal("csi\xc2\x9b"
                           "31m"),
            "csi\\u009b31m");  // U+009B, C1 CSI
  EXPECT_EQ(EscapeTerminal("raw\x9b"
                           "31m"),
            "raw\\x9b31m");                                      // not UTF-8
  EXPECT_EQ(EscapeTerminal("cut\xe2\x82"), "cut\\xe2\\x82");     // truncated sequence
  EXPECT_EQ(EscapeTerminal("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(EscapeTerminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(EscapeTerminal("caf\xc3\xa9 \xc2\xa0 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xc2\xa0 \xe2\x82\xac \xf0\x9f\x98\x80");  // é, NBSP, €, emoji
  // JSON with raw DEL and C1 inside strings stays JSON.
  EXPECT_EQ(EscapeTerminal("{\"a\":\"\x7f\xc2\x85\"}\n", true), "{\"a\":\"\\u007f\\u0085\"}\n");
}

TEST(Utf8, SequenceLengthsAndTheFirstBadByte) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xc3\xa9", 0), 2u);
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xf4\x90\x80\x80", 0), 0u);  // above U+10FFFF
  EXPECT_EQ(Utf8SequenceLength("\xc0\xaf", 0), 0u);          // overlong
  EXPECT_EQ(Utf8SequenceLength("\xed\xa0\x80", 0), 0u);      // surrogate
  EXPECT_EQ(Utf8SequenceLength("a", 1), 0u);                 // past the end
  EXPECT_EQ(FirstNonUtf8("caf\xc3\xa9 \xe2\x82\xac"), std::nullopt);
  EXPECT_EQ(FirstNonUtf8(""), std::nullopt);
  EXPECT_EQ(FirstNonUtf8("ab\xfe\xff"), 2u);
  EXPECT_EQ(FirstNonUtf8("ab\xe2\x82"), 2u);  // cut sequence
  EXPECT_EQ(FirstNonUtf8("\x80"), 0u);        // stray continuation byte
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

TEST(FormatUuidV4Test, SetsVersionAndVariantOverTheBits) {
  EXPECT_EQ(FormatUuidV4(0, 0), "00000000-0000-4000-8000-000000000000");
  EXPECT_EQ(FormatUuidV4(~0ULL, ~0ULL), "ffffffff-ffff-4fff-bfff-ffffffffffff");
  EXPECT_EQ(FormatUuidV4(0x0123456789abcdefULL, 0xfedcba9876543210ULL),
            "01234567-89ab-4def-bedc-ba9876543210");
}

}  // namespace
}  // namespace hami
