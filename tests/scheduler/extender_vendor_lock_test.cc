// Issue 30 item 13 through the extender: a Cambricon bind that fails after taking
// cambricon.com/dsmlu.lock releases it only while it still reads the value that bind wrote. The
// extender used to send a merge patch setting the key to null, which removed the lock another
// bind had taken meanwhile (here: written just before the failing bind's pod patch).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "device/config.h"
#include "device/usage_index.h"
#include "k8s/object.h"
#include "scheduler/extender.h"
#include "support/sim_node_test.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

constexpr const char* kLockKey = "cambricon.com/dsmlu.lock";
constexpr const char* kOtherBind = "2099-01-01T00:00:00Z";  // taken by another bind meanwhile

class ExtenderVendorLockTest : public test_support::SimNodeTest {
 protected:
  void SetUp() override {
    SimNodeTest::SetUp();
    if (HasFatalFailure()) return;
    auto config = device::LoadDeviceConfig(
        "cambricon:\n"
        "  resourceCountName: cambricon.com/vmlu\n"
        "  resourceMemoryName: cambricon.com/mlu.smlu.vmemory\n"
        "  resourceCoreName: cambricon.com/mlu.smlu.vcore\n");
    ASSERT_TRUE(config) << config.error();
    registry_ = device::MakeRegistry(*config);
    ExtenderOptions eo;
    eo.zone = Zone::Utc();
    eo.node_lock_retry_timeout = std::chrono::seconds(1);
    eo.lock_poll_interval = std::chrono::milliseconds(10);
    extender_ = std::make_unique<Extender>(registry_, index_, *client_, RealClock(), eo, nullptr);
  }
  void TearDown() override { extender_.reset(); }

  void SetVendorLock(const std::string& value) {
    json patch;
    patch["metadata"]["annotations"][kLockKey] = value;
    ASSERT_TRUE(client_->Patch(k8s::resources::kNodes, "", test_support::kNode,
                               k8s::PatchType::kMerge, patch));
  }
  std::optional<std::string> VendorLock() {
    auto n = client_->Get(k8s::resources::kNodes, "", test_support::kNode);
    EXPECT_TRUE(n);
    return n ? k8s::Annotation(*n, kLockKey) : std::nullopt;
  }

  device::Registry registry_;
  device::UsageIndex index_;
  std::unique_ptr<Extender> extender_;
};

TEST_F(ExtenderVendorLockTest, AFailedBindLeavesALockAnotherBindTookMeanwhile) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", "first"}, {"namespace", "default"}};
  pod["spec"]["containers"] = json::array(
      {{{"name", "main"},
        {"image", "mlu"},
        {"resources",
         {{"limits", {{"cambricon.com/vmlu", "1"}, {"cambricon.com/mlu.smlu.vmemory", "8"}}}}}}});
  ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", pod));
  const std::string patch_pod = "PATCH /api/v1/namespaces/default/pods/first";
  // Our lock is taken; before the bind-phase patch another bind's lock replaces it (ours had
  // expired); then the Binding fails, and the bind releases what it took.
  Before(patch_pod, [&] {
    Before(patch_pod, nullptr);
    SetVendorLock(kOtherBind);
  });
  Fail("POST /api/v1/namespaces/default/pods/first/binding", -1);
  HttpReply r = extender_->Bind(json{
      {"PodName", "first"},
      {"PodNamespace", "default"},
      {"Node", test_support::kNode}}.dump());
  json reply = json::parse(r.body);
  EXPECT_NE(reply["Error"].get<std::string>().find("bind"), std::string::npos) << reply;
  EXPECT_EQ(VendorLock(), kOtherBind);
  // The lock this bind wrote, unchanged, is removed.
  Before(patch_pod, nullptr);
  HttpReply again = extender_->Bind(json{
      {"PodName", "first"},
      {"PodNamespace", "default"},
      {"Node", test_support::kNode}}.dump());
  // kOtherBind is in the future: young, so this bind is refused and leaves it.
  EXPECT_NE(json::parse(again.body)["Error"].get<std::string>().find("locked within"),
            std::string::npos)
      << again.body;
  EXPECT_EQ(VendorLock(), kOtherBind);
  // Without a lock on the node, the failing bind takes one and removes it again.
  json clear;
  clear["metadata"]["annotations"][kLockKey] = nullptr;
  ASSERT_TRUE(client_->Patch(k8s::resources::kNodes, "", test_support::kNode,
                             k8s::PatchType::kMerge, clear));
  HttpReply third = extender_->Bind(json{
      {"PodName", "first"},
      {"PodNamespace", "default"},
      {"Node", test_support::kNode}}.dump());
  EXPECT_NE(json::parse(third.body)["Error"].get<std::string>(), "") << third.body;
  EXPECT_EQ(VendorLock(), std::nullopt);
}

}  // namespace
}  // namespace hami::scheduler
