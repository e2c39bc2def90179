// nodelock::TryAcquire and nodelock::Locker against the in-process sim apiserver, on a fake clock:
// who may take the lock (free, own, expired, owner gone) and who may not (a live owner's fresh
// lock, a malformed one); the per-node queue answers pods in turn as the lock frees, ends a wait
// that ran out on the injected clock, and answers everyone on Stop; transient API errors are
// retried under the policy's recorded waits, then given up with a message naming node and call.
#include "nodelock/acquire.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fixture.h"
#include "nodelock/release.h"

namespace hami::nodelock {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

class AcquireTest : public NodeLockTest {
 protected:
  AcquireOptions Options() {
    AcquireOptions o;
    o.zone = Zone::Utc();
    o.retry = retry_;
    return o;
  }
  // TryAcquire for default/<pod> at the clock's time; *why_out gets the busy reason.
  Result<bool> Try(const std::string& pod, std::string* why_out = nullptr) {
    std::string why;
    Result<bool> r = TryAcquire(*client_, kNode, "default", pod, clock_.Now(), Options(), &why);
    if (why_out != nullptr) *why_out = why;
    return r;
  }
};

TEST_F(AcquireTest, WhoMayTakeTheLock) {
  CreatePod("holder");
  struct Case {
    const char* name;
    std::optional<std::string> current;  // the lock before
    SystemTime now;
    bool taken;
    std::optional<std::string> left;  // the lock after
  };
  const SystemTime t = DemoLockTime();
  const Case cases[] = {
      {"free", std::nullopt, t, true, LockOf("demo", t)},
      {"its own: left as is", LockOf("demo", t - minutes(1)), t, true,
       LockOf("demo", t - minutes(1))},
      {"a live owner's fresh lock", LockOf("holder", t), t + minutes(5), false,
       LockOf("holder", t)},
      {"a live owner's expired lock", LockOf("holder", t), t + minutes(5) + seconds(1), true,
       LockOf("demo", t + minutes(5) + seconds(1))},
      {"an owner pod that is gone", LockOf("ghost", t), t, true, LockOf("demo", t)},
      {"a fresh legacy lock", "2026-08-21T10:00:05Z", t + minutes(1), false,
       "2026-08-21T10:00:05Z"},
      {"an expired legacy lock", "2026-08-21T10:00:05Z", t + minutes(6), true,
       LockOf("demo", t + minutes(6))},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SetLock(c.current);
    clock_.Set(c.now);
    std::string why;
    Result<bool> r = Try("demo", &why);
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(*r, c.taken);
    EXPECT_EQ(Lock(), c.left);
    if (!c.taken) {
      EXPECT_EQ(why.find("node node-1 has been locked within 5m0s by "), 0u) << why;
    }
  }
}

TEST_F(AcquireTest, BusyNamesTheHolderAndSinceWhen) {
  CreatePod("holder");
  SetLock(LockOf("holder"));
  clock_.Advance(seconds(28));
  std::string why;
  Result<bool> r = Try("demo", &why);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(*r);
  EXPECT_EQ(why,
            "node node-1 has been locked within 5m0s by default/holder since "
            "2026-08-21T10:00:05Z");
}

TEST_F(AcquireTest, AMalformedLockIsAnErrorAndLeftAlone) {
  SetLock("yesterday,default,demo");
  Result<bool> r = Try("demo");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().rfind("node node-1: hami.io/mutex.lock \"yesterday,default,demo\"", 0), 0u)
      << r.error();
  EXPECT_EQ(Lock(), "yesterday,default,demo");
}

