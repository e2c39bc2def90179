// --async-decision-write: /filter answers once the decision is counted, the patch that writes it
// to the pod runs on the extender's writer thread, and the pod's bind waits for that write. The
// bind sees the written decision, a failed write fails the bind (never a bind without a decision
// on the pod) and takes the pod out of the index, and Stop() writes every answered decision.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/object.h"
#include "scheduler/extender.h"
#include "scheduler/registration.h"
#include "sim/apiserver/apiserver.h"
#include "support/wait_for.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using test_support::WaitFor;

// node-1 (two V100s of 32768 MiB) registered; an extender with async_decision_write and one
// writer thread (a held write holds the ones queued behind it); requests named in fail_ are
// answered 500 by the API server that many times (-1: always).
class AsyncWriteTest : public testing::NodeOneExtenderTest {
 protected:
  AsyncWriteTest() {
    extender_options_.async_decision_write = true;
    extender_options_.decision_writers = 1;
    api_options_.fail_request = [this](const std::string& method, const std::string& path) {
      std::unique_lock<std::mutex> lock(mu_);
      if (hold_ == method + " " + path) {  // held until Let() (once)
        hold_.clear();
        lock.unlock();
        arrived_.Open();
        let_.Wait();
        lock.lock();
      }
      int& left = fail_[method + " " + path];
      if (left == 0) return false;
      if (left > 0) --left;
      return true;
    };
  }
  ~AsyncWriteTest() override {
    extender_.reset();
    if (api_) api_->Stop();  // the hook's state goes before the server the base owns
  }

  json Bind(const std::string& pod) {
    HttpReply r = extender_->Bind(
        json{{"PodName", pod}, {"PodNamespace", "default"}, {"Node", "node-1"}}.dump());
    return json::parse(r.body);
  }
  void Fail(const std::string& request, int times) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_[request] = times;
  }
  // The next `request` waits in the API server until Let(); Held() waits until it arrived.
  void Hold(const std::string& request) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = request;
  }
  void Held() { arrived_.Wait(); }
  void Let() { let_.Open(); }
  // A pod of `mem` MiB filtered onto node-1 with its decision write held in the API server.
  json FilterWithTheWriteHeld(const std::string& name, int mem) {
    json pod = Create(name, mem);
    Hold("PATCH /api/v1/namespaces/default/pods/" + name);
    EXPECT_EQ(Filter(pod)["NodeNames"], json::array({"node-1"}));
    Held();  // the decision write is in the API server now, and stays there until Let()
    return pod;
  }

  std::mutex mu_;
  std::map<std::string, int> fail_;
  std::string hold_;
  test_support::Gate arrived_;  // the held request is in the API server
  test_support::Gate let_;      // Let() was called
};

TEST_F(AsyncWriteTest, TheBindSeesTheDecisionTheFilterAnsweredBeforeWriting) {
  json pod = Create("demo", 3000);
  json res = Filter(pod);
  ASSERT_EQ(res["NodeNames"], json::array({"node-1"}));
  EXPECT_EQ(res.value("Error", ""), "");
  EXPECT_EQ(UsedMem(), 3000);  // counted when answered, whether or not written yet
  EXPECT_EQ(Bind("demo"), json::parse(R"({"Error":""})"));
  json got = Get("demo");
  auto annos = k8s::Annotations(got);
  EXPECT_EQ(annos["hami.io/vgpu-node"], "node-1");
  EXPECT_EQ(annos["hami.io/bind-phase"], "allocating");
  EXPECT_NE(annos["hami.io/vgpu-devices-to-allocate"], "");
  EXPECT_EQ(got["spec"].value("nodeName", ""), "node-1");
  EXPECT_EQ(UsedMem(), 3000);
}

