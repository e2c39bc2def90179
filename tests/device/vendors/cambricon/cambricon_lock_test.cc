// HAMi's Cambricon node lock (pkg/device/cambricon/device.go LockNode): cambricon.com/dsmlu.lock
// holds the bind's time; a lock younger than two minutes refuses the next bind, an older one is
// taken over, a value that is not RFC 3339 fails the bind.
#include <gtest/gtest.h>

#include <chrono>

#include "device/vendors/cambricon/cambricon.h"

namespace hami::device::cambricon {
namespace {

using std::chrono::seconds;

const SystemTime kNow{seconds(1700000000)};  // 2023-11-14T22:13:20Z

TEST(DsmluLock, FreeNodeTakesTheLockAtTheBindsTime) {
  NodeView node{.name = "mlu-1"};
  auto v = DsmluLock(node, kNow, Zone::Utc());
  ASSERT_TRUE(v) << v.error();
  EXPECT_EQ(*v, "2023-11-14T22:13:20Z");
  auto east = DsmluLock(node, kNow, Zone::Fixed(8 * 3600));
  ASSERT_TRUE(east);
  EXPECT_EQ(*east, "2023-11-15T06:13:20+08:00");
}

TEST(DsmluLock, YoungLockRefusesOldLockIsTakenOver) {
  NodeView node{.name = "mlu-1"};
  node.annotations[std::string(kDsmluLockKey)] = "2023-11-14T22:11:20Z";  // exactly 2 min
  auto held = DsmluLock(node, kNow, Zone::Utc());
  ASSERT_FALSE(held);
  EXPECT_EQ(held.error(), "node mlu-1 has been locked within 2 minutes");
  // One second past the expiry (an offset other than the writer's reads the same instant).
  node.annotations[std::string(kDsmluLockKey)] = "2023-11-15T06:11:19+08:00";
  auto taken = DsmluLock(node, kNow, Zone::Utc());
  ASSERT_TRUE(taken) << taken.error();
  EXPECT_EQ(*taken, "2023-11-14T22:13:20Z");
  // A lock from the future is young.
  node.annotations[std::string(kDsmluLockKey)] = "2023-11-14T22:20:00Z";
  EXPECT_FALSE(DsmluLock(node, kNow, Zone::Utc()));
}

TEST(DsmluLock, UnreadableLockFailsNamingTheKey) {
  NodeView node{.name = "mlu-1"};
  node.annotations[std::string(kDsmluLockKey)] = "yesterday";
  auto v = DsmluLock(node, kNow, Zone::Utc());
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error(),
            "node \"mlu-1\": annotation cambricon.com/dsmlu.lock: want an RFC 3339 time, got "
            "\"yesterday\"");
}

}  // namespace
}  // namespace hami::device::cambricon
