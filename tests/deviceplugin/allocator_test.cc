// FindPendingPod against the in-process sim apiserver: it finds the lock owner or the bound pod,
// reports the node lock it read (which Allocate hands to nodelock::Release for its conditional
// release; tests/nodelock has the release's own tests), and retries a transient error on each
// read, as Allocate's writes do, while a 404 fails at once.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "deviceplugin/allocator.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "support/allocate_env.h"
#include "support/sim_node_test.h"

namespace hami::deviceplugin {
namespace {

using test_support::kNode;
namespace res = k8s::resources;

using test_support::kDemoLock;
using test_support::kGetNode;
constexpr const char* kGetPod = "GET /api/v1/namespaces/default/pods/demo";
constexpr const char* kListPods = "GET /api/v1/pods";

class FindPendingPodTest : public test_support::SimNodeTest {
 protected:
  void CreateDemo() {
    ASSERT_TRUE(client_->Create(res::kPods, "default", test_support::BoundPod("demo", "")));
  }
};

TEST_F(FindPendingPodTest, ReportsTheLockItRead) {
  CreateDemo();
  ASSERT_TRUE(test_support::SetNodeLock(*client_, std::string(kDemoLock)));
  std::string seen = "stale";
  auto found = FindPendingPod(*client_, kNode, &seen);
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(k8s::Name(*found), "demo");
  EXPECT_EQ(seen, kDemoLock);

  ASSERT_TRUE(client_->Delete(res::kPods, "default", "demo"));
  ASSERT_TRUE(test_support::SetNodeLock(*client_, std::nullopt));
  EXPECT_FALSE(FindPendingPod(*client_, kNode, &seen));  // no lock and no candidate pod
  EXPECT_EQ(seen, "");
}

TEST_F(FindPendingPodTest, LockOwnerReadsRetryA500) {
  CreateDemo();
  ASSERT_TRUE(test_support::SetNodeLock(*client_, std::string(kDemoLock)));
  Fail(kGetNode, 1);
  Fail(kGetPod, 1);
  std::string seen;
  auto found = FindPendingPod(*client_, kNode, &seen);
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(k8s::Name(*found), "demo");
  EXPECT_EQ(seen, kDemoLock);
  EXPECT_EQ(Hits(kGetNode), 2);
  EXPECT_EQ(Hits(kGetPod), 2);
}

TEST_F(FindPendingPodTest, PodListRetriesA500) {
  CreateDemo();
  Fail(kGetNode, 1);
  Fail(kListPods, 1);
  auto found = FindPendingPod(*client_, kNode);
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(k8s::Name(*found), "demo");
  EXPECT_EQ(Hits(kGetNode), 2);
  EXPECT_EQ(Hits(kListPods), 2);
}

TEST_F(FindPendingPodTest, NotFoundIsNotRetried) {
  ASSERT_TRUE(test_support::SetNodeLock(*client_, std::string(kDemoLock)));  // demo does not exist
  auto found = FindPendingPod(*client_, kNode);
  ASSERT_FALSE(found);
  EXPECT_NE(found.error().find("get lock owner pod default/demo"), std::string::npos)
      << found.error();
  EXPECT_EQ(Hits(kGetNode), 1);
  EXPECT_EQ(Hits(kGetPod), 1);
}

}  // namespace
}  // namespace hami::deviceplugin
