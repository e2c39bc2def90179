#include "protocol/pair_score.h"

#include <gtest/gtest.h>

#include <string>

namespace hami::protocol {
namespace {

// The example of docs/protocol.md#pair-scores.
TEST(PairScore, SpecExampleRoundTrips) {
  const char* kSpec = R"([{"uuid":"GPU-a","score":{"GPU-b":200,"GPU-c":20}}])";
  auto r = DecodePairScores(kSpec);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].uuid, "GPU-a");
  EXPECT_EQ((*r)[0].score, (std::map<std::string, int64_t>{{"GPU-b", 200}, {"GPU-c", 20}}));
  EXPECT_EQ(EncodePairScores(*r), kSpec);
}

TEST(PairScore, EncodeSortsKeysLikeGoMaps) {
  // Byte order: upper case before lower case, shorter prefix first, bytes >= 0x80 last.
  PairScores s = {{"GPU-0", {{"b", 1}, {"B", 2}, {"a0", 3}, {"a", 4}, {"\xc3\xa9", 5}}},
                  {"GPU-1", {}}};
  EXPECT_EQ(EncodePairScores(s),
            "[{\"uuid\":\"GPU-0\",\"score\":{\"B\":2,\"a\":4,\"a0\":3,\"b\":1,\"\xc3\xa9\":5}},"
            "{\"uuid\":\"GPU-1\",\"score\":{}}]");
  EXPECT_EQ(EncodePairScores({}), "[]");
  // Keys are escaped like every other Go string.
  EXPECT_EQ(EncodePairScores({{"<", {{"&", -10}}}}),
            R"([{"uuid":"\u003c","score":{"\u0026":-10}}])");
}

TEST(PairScore, DecodeLenientLikeGo) {
  struct Case {
    const char* in;
    PairScores want;
  };
  const Case cases[] = {
      {"", {}},
      {"null", {}},
      {"[]", {}},
      {R"([{"UUID":"a","Score":{"b":1},"x":true}])", {{"a", {{"b", 1}}}}},
      {R"([{"uuid":"a","score":null}])", {{"a", {}}}},
      {R"([{"uuid":"a","score":{"b":null}}])", {{"a", {{"b", 0}}}}},
      {R"([{"uuid":"a","score":{"b":1,"b":2}}])", {{"a", {{"b", 2}}}}},
      {R"([null,{}])", {{}, {}}},
  };
  for (const auto& c : cases) {
    auto r = DecodePairScores(c.in);
    ASSERT_TRUE(r) << c.in << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.in;
  }
}

TEST(PairScore, RejectsMalformedNamingEntryAndField) {
  struct Case {
    const char* in;
    const char* want;
  };
  const Case cases[] = {
      {R"([{"uuid":"a","score":{"GPU-b":"x"}}])",
       R"(device 0: field "score.GPU-b": want an integer, got "x")"},
      {R"([{},{"uuid":"a","score":{"GPU-b":1.5}}])",
       R"(device 1: field "score.GPU-b": want an integer, got 1.5)"},
      {R"([{"score":{"b":9223372036854775808}}])",
       R"(field "score.b": 9223372036854775808 is out)"},
      {R"([{"score":[]}])", R"(device 0: field "score": want an object, got [])"},
      {R"([{"uuid":7}])", R"(device 0: field "uuid": want a string, got 7)"},
      {R"(["a"])", R"(device 0: want an object, got "a")"},
      {R"({"uuid":"a"})", "pair scores: want a JSON list"},
      {R"([{"uuid":"a"])", "pair scores: not valid JSON"},
  };
  for (const auto& c : cases) {
    auto r = DecodePairScores(c.in);
    ASSERT_FALSE(r) << c.in;
    EXPECT_NE(r.error().find(c.want), std::string::npos) << c.in << " -> " << r.error();
  }
}

// 100,000 levels of `[` (200 KB, under the annotation size limit) crashed the decoder's caller.
TEST(DeepNesting, PairScoresIsACleanError) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = DecodePairScores(deep);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("pair scores: nested deeper than 10000 levels"), std::string::npos)
      << r.error().substr(0, 200);
}

}  // namespace
}  // namespace hami::protocol
