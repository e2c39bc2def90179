#include "protocol/scoring_weights.h"

#include <gtest/gtest.h>

#include "common/strings.h"

namespace hami::protocol {
namespace {

TEST(ScoringWeights, ParsesSpecVectorAndAnyOrder) {
  struct Case {
    const char* text;
    ScoringWeights want;
  };
  const Case cases[] = {
      {"slot=1,core=1,memory=3", {1, 1, 3}},  // vector 17
      {"memory=3,slot=1,core=1", {1, 1, 3}},
      {" slot = 0 , core=0, memory=7 ", {0, 0, 7}},
      {"slot=2147483647,core=0,memory=0", {2147483647, 0, 0}},
  };
  for (const auto& c : cases) {
    auto r = ParseScoringWeights(c.text);
    ASSERT_TRUE(r) << c.text << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.text;
  }
}

TEST(ScoringWeights, FormatRoundTrips) {
  EXPECT_EQ(FormatScoringWeights({1, 1, 3}), "slot=1,core=1,memory=3");
  auto r = ParseScoringWeights(FormatScoringWeights({4, 0, 2}));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (ScoringWeights{4, 0, 2}));
}

// Vector 17: each error is HAMi's (pkg/util/device_scoring_weights.go), word for word, so an
// operator's search for HAMi's message finds ours (issue 15 item 5).
TEST(ScoringWeights, RejectsInHamisWords) {
  struct Case {
    const char* text;
    const char* problem;
  };
  const Case cases[] = {
      {"slot=1,core=1", "expected slot, core, and memory weights"},
      {"slot=1,core=1,memory=3,slot=1", "expected slot, core, and memory weights"},
      {"", "expected slot, core, and memory weights"},
      {"slot=1,slot=1,memory=3", "duplicate \"slot\" weight"},
      {"slot=1,core=1,gpu=3", "unknown weight \"gpu\""},
      {"slot=1,core=x,memory=3", "\"core\" weight must be an integer"},
      {"slot=1,core=1.5,memory=3", "\"core\" weight must be an integer"},
      {"slot=1,core=,memory=3", "\"core\" weight must be an integer"},
      {"slot=1,core=99999999999,memory=3", "\"core\" weight must be an integer"},
      {"slot=-1,core=1,memory=3", "\"slot\" weight must not be negative"},
      {"slot=1,core=-1,memory=3", "\"core\" weight must not be negative"},
      {"slot=1,core=1,memory=-3", "\"memory\" weight must not be negative"},
      {"slot=1,gpu=-1,memory=3", "\"gpu\" weight must not be negative"},  // HAMi: sign first
      {"slot=0,core=0,memory=0", "at least one weight must be positive"},
      {"slot=1,core1,memory=3", "expected key=value entries"},
  };
  for (const auto& c : cases) {
    auto r = ParseScoringWeights(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error(), "invalid hami.io/device-scoring-weights annotation " + Quote(c.text) +
                             ": " + c.problem);
  }
}

}  // namespace
}  // namespace hami::protocol