// The write is conditional on the resourceVersion read: a pod that takes the lock between the
// read and the write wins, and the re-read finds it busy.
TEST_F(AcquireTest, ARacingWriterWinsAndTheReReadSeesIt) {
  CreatePod("other");
  Before(kPatchNode, [this] {
    Before(kPatchNode, nullptr);
    SetLock(LockOf("other"));
  });
  const int gets = Hits(kGetNode);
  std::string why;
  Result<bool> r = Try("demo", &why);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(*r);
  EXPECT_EQ(Hits(kGetNode) - gets, 2);  // read, 409, re-read
  EXPECT_EQ(Lock(), LockOf("other"));
  EXPECT_NE(why.find("by default/other"), std::string::npos) << why;
}

// A cache (the scheduler's node informer) that shows the lock free saves the read: the write is
// conditional on the version the cache saw.
TEST_F(AcquireTest, ACacheShowingTheLockFreeSavesTheRead) {
  auto node = client_->Get(k8s::resources::kNodes, "", kNode);
  ASSERT_TRUE(node);
  AcquireOptions o = Options();
  o.seen = [rv = k8s::ResourceVersion(*node)](std::string_view name) -> std::optional<SeenNode> {
    EXPECT_EQ(name, kNode);
    return SeenNode{rv, std::nullopt};
  };
  const int gets = Hits(kGetNode);
  std::string why;
  Result<bool> r = TryAcquire(*client_, kNode, "default", "demo", clock_.Now(), o, &why);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(*r);
  EXPECT_EQ(Hits(kGetNode) - gets, 0);
  EXPECT_EQ(Lock(), LockOf("demo"));
}

// A cache behind the API server costs a 409 and the usual read; one that shows the lock held
// (by another pod, or by this very pod) is never taken for an answer: the node is read.
TEST_F(AcquireTest, AStaleCacheIsReadPast) {
  CreatePod("other");
  auto seen_as = [](const k8s::Json& node, std::optional<std::string> lock) {
    return [rv = k8s::ResourceVersion(node), lock](std::string_view) -> std::optional<SeenNode> {
      return SeenNode{rv, lock};
    };
  };
  auto try_with = [&](AcquireOptions o, std::string* why) {
    return TryAcquire(*client_, kNode, "default", "demo", clock_.Now(), o, why);
  };
  // Free in the cache, taken by another pod since.
  auto node = client_->Get(k8s::resources::kNodes, "", kNode);
  ASSERT_TRUE(node);
  AcquireOptions o = Options();
  o.seen = seen_as(*node, std::nullopt);
  SetLock(LockOf("other"));
  int gets = Hits(kGetNode);
  std::string why;
  Result<bool> r = try_with(o, &why);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(*r);
  EXPECT_EQ(Hits(kGetNode) - gets, 1);  // 409, read
  EXPECT_EQ(Lock(), LockOf("other"));
  EXPECT_NE(why.find("by default/other"), std::string::npos) << why;
  // Held by another pod in the cache, given back since: read, and taken.
  node = client_->Get(k8s::resources::kNodes, "", kNode);
  ASSERT_TRUE(node);
  o.seen = seen_as(*node, LockOf("other"));
  SetLock(std::nullopt);
  gets = Hits(kGetNode);
  r = try_with(o, &why);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(*r);
  EXPECT_EQ(Hits(kGetNode) - gets, 1);
  EXPECT_EQ(Lock(), LockOf("demo"));
  // Held by this pod in the cache, given back since: not taken for held, read and written.
  node = client_->Get(k8s::resources::kNodes, "", kNode);
  ASSERT_TRUE(node);
  o.seen = seen_as(*node, LockOf("demo"));
  SetLock(std::nullopt);
  r = try_with(o, &why);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(*r);
  EXPECT_EQ(Lock(), LockOf("demo"));
}

