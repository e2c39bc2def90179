// The extender and the registration pass against the sim apiserver (in-process, loopback): the
// seed's register annotation gets the handshake, a 1 GPU / 3000 MiB pod is filtered and bound
// with exactly the seed's annotations, racing binds both succeed in turn, stale locks are taken
// over, malformed bodies get an Error.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "protocol/node_lock.h"
#include "scheduler/extender.h"
#include "scheduler/registration.h"
#include "sim/apiserver/apiserver.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using testing::GpuPod;
using testing::kSeedRegister;
using testing::Node;

class ExtenderTest : public testing::RegistrarTest {
 protected:
  std::unique_ptr<Extender> MakeExtender(std::chrono::seconds retry) {
    ExtenderOptions eo;
    eo.zone = Zone::Utc();
    eo.node_lock_retry_timeout = retry;
    eo.lock_poll_interval = std::chrono::milliseconds(10);
    return std::make_unique<Extender>(registry_, index_, *client_, RealClock(), eo, nullptr);
  }

  json CreatePod(const json& pod) {
    auto r = client_->Create(k8s::resources::kPods, "default", pod);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : json();
  }
  json GetNode(const std::string& name) { return *client_->Get(k8s::resources::kNodes, "", name); }
  json GetPod(const std::string& name) {
    return *client_->Get(k8s::resources::kPods, "default", name);
  }
  void AddNode(const std::string& name, const std::string& reg = kSeedRegister) {
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node(name, reg)).ok());
  }
  json Filter(Extender& ext, const json& pod, const std::vector<std::string>& names) {
    HttpReply r = ext.Filter(json{{"Pod", pod}, {"NodeNames", names}}.dump());
    EXPECT_EQ(r.status, 200);
    return json::parse(r.body);
  }
  json Bind(Extender& ext, const std::string& pod, const std::string& node) {
    HttpReply r = ext.Bind(
        json{{"PodName", pod}, {"PodNamespace", "default"}, {"PodUID", ""}, {"Node", node}}.dump());
    EXPECT_EQ(r.status, 200);
    return json::parse(r.body);
  }
};

TEST_F(ExtenderTest, RegistrationWritesHandshakeAndSkipsMalformed) {
  AddNode("node-1");
  AddNode("bad", "not json");
  auto n = registrar_->RunOnce();
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(k8s::Annotation(GetNode("node-1"), "hami.io/node-handshake"),
            "Requesting_2026-08-21 10:00:00");
  EXPECT_EQ(index_.NodeNames(), std::vector<std::string>{"node-1"});
  // A pending Requesting is left alone inside the 60 s window...
  clock_.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_EQ(k8s::Annotation(GetNode("node-1"), "hami.io/node-handshake"),
            "Requesting_2026-08-21 10:00:00");
  // ...and an expired one with allocatable devices does not clean up.
  clock_.Advance(std::chrono::seconds(120));
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_EQ(index_.NodeNames(), std::vector<std::string>{"node-1"});
  // The malformed node got a warning event.
  auto events = client_->List(k8s::resources::kEvents, "", {});
  ASSERT_TRUE(events.ok());
  bool warned = false;
  for (const json& e : events->items) warned |= e.value("type", "") == "Warning";
  EXPECT_TRUE(warned);
}