TEST_F(AsyncWriteTest, AFailedWriteFailsTheBindAndUncountsThePod) {
  json pod = Create("demo", 3000);
  Fail("PATCH /api/v1/namespaces/default/pods/demo", 1);
  ASSERT_EQ(Filter(pod)["NodeNames"], json::array({"node-1"}));
  json bound = Bind("demo");
  const std::string error = bound.value("Error", "");
  EXPECT_NE(error.find("decision was not written"), std::string::npos) << error;
  EXPECT_NE(error.find("patch pod annotations"), std::string::npos) << error;
  json got = Get("demo");
  EXPECT_FALSE(k8s::Annotation(got, "hami.io/vgpu-node").has_value());
  EXPECT_EQ(got["spec"].value("nodeName", ""), "");
  EXPECT_EQ(UsedMem(), 0);
  // kube-scheduler schedules the pod again: this time the write lands and the bind goes on.
  ASSERT_EQ(Filter(pod)["NodeNames"], json::array({"node-1"}));
  EXPECT_EQ(Bind("demo"), json::parse(R"({"Error":""})"));
  EXPECT_EQ(k8s::Annotation(Get("demo"), "hami.io/vgpu-node"), "node-1");
  EXPECT_EQ(UsedMem(), 3000);
}

// kube-scheduler retries a pod's filter while the first one's write is still on its way: the
// retry waits for it (the pod's index claim is the write's until it lands), then decides with the
// pod counted once.
TEST_F(AsyncWriteTest, ARetriedFilterWaitsForTheWriteInFlight) {
  json pod = FilterWithTheWriteHeld("demo", 3000);
  json retried;
  std::thread retry([&] { retried = Filter(pod); });
  EXPECT_TRUE(WaitFor([&] { return extender_->FiltersWaitingForTheirPod() == 1; }));
  EXPECT_FALSE(k8s::Annotation(Get("demo"), "hami.io/vgpu-node").has_value());
  Let();
  retry.join();
  EXPECT_EQ(retried["NodeNames"], json::array({"node-1"}));
  EXPECT_EQ(extender_->FiltersWaitingForTheirPod(), 0u);
  EXPECT_EQ(Bind("demo"), json::parse(R"({"Error":""})"));
  EXPECT_EQ(k8s::Annotation(Get("demo"), "hami.io/vgpu-node"), "node-1");
  EXPECT_EQ(UsedMem(), 3000);
}

// A bind that comes while the decision is still being written is parked: BindAsync returns at
// once (the HTTP worker is free), and the reply comes once the write has landed.
TEST_F(AsyncWriteTest, ABindWaitingForTheWriteHoldsNoThread) {
  FilterWithTheWriteHeld("demo", 3000);
  std::mutex mu;
  std::optional<HttpReply> reply;
  extender_->BindAsync(
      json{{"PodName", "demo"}, {"PodNamespace", "default"}, {"Node", "node-1"}}.dump(),
      [&](HttpReply r) {
        std::lock_guard<std::mutex> lock(mu);
        reply = std::move(r);
      });
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_FALSE(reply.has_value());  // returned without an answer: parked, not waiting
  }
  Let();
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return reply.has_value();
  }));
  EXPECT_EQ(json::parse(reply->body), json::parse(R"({"Error":""})"));
  EXPECT_EQ(k8s::Annotation(Get("demo"), "hami.io/bind-phase"), "allocating");
}

TEST_F(AsyncWriteTest, StopWritesEveryAnsweredDecision) {
  for (int i = 0; i < 5; ++i) {
    const std::string name = "p" + std::to_string(i);
    ASSERT_EQ(Filter(Create(name, 1000))["NodeNames"], json::array({"node-1"})) << name;
  }
  extender_->Stop();
  for (int i = 0; i < 5; ++i) {
    const std::string name = "p" + std::to_string(i);
    EXPECT_EQ(k8s::Annotation(Get(name), "hami.io/vgpu-node"), "node-1") << name;
  }
  EXPECT_EQ(UsedMem(), 5000);
}