TEST_F(AcquireTest, TransientErrorsAreRetriedThenGivenUpNamingNodeAndCall) {
  Fail(kGetNode, 2);
  Fail(kPatchNode, 1);
  Result<bool> r = Try("demo");
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(*r);
  EXPECT_EQ(Lock(), LockOf("demo"));
  using std::chrono::milliseconds;
  EXPECT_EQ(TakeSleeps(),
            (std::vector<milliseconds>{milliseconds(50), milliseconds(100), milliseconds(50)}));

  SetLock(std::nullopt);
  Fail(kGetNode, -1);
  r = Try("demo");
  Fail(kGetNode, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().rfind("get node \"node-1\": 500 ", 0), 0u) << r.error();
  EXPECT_NE(r.error().find("(gave up after 4 tries)"), std::string::npos) << r.error();
  EXPECT_EQ(TakeSleeps(), GaveUpWaits());

  Fail(kPatchNode, -1);
  r = Try("demo");
  Fail(kPatchNode, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().rfind("lock node \"node-1\": 500 ", 0), 0u) << r.error();
  EXPECT_NE(r.error().find("(gave up after 4 tries)"), std::string::npos) << r.error();
  EXPECT_EQ(TakeSleeps(), GaveUpWaits());
  EXPECT_EQ(Lock(), std::nullopt);
}

// An owner pod that cannot be read is not taken for gone: only a 404 lets the lock be taken.
TEST_F(AcquireTest, AnUnreadableOwnerKeepsItsLock) {
  SetLock(LockOf("holder"));  // no such pod, but its GET fails
  Fail("GET /api/v1/namespaces/default/pods/holder", -1);
  Result<bool> r = Try("demo");
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(*r);
  EXPECT_EQ(TakeSleeps(), GaveUpWaits());
  Fail("GET /api/v1/namespaces/default/pods/holder", 0);
  r = Try("demo");
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(*r);  // now a 404: gone, taken over
}

// A pod that has ended gets no Allocate: its fresh lock is taken over as a gone pod's is (a
// kubelet that failed the pod while the device plugin was away left it behind).
TEST_F(AcquireTest, AnEndedOwnersLockIsTakenOver) {
  for (auto [phase, owner] : {std::pair<std::string, std::string>{"Failed", "failed"},
                              std::pair<std::string, std::string>{"Succeeded", "done"}}) {
    SCOPED_TRACE(phase);
    CreatePod(owner);
    SetLock(LockOf(owner, clock_.Now()));
    Result<bool> r = Try("demo");
    ASSERT_TRUE(r) << r.error();
    EXPECT_FALSE(*r);  // still Pending: its lock holds
    k8s::Json status = {{"status", {{"phase", phase}}}};
    ASSERT_TRUE(client_->Patch(k8s::resources::kPods, "default", owner, k8s::PatchType::kMerge,
                               status, "status"));
    r = Try("demo");
    ASSERT_TRUE(r) << r.error();
    EXPECT_TRUE(*r);
    EXPECT_EQ(Lock(), LockOf("demo", clock_.Now()));
    SetLock(std::nullopt);
  }
}

// An owner its plugin allocated (bind-phase success) whose lock was not released (the API
// server was away) no longer holds the node; one still allocating, or failed (a pod bound again
// keeps that until the new bind writes allocating), does.
TEST_F(AcquireTest, AnAllocatedOwnersLockIsTakenOver) {
  CreatePod("owner");
  for (const char* phase : {"allocating", "failed"}) {
    SCOPED_TRACE(phase);
    k8s::Json patch;
    patch["metadata"]["annotations"]["hami.io/bind-phase"] = phase;
    ASSERT_TRUE(
        client_->Patch(k8s::resources::kPods, "default", "owner", k8s::PatchType::kMerge, patch));
    SetLock(LockOf("owner", clock_.Now()));
    Result<bool> r = Try("demo");
    ASSERT_TRUE(r) << r.error();
    EXPECT_FALSE(*r);
  }
  k8s::Json done;
  done["metadata"]["annotations"]["hami.io/bind-phase"] = "success";
  ASSERT_TRUE(
      client_->Patch(k8s::resources::kPods, "default", "owner", k8s::PatchType::kMerge, done));
  Result<bool> r = Try("demo");
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(*r);
  EXPECT_EQ(Lock(), LockOf("demo", clock_.Now()));
}

