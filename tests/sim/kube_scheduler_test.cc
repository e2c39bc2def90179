// The simulated kube-scheduler loop: against the real hami-scheduler (filter + bind over
// loopback, an unschedulable pod retried after a node add) and against a scripted extender
// (backoff doubling on a FakeClock, binds running while the cycle goes on, the PodScheduled
// condition of an unschedulable pod).
// sim_test does not link cpp-httplib's pkg-config target: take its definitions so this header
// declares the classes the compiled library holds.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif

#include "sim/kube_scheduler.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/object.h"
#include "scheduler/server.h"
#include "scheduling_test_util.h"
#include "sim/apiserver/apiserver.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

using testutil::Eventually;

// A Ready node; with `gpus` > 0 also its register annotation and allocatable count, as the
// device plugin and kubelet would leave them.
json ReadyNode(const std::string& name, int gpus, int64_t mem_mib) {
  json node = testutil::ReadyNode(name);
  if (gpus > 0) {
    json reg = json::array();
    for (int i = 0; i < gpus; ++i) {
      reg.push_back({{"id", "GPU-" + name + "-" + std::to_string(i)},
                     {"index", i},
                     {"count", 10},
                     {"devmem", mem_mib},
                     {"devcore", 100},
                     {"type", "NVIDIA-Tesla T4"},
                     {"numa", 0},
                     {"mode", "hami-core"},
                     {"health", true}});
    }
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = reg.dump();
    node["status"]["allocatable"]["nvidia.com/gpu"] = std::to_string(gpus * 10);
  }
  return node;
}

json GpuPod(const std::string& name, int64_t mem_mib) {
  json ctr = {{"name", "main"}, {"image", "busybox"}};
  ctr["resources"]["limits"] = {{"nvidia.com/gpu", "1"},
                                {"nvidia.com/gpumem", std::to_string(mem_mib)}};
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}};
  pod["spec"] = {{"schedulerName", "hami-scheduler"}, {"containers", json::array({ctr})}};
  return pod;
}

class Cluster {
 public:
  Cluster() : api_(ApiServerOptions{}) {}
  void Start() {
    ASSERT_TRUE(api_.Start());
    k8s::RestConfig cfg;
    cfg.server = api_.url();
    cfg.qps = 0;
    client_ = std::make_unique<k8s::Client>(cfg);
  }
  k8s::Client& client() { return *client_; }
  void Create(const k8s::Resource& r, const json& obj) {
    auto made = client_->Create(r, r.namespaced ? "default" : "", obj);
    ASSERT_TRUE(made.ok()) << made.error().ToString();
  }
  std::optional<PodScheduleRecord> Record(const KubeSchedulerLoop& loop, const std::string& name) {
    for (const PodScheduleRecord& r : loop.Records()) {
      if (r.name == name) return r;
    }
    return std::nullopt;
  }

 private:
  ApiServer api_;
  std::unique_ptr<k8s::Client> client_;
};

TEST(PodBackoffTest, DoublesUpToTheCap) {
  const milliseconds init(1000), cap(10000);
  const std::vector<int64_t> want = {1000, 2000, 4000, 8000, 10000, 10000, 10000};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(PodBackoff(static_cast<int>(i) + 1, init, cap).count(), want[i]) << i;
  }
  EXPECT_EQ(PodBackoff(1000, init, cap).count(), 10000);
}

TEST(UnschedulableMessageTest, GroupsAndSortsReasons) {
  EXPECT_EQ(
      UnschedulableMessage(
          3,
          {{"a", "CardInsufficientMemory"}, {"b", "NodeUnfitPod"}, {"c", "CardInsufficientMemory"}},
          ""),
      "0/3 nodes are available: 1 NodeUnfitPod, 2 CardInsufficientMemory.");
  EXPECT_EQ(UnschedulableMessage(2, {}, "no quota"), "0/2 nodes are available: no quota.");
  EXPECT_EQ(UnschedulableMessage(0, {}, ""),
            "0/0 nodes are available: no node returned by the extender.");
}

