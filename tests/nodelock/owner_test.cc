// nodelock::LookupOwner against the in-process sim apiserver: who holds the node lock, since
// when, and whether it has expired; a malformed lock and a failed read are errors naming the node.
#include "nodelock/owner.h"

#include <gtest/gtest.h>

#include <chrono>

#include "fixture.h"

namespace hami::nodelock {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

using OwnerTest = NodeLockTest;

TEST_F(OwnerTest, NoLockIsNoHolder) {
  auto holder = LookupOwner(*client_, kNode, retry_);
  ASSERT_TRUE(holder) << holder.error();
  EXPECT_FALSE(*holder);
}

TEST_F(OwnerTest, NamesThePodAndSinceWhen) {
  SetLock("2026-08-21T18:00:05+08:00,team-a,train-0");
  auto holder = LookupOwner(*client_, kNode, retry_);
  ASSERT_TRUE(holder) << holder.error();
  ASSERT_TRUE(*holder);
  const Holder& h = **holder;
  EXPECT_EQ(h.value, "2026-08-21T18:00:05+08:00,team-a,train-0");
  ASSERT_TRUE(h.lock.owner);
  EXPECT_EQ(h.lock.owner->ns, "team-a");
  EXPECT_EQ(h.lock.owner->pod, "train-0");
  EXPECT_EQ(h.lock.time.instant, DemoLockTime());  // the same instant as 10:00:05Z
  EXPECT_EQ(h.lock.time.offset_seconds, 8 * 3600);
}

TEST_F(OwnerTest, ExpiredStrictlyAfterTheTimeout) {
  SetLock(std::string(kDemoLock));
  auto holder = LookupOwner(*client_, kNode, retry_);
  ASSERT_TRUE(holder && *holder);
  const Holder& h = **holder;
  EXPECT_FALSE(h.Expired(DemoLockTime()));
  EXPECT_FALSE(h.Expired(DemoLockTime() + minutes(5)));  // the default 5 min, not yet
  EXPECT_TRUE(h.Expired(DemoLockTime() + minutes(5) + seconds(1)));
  EXPECT_FALSE(h.Expired(DemoLockTime() + minutes(9), minutes(10)));
  EXPECT_TRUE(h.Expired(DemoLockTime() + minutes(11), minutes(10)));
}

TEST_F(OwnerTest, ALegacyValueNamesNoPod) {
  SetLock("2026-08-21T10:00:05Z");
  auto holder = LookupOwner(*client_, kNode, retry_);
  ASSERT_TRUE(holder && *holder);
  EXPECT_FALSE((*holder)->lock.owner);
  EXPECT_EQ((*holder)->lock.time.instant, DemoLockTime());
}

TEST_F(OwnerTest, AMalformedLockIsAnErrorNamingNodeAndValue) {
  SetLock("yesterday,default,demo");
  auto holder = LookupOwner(*client_, kNode, retry_);
  ASSERT_FALSE(holder);
  EXPECT_EQ(
      holder.error().rfind("node \"node-1\": hami.io/mutex.lock \"yesterday,default,demo\"", 0), 0u)
      << holder.error();
}

TEST_F(OwnerTest, TransientErrorsAreRetriedThenGivenUp) {
  SetLock(std::string(kDemoLock));
  Fail(kGetNode, 3);  // the fourth try answers
  const int gets = Hits(kGetNode);
  auto holder = LookupOwner(*client_, kNode, retry_);
  ASSERT_TRUE(holder && *holder) << (holder ? "" : holder.error());
  EXPECT_EQ((*holder)->value, kDemoLock);
  EXPECT_EQ(Hits(kGetNode) - gets, 4);
  EXPECT_EQ(TakeSleeps(), GaveUpWaits());

  Fail(kGetNode, -1);
  holder = LookupOwner(*client_, kNode, retry_);
  Fail(kGetNode, 0);
  ASSERT_FALSE(holder);
  EXPECT_EQ(holder.error().rfind("get node \"node-1\": 500 ", 0), 0u) << holder.error();
  EXPECT_NE(holder.error().find("(gave up after 4 tries)"), std::string::npos) << holder.error();
  EXPECT_EQ(TakeSleeps(), GaveUpWaits());
}

}  // namespace
}  // namespace hami::nodelock
