// The pieces hami-sim's two kube-scheduler loops share (sim/scheduling_queue.h,
// sim/worker_pool.h), on their own: the queue's FIFO, backoff doubling, unschedulableQ flush
// and pod informer moves on a FakeClock; the Ready nodes' sample and rotating start; the worker
// pool's one-at-a-time tasks per key.
#include "sim/scheduling_queue.h"

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "scheduling_test_util.h"
#include "sim/worker_pool.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

json PendingPod(const std::string& name, const std::string& uid) {
  return {{"metadata", {{"namespace", "default"}, {"name", name}, {"uid", uid}}},
          {"spec", {{"schedulerName", "hami-scheduler"}}}};
}

SchedulingQueueOptions Options() {
  SchedulingQueueOptions o;
  o.initial_backoff = milliseconds(100);
  o.max_backoff = milliseconds(300);
  return o;
}

class SchedulingQueueTest : public ::testing::Test {
 protected:
  SchedulingQueueTest() { q_.Start(); }

  FakeClock clock_;
  SchedulingQueue q_{Options(), clock_};
  QueuedPod* s_ = nullptr;  // what the last Observe saw
  std::string key_;         // what the last Pop gave
};

TEST_F(SchedulingQueueTest, PodsPopInArrivalOrderAndFailuresBackOffDoublingUpToTheCap) {
  EXPECT_EQ(q_.Observe("default/b", PendingPod("b", "1"), &s_), SchedulingQueue::Seen::kAdded);
  EXPECT_EQ(q_.Observe("default/a", PendingPod("a", "2"), &s_), SchedulingQueue::Seen::kAdded);
  ASSERT_TRUE(q_.Pop(key_));
  EXPECT_EQ(key_, "default/b");  // FIFO by arrival, not by name
  ASSERT_TRUE(q_.Pop(key_));
  EXPECT_EQ(key_, "default/a");
  EXPECT_FALSE(q_.Pop(key_));
  EXPECT_FALSE(q_.Idle());  // both in flight

  std::vector<milliseconds> backoffs;
  for (int i = 0; i < 4; ++i) {
    q_.Fail(q_["default/a"], clock_.Now(), "error", /*unschedulable=*/false);
    q_.Done();
    backoffs.push_back(q_["default/a"].rec.backoff);
    EXPECT_FALSE(q_.Pop(key_));  // still backing off
    clock_.Advance(backoffs.back());
    ASSERT_TRUE(q_.Pop(key_));
    EXPECT_EQ(key_, "default/a");
  }
  EXPECT_EQ(backoffs, (std::vector<milliseconds>{milliseconds(100), milliseconds(200),
                                                 milliseconds(300), milliseconds(300)}));
  EXPECT_EQ(q_["default/a"].rec.failures, 4);
  q_.BindDone("default/a", clock_.Now(), "");
  EXPECT_TRUE(q_["default/a"].rec.bound);
  EXPECT_TRUE(q_["default/a"].rec.last_failure.empty());
}

TEST_F(SchedulingQueueTest, AnUnschedulablePodWaitsForAFlushThenHonoursItsBackoff) {
  q_.Observe("default/p", PendingPod("p", "1"), &s_);
  ASSERT_TRUE(q_.Pop(key_));
  EXPECT_FALSE(q_.MovedSincePop());
  q_.Fail(*s_, clock_.Now(), "0/1 nodes are available: 1 Insufficient GPU.", true);
  q_.Done();
  EXPECT_TRUE(q_.ShouldWrite(*s_, "0/1 nodes are available: 1 Insufficient GPU."));
  EXPECT_FALSE(q_.ShouldWrite(*s_, "0/1 nodes are available: 1 Insufficient GPU."));
  EXPECT_EQ(q_.unschedulable().size(), 1u);
  EXPECT_TRUE(q_.Idle());  // unschedulable pods do not count
  clock_.Advance(milliseconds(500));
  EXPECT_FALSE(q_.Pop(key_));  // past its backoff, but no event and no periodic flush yet

  q_.RequestFlush();  // a cluster event
  EXPECT_TRUE(q_.MovedSincePop());
  ASSERT_TRUE(q_.Pop(key_));
  EXPECT_EQ(key_, "default/p");
  EXPECT_TRUE(q_.unschedulable().empty());

  // Flushed while its backoff lasts: it waits in the backoffQ.
  q_.Fail(*s_, clock_.Now(), "again", true);
  q_.Done();
  q_.RequestFlush();
  EXPECT_FALSE(q_.Pop(key_));
  EXPECT_EQ(q_["default/p"].where, PodWhere::kBackoff);
  clock_.Advance(milliseconds(200));
  ASSERT_TRUE(q_.Pop(key_));

  // The periodic flush (60 s by default) needs no event.
  q_.Fail(*s_, clock_.Now(), "again", true);
  q_.Done();
  clock_.Advance(std::chrono::seconds(61));
  ASSERT_TRUE(q_.Pop(key_));
}