TEST_F(ExtenderTest, FilterAndBindWriteTheSeedAnnotations) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(5));
  json pod = CreatePod(GpuPod("demo", 3000));
  json res = Filter(*ext, pod, {"node-1", "node-x"});
  EXPECT_EQ(res["Error"], "");
  EXPECT_EQ(res["NodeNames"], json::array({"node-1"}));
  EXPECT_EQ(res["FailedNodes"]["node-x"], "node unregistered");
  json got = GetPod("demo");
  auto annos = k8s::Annotations(got);
  EXPECT_EQ(annos["hami.io/vgpu-node"], "node-1");
  EXPECT_EQ(k8s::Labels(got)["hami.io/vgpu-node"], "node-1");
  EXPECT_TRUE(std::regex_match(annos["hami.io/vgpu-time"], std::regex("[0-9]+")));
  std::regex seed("GPU-[0-9a-f-]+,NVIDIA,3000,0:;");
  EXPECT_TRUE(std::regex_match(annos["hami.io/vgpu-devices-allocated"], seed))
      << annos["hami.io/vgpu-devices-allocated"];
  EXPECT_EQ(annos["hami.io/vgpu-devices-to-allocate"], annos["hami.io/vgpu-devices-allocated"]);
  EXPECT_EQ(index_.PodCount(), 1u);

  json bound = Bind(*ext, "demo", "node-1");
  EXPECT_EQ(bound, json::parse(R"({"Error":""})"));
  got = GetPod("demo");
  annos = k8s::Annotations(got);
  EXPECT_EQ(annos["hami.io/bind-phase"], "allocating");
  EXPECT_TRUE(std::regex_match(annos["hami.io/bind-time"], std::regex("[0-9]+")));
  EXPECT_EQ(got["spec"]["nodeName"], "node-1");
  auto lock = k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock");
  ASSERT_TRUE(lock.has_value());
  EXPECT_TRUE(
      std::regex_match(*lock, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ,default,demo)")))
      << *lock;
}

TEST_F(ExtenderTest, FilterReportsUnfitNodes) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(1));
  json pod = CreatePod(GpuPod("big", 40000));
  json res = Filter(*ext, pod, {"node-1"});
  EXPECT_TRUE(res["NodeNames"].is_null());
  EXPECT_EQ(res["FailedNodes"]["node-1"], "2/2 CardInsufficientMemory");
  EXPECT_FALSE(k8s::Annotation(GetPod("big"), "hami.io/vgpu-node").has_value());
}

// Events are written in the background; after a flush they carry HAMi's message shapes.
TEST_F(ExtenderTest, FilterEventsAreRecordedOffTheRequestPath) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(1));
  ASSERT_EQ(Filter(*ext, CreatePod(GpuPod("fits", 3000)), {"node-1", "node-x"})["NodeNames"],
            json::array({"node-1"}));
  ASSERT_TRUE(Filter(*ext, CreatePod(GpuPod("big", 40000)), {"node-1"})["NodeNames"].is_null());
  ext->FlushEvents();
  auto events = client_->ListAll(k8s::resources::kEvents, "default", {});
  ASSERT_TRUE(events.ok());
  std::map<std::string, std::vector<std::string>> by_pod;  // pod -> "reason: message"
  for (const json& e : events->items) {
    EXPECT_EQ(e["source"]["component"], "hami-scheduler");
    by_pod[e["involvedObject"]["name"]].push_back(e["reason"].get<std::string>() + ": " +
                                                  e["message"].get<std::string>());
  }
  ASSERT_EQ(by_pod["fits"].size(), 1u);
  EXPECT_TRUE(
      std::regex_match(by_pod["fits"][0],
                       std::regex(R"(FilteringSucceed: find fit node\(node-1\), 1 nodes not fit, )"
                                  R"(1 nodes fit\(node-1:[0-9]+\.[0-9]{2}\))")))
      << by_pod["fits"][0];
  EXPECT_EQ(by_pod["big"],
            std::vector<std::string>{"FilteringFailed: 1 nodes CardInsufficientMemory(node-1)"});
}