TEST(KubeSchedulerLoopTest, RealExtenderBindsAndRetriesUnschedulableAfterNodeAdd) {
  Cluster c;
  c.Start();
  c.Create(k8s::resources::kNodes, ReadyNode("node-a", 1, 8000));
  scheduler::ServerOptions so;
  so.http_bind = "127.0.0.1:0";
  so.metrics_bind = "";
  so.extender.zone = Zone::Utc();
  so.registration.zone = Zone::Utc();
  scheduler::Server server(c.client(), device::DefaultDeviceConfig(), so);
  ASSERT_TRUE(server.Start().ok());

  KubeSchedulerOptions ko;
  ko.extender_url = "http://127.0.0.1:" + std::to_string(server.port());
  ko.initial_backoff = milliseconds(50);
  KubeSchedulerLoop loop(c.client(), ko);
  ASSERT_TRUE(loop.Start().ok());

  c.Create(k8s::resources::kPods, GpuPod("fits", 3000));
  c.Create(k8s::resources::kPods, GpuPod("too-big", 20000));
  ASSERT_TRUE(Eventually([&] {
    auto r = c.Record(loop, "fits");
    return r && r->bound;
  }));
  json fits = *c.client().Get(k8s::resources::kPods, "default", "fits");
  EXPECT_EQ(fits["spec"]["nodeName"], "node-a");
  EXPECT_EQ(k8s::Annotation(fits, "hami.io/bind-phase"), "allocating");
  EXPECT_TRUE(k8s::Annotation(fits, "hami.io/vgpu-devices-allocated").has_value());

  ASSERT_TRUE(Eventually([&] { return loop.Unschedulable() == 1; }));
  auto big = c.Record(loop, "too-big");
  ASSERT_TRUE(big);
  EXPECT_FALSE(big->bound);
  EXPECT_EQ(big->last_failure.rfind("0/1 nodes are available: 1 ", 0), 0u) << big->last_failure;
  EXPECT_NE(big->last_failure.find("CardInsufficientMemory"), std::string::npos)
      << big->last_failure;
  ASSERT_TRUE(Eventually([&] {
    auto pod = c.client().Get(k8s::resources::kPods, "default", "too-big");
    return pod &&
           (*pod)["status"].value("conditions", json::array()).dump().find("Unschedulable") !=
               std::string::npos;
  }));

  // A bigger GPU arrives: the node add flushes the unschedulableQ and the pod lands there.
  c.Create(k8s::resources::kNodes, ReadyNode("node-b", 1, 32000));
  ASSERT_TRUE(Eventually([&] {
    auto r = c.Record(loop, "too-big");
    return r && r->bound;
  }));
  json got = *c.client().Get(k8s::resources::kPods, "default", "too-big");
  EXPECT_EQ(got["spec"]["nodeName"], "node-b");
  EXPECT_GE(c.Record(loop, "too-big")->attempts, 2);
  EXPECT_EQ(c.Record(loop, "too-big")->last_failure, "");
  EXPECT_TRUE(Eventually([&] { return loop.Idle() && loop.Unschedulable() == 0; }));
  loop.Stop();
  server.Stop();
}

