#include "protocol/node_lock.h"

#include <gtest/gtest.h>

#include <chrono>

#include "common/strings.h"

namespace hami::protocol {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

SystemTime At(int64_t secs) {
  return SystemTime(std::chrono::duration_cast<SystemTime::duration>(seconds{secs}));
}

// 2026-08-21T10:11:12+08:00 == 02:11:12 UTC.
constexpr int64_t kLockInstant = 1787278272;
const Zone kPlus8 = Zone::Fixed(8 * 3600);

TEST(NodeLock, ParsesCurrentAndLegacyValues) {
  auto r = ParseNodeLock("2026-08-21T10:11:12+08:00,default,train-0");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->time.instant, At(kLockInstant));
  EXPECT_EQ(r->time.offset_seconds, 8 * 3600);
  ASSERT_TRUE(r->owner);
  EXPECT_EQ(*r->owner, (LockOwner{"default", "train-0"}));
  EXPECT_EQ(FormatNodeLock(*r), "2026-08-21T10:11:12+08:00,default,train-0");

  auto legacy = ParseNodeLock("2026-08-21T02:11:12Z");
  ASSERT_TRUE(legacy) << legacy.error();
  EXPECT_EQ(legacy->time.instant, At(kLockInstant));
  EXPECT_FALSE(legacy->owner);
  EXPECT_EQ(FormatNodeLock(*legacy), "2026-08-21T02:11:12Z");
}