// The index equals the live pods' annotations: a re-filter that writes nothing (no node fits)
// leaves the allocation the pod's annotations still hold from an earlier decision.
TEST_F(ExtenderTest, RefilterThatWritesNothingKeepsTheAnnotatedAllocation) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(1));
  ASSERT_EQ(Filter(*ext, CreatePod(GpuPod("again", 3000)), {"node-1"})["NodeNames"],
            json::array({"node-1"}));
  ASSERT_EQ(index_.PodCount(), 1u);
  // Its bind failed; kube-scheduler filters it again and no candidate fits this time.
  EXPECT_TRUE(Filter(*ext, GetPod("again"), {"node-x"})["NodeNames"].is_null());
  EXPECT_EQ(index_.PodCount(), 1u);
  // A pod that never had a decision leaves nothing behind.
  EXPECT_TRUE(Filter(*ext, CreatePod(GpuPod("never", 3000)), {"node-x"})["NodeNames"].is_null());
  EXPECT_EQ(index_.PodCount(), 1u);
}

TEST_F(ExtenderTest, RacingBindsBothSucceedInTurn) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(20));
  for (const char* name : {"a", "b"}) {
    json pod = CreatePod(GpuPod(name, 1000));
    ASSERT_EQ(Filter(*ext, pod, {"node-1"})["NodeNames"], json::array({"node-1"}));
  }
  // Plays the device plugin: releases each lock once its owner is bound.
  std::atomic<bool> done{false};
  std::atomic<int> released{0};
  std::thread plugin([&] {
    while (!done) {
      auto lock = k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock");
      if (lock) {
        std::string owner = lock->substr(lock->rfind(',') + 1);
        if (!GetPod(owner)["spec"].value("nodeName", "").empty()) {
          json patch = {{"metadata", {{"annotations", {{"hami.io/mutex.lock", nullptr}}}}}};
          ASSERT_TRUE(
              client_->Patch(k8s::resources::kNodes, "", "node-1", k8s::PatchType::kMerge, patch)
                  .ok());
          ++released;
        }
      }
      std::this_thread::yield();
    }
  });
  json ra, rb;
  std::thread ta([&] { ra = Bind(*ext, "a", "node-1"); });
  std::thread tb([&] { rb = Bind(*ext, "b", "node-1"); });
  ta.join();
  tb.join();
  done = true;
  plugin.join();
  EXPECT_EQ(ra["Error"], "");
  EXPECT_EQ(rb["Error"], "");
  EXPECT_EQ(GetPod("a")["spec"]["nodeName"], "node-1");
  EXPECT_EQ(GetPod("b")["spec"]["nodeName"], "node-1");
  EXPECT_GE(released.load(), 1);
}

// A pod already bound gets no second bind: kube-scheduler binds again when the answer to its
// first Binding was lost. Bound to the same node it is done, with nothing written (bind-phase
// stays the plugin's success, the node lock is not taken); bound elsewhere it fails, naming
// the node.
TEST_F(ExtenderTest, ABindOfAPodAlreadyBoundWritesNothing) {
  AddNode("node-1");
  AddNode("node-2");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(0));
  json pod = CreatePod(GpuPod("p", 1000));
  ASSERT_EQ(Filter(*ext, pod, {"node-1"})["NodeNames"], json::array({"node-1"}));
  ASSERT_EQ(Bind(*ext, "p", "node-1")["Error"], "");
  // Plays the device plugin: allocated, lock released.
  json done = {{"metadata", {{"annotations", {{"hami.io/bind-phase", "success"}}}}}};
  ASSERT_TRUE(
      client_->Patch(k8s::resources::kPods, "default", "p", k8s::PatchType::kMerge, done).ok());
  json unlock = {{"metadata", {{"annotations", {{"hami.io/mutex.lock", nullptr}}}}}};
  ASSERT_TRUE(
      client_->Patch(k8s::resources::kNodes, "", "node-1", k8s::PatchType::kMerge, unlock).ok());
  const std::string rv = GetPod("p")["metadata"]["resourceVersion"];

  EXPECT_EQ(Bind(*ext, "p", "node-1")["Error"], "");
  json again = Bind(*ext, "p", "node-2");
  EXPECT_EQ(again["Error"], "pod default/p is already bound to node \"node-1\"") << again;
  EXPECT_EQ(GetPod("p")["metadata"]["resourceVersion"], rv);
  EXPECT_EQ(k8s::Annotation(GetPod("p"), "hami.io/bind-phase"), "success");
  EXPECT_FALSE(k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock").has_value());
  EXPECT_FALSE(k8s::Annotation(GetNode("node-2"), "hami.io/mutex.lock").has_value());
}

