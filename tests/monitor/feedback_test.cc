// The priority feedback vectors (docs/MONITOR.md#priority-feedback): who is active, who is blocked,
// who throttles.
#include "monitor/feedback.h"

#include <gtest/gtest.h>

namespace hami::monitor {
namespace {

constexpr const char* kA = "GPU-a";
constexpr const char* kB = "GPU-b";

FeedbackState C(std::vector<std::string> uuids, int32_t priority, int32_t recent,
                int32_t util_switch = 0) {
  return FeedbackState{std::move(uuids), priority, recent, util_switch};
}

TEST(PriorityFeedback, AloneNothingIsSet) {
  std::vector<FeedbackState> v = {C({kA}, 1, 2)};
  PriorityFeedback(v);
  EXPECT_EQ(v[0].recent_kernel, 1);  // decremented
  EXPECT_EQ(v[0].utilization_switch, 0);
  PriorityFeedback(v);
  EXPECT_EQ(v[0].recent_kernel, 0);
  PriorityFeedback(v);
  EXPECT_EQ(v[0].recent_kernel, 0);  // stays at 0
}

TEST(PriorityFeedback, HighPriorityActiveBlocksLowOnTheSameGpu) {
  std::vector<FeedbackState> v = {C({kA}, 0, 2), C({kA}, 1, 2), C({kB}, 1, 2)};
  PriorityFeedback(v);
  EXPECT_EQ(v[0].recent_kernel, 1);
  EXPECT_EQ(v[0].utilization_switch, 0);  // alone at its priority, nothing higher
  EXPECT_EQ(v[1].recent_kernel, -1);      // blocked
  EXPECT_EQ(v[1].utilization_switch, 1);
  EXPECT_EQ(v[2].recent_kernel, 1);  // another GPU: untouched
  EXPECT_EQ(v[2].utilization_switch, 0);
}

TEST(PriorityFeedback, TwoOfTheSamePriorityThrottleButDoNotBlock) {
  std::vector<FeedbackState> v = {C({kA}, 1, 2), C({kA, kB}, 1, 2)};
  PriorityFeedback(v);
  for (const FeedbackState& c : v) {
    EXPECT_EQ(c.recent_kernel, 1);
    EXPECT_EQ(c.utilization_switch, 1);
  }
}

TEST(PriorityFeedback, AnyOfItsGpusCounts) {
  std::vector<FeedbackState> v = {C({kB}, 0, 2), C({kA, kB}, 1, 0)};
  PriorityFeedback(v);
  EXPECT_EQ(v[1].recent_kernel, -1);
  EXPECT_EQ(v[1].utilization_switch, 1);
}

TEST(PriorityFeedback, UnblockedOnceTheHighPriorityTaskIsIdle) {
  std::vector<FeedbackState> v = {C({kA}, 0, 1), C({kA}, 1, -1, 1)};
  PriorityFeedback(v);  // 1 -> 0: no longer active
  EXPECT_EQ(v[0].recent_kernel, 0);
  EXPECT_EQ(v[1].recent_kernel, 0);
  EXPECT_EQ(v[1].utilization_switch, 0);
}

TEST(PriorityFeedback, LowPriorityNeverBlocksHigh) {
  std::vector<FeedbackState> v = {C({kA}, 1, 2), C({kA}, 0, 0)};
  PriorityFeedback(v);
  EXPECT_EQ(v[1].recent_kernel, 0);
  EXPECT_EQ(v[1].utilization_switch, 0);
  EXPECT_EQ(v[0].utilization_switch, 0);
}

TEST(PriorityFeedback, EmptyUuidsAreIgnored) {
  std::vector<FeedbackState> v = {C({""}, 0, 2), C({""}, 1, 2)};
  PriorityFeedback(v);
  EXPECT_EQ(v[1].recent_kernel, 1);
  EXPECT_EQ(v[1].utilization_switch, 0);
}

}  // namespace
}  // namespace hami::monitor