TEST(NodeLock, RejectsMalformedNamingTheValue) {
  for (const char* bad :
       {"lock", "", "2026-08-21T10:11:12+08:00,default", "2026-08-21T10:11:12+08:00,a,b,c",
        "not-a-time,default,train-0", "2026-08-21 10:11:12,default,train-0"}) {
    auto r = ParseNodeLock(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find("hami.io/mutex.lock"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(Quote(bad)), std::string::npos) << r.error();
  }
}

TEST(NodeLock, ValueExpiryAndOwnership) {
  EXPECT_EQ(NodeLockValue(At(kLockInstant), kPlus8, "hami-ns", "hami"),
            "2026-08-21T10:11:12+08:00,hami-ns,hami");
  EXPECT_EQ(NodeLockValue(At(kLockInstant), Zone::Utc(), "hami-ns", "hami"),
            "2026-08-21T02:11:12Z,hami-ns,hami");
  auto lock = ParseNodeLock("2026-08-21T10:11:12+08:00,default,train-0");
  ASSERT_TRUE(lock);
  EXPECT_FALSE(NodeLockExpired(*lock, At(kLockInstant) + minutes(5)));
  EXPECT_TRUE(NodeLockExpired(*lock, At(kLockInstant) + minutes(5) + seconds(1)));
  EXPECT_TRUE(NodeLockExpired(*lock, At(kLockInstant) + seconds(11), seconds(10)));

  EXPECT_TRUE(NodeLockOwnedBy("2026-08-21T10:11:12+08:00,default,train-0", "default", "train-0"));
  EXPECT_FALSE(NodeLockOwnedBy("2026-08-21T10:11:12+08:00,default,train-0", "default", "train"));
  EXPECT_FALSE(NodeLockOwnedBy("2026-08-21T10:11:12+08:00,default,train-0", "ault", "train-0"));
  EXPECT_TRUE(MayReleaseNodeLock("2026-08-21T10:11:12+08:00", "default", "x"));
  EXPECT_FALSE(MayReleaseNodeLock("2026-08-21T10:11:12+08:00,default,y", "default", "x"));
}

// The cases of docs/protocol.md#node-lock, one row per case.
TEST(DecideNodeLock, SpecVector22) {
  const SystemTime now = At(kLockInstant);
  const std::string fresh_other = NodeLockValue(now - seconds(10), kPlus8, "other-ns", "other");
  const std::string fresh_same_ns = NodeLockValue(now - seconds(10), kPlus8, "hami-ns", "other");
  const std::string fresh_mine = NodeLockValue(now - seconds(10), kPlus8, "hami-ns", "hami");
  const std::string old_other = NodeLockValue(now - minutes(6), kPlus8, "other-ns", "other");
  const std::string legacy_fresh = FormatRfc3339(now - seconds(10), kPlus8);
  const std::string legacy_old = FormatRfc3339(now - minutes(6), kPlus8);
  const std::string want_value = "2026-08-21T10:11:12+08:00,hami-ns,hami";
  struct Case {
    const char* name;
    std::optional<std::string_view> current;
    bool owner_exists;
    LockAction action;
  };
  const Case cases[] = {
      {"empty node", std::nullopt, true, LockAction::kAcquire},
      {"other pod, fresh", fresh_other, true, LockAction::kBusy},
      {"same namespace other pod", fresh_same_ns, true, LockAction::kBusy},
      {"unparsable", "lock", true, LockAction::kMalformed},
      {"same pod re-locks", fresh_mine, true, LockAction::kAlreadyOwned},
      {"older than timeout", old_other, true, LockAction::kTakeOver},
      {"owner deleted", fresh_other, false, LockAction::kTakeOver},
      {"legacy fresh", legacy_fresh, false, LockAction::kBusy},
      {"legacy expired", legacy_old, true, LockAction::kTakeOver},
  };
  for (const auto& c : cases) {
    LockRequest req{
        "node-1",      c.current, "hami-ns", "hami", now, kPlus8, kDefaultNodeLockTimeout,
        c.owner_exists};
    LockDecision d = DecideNodeLock(req);
    EXPECT_EQ(d.action, c.action) << c.name << ": " << d.message;
    bool writes = c.action == LockAction::kAcquire || c.action == LockAction::kTakeOver;
    EXPECT_EQ(d.new_value, writes ? want_value : "") << c.name;
    EXPECT_FALSE(d.message.empty()) << c.name;
  }
}

TEST(DecideNodeLock, MessagesNameNodeHolderAndValue) {
  const SystemTime now = At(kLockInstant);
  LockRequest busy{"node-1", "2026-08-21T10:11:02+08:00,default,train-0", "hami-ns", "hami", now,
                   kPlus8};
  LockDecision d = DecideNodeLock(busy);
  EXPECT_EQ(d.message,
            "node node-1 has been locked within 5m0s by default/train-0 since "
            "2026-08-21T10:11:02+08:00");
  LockRequest bad{"node-1", "lock", "hami-ns", "hami", now, kPlus8};
  d = DecideNodeLock(bad);
  EXPECT_NE(d.message.find("node-1"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("\"lock\""), std::string::npos) << d.message;
  EXPECT_EQ(LockActionName(LockAction::kTakeOver), "TakeOver");
}

TEST(FormatGoDuration, MatchesGo) {
  using std::chrono::hours;
  using std::chrono::milliseconds;
  using std::chrono::nanoseconds;
  EXPECT_EQ(FormatGoDuration(minutes(5)), "5m0s");
  EXPECT_EQ(FormatGoDuration(seconds(28)), "28s");
  EXPECT_EQ(FormatGoDuration(hours(1)), "1h0m0s");
  EXPECT_EQ(FormatGoDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatGoDuration(milliseconds(100)), "100ms");
  EXPECT_EQ(FormatGoDuration(nanoseconds(1500)), "1.5\xc2\xb5s");
  EXPECT_EQ(FormatGoDuration(nanoseconds(7)), "7ns");
  EXPECT_EQ(FormatGoDuration(nanoseconds(0)), "0s");
  EXPECT_EQ(FormatGoDuration(-seconds(90)), "-1m30s");
  EXPECT_EQ(FormatGoDuration(nanoseconds(INT64_MIN)), "-2562047h47m16.854775808s");
}

}  // namespace
}  // namespace hami::protocol