// The API server writes the Binding and its answer is lost (here: a 500 after the write): the
// retry gets 409 "already assigned". The bind succeeds and keeps the node lock for the plugin;
// it used to fail and release the lock, so a second pod could take the node while the plugin was
// about to allocate the first, and kube-scheduler's bind of it again wrote allocating over the
// plugin's success (a pod Running with bind-phase allocating).
class ExtenderLostBindingTest : public ExtenderTest {
 protected:
  ExtenderLostBindingTest() {
    api_options_.fail_request = [this](const std::string& method, const std::string& path) {
      if (method != "POST" || path != "/api/v1/namespaces/default/pods/p/binding") return false;
      if (bindings_++ != 0) return false;  // the one below, and the extender's retry
      EXPECT_TRUE(client_->Bind("default", "p", "node-1", "").ok());
      return true;
    };
  }
  std::atomic<int> bindings_{0};
};

TEST_F(ExtenderLostBindingTest, ABindingWhoseAnswerWasLostIsABind) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(0));
  json pod = CreatePod(GpuPod("p", 1000));
  ASSERT_EQ(Filter(*ext, pod, {"node-1"})["NodeNames"], json::array({"node-1"}));
  json res = Bind(*ext, "p", "node-1");
  EXPECT_EQ(res["Error"], "") << res;
  EXPECT_EQ(bindings_.load(), 3);  // lost, written underneath, the retry's 409
  EXPECT_EQ(GetPod("p")["spec"]["nodeName"], "node-1");
  EXPECT_EQ(k8s::Annotation(GetPod("p"), "hami.io/bind-phase"), "allocating");
  auto lock = k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock");
  ASSERT_TRUE(lock.has_value());
  EXPECT_TRUE(protocol::NodeLockOwnedBy(*lock, "default", "p"));
}

TEST_F(ExtenderTest, StaleOrOrphanLocksAreTakenOverLiveOnesTimeOut) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(0));
  auto set_lock = [&](const std::string& value) {
    json patch = {{"metadata", {{"annotations", {{"hami.io/mutex.lock", value}}}}}};
    ASSERT_TRUE(
        client_->Patch(k8s::resources::kNodes, "", "node-1", k8s::PatchType::kMerge, patch).ok());
  };
  CreatePod(GpuPod("holder", 1000));
  for (const char* name : {"p1", "p2", "p3"}) CreatePod(GpuPod(name, 1000));
  // Expired (older than 5 min) although its owner lives.
  set_lock("2020-01-01T00:00:00Z,default,holder");
  EXPECT_EQ(Bind(*ext, "p1", "node-1")["Error"], "");
  // Fresh, but the owner pod is gone.
  set_lock(FormatRfc3339(std::chrono::system_clock::now(), Zone::Utc()) + ",default,ghost");
  EXPECT_EQ(Bind(*ext, "p2", "node-1")["Error"], "");
  EXPECT_TRUE(protocol::NodeLockOwnedBy(*k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock"),
                                        "default", "p2"));
  // Fresh and its owner lives: with no retry window the bind fails and leaves the lock alone.
  set_lock(FormatRfc3339(std::chrono::system_clock::now(), Zone::Utc()) + ",default,holder");
  json res = Bind(*ext, "p3", "node-1");
  EXPECT_NE(res["Error"].get<std::string>().find("locked"), std::string::npos) << res;
  EXPECT_TRUE(protocol::NodeLockOwnedBy(*k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock"),
                                        "default", "holder"));
  EXPECT_FALSE(GetPod("p3")["spec"].contains("nodeName"));
}

