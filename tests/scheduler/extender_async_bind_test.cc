// Extender::BindAsync: binds queued on a locked node return at once and hold no thread; their
// retries arrive as tasks on the executor, they are answered in turn once the lock is free, and
// Stop() answers the rest.
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "k8s/object.h"
#include "protocol/keys.h"
#include "protocol/node_lock.h"
#include "scheduler/extender.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

// Tasks posted by the extender, run by the test thread when it drains them.
class ManualExecutor {
 public:
  Extender::Executor executor() {
    return [this](std::function<void()> task) {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
      ++posted_;
    };
  }
  // Runs posted tasks until `done()` or 10 s; false on timeout.
  bool RunUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::function<void()> task;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!tasks_.empty()) {
          task = std::move(tasks_.front());
          tasks_.pop_front();
        }
      }
      if (task) {
        task();
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // poll interval only
      }
    }
    return true;
  }
  size_t posted() {
    std::lock_guard<std::mutex> lock(mu_);
    return posted_;
  }

 private:
  std::mutex mu_;
  std::deque<std::function<void()>> tasks_;
  size_t posted_ = 0;
};

class AsyncBindTest : public testing::RegistrarTest {
 protected:
  void SetUp() override {
    testing::RegistrarTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", testing::Node("node-1")).ok());
    ASSERT_TRUE(registrar_->RunOnce().ok());
    for (const char* name : {"holder", "a", "b", "c"}) {
      ASSERT_TRUE(
          client_->Create(k8s::resources::kPods, "default", testing::GpuPod(name, 1000)).ok());
    }
    SetLock(protocol::NodeLockValue(std::chrono::system_clock::now(), Zone::Utc(), "default",
                                    "holder"));
    ExtenderOptions eo;
    eo.zone = Zone::Utc();
    eo.node_lock_retry_timeout = std::chrono::seconds(60);
    eo.lock_poll_interval = std::chrono::milliseconds(5);
    eo.record_events = false;
    ext_ = std::make_unique<Extender>(registry_, index_, *client_, RealClock(), eo, nullptr);
    ext_->SetExecutor(executor_.executor());
  }

  void SetLock(const std::optional<std::string>& value) {
    json v = value ? json(*value) : json(nullptr);
    json patch = {{"metadata", {{"annotations", {{std::string(protocol::kNodeLockKey), v}}}}}};
    ASSERT_TRUE(
        client_->Patch(k8s::resources::kNodes, "", "node-1", k8s::PatchType::kMerge, patch).ok());
  }

  void BindAsync(const std::string& pod) {
    json args = {{"PodName", pod}, {"PodNamespace", "default"}, {"PodUID", ""}, {"Node", "node-1"}};
    ext_->BindAsync(args.dump(), [this, pod](HttpReply r) {
      std::lock_guard<std::mutex> lock(mu_);
      replies_.emplace_back(pod, json::parse(r.body).value("Error", "?"));
    });
  }
  size_t answered() {
    std::lock_guard<std::mutex> lock(mu_);
    return replies_.size();
  }

  ManualExecutor executor_;
  std::unique_ptr<Extender> ext_;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> replies_;  // pod, Error
};

TEST_F(AsyncBindTest, QueuedBindsHoldNoThreadAndGoInTurn) {
  for (const char* pod : {"a", "b", "c"}) BindAsync(pod);  // each returns at once
  EXPECT_EQ(answered(), 0u);
  // The first in line retries through the executor (this thread) while the lock is held.
  ASSERT_TRUE(executor_.RunUntil([&] { return executor_.posted() >= 5; }));
  EXPECT_EQ(answered(), 0u);
  SetLock(std::nullopt);
  ASSERT_TRUE(executor_.RunUntil([&] { return answered() >= 1; }));
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(replies_[0], (std::pair<std::string, std::string>{"a", ""}));
  }
  EXPECT_EQ(client_->Get(k8s::resources::kPods, "default", "a")->at("spec").value("nodeName", ""),
            "node-1");
  // a holds the lock now (the device plugin would release it): b waits; Stop answers b and c.
  EXPECT_TRUE(protocol::NodeLockOwnedBy(
      *k8s::Annotation(*client_->Get(k8s::resources::kNodes, "", "node-1"),
                       std::string(protocol::kNodeLockKey)),
      "default", "a"));
  ext_->Stop();
  ASSERT_TRUE(executor_.RunUntil([&] { return answered() == 3; }));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(replies_[1].second, "scheduler is shutting down");
  EXPECT_EQ(replies_[2].second, "scheduler is shutting down");
}

TEST_F(AsyncBindTest, TheWaitEndsAtTheRetryTimeout) {
  ext_.reset();
  ExtenderOptions eo;
  eo.zone = Zone::Utc();
  eo.node_lock_retry_timeout = std::chrono::milliseconds(50);
  eo.lock_poll_interval = std::chrono::milliseconds(5);
  eo.record_events = false;
  ext_ = std::make_unique<Extender>(registry_, index_, *client_, RealClock(), eo, nullptr);
  ext_->SetExecutor(executor_.executor());
  BindAsync("a");
  BindAsync("b");
  ASSERT_TRUE(executor_.RunUntil([&] { return answered() == 2; }));
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [pod, error] : replies_) {
    EXPECT_NE(error.find("holder"), std::string::npos) << pod << ": " << error;
  }
}

}  // namespace
}  // namespace hami::scheduler
