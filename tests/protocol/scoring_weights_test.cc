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

// Vector 17: each error names the key, the value and the problem.
TEST(ScoringWeights, RejectsNamingTheProblem) {
  struct Case {
    const char* text;
    const char* problem;
  };
  const Case cases[] = {
      {"slot=1,core=1", "2 entries"},
      {"slot=1,core=1,memory=3,slot=1", "4 entries"},
      {"", "1 entries"},
      {"slot=1,slot=1,memory=3", "duplicate key \"slot\""},
      {"slot=1,core=1,gpu=3", "unknown key \"gpu\""},
      {"slot=1,core=x,memory=3", "not an integer: \"x\""},
      {"slot=1,core=1.5,memory=3", "not an integer"},
      {"slot=1,core=,memory=3", "not an integer"},
      {"slot=1,core=99999999999,memory=3", "not an integer"},
      {"slot=-1,core=1,memory=3", "negative"},
      {"slot=0,core=0,memory=0", "all weights are zero"},
      {"slot=1,core1,memory=3", "no '='"},
  };
  for (const auto& c : cases) {
    auto r = ParseScoringWeights(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().find("hami.io/device-scoring-weights"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(Quote(c.text)), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(c.problem), std::string::npos) << r.error();
  }
}

}  // namespace
}  // namespace hami::protocol