TEST_F(SchedulingQueueTest, APodBoundElsewhereLeavesAndANewPodUnderItsNameStartsAfresh) {
  q_.Observe("default/p", PendingPod("p", "1"), &s_);
  json bound = PendingPod("p", "1");
  bound["spec"]["nodeName"] = "node-a";
  EXPECT_EQ(q_.Observe("default/p", bound, &s_), SchedulingQueue::Seen::kLeft);
  EXPECT_EQ(s_->where, PodWhere::kBound);
  EXPECT_TRUE(s_->rec.bound);
  EXPECT_FALSE(q_.Pop(key_));
  EXPECT_TRUE(q_.Idle());

  EXPECT_EQ(q_.Observe("default/p", PendingPod("p", "2"), &s_), SchedulingQueue::Seen::kAdded);
  EXPECT_FALSE(s_->rec.bound);
  EXPECT_EQ(q_.Observe("default/p", PendingPod("p", "2"), &s_), SchedulingQueue::Seen::kPending);
  q_.Deleted("default/p");
  EXPECT_EQ(s_->where, PodWhere::kGone);
  EXPECT_FALSE(q_.Pop(key_));

  json finished = PendingPod("q_", "3");
  finished["status"]["phase"] = "Succeeded";
  EXPECT_EQ(q_.Observe("default/q_", finished, &s_), SchedulingQueue::Seen::kIgnored);
  EXPECT_EQ(q_.Records().size(), 1u);
}

TEST(ReadyNodesTest, BelowAHundredEveryNodeInNameOrderAboveASampleFromARotatingStart) {
  ReadyNodes few;
  for (const char* n : {"n-b", "n-a", "n-c"}) few.Update(testutil::ReadyNode(n));
  json not_ready = testutil::ReadyNode("n-d");
  not_ready["status"]["conditions"][0]["status"] = "False";
  few.Update(not_ready);
  EXPECT_EQ(few.Sample(), (std::vector<std::string>{"n-a", "n-b", "n-c"}));
  few.Advance(2, 3);  // below 100 nodes the start stays put
  EXPECT_EQ(few.All(), (std::vector<std::string>{"n-a", "n-b", "n-c"}));
  few.Erase(testutil::ReadyNode("n-b"));
  EXPECT_EQ(few.All(), (std::vector<std::string>{"n-a", "n-c"}));

  ReadyNodes many;
  for (int i = 0; i < 200; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "n-%03d", i);
    many.Update(testutil::ReadyNode(name));
  }
  std::vector<std::string> first = many.Sample();  // 100 of 200 (kube-scheduler's share)
  ASSERT_EQ(first.size(), 100u);
  EXPECT_EQ(first.front(), "n-000");
  std::vector<std::string> second = many.Sample();
  ASSERT_EQ(second.size(), 100u);
  EXPECT_EQ(second.front(), "n-100");

  ReadyNodes all;
  for (int i = 0; i < 200; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "n-%03d", i);
    all.Update(testutil::ReadyNode(name));
  }
  EXPECT_EQ(all.All().front(), "n-000");
  all.Advance(7, 200);
  std::vector<std::string> rotated = all.All();
  ASSERT_EQ(rotated.size(), 200u);
  EXPECT_EQ(rotated.front(), "n-007");
  EXPECT_EQ(rotated.back(), "n-006");
}

TEST(WorkerPoolTest, TasksUnderOneKeyRunOneAtATimeInOrderWhileOthersRun) {
  WorkerPool<NoWorkerContext> pool;
  pool.Start(4);
  std::promise<void> gate, a2_ran, b_ran;
  std::shared_future<void> gate_open = gate.get_future().share();
  std::vector<std::string> order;  // written by the "a" tasks, one at a time
  pool.SubmitSerial("a", [&](NoWorkerContext&) {
    gate_open.wait();
    order.push_back("a1");
    pool.SerialDone("a");
  });
  pool.SubmitSerial("a", [&](NoWorkerContext&) {
    order.push_back("a2");
    pool.SerialDone("a");
    a2_ran.set_value();
  });
  pool.Submit([&](NoWorkerContext&) { b_ran.set_value(); });
  b_ran.get_future().wait();  // another task runs while "a" is held up
  EXPECT_TRUE(order.empty());
  gate.set_value();
  a2_ran.get_future().wait();
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "a2"}));
  pool.Stop();
}

}  // namespace
}  // namespace hami::sim