TEST_F(ExtenderTest, MalformedBodiesGetAnError) {
  auto ext = MakeExtender(std::chrono::seconds(0));
  for (const char* body : {"", "nul", "[]", R"({"Pod":3})", R"({"NodeNames":[1]})", "{}"}) {
    json res = json::parse(ext->Filter(body).body);
    EXPECT_FALSE(res["Error"].get<std::string>().empty()) << body;
  }
  for (const char* body : {"", "{", R"({"PodName":1})", R"({"podname":"x"})", "{}"}) {
    json res = json::parse(ext->Bind(body).body);
    EXPECT_FALSE(res["Error"].get<std::string>().empty()) << body;
  }
  // Lower-case keys and nulls are accepted.
  json res = json::parse(ext->Filter(R"({"pod":{"metadata":{"name":"x"},"spec":{"containers":
      [{"name":"c"}]}},"nodes":null,"nodenames":["n1"]})")
                             .body);
  EXPECT_EQ(res["Error"], "");
  EXPECT_EQ(res["NodeNames"], json::array({"n1"}));  // no device request: pass-through
}

TEST_F(ExtenderTest, SimulationFilterHasNoSideEffects) {
  auto ext = MakeExtender(std::chrono::seconds(0));
  json pod = CreatePod(GpuPod("sim", 3000));
  json nodes = {{"items", json::array({Node("n1", kSeedRegister), Node("n2", "")})}};
  json res = json::parse(ext->Filter(json{{"Pod", pod}, {"Nodes", nodes}}.dump()).body);
  EXPECT_EQ(res["Error"], "");
  ASSERT_EQ(res["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(res["Nodes"]["items"][0]["metadata"]["name"], "n1");
  EXPECT_FALSE(k8s::Annotation(GetPod("sim"), "hami.io/vgpu-node").has_value());
  EXPECT_EQ(index_.PodCount(), 0u);
}

// Issue 15 item 5: a node with no register annotation is "node unregistered" in both argument
// forms, as in HAMi (pkg/scheduler/scheduler.go), not NodeInsufficientDevice.
TEST_F(ExtenderTest, ANodeWithoutRegistrationIsUnregisteredInBothForms) {
  AddNode("node-1");
  AddNode("bare", "");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(0));
  json sim = CreatePod(GpuPod("sim", 3000));
  json nodes = {{"items", json::array({Node("n1", kSeedRegister), Node("bare", "")})}};
  json res = json::parse(ext->Filter(json{{"Pod", sim}, {"Nodes", nodes}}.dump()).body);
  EXPECT_EQ(res["Error"], "");
  EXPECT_EQ(res["FailedNodes"], (json{{"bare", "node unregistered"}}));
  ASSERT_EQ(res["Nodes"]["items"].size(), 1u);
  // Only unregistered nodes: each says so, none is chosen.
  json only_bare = {{"items", json::array({Node("bare", ""), Node("bare2", "")})}};
  res = json::parse(ext->Filter(json{{"Pod", sim}, {"Nodes", only_bare}}.dump()).body);
  EXPECT_EQ(res["FailedNodes"],
            (json{{"bare", "node unregistered"}, {"bare2", "node unregistered"}}));
  json pod = CreatePod(GpuPod("live", 3000));
  res = Filter(*ext, pod, {"node-1", "bare"});
  EXPECT_EQ(res["Error"], "");
  EXPECT_EQ(res["NodeNames"], json::array({"node-1"}));
  EXPECT_EQ(res["FailedNodes"], (json{{"bare", "node unregistered"}}));
}

TEST_F(ExtenderTest, RestartRebuildsUsageFromPodsAndNeverOvercommits) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(1));
  for (int i = 0; i < 5; ++i) {
    json pod = CreatePod(GpuPod("s" + std::to_string(i), 8000));
    ASSERT_EQ(Filter(*ext, pod, {"node-1"})["NodeNames"], json::array({"node-1"}));
  }
  // A fresh process: a new registry (the backends remember what they saw per node) and an empty
  // index rebuilt from the nodes and the pods' annotations.
  device::Registry fresh = device::MakeRegistry(device::DefaultDeviceConfig());
  device::UsageIndex rebuilt;
  RegistrationOptions ro;
  ro.zone = Zone::Utc();
  Registrar registrar(fresh, rebuilt, *client_, clock_, ro);
  ASSERT_TRUE(registrar.RunOnce().ok());
  auto pods = client_->List(k8s::resources::kPods, "default", {});
  ASSERT_TRUE(pods.ok());
  for (const json& p : pods->items) registrar.OnPod(p);
  EXPECT_EQ(rebuilt.Rows({"node-1"}).nodes, index_.Rows({"node-1"}).nodes);
  // The stream goes on against the rebuilt index until the node is full: 2 x 32768 MiB hold
  // 8 pods of 8000 MiB, so of 5 more only 3 fit.
  ExtenderOptions eo;
  eo.zone = Zone::Utc();
  Extender restarted(fresh, rebuilt, *client_, RealClock(), eo, nullptr);
  int fitted = 0;
  for (int i = 5; i < 10; ++i) {
    json pod = CreatePod(GpuPod("s" + std::to_string(i), 8000));
    fitted += Filter(restarted, pod, {"node-1"})["NodeNames"].is_array();
  }
  EXPECT_EQ(fitted, 3);
  device::UsageIndex::Snapshot after = rebuilt.Rows({"node-1"});
  ASSERT_EQ(after.nodes.size(), 1u);
  for (const device::DeviceUsage& d : after.nodes[0].devices) {
    EXPECT_LE(d.usedmem, d.totalmem) << d.id;
  }
}