// A Locker whose attempts run inline; the test waits on what they report, never on time.
class LockerTest : public AcquireTest {
 protected:
  void SetUp() override {
    AcquireTest::SetUp();
    LockerOptions o;
    o.acquire = Options();
    o.wait = minutes(10);
    o.poll_interval = std::chrono::milliseconds(1);
    Start(o);
  }
  void TearDown() override { locker_.reset(); }
  void Start(const LockerOptions& o) {
    locker_ = std::make_unique<Locker>(*client_, clock_, o);
    locker_->SetExecutor([this](std::function<void()> task) {
      task();
      std::lock_guard<std::mutex> lock(mu_);
      ++tasks_;
      cv_.notify_all();
    });
  }
  void Queue(const std::string& pod) {
    locker_->AcquireAsync(kNode, "default", pod, [this, pod](Status s) {
      std::lock_guard<std::mutex> lock(mu_);
      answers_.emplace_back(pod, s ? "" : s.error());
      cv_.notify_all();
    });
  }
  // Waits (10 s at most) until `n` pods were answered.
  bool Answered(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return answers_.size() >= n; });
  }
  // Waits (10 s at most) until `n` more polls ran.
  bool Polled(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    const int until = tasks_ + n;
    return cv_.wait_for(lock, seconds(10), [&] { return tasks_ >= until; });
  }
  std::vector<std::pair<std::string, std::string>> Answers() {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_;
  }

  std::unique_ptr<Locker> locker_;
  std::mutex mu_;
  std::condition_variable cv_;
  int tasks_ = 0;
  std::vector<std::pair<std::string, std::string>> answers_;  // pod, error ("" = taken)
};

TEST_F(LockerTest, ContendingPodsTakeTheLockInTurn) {
  for (const char* pod : {"holder", "a", "b", "c"}) CreatePod(pod);
  SetLock(LockOf("holder"));
  Queue("a");
  Queue("b");
  Queue("c");
  ASSERT_TRUE(Polled(3));
  EXPECT_TRUE(Answers().empty());
  const int gets = Hits(kGetNode);
  ASSERT_TRUE(Polled(3));
  EXPECT_LE(Hits(kGetNode) - gets, 4);  // only the first in line reads the node

  SetLock(std::nullopt);  // the holder's device plugin released it
  ASSERT_TRUE(Answered(1));
  EXPECT_EQ(Lock(), LockOf("a"));
  ASSERT_TRUE(Polled(3));  // b now polls a's lock
  EXPECT_EQ(Answers().size(), 1u);

  ASSERT_TRUE(locker_->Release(kNode, "default", "a", LockOf("a")));
  ASSERT_TRUE(Answered(2));
  EXPECT_EQ(Lock(), LockOf("b"));
  ASSERT_TRUE(locker_->Release(kNode, "default", "b"));
  ASSERT_TRUE(Answered(3));
  EXPECT_EQ(Lock(), LockOf("c"));
  using Answer = std::pair<std::string, std::string>;
  EXPECT_EQ(Answers(), (std::vector<Answer>{{"a", ""}, {"b", ""}, {"c", ""}}));
}

TEST_F(LockerTest, AWaitingPodTakesOverOnceTheLockExpires) {
  CreatePod("holder");
  SetLock(LockOf("holder"));
  clock_.Advance(minutes(1));
  Queue("a");
  ASSERT_TRUE(Polled(2));
  EXPECT_TRUE(Answers().empty());
  clock_.Advance(minutes(4) + seconds(1));  // 5m1s since the holder took it
  ASSERT_TRUE(Answered(1));
  EXPECT_EQ(Answers()[0].second, "");
  EXPECT_EQ(Lock(), LockOf("a", DemoLockTime() + minutes(5) + seconds(1)));
}

