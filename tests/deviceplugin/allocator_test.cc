// FindPendingPod against the in-process sim apiserver: it reports the node lock it read, which
// Allocate hands to nodelock::Release for its conditional release (tests/nodelock has the
// release's own tests).
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

class FindPendingPodTest : public ::testing::Test {
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

  sim::ApiServer server_{sim::ApiServerOptions{}};
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(FindPendingPodTest, ReportsTheLockItRead) {
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