// A scripted extender: /filter answers `filter_reply` (default: the first candidate node),
// /bind calls `on_bind` (default: success).
class FakeExtender {
 public:
  FakeExtender() {
    http_.Post("/filter", [this](const httplib::Request& req, httplib::Response& res) {
      json args = json::parse(req.body);
      filters_.fetch_add(1);
      std::function<json(const json&)> reply;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reply = filter_reply_;
      }
      json out = reply ? reply(args)
                       : json{{"NodeNames", json::array({args["NodeNames"][0]})}, {"Error", ""}};
      res.set_content(out.dump(), "application/json");
    });
    http_.Post("/bind", [this](const httplib::Request& req, httplib::Response& res) {
      std::function<std::string(const json&)> bind;
      {
        std::lock_guard<std::mutex> lock(mu_);
        bind = on_bind_;
      }
      const std::string error = bind ? bind(json::parse(req.body)) : "";
      binds_.fetch_add(1);
      res.set_content(json{{"Error", error}}.dump(), "application/json");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~FakeExtender() {
    http_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void set_filter(std::function<json(const json&)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    filter_reply_ = std::move(f);
  }
  void set_bind(std::function<std::string(const json&)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    on_bind_ = std::move(f);
  }
  int filters() const { return filters_.load(); }
  int binds() const { return binds_.load(); }

 private:
  httplib::Server http_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::function<json(const json&)> filter_reply_;
  std::function<std::string(const json&)> on_bind_;
  std::atomic<int> filters_{0};
  std::atomic<int> binds_{0};
};

// A loop against `ext` on `clock` (5 ms waits), started, and then pod "p" (1000 MiB) created;
// null when the loop does not start.
std::unique_ptr<KubeSchedulerLoop> StartLoopWithPod(Cluster& c, const FakeExtender& ext,
                                                    const Clock& clock) {
  KubeSchedulerOptions ko;
  ko.extender_url = ext.url();
  ko.max_wait = milliseconds(5);
  auto loop = std::make_unique<KubeSchedulerLoop>(c.client(), ko, clock);
  if (!loop->Start().ok()) return nullptr;
  c.Create(k8s::resources::kPods, GpuPod("p", 1000));
  return loop;
}

TEST(KubeSchedulerLoopTest, BindErrorBacksOffDoublingToTenSecondsOnTheClock) {
  Cluster c;
  c.Start();
  c.Create(k8s::resources::kNodes, ReadyNode("n1", 0, 0));
  FakeExtender ext;
  ext.set_bind([](const json&) { return std::string("node lock busy"); });
  FakeClock clock;
  auto started = StartLoopWithPod(c, ext, clock);
  ASSERT_TRUE(started);
  KubeSchedulerLoop& loop = *started;
  auto failures = [&] {
    auto r = c.Record(loop, "p");
    return r ? r->failures : 0;
  };
  ASSERT_TRUE(Eventually([&] { return failures() == 1; }));

  int n = 1;
  for (int64_t want : {1000, 2000, 4000, 8000, 10000, 10000}) {
    auto r = c.Record(loop, "p");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->backoff.count(), want);
    EXPECT_EQ(r->last_failure, "node lock busy");
    const int binds = ext.binds();
    // 1 ms short of the deadline: two full loop passes later nothing was retried.
    clock.Advance(milliseconds(want - 1));
    const uint64_t passes = loop.passes();
    loop.Wake();
    ASSERT_TRUE(Eventually([&] { return loop.passes() >= passes + 2; }));
    EXPECT_EQ(ext.binds(), binds) << "retried before its " << want << " ms backoff";
    clock.Advance(milliseconds(1));
    loop.Wake();
    ASSERT_TRUE(Eventually([&] { return failures() == n + 1; })) << want;
    EXPECT_EQ(ext.binds(), binds + 1);
    ++n;
  }
  EXPECT_EQ(c.Record(loop, "p")->attempts, 7);
  EXPECT_EQ(c.Record(loop, "p")->failures, 7);
}

TEST(KubeSchedulerLoopTest, BindsRunConcurrentlyWhileTheCycleGoesOn) {
  Cluster c;
  c.Start();
  for (const char* n : {"n-a", "n-b", "n-c"}) c.Create(k8s::resources::kNodes, ReadyNode(n, 0, 0));
  FakeExtender ext;
  // Pod "x" goes to node "n-x".
  ext.set_filter([](const json& args) {
    return json{{"NodeNames", {"n-" + args["Pod"]["metadata"]["name"].get<std::string>()}},
                {"Error", ""}};
  });
  std::mutex mu;
  std::condition_variable cv;
  int waiting = 0;
  bool release = false;
  ext.set_bind([&](const json& args) {
    std::unique_lock<std::mutex> lock(mu);
    ++waiting;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    // The extender creates the Binding, as HAMi's does.
    auto b = c.client().Bind(args["PodNamespace"].get<std::string>(),
                             args["PodName"].get<std::string>(), args["Node"].get<std::string>());
    return b.ok() ? std::string() : b.error().ToString();
  });
  KubeSchedulerOptions ko;
  ko.extender_url = ext.url();
  ko.bind_parallelism = 4;
  KubeSchedulerLoop loop(c.client(), ko);
  ASSERT_TRUE(loop.Start().ok());
  for (const char* name : {"a", "b", "c"}) c.Create(k8s::resources::kPods, GpuPod(name, 1000));
  {
    // All three binds (one per node) are in the extender at once: the cycle did not wait.
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, seconds(10), [&] { return waiting == 3; })) << waiting;
    EXPECT_EQ(ext.filters(), 3);
    EXPECT_FALSE(loop.Idle());
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(Eventually([&] { return loop.Idle(); }));
  for (const PodScheduleRecord& r : loop.Records()) {
    EXPECT_TRUE(r.bound) << r.name << ": " << r.last_failure;
    EXPECT_EQ(r.attempts, 1) << r.name;
  }
  EXPECT_EQ(loop.Records().size(), 3u);
  EXPECT_EQ(loop.FilterLatenciesMs().size(), 3u);  // one round trip per attempt
}

TEST(KubeSchedulerLoopTest, UnschedulableWaitsForAClusterEventAndLeavesWhenDeleted) {
  Cluster c;
  c.Start();
  c.Create(k8s::resources::kNodes, ReadyNode("n1", 0, 0));
  c.Create(k8s::resources::kNodes, ReadyNode("n2", 0, 0));
  json not_ready = ReadyNode("n3", 0, 0);
  not_ready["status"]["conditions"][0]["status"] = "False";
  c.Create(k8s::resources::kNodes, not_ready);
  FakeExtender ext;
  std::atomic<size_t> seen_nodes{0};
  ext.set_filter([&](const json& args) {
    seen_nodes = args["NodeNames"].size();
    json failed = json::object();
    for (const json& n : args["NodeNames"]) failed[n.get<std::string>()] = "NodeUnfitPod";
    return json{{"NodeNames", nullptr}, {"FailedNodes", failed}, {"Error", ""}};
  });
  FakeClock clock;
  auto started = StartLoopWithPod(c, ext, clock);
  ASSERT_TRUE(started);
  KubeSchedulerLoop& loop = *started;
  ASSERT_TRUE(Eventually([&] { return loop.Unschedulable() == 1 && loop.Idle(); }));
  EXPECT_EQ(seen_nodes.load(), 2u);  // the NotReady node is no candidate
  EXPECT_EQ(c.Record(loop, "p")->last_failure, "0/2 nodes are available: 2 NodeUnfitPod.");
  ASSERT_TRUE(Eventually([&] {
    auto pod = c.client().Get(k8s::resources::kPods, "default", "p");
    if (!pod || !(*pod)["status"].contains("conditions")) return false;
    const json& cond = (*pod)["status"]["conditions"][0];
    return cond["type"] == "PodScheduled" && cond["status"] == "False" &&
           cond["reason"] == "Unschedulable" &&
           cond["message"] == "0/2 nodes are available: 2 NodeUnfitPod.";
  }));

  // Time alone (under the 60 s flush) retries nothing; a node add does, after the backoff.
  clock.Advance(seconds(30));
  uint64_t passes = loop.passes();
  loop.Wake();
  ASSERT_TRUE(Eventually([&] { return loop.passes() >= passes + 2; }));
  EXPECT_EQ(ext.filters(), 1);
  ext.set_filter(nullptr);
  c.Create(k8s::resources::kNodes, ReadyNode("n4", 0, 0));
  ASSERT_TRUE(Eventually([&] { return c.Record(loop, "p")->bound; }));
  EXPECT_EQ(ext.filters(), 2);
  EXPECT_EQ(loop.Unschedulable(), 0u);

  // Periodic flush: a second unschedulable pod is retried after 60 s without any event.
  ext.set_filter([](const json&) { return json{{"Error", ""}}; });
  c.Create(k8s::resources::kPods, GpuPod("q", 1000));
  ASSERT_TRUE(Eventually([&] { return loop.Unschedulable() == 1 && loop.Idle(); }));
  clock.Advance(seconds(60));
  loop.Wake();
  ASSERT_TRUE(Eventually([&] { return ext.filters() == 4; }));
  ASSERT_TRUE(Eventually([&] { return loop.Unschedulable() == 1 && loop.Idle(); }));

  // Deleted while unschedulable: it leaves the queue.
  ASSERT_TRUE(c.client().Delete(k8s::resources::kPods, "default", "q").ok());
  EXPECT_TRUE(Eventually([&] { return loop.Unschedulable() == 0; }));
  // A new pod under the same name is a new pod to schedule.
  c.Create(k8s::resources::kPods, GpuPod("q", 1000));
  EXPECT_TRUE(Eventually([&] { return ext.filters() == 5 && loop.Unschedulable() == 1; }));
}

}  // namespace
}  // namespace hami::sim