TEST_F(LockerTest, TheWaitEndsOnTheInjectedClock) {
  LockerOptions o;
  o.acquire = Options();
  o.wait = seconds(25);
  o.poll_interval = std::chrono::milliseconds(1);
  Start(o);
  CreatePod("holder");
  SetLock(LockOf("holder"));
  Queue("a");
  Queue("b");
  ASSERT_TRUE(Polled(2));
  EXPECT_TRUE(Answers().empty());
  clock_.Advance(seconds(26));
  ASSERT_TRUE(Answered(1));
  EXPECT_EQ(Answers()[0], std::make_pair(std::string("a"),
                                         std::string("node node-1 has been locked within 5m0s by "
                                                     "default/holder since 2026-08-21T10:00:05Z")));
  // b's turn starts now, with its own 25 s.
  ASSERT_TRUE(Polled(2));
  EXPECT_EQ(Answers().size(), 1u);
  clock_.Advance(seconds(26));
  ASSERT_TRUE(Answered(2));
  EXPECT_EQ(Answers()[1].first, "b");
  EXPECT_EQ(Lock(), LockOf("holder"));
}

TEST_F(LockerTest, AnErrorAnswersThePodAndTheNextGoesOn) {
  Fail(kGetNode, 4);  // a's four tries
  Queue("a");
  Queue("b");
  ASSERT_TRUE(Answered(2));
  std::map<std::string, std::string>
      answers;  // the inline executor runs b's turn before a's answer
  for (auto& [pod, error] : Answers()) answers[pod] = error;
  EXPECT_EQ(answers["a"].rfind("get node \"node-1\": 500 ", 0), 0u) << answers["a"];
  EXPECT_NE(answers["a"].find("(gave up after 4 tries)"), std::string::npos);
  EXPECT_EQ(answers.at("b"), "");
  EXPECT_EQ(Lock(), LockOf("b"));
}

TEST_F(LockerTest, StopAnswersEveryQueuedPod) {
  CreatePod("holder");
  SetLock(LockOf("holder"));
  Queue("a");
  Queue("b");
  ASSERT_TRUE(Polled(1));
  locker_->Stop("scheduler is shutting down");
  ASSERT_TRUE(Answered(2));
  for (const auto& [pod, error] : Answers()) {
    // a: the stop, or its last busy reason when the stop came while it polled.
    EXPECT_EQ(error.empty(), false) << pod;
    if (pod == "b") {
      EXPECT_EQ(error, "scheduler is shutting down");
    }
  }
  Queue("c");  // after Stop: answered at once
  ASSERT_TRUE(Answered(3));
  EXPECT_EQ(Answers()[2],
            std::make_pair(std::string("c"), std::string("scheduler is shutting down")));
  EXPECT_EQ(Lock(), LockOf("holder"));
}

// The release is conditional on the owner: after another pod took an expired lock over, the
// first owner's release (with the value it read, or without) leaves the new owner's lock.
TEST_F(LockerTest, AReleaseAfterATakeOverLeavesTheNewOwner) {
  CreatePod("a");
  CreatePod("b");
  ASSERT_TRUE(locker_->Acquire(kNode, "default", "a"));
  const std::string a_lock = LockOf("a");
  EXPECT_EQ(Lock(), a_lock);
  clock_.Advance(minutes(6));
  ASSERT_TRUE(locker_->Acquire(kNode, "default", "b"));
  const std::string b_lock = LockOf("b", DemoLockTime() + minutes(6));
  EXPECT_EQ(Lock(), b_lock);
  EXPECT_TRUE(locker_->Release(kNode, "default", "a", a_lock));
  EXPECT_EQ(Lock(), b_lock);
  EXPECT_TRUE(locker_->Release(kNode, "default", "a"));
  EXPECT_EQ(Lock(), b_lock);
  EXPECT_TRUE(locker_->Release(kNode, "default", "b", b_lock));
  EXPECT_EQ(Lock(), std::nullopt);
}

}  // namespace
}  // namespace hami::nodelock
