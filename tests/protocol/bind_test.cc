#include "protocol/bind.h"

#include <gtest/gtest.h>

#include <chrono>

#include "common/strings.h"
#include "protocol/keys.h"

namespace hami::protocol {
namespace {

SystemTime At(int64_t secs) {
  return SystemTime(std::chrono::duration_cast<SystemTime::duration>(std::chrono::seconds{secs}));
}

TEST(BindPhase, RoundTripsTheThreeWords) {
  struct Case {
    BindPhase phase;
    const char* text;
  };
  for (const Case& c : {Case{BindPhase::kAllocating, "allocating"},
                        Case{BindPhase::kSuccess, "success"}, Case{BindPhase::kFailed, "failed"}}) {
    EXPECT_EQ(FormatBindPhase(c.phase), c.text);
    auto r = ParseBindPhase(c.text);
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(*r, c.phase);
  }
}

TEST(BindPhase, RejectsAnythingElseNamingKeyAndValue) {
  for (const char* bad : {"", "Allocating", "success ", "done", "allocating\n"}) {
    auto r = ParseBindPhase(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find("hami.io/bind-phase"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(Quote(bad)), std::string::npos) << r.error();
  }
}

TEST(BindTime, SeedValue) {
  // Seed: hami.io/bind-time: "1716199325".
  EXPECT_EQ(FormatBindTime(At(1716199325)), "1716199325");
  EXPECT_EQ(FormatBindTime(At(1716199325) + std::chrono::milliseconds(999)), "1716199325");
  auto r = ParseBindTime("1716199325");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, At(1716199325));
  auto zero = ParseBindTime("0");
  ASSERT_TRUE(zero);
  EXPECT_EQ(*zero, At(0));
  EXPECT_TRUE(ParseBindTime("9223372036"));
}

TEST(BindTime, RejectsNonDecimalNamingKeyAndValue) {
  for (const char* bad :
       {"", "-1", "+5", " 1", "1.5", "1e9", "abc", "9223372037", "99999999999999999999"}) {
    auto r = ParseBindTime(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find("hami.io/bind-time"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(Quote(bad)), std::string::npos) << r.error();
  }
  auto other = ParseUnixSecondsAnnotation(kVgpuTimeKey, "x");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().find("hami.io/vgpu-time"), std::string::npos) << other.error();
}

TEST(Keys, ExactStrings) {
  EXPECT_EQ(kBindPhaseKey, "hami.io/bind-phase");
  EXPECT_EQ(kBindTimeKey, "hami.io/bind-time");
  EXPECT_EQ(kVgpuNodeKey, "hami.io/vgpu-node");
  EXPECT_EQ(kVgpuTimeKey, "hami.io/vgpu-time");
  EXPECT_EQ(kNodeLockKey, "hami.io/mutex.lock");
  EXPECT_EQ(kDeviceCordonKey, "hami.io/device-cordon");
  EXPECT_EQ(kDeviceScoringWeightsKey, "hami.io/device-scoring-weights");
  EXPECT_EQ(kNodeSchedulerPolicyKey, "hami.io/node-scheduler-policy");
  EXPECT_EQ(kGpuSchedulerPolicyKey, "hami.io/gpu-scheduler-policy");
  EXPECT_EQ(kVgpuMigAllocationsKey, "hami.io/vgpu-mig-allocations");
  EXPECT_EQ(kNodeNvidiaScoreKey, "hami.io/node-nvidia-score");
  EXPECT_EQ(kNumaBindKey, "nvidia.com/numa-bind");
  EXPECT_EQ(kVgpuModeKey, "nvidia.com/vgpu-mode");
  EXPECT_EQ(kWebhookLabelKey, "hami.io/webhook");
  EXPECT_EQ(kSchedulerRoleLabelKey, "hami.io/scheduler-role");
}

}  // namespace
}  // namespace hami::protocol