TEST_F(ExtenderTest, NvidiaAllocatableDropTakesDevicesOut) {
  json node = Node("node-1", kSeedRegister);
  EXPECT_TRUE(registrar_->RegisterNode(node));
  node["status"]["allocatable"]["nvidia.com/gpu"] = "0";
  EXPECT_FALSE(registrar_->RegisterNode(node));
  EXPECT_TRUE(index_.NodeNames().empty());
  node["status"]["allocatable"]["nvidia.com/gpu"] = "20";
  EXPECT_TRUE(registrar_->RegisterNode(node));
  EXPECT_EQ(index_.NodeNames(), std::vector<std::string>{"node-1"});
}

TEST(FilteringFailedTest, GroupsNodesByReason) {
  std::map<std::string, std::string> failed = {
      {"n2", "1/2 CardInsufficientMemory, 1/2 CardTypeMismatch"},
      {"n1", "2/2 CardInsufficientMemory"},
      {"n3", "NodeInsufficientDevice"},
      {"n4", "node unregistered"}};
  EXPECT_EQ(FilteringFailedMessages(failed),
            (std::vector<std::string>{"2 nodes CardInsufficientMemory(n1,n2)",
                                      "1 nodes CardTypeMismatch(n2)"}));
}

// The bind takes the pod from its decision write's answer instead of reading it again; the
// bind-phase patch is conditional on that answer's resourceVersion, so a pod changed meanwhile
// is read and checked again.
class ExtenderBindReadTest : public ExtenderTest {
 protected:
  struct Seen {
    std::mutex mu;
    std::vector<std::string> requests;  // "METHOD path"
  };
  ExtenderBindReadTest() {
    api_options_.fail_request = [seen = seen_](const std::string& method, const std::string& path) {
      std::lock_guard<std::mutex> lock(seen->mu);
      seen->requests.push_back(method + " " + path);
      return false;
    };
  }
  size_t Count(const std::string& request) {
    std::lock_guard<std::mutex> lock(seen_->mu);
    return static_cast<size_t>(std::count(seen_->requests.begin(), seen_->requests.end(), request));
  }
  void Forget() {
    std::lock_guard<std::mutex> lock(seen_->mu);
    seen_->requests.clear();
  }
  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
};

