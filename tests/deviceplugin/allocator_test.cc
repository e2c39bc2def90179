// The node-lock release of Allocate against the in-process sim apiserver: the conditional
// release (one JSON patch whose `test` op checks the value FindPendingPod read) removes only the
// lock it saw; when the lock changed meanwhile, the fallback re-reads the node and releases only
// what the pod owns.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "deviceplugin/allocator.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "sim/apiserver.h"

namespace hami::deviceplugin {
namespace {

using k8s::Json;
namespace res = k8s::resources;

constexpr const char* kNode = "node-1";
constexpr const char* kLockKey = "hami.io/mutex.lock";
constexpr const char* kOurs = "2026-08-21T10:00:05Z,default,demo";
constexpr const char* kOursLater = "2026-08-21T10:01:00Z,default,demo";
constexpr const char* kTheirs = "2026-08-21T10:00:09Z,default,other";
constexpr const char* kLegacy = "2026-08-21T10:00:05Z";

class ReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    k8s::RestConfig cfg;
    cfg.server = server_.url();
    cfg.qps = 0;
    client_ = std::make_unique<k8s::Client>(cfg);
    Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}};
    ASSERT_TRUE(client_->Create(res::kNodes, "", node));
  }
  void TearDown() override { server_.Stop(); }

  void SetLock(std::optional<std::string> value) {
    Json patch;
    patch["metadata"]["annotations"][kLockKey] = value ? Json(*value) : Json(nullptr);
    ASSERT_TRUE(client_->Patch(res::kNodes, "", kNode, k8s::PatchType::kMerge, patch));
  }
  std::optional<std::string> Lock() {
    auto node = client_->Get(res::kNodes, "", kNode);
    EXPECT_TRUE(node);
    return node ? k8s::Annotation(*node, kLockKey) : std::nullopt;
  }

  sim::ApiServer server_{sim::ApiServerOptions{}};
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(ReleaseTest, ReleasesOnlyWhatThePodOwns) {
  struct Case {
    const char* name;
    std::optional<std::string> current;  // the lock on the node at release time
    std::string seen;                    // what Allocate read earlier ("" = nothing)
    std::optional<std::string> left;     // the lock afterwards
  };
  const Case cases[] = {
      {"unchanged, ours: removed by the conditional patch", kOurs, kOurs, std::nullopt},
      {"unchanged legacy value: removed", kLegacy, kLegacy, std::nullopt},
      {"taken by another pod since: left", kTheirs, kOurs, kTheirs},
      {"re-taken by the same pod since: removed by the fallback", kOursLater, kOurs, std::nullopt},
      {"nothing seen, ours now: removed by the fallback", kOurs, "", std::nullopt},
      {"nothing seen, theirs now: left", kTheirs, "", kTheirs},
      {"seen theirs (not ours to release), theirs now: left", kTheirs, kTheirs, kTheirs},
      {"already gone: fine", std::nullopt, kOurs, std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SetLock(c.current);
    EXPECT_TRUE(ReleaseNodeLock(*client_, kNode, "default", "demo", c.seen));
    EXPECT_EQ(Lock(), c.left);
  }
}

TEST_F(ReleaseTest, FindPendingPodReportsTheLockItRead) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "demo"}, {"namespace", "default"}}},
              {"spec", {{"nodeName", kNode}, {"containers", Json::array({{{"name", "c"}}})}}}};
  ASSERT_TRUE(client_->Create(res::kPods, "default", pod));
  SetLock(std::string(kOurs));
  std::string seen = "stale";
  auto found = FindPendingPod(*client_, kNode, &seen);
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(k8s::Name(*found), "demo");
  EXPECT_EQ(seen, kOurs);

  SetLock(std::nullopt);
  EXPECT_FALSE(FindPendingPod(*client_, kNode, &seen));  // no lock and no candidate pod
  EXPECT_EQ(seen, "");
}

}  // namespace
}  // namespace hami::deviceplugin
