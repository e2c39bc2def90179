// The fixture of the node-lock tests: the sim API server with node-1 (support/sim_node_test.h), a
// fake clock at the time default/demo's lock (kDemoLock) was taken, a retry policy whose waits are
// recorded instead of slept, and pods to own locks.
#ifndef HAMI_TESTS_NODELOCK_FIXTURE_H_
#define HAMI_TESTS_NODELOCK_FIXTURE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/time_format.h"
#include "k8s/client.h"
#include "support/allocate_env.h"
#include "support/sim_node_test.h"

namespace hami::nodelock {

using test_support::kDemoLock;
using test_support::kGetNode;
using test_support::kNode;
using test_support::kPatchNode;

// When kDemoLock was taken.
inline SystemTime DemoLockTime() {
  return SystemTime(std::chrono::seconds(1787306405));  // 2026-08-21T10:00:05Z
}

class NodeLockTest : public test_support::SimNodeTest {
 protected:
  NodeLockTest() : clock_(DemoLockTime()) {
    retry_.sleep = [this](std::chrono::milliseconds d) {
      std::lock_guard<std::mutex> lock(sleeps_mu_);
      sleeps_.push_back(d);
    };
  }

  void SetLock(const std::optional<std::string>& value) {
    EXPECT_TRUE(test_support::SetNodeLock(*client_, value));
  }
  std::optional<std::string> Lock() {
    auto lock = test_support::NodeLock(*client_);
    EXPECT_TRUE(lock) << lock.error().ToString();
    return lock ? *lock : std::nullopt;
  }
  // A pod default/<name>, so a lock naming it has a live owner.
  void CreatePod(const std::string& name) {
    k8s::Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    pod["metadata"] = {{"name", name}, {"namespace", "default"}};
    pod["spec"]["containers"] = k8s::Json::array({{{"name", "main"}, {"image", "cuda"}}});
    ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", pod));
  }
  // The lock value default/<pod> writes at `t` (UTC).
  static std::string LockOf(const std::string& pod, SystemTime t = DemoLockTime()) {
    return protocol::NodeLockValue(t, Zone::Utc(), "default", pod);
  }
  // The waits the retry policy was asked for, in order; cleared.
  std::vector<std::chrono::milliseconds> TakeSleeps() {
    std::lock_guard<std::mutex> lock(sleeps_mu_);
    std::vector<std::chrono::milliseconds> out;
    out.swap(sleeps_);
    return out;
  }

  FakeClock clock_;
  k8s::RetryPolicy retry_;  // the default attempts and backoff; the waits recorded

 private:
  std::mutex sleeps_mu_;
  std::vector<std::chrono::milliseconds> sleeps_;
};

// The waits of the default policy when every try fails: 50, 100, 200 ms.
inline std::vector<std::chrono::milliseconds> GaveUpWaits() {
  using std::chrono::milliseconds;
  return {milliseconds(50), milliseconds(100), milliseconds(200)};
}

}  // namespace hami::nodelock

#endif  // HAMI_TESTS_NODELOCK_FIXTURE_H_