// The HTTP event loop answers /filter itself in this mode (Extender::FilterWithoutWaiting) and
// hands a filter that would wait to a worker: a retry of a pod whose write is in flight, and the
// simulation form. Handed over, nothing of the call has happened yet: the worker's Filter is the
// whole call.
TEST_F(AsyncWriteTest, AFilterThatWouldWaitIsLeftForAThreadThatMayWait) {
  json other = Create("other", 1000);
  std::optional<HttpReply> r = extender_->FilterWithoutWaiting(FilterBody(other));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(json::parse(r->body)["NodeNames"], json::array({"node-1"}));
  json pod = FilterWithTheWriteHeld("demo", 3000);
  EXPECT_FALSE(extender_->FilterWithoutWaiting(FilterBody(pod)).has_value());
  EXPECT_EQ(extender_->FiltersWaitingForTheirPod(), 0u);  // it did not wait either
  EXPECT_EQ(UsedMem(), 4000);                             // nor take demo out of the index
  const std::string simulation =
      json{{"Pod", Create("sim", 1000)},
           {"Nodes", {{"items", json::array({testing::Node("node-1")})}}}}
          .dump();
  EXPECT_FALSE(extender_->FilterWithoutWaiting(simulation).has_value());
  json simulated = json::parse(extender_->Filter(simulation).body);
  ASSERT_EQ(simulated["Nodes"]["items"].size(), 1u) << simulated.dump();
  EXPECT_EQ(simulated["Nodes"]["items"][0]["metadata"]["name"], "node-1");
  Let();
  ASSERT_TRUE(
      WaitFor([&] { return k8s::Annotation(Get("demo"), "hami.io/vgpu-node").has_value(); }));
  ASSERT_TRUE(
      WaitFor([&] { return extender_->FilterWithoutWaiting(FilterBody(pod)).has_value(); }));
  EXPECT_EQ(UsedMem(), 4000);
}

// Without --async-decision-write every filter writes its decision before it answers: none is
// answered without waiting, and the refusal changes nothing.
class SyncWriteTest : public testing::NodeOneExtenderTest {};

TEST_F(SyncWriteTest, NoFilterIsAnsweredWithoutWaiting) {
  json pod = Create("demo", 3000);
  EXPECT_FALSE(extender_->FilterWithoutWaiting(FilterBody(pod)).has_value());
  EXPECT_FALSE(k8s::Annotation(Get("demo"), "hami.io/vgpu-node").has_value());
  EXPECT_EQ(UsedMem(), 0);
  EXPECT_EQ(Filter(pod)["NodeNames"], json::array({"node-1"}));
  EXPECT_EQ(k8s::Annotation(Get("demo"), "hami.io/vgpu-node"), "node-1");
}

// The BindingFailed event of a failed write names the pod as kubectl and `kubectl hami explain`
// look it up: kind Pod and the pod's UID.
class AsyncWriteEventsTest : public AsyncWriteTest {
 protected:
  AsyncWriteEventsTest() { extender_options_.record_events = true; }
};

TEST_F(AsyncWriteEventsTest, AFailedWriteIsReportedOnThePod) {
  json pod = Create("demo", 3000);
  Fail("PATCH /api/v1/namespaces/default/pods/demo", 1);
  ASSERT_EQ(Filter(pod)["NodeNames"], json::array({"node-1"}));
  EXPECT_NE(Bind("demo").value("Error", "").find("decision was not written"), std::string::npos);
  extender_->FlushEvents();
  auto events = client_->ListAll(k8s::resources::kEvents, "default", {});
  ASSERT_TRUE(events.ok());
  int found = 0;
  for (const json& e : events->items) {
    if (e.value("reason", "") != "BindingFailed") continue;
    ++found;
    EXPECT_EQ(e["involvedObject"]["kind"], "Pod");
    EXPECT_EQ(e["involvedObject"]["name"], "demo");
    EXPECT_EQ(e["involvedObject"]["uid"], k8s::Uid(pod));
    EXPECT_NE(e.value("message", "").find("decision was not written"), std::string::npos);
  }
  EXPECT_EQ(found, 1);
}

// The async writer's bounds, small: max_queued_writes and max_failed_writes.
template <size_t kQueued, size_t kFailed>
class AsyncWriteBoundsTest : public AsyncWriteTest {
 protected:
  AsyncWriteBoundsTest() {
    extender_options_.max_queued_writes = kQueued;
    extender_options_.max_failed_writes = kFailed;
  }
};

// A writer that far behind (the API server slow or down): the filter writes its decision itself
// before answering, so answered-but-unwritten decisions stay at max_queued_writes.
using AsyncWriteQueueTest = AsyncWriteBoundsTest<1, 4096>;