TEST_F(ExtenderBindReadTest, TheBindReadsNoPodAfterItsDecisionWrite) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(5));
  json pod = CreatePod(GpuPod("demo", 3000));
  ASSERT_EQ(Filter(*ext, pod, {"node-1"})["NodeNames"], json::array({"node-1"}));
  Forget();
  EXPECT_EQ(Bind(*ext, "demo", "node-1"), json::parse(R"({"Error":""})"));
  EXPECT_EQ(Count("GET /api/v1/namespaces/default/pods/demo"), 0u);
  EXPECT_EQ(Count("PATCH /api/v1/namespaces/default/pods/demo"), 1u);
  json got = GetPod("demo");
  EXPECT_EQ(k8s::Annotation(got, "hami.io/bind-phase"), "allocating");
  EXPECT_EQ(got["spec"]["nodeName"], "node-1");
  // A second bind of the pod (kube-scheduler's retry after a lost answer) reads it: bound here.
  Forget();
  EXPECT_EQ(Bind(*ext, "demo", "node-1"), json::parse(R"({"Error":""})"));
  EXPECT_EQ(Count("GET /api/v1/namespaces/default/pods/demo"), 1u);
  EXPECT_EQ(Count("PATCH /api/v1/namespaces/default/pods/demo"), 0u);
}

TEST_F(ExtenderBindReadTest, APodChangedSinceItsDecisionIsReadAgainAndBound) {
  AddNode("node-1");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(5));
  json pod = CreatePod(GpuPod("demo", 3000));
  ASSERT_EQ(Filter(*ext, pod, {"node-1"})["NodeNames"], json::array({"node-1"}));
  json label = {{"metadata", {{"labels", {{"team", "a"}}}}}};
  ASSERT_TRUE(
      client_->Patch(k8s::resources::kPods, "default", "demo", k8s::PatchType::kMerge, label).ok());
  Forget();
  EXPECT_EQ(Bind(*ext, "demo", "node-1"), json::parse(R"({"Error":""})"));
  // The conditional patch was refused (409), the pod read, the patch written on what was read.
  EXPECT_EQ(Count("GET /api/v1/namespaces/default/pods/demo"), 1u);
  EXPECT_EQ(Count("PATCH /api/v1/namespaces/default/pods/demo"), 2u);
  json got = GetPod("demo");
  EXPECT_EQ(k8s::Annotation(got, "hami.io/bind-phase"), "allocating");
  EXPECT_EQ(k8s::Labels(got)["team"], "a");
  EXPECT_EQ(k8s::Annotation(got, "hami.io/vgpu-node"), "node-1");
  EXPECT_EQ(got["spec"]["nodeName"], "node-1");
}

TEST_F(ExtenderBindReadTest, APodBoundElsewhereSinceItsDecisionFailsAndGivesTheLockBack) {
  AddNode("node-1");
  AddNode("node-2");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  auto ext = MakeExtender(std::chrono::seconds(5));
  json pod = CreatePod(GpuPod("demo", 3000));
  ASSERT_EQ(Filter(*ext, pod, {"node-1"})["NodeNames"], json::array({"node-1"}));
  // Someone else bound it meanwhile.
  ASSERT_TRUE(client_->Bind("default", "demo", "node-2", ""));
  json res = Bind(*ext, "demo", "node-1");
  EXPECT_EQ(res["Error"], "pod default/demo is already bound to node \"node-2\"") << res.dump();
  EXPECT_FALSE(k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock").has_value());
  EXPECT_NE(k8s::Annotation(GetPod("demo"), "hami.io/bind-phase"), "allocating");
}

}  // namespace
}  // namespace hami::scheduler