TEST_F(AsyncWriteQueueTest, AFilterPastTheQueueBoundWritesItsOwnDecision) {
  json a = Create("a", 1000);
  json b = Create("b", 1000);
  json c = Create("c", 1000);
  Hold("PATCH /api/v1/namespaces/default/pods/a");
  ASSERT_EQ(Filter(a)["NodeNames"], json::array({"node-1"}));
  Held();  // a's write is in the API server; the queue is empty
  ASSERT_EQ(Filter(b)["NodeNames"], json::array({"node-1"}));  // queued behind a
  // Past the bound the filter writes its own decision: not without waiting.
  EXPECT_FALSE(extender_->FilterWithoutWaiting(FilterBody(c)).has_value());
  ASSERT_EQ(Filter(c)["NodeNames"], json::array({"node-1"}));  // past the bound: written now
  EXPECT_EQ(k8s::Annotation(Get("c"), "hami.io/vgpu-node"), "node-1");
  EXPECT_FALSE(k8s::Annotation(Get("b"), "hami.io/vgpu-node").has_value());
  EXPECT_FALSE(k8s::Annotation(Get("a"), "hami.io/vgpu-node").has_value());
  Let();
  for (const char* name : {"a", "b"}) {
    EXPECT_TRUE(WaitFor([&] {
      return k8s::Annotation(Get(name), "hami.io/vgpu-node").has_value();
    })) << name;
  }
  EXPECT_EQ(UsedMem(), 3000);
}

// Past max_failed_writes the oldest failure is forgotten, whatever the pods' names; its pod's
// bind still fails, on the decision missing from the pod.
using AsyncWriteFailuresTest = AsyncWriteBoundsTest<1024, 2>;

TEST_F(AsyncWriteFailuresTest, TheOldestFailedWriteIsForgottenFirst) {
  json z = Create("z", 1000);
  json a = Create("a", 1000);
  json m = Create("m", 1000);
  for (const char* name : {"z", "a", "m"}) {
    Fail(std::string("PATCH /api/v1/namespaces/default/pods/") + name, 1);
  }
  for (const json* pod : {&z, &a, &m})
    ASSERT_EQ(Filter(*pod)["NodeNames"], json::array({"node-1"}));
  // m's bind waits for m's write, the last: all three have failed by its answer.
  EXPECT_NE(Bind("m").value("Error", "").find("decision was not written"), std::string::npos);
  EXPECT_NE(Bind("a").value("Error", "").find("decision was not written"), std::string::npos);
  const std::string z_error = Bind("z").value("Error", "");
  EXPECT_EQ(z_error.find("decision was not written"), std::string::npos) << z_error;
  // Still no bind without a decision on the pod.
  EXPECT_NE(z_error.find("has no decision for node \"node-1\""), std::string::npos) << z_error;
  EXPECT_EQ(Get("z")["spec"].value("nodeName", ""), "");
  EXPECT_FALSE(k8s::Annotation(Get("z"), "hami.io/vgpu-node").has_value());
}

// Several writers: a write held in the API server holds only its own pod; the next pod's write
// lands meanwhile, and that pod's bind goes on (with one writer it would wait for the held one).
class AsyncWritersTest : public AsyncWriteTest {
 protected:
  AsyncWritersTest() { extender_options_.decision_writers = 2; }
};

TEST_F(AsyncWritersTest, AHeldWriteHoldsOnlyItsOwnPod) {
  FilterWithTheWriteHeld("a", 1000);
  json b = Create("b", 1000);
  ASSERT_EQ(Filter(b)["NodeNames"], json::array({"node-1"}));
  if (!WaitFor([&] { return k8s::Annotation(Get("b"), "hami.io/vgpu-node").has_value(); })) {
    Let();  // b's bind would wait for a's write
    FAIL() << "b's decision write waited for a's";
  }
  EXPECT_EQ(Bind("b"), json::parse(R"({"Error":""})"));
  EXPECT_FALSE(k8s::Annotation(Get("a"), "hami.io/vgpu-node").has_value());
  Let();
  EXPECT_TRUE(WaitFor([&] { return k8s::Annotation(Get("a"), "hami.io/vgpu-node").has_value(); }));
  EXPECT_EQ(UsedMem(), 2000);
}

}  // namespace
}  // namespace hami::scheduler
