// The whole scheduler::Server on loopback against the sim apiserver: registration at start
// (handshake written), /webhook, /filter and /bind over HTTP with the seed's annotations,
// /healthz, /readyz and /metrics (devices, pods, quota, build info, legacy names).
#include "scheduler/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/object.h"
#include "sim/apiserver/apiserver.h"
#include "support/wait_for.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using testing::kSeedRegister;

TEST(ServerTest, EndToEndOverLoopback) {
  testing::SimEnv env = testing::StartSim();
  ASSERT_TRUE(env.client);
  k8s::Client& client = *env.client;
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = kSeedRegister;
  ASSERT_TRUE(client.Create(k8s::resources::kNodes, "", node).ok());
  json quota = {{"apiVersion", "v1"}, {"kind", "ResourceQuota"}};
  quota["metadata"] = {{"name", "gpu"}, {"namespace", "default"}};
  quota["spec"]["hard"] = {{"limits.nvidia.com/gpumem", "10000"}, {"pods", "10"}};
  ASSERT_TRUE(client.Create(k8s::resources::kResourceQuotas, "default", quota).ok());

  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "127.0.0.1:0";
  opts.legacy_metrics = true;
  opts.webhook.scheduler_name = "hami-scheduler";
  opts.extender.zone = Zone::Utc();
  opts.registration.zone = Zone::Utc();
  Server server(client, device::DefaultDeviceConfig(), opts);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client http("127.0.0.1", server.port());
  http.set_read_timeout(std::chrono::seconds(40));

  EXPECT_EQ(http.Get("/healthz")->status, 200);

  json ctr = {{"name", "main"}, {"image", "busybox"}};
  ctr["resources"]["limits"] = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}};
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", "demo"}, {"namespace", "default"}};
  pod["spec"]["containers"] = json::array();
  pod["spec"]["containers"].push_back(ctr);

  json review = {{"apiVersion", "admission.k8s.io/v1beta1"},
                 {"kind", "AdmissionReview"},
                 {"request", {{"uid", "1"}, {"object", pod}}}};
  auto wh = http.Post("/webhook", review.dump(), "application/json");
  ASSERT_TRUE(wh);
  EXPECT_EQ(json::parse(wh->body)["response"]["allowed"], true);
  pod["spec"]["schedulerName"] = "hami-scheduler";
  ASSERT_TRUE(client.Create(k8s::resources::kPods, "default", pod).ok());

  // /filter waits for the first registration pass.
  auto fr = http.Post("/filter", json{{"Pod", pod}, {"NodeNames", {"node-1"}}}.dump(),
                      "application/json");
  ASSERT_TRUE(fr);
  EXPECT_EQ(json::parse(fr->body)["NodeNames"], json::array({"node-1"})) << fr->body;
  EXPECT_EQ(http.Get("/readyz")->status, 200);  // synced: the filter waited for the rows
  // The pass's handshake writes come after the rows; the pass counts once they are made.
  ASSERT_TRUE(server.WaitForPass(0, std::chrono::seconds(10)));
  json got_node = *client.Get(k8s::resources::kNodes, "", "node-1");
  auto hs = k8s::Annotation(got_node, "hami.io/node-handshake");
  ASSERT_TRUE(hs.has_value());
  EXPECT_TRUE(std::regex_match(*hs, std::regex(R"(Requesting_\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")));

  auto br = http.Post("/bind",
                      R"({"PodName":"demo","PodNamespace":"default","PodUID":"","Node":"node-1"})",
                      "application/json");
  ASSERT_TRUE(br);
  EXPECT_EQ(br->body, R"({"Error":""})");
  json got = *client.Get(k8s::resources::kPods, "default", "demo");
  auto annos = k8s::Annotations(got);
  EXPECT_TRUE(std::regex_match(annos["hami.io/vgpu-devices-allocated"],
                               std::regex("GPU-[0-9a-f-]+,NVIDIA,3000,0:;")));
  EXPECT_EQ(annos["hami.io/bind-phase"], "allocating");
  EXPECT_EQ(got["spec"]["nodeName"], "node-1");

  httplib::Client metrics("127.0.0.1", server.metrics_port());
  auto m = metrics.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("hami_gpu_memory_limit_bytes{node=\"node-1\""), std::string::npos);
  EXPECT_NE(m->body.find("hami_scheduler_filter_duration_seconds_count{} 1"), std::string::npos);
  EXPECT_NE(m->body.find("hami_build_info{version=\""), std::string::npos);
  EXPECT_NE(m->body.find("\nGPUDeviceMemoryLimit{nodeid=\"node-1\""), std::string::npos);
  // The per-pod and quota lines follow the pod informer and the quota informer: scrape until
  // they catch up with the filter's annotations (a few event deliveries).
  const std::string vgpu =
      R"(hami_vgpu_memory_allocated_bytes{namespace="default",node="node-1",pod="demo",container_index="0",device_uuid="GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448",zone="vGPU"} 3145728000)";
  const std::string used =
      R"(hami_resource_quota_used{namespace="default",quota_name="nvidia.com/gpumem",limit="10000",zone="vGPU"} 3000)";
  const std::string limit =
      R"(hami_resource_quota_limit{namespace="default",quota_name="nvidia.com/gpumem",zone="vGPU"} 10000)";
  const std::string legacy_vgpu =
      R"(vGPUMemoryAllocated{podnamespace="default",nodename="node-1",podname="demo",containeridx="0")";
  const std::string legacy_quota =
      R"(QuotaUsed{quotanamespace="default",quotaName="nvidia.com/gpumem",limit="10000",zone="vGPU"} 3000)";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string body;
  do {
    body = metrics.Get("/metrics")->body;
    if (body.find(vgpu) != std::string::npos && body.find(used) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll interval only
  } while (std::chrono::steady_clock::now() < deadline);
  for (const std::string& line : {vgpu, used, limit, legacy_vgpu, legacy_quota}) {
    EXPECT_NE(body.find(line), std::string::npos) << line << "\n" << body;
  }
  server.Stop();
}

// The bind's node lock takes the node from the node informer when it shows the lock free: no
// GET of the node, the write conditional on the informer's resourceVersion.
TEST(ServerTest, TheBindLocksANodeAsItsInformerSawIt) {
  struct Seen {
    std::mutex mu;
    std::vector<std::string> requests;
  };
  auto seen = std::make_shared<Seen>();
  sim::ApiServerOptions api;
  api.fail_request = [seen](const std::string& method, const std::string& path) {
    std::lock_guard<std::mutex> lock(seen->mu);
    seen->requests.push_back(method + " " + path);
    return false;
  };
  testing::SimEnv env = testing::StartSim(std::move(api));
  ASSERT_TRUE(env.client);
  k8s::Client& client = *env.client;
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = kSeedRegister;
  ASSERT_TRUE(client.Create(k8s::resources::kNodes, "", node).ok());
  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.extender.zone = Zone::Utc();
  opts.extender.record_events = false;
  opts.registration.zone = Zone::Utc();
  Server server(client, device::DefaultDeviceConfig(), opts);
  EXPECT_FALSE(server.SeenNode("node-1").has_value());  // no informer yet
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE(server.WaitForPass(0, std::chrono::seconds(10)));
  // The informer catches up with the handshake the pass wrote.
  const std::string rv = k8s::ResourceVersion(*client.Get(k8s::resources::kNodes, "", "node-1"));
  ASSERT_TRUE(test_support::WaitFor([&] {
    auto n = server.SeenNode("node-1");
    return n && n->resource_version == rv;
  }));
  EXPECT_EQ(server.SeenNode("node-1")->lock, std::nullopt);

  json ctr = {{"name", "main"}, {"image", "busybox"}};
  ctr["resources"]["limits"] = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}};
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", "demo"}, {"namespace", "default"}};
  pod["spec"]["containers"] = json::array({ctr});
  pod["spec"]["schedulerName"] = "hami-scheduler";
  ASSERT_TRUE(client.Create(k8s::resources::kPods, "default", pod).ok());
  httplib::Client http("127.0.0.1", server.port());
  auto fr = http.Post("/filter", json{{"Pod", pod}, {"NodeNames", {"node-1"}}}.dump(),
                      "application/json");
  ASSERT_TRUE(fr);
  ASSERT_EQ(json::parse(fr->body)["NodeNames"], json::array({"node-1"})) << fr->body;
  {
    std::lock_guard<std::mutex> lock(seen->mu);
    seen->requests.clear();
  }
  auto br = http.Post("/bind",
                      R"({"PodName":"demo","PodNamespace":"default","PodUID":"","Node":"node-1"})",
                      "application/json");
  ASSERT_TRUE(br);
  EXPECT_EQ(br->body, R"({"Error":""})");
  {
    std::lock_guard<std::mutex> lock(seen->mu);
    EXPECT_EQ(std::count(seen->requests.begin(), seen->requests.end(), "GET /api/v1/nodes/node-1"),
              0);
    EXPECT_EQ(
        std::count(seen->requests.begin(), seen->requests.end(), "PATCH /api/v1/nodes/node-1"), 1);
  }
  auto lock =
      k8s::Annotation(*client.Get(k8s::resources::kNodes, "", "node-1"), "hami.io/mutex.lock");
  ASSERT_TRUE(lock.has_value());
  EXPECT_NE(lock->find(",default,demo"), std::string::npos) << *lock;
  // The informer sees the lock too.
  EXPECT_TRUE(test_support::WaitFor([&] {
    auto n = server.SeenNode("node-1");
    return n && n->lock == lock;
  }));
  server.Stop();
}

// --async-decision-write: the event loop answers /filter itself. With the one worker waiting (a
// retried filter of a pod whose decision write is held in the API server), another pod's filter
// is still answered; once the write lands, so is the retry.
TEST(ServerTest, AsyncFiltersAreAnsweredWhileTheOnlyWorkerWaits) {
  test_support::Gate arrived, let;
  std::atomic<bool> hold{true};
  sim::ApiServerOptions api_options;
  api_options.fail_request = [&](const std::string& method, const std::string& path) {
    if (method == "PATCH" && path == "/api/v1/namespaces/default/pods/a" && hold.exchange(false)) {
      arrived.Open();
      let.Wait();
    }
    return false;
  };
  testing::SimEnv env = testing::StartSim(std::move(api_options));
  ASSERT_TRUE(env.client);
  ASSERT_TRUE(env.client->Create(k8s::resources::kNodes, "", testing::Node("node-1")).ok());
  std::map<std::string, std::string> filters;
  for (const char* name : {"a", "b"}) {
    json pod = testing::GpuPod(name, 1000);
    pod["spec"]["schedulerName"] = "hami-scheduler";
    auto created = env.client->Create(k8s::resources::kPods, "default", pod);
    ASSERT_TRUE(created.ok());
    filters[name] = json{{"Pod", *created}, {"NodeNames", {"node-1"}}}.dump();
  }
  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "";
  opts.http_workers = 1;
  opts.extender.async_decision_write = true;
  opts.extender.zone = Zone::Utc();
  opts.registration.zone = Zone::Utc();
  Server server(*env.client, device::DefaultDeviceConfig(), opts);
  ASSERT_TRUE(server.Start().ok());
  // Well below the API client's timeout (30 s), at which a's held write would fail and free the
  // worker: b must not need the worker.
  auto post = [&](const std::string& name) {
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(std::chrono::seconds(10));
    auto r = c.Post("/filter", filters[name], "application/json");
    return r ? json::parse(r->body, nullptr, false) : json::object();  // no reply
  };
  EXPECT_EQ(post("a")["NodeNames"], json::array({"node-1"}));
  arrived.Wait();  // a's decision write is in the API server, held there
  json retried;
  std::thread retry([&] { retried = post("a"); });
  // (EXPECT, not ASSERT: the retry thread and the held write must be let go either way.)
  EXPECT_TRUE(test_support::WaitFor([&] { return server.filters_waiting_for_their_pod() == 1; }));
  EXPECT_EQ(post("b")["NodeNames"], json::array({"node-1"}));  // the worker is a's retry's
  let.Open();
  retry.join();
  EXPECT_EQ(retried["NodeNames"], json::array({"node-1"}));
  server.Stop();
}

// Until the first registration pass (here: listing nodes fails), /readyz answers 503 on both
// ports while /healthz answers 200, and /filter requests are parked without a thread each: with
// one worker, a /webhook is still answered. Once nodes list again, the parked filters get real
// answers; past sync_timeout they get "context cancelled".
TEST(ServerTest, ReadyzIs503AndFiltersParkUntilTheFirstPass) {
  std::atomic<bool> fail_nodes{true};
  sim::ApiServerOptions api_options;
  api_options.fail_request = [&](const std::string& method, const std::string& path) {
    return fail_nodes && method == "GET" && path == "/api/v1/nodes";
  };
  testing::SimEnv env = testing::StartSim(std::move(api_options));
  ASSERT_TRUE(env.client);
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = kSeedRegister;
  ASSERT_TRUE(env.client->Create(k8s::resources::kNodes, "", node).ok());
  json pod = testing::GpuPod("p", 1000);
  pod["spec"]["schedulerName"] = "hami-scheduler";
  ASSERT_TRUE(env.client->Create(k8s::resources::kPods, "default", pod).ok());

  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "127.0.0.1:0";
  opts.http_workers = 1;
  opts.webhook.scheduler_name = "hami-scheduler";
  Server server(*env.client, device::DefaultDeviceConfig(), opts);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client http("127.0.0.1", server.port());
  httplib::Client metrics("127.0.0.1", server.metrics_port());
  EXPECT_EQ(http.Get("/readyz")->status, 503);
  EXPECT_EQ(metrics.Get("/readyz")->status, 503);
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  EXPECT_EQ(metrics.Get("/healthz")->status, 200);

  const std::string filter = json{{"Pod", pod}, {"NodeNames", {"node-1"}}}.dump();
  std::vector<std::thread> clients;
  std::vector<std::string> answers(4);
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server.port());
      c.set_read_timeout(std::chrono::seconds(40));
      auto r = c.Post("/filter", filter, "application/json");
      answers[i] = r ? r->body : "no reply";
    });
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.parked_filters() < answers.size() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval only
  }
  ASSERT_EQ(server.parked_filters(), answers.size());
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request", {{"uid", "1"}, {"object", pod}}}};
  auto wh = http.Post("/webhook", review.dump(), "application/json");
  ASSERT_TRUE(wh);
  EXPECT_EQ(wh->status, 200);
  EXPECT_FALSE(server.synced());

  fail_nodes = false;
  for (std::thread& t : clients) t.join();
  for (const std::string& a : answers) {
    EXPECT_EQ(json::parse(a)["NodeNames"], json::array({"node-1"})) << a;
  }
  EXPECT_EQ(http.Get("/readyz")->status, 200);
  EXPECT_EQ(metrics.Get("/readyz")->status, 200);
  server.Stop();
}

// The first pass's handshake writes (5,000 throttled PATCHes at 5,000 nodes) come after the
// rows: a filter is served while they are still under way, and they go through the registration
// client, whose rate limiter is not the filter's (issue 18).
TEST(ServerTest, FiltersAreServedWhileTheHandshakeWritesAreUnderWay) {
  test_support::Gate gate;
  std::atomic<int> held{0};
  sim::ApiServerOptions api_options;
  api_options.fail_request = [&](const std::string& method, const std::string& path) {
    if (method == "PATCH" && path == "/api/v1/nodes/node-1") {
      ++held;
      gate.Wait();
    }
    return false;
  };
  testing::SimEnv env = testing::StartSim(std::move(api_options));
  ASSERT_TRUE(env.client);
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = kSeedRegister;
  ASSERT_TRUE(env.client->Create(k8s::resources::kNodes, "", node).ok());
  json pod = testing::GpuPod("p", 1000);
  pod["spec"]["schedulerName"] = "hami-scheduler";
  ASSERT_TRUE(env.client->Create(k8s::resources::kPods, "default", pod).ok());

  k8s::RestConfig cfg;
  cfg.server = env.api->url();
  cfg.qps = 0;
  k8s::Client registration_client(cfg);
  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "";
  Server server(*env.client, registration_client, device::DefaultDeviceConfig(), opts);
  ASSERT_TRUE(server.Start().ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (held == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval only
  }
  ASSERT_GT(held.load(), 0) << "the handshake write never came";
  EXPECT_TRUE(server.synced());
  httplib::Client http("127.0.0.1", server.port());
  http.set_read_timeout(std::chrono::seconds(10));
  auto r = http.Post("/filter", json{{"Pod", pod}, {"NodeNames", {"node-1"}}}.dump(),
                     "application/json");
  gate.Open();
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["NodeNames"], json::array({"node-1"})) << r->body;
  // The pass goes on after the filter and writes the handshake (Stop() would end it).
  EXPECT_TRUE(test_support::WaitFor([&] {
    auto written = env.client->Get(k8s::resources::kNodes, "", "node-1");
    return written && k8s::Annotation(*written, "hami.io/node-handshake")
                              .value_or("")
                              .rfind("Requesting_", 0) == 0;
  }));
  server.Stop();
}

// SIGTERM during a registration pass: the pass makes no further handshake write (at 10,000
// nodes they take minutes at --kube-qps 50, past the pod's termination grace period), so Stop()
// returns once the write in flight is answered.
TEST(ServerTest, StopEndsAPassWithoutItsRemainingHandshakeWrites) {
  test_support::Gate gate;
  std::atomic<int> patches{0};
  sim::ApiServerOptions api_options;
  api_options.fail_request = [&](const std::string& method, const std::string& path) {
    if (method == "PATCH" && path.rfind("/api/v1/nodes/", 0) == 0 && patches++ == 0) {
      gate.Wait();  // the first write waits in the API server
    }
    return false;
  };
  testing::SimEnv env = testing::StartSim(std::move(api_options));
  ASSERT_TRUE(env.client);
  for (const char* name : {"node-1", "node-2", "node-3"}) {
    json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = kSeedRegister;
    ASSERT_TRUE(env.client->Create(k8s::resources::kNodes, "", node).ok());
  }
  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "";
  Server server(*env.client, device::DefaultDeviceConfig(), opts);
  ASSERT_TRUE(server.Start().ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (patches == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval only
  }
  ASSERT_EQ(patches.load(), 1) << "the first handshake write never came";
  std::thread stop([&] { server.Stop(); });
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server.stopping() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval only
  }
  gate.Open();
  stop.join();
  EXPECT_EQ(patches.load(), 1);  // node-2's and node-3's writes were not made
}

TEST(ServerTest, AParkedFilterIsCancelledAfterTheSyncTimeout) {
  sim::ApiServerOptions api_options;
  api_options.fail_request = [](const std::string& method, const std::string& path) {
    return method == "GET" && path == "/api/v1/nodes";
  };
  testing::SimEnv env = testing::StartSim(std::move(api_options));
  ASSERT_TRUE(env.client);
  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "";
  opts.sync_timeout = std::chrono::seconds(1);
  Server server(*env.client, device::DefaultDeviceConfig(), opts);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client http("127.0.0.1", server.port());
  auto r =
      http.Post("/filter", json{{"Pod", testing::GpuPod("p", 1000)}, {"NodeNames", {"n"}}}.dump(),
                "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["Error"], "context cancelled") << r->body;
  EXPECT_EQ(server.parked_filters(), 0u);
  server.Stop();
}

// The node informer's transform keeps what its handlers read (the name), what the informer
// needs (namespace, resourceVersion) and the node lock; a node without a metadata object is left
// as it is.
TEST(NodeNameFieldsTest, KeepsNameAndVersion) {
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata",
                {{"name", "gpu-0"},
                 {"uid", "u-1"},
                 {"resourceVersion", "12"},
                 {"labels", {{"gpu", "on"}}},
                 {"annotations", {{"hami.io/node-nvidia-register", "GPU-0,10,80000,100"}}}}},
               {"status", {{"allocatable", {{"nvidia.com/gpu", "10"}}}}}};
  EXPECT_EQ(NodeNameFields(node),
            (json{{"metadata", {{"name", "gpu-0"}, {"uid", "u-1"}, {"resourceVersion", "12"}}}}));
  // The node lock is kept for the bind's first attempt (nodelock::AcquireOptions::seen).
  node["metadata"]["annotations"]["hami.io/mutex.lock"] = "2026-08-21T10:00:05Z,default,demo";
  EXPECT_EQ(
      NodeNameFields(node),
      (json{{"metadata",
             {{"name", "gpu-0"},
              {"uid", "u-1"},
              {"resourceVersion", "12"},
              {"annotations", {{"hami.io/mutex.lock", "2026-08-21T10:00:05Z,default,demo"}}}}}}));
  EXPECT_EQ(NodeNameFields(json{{"metadata", 3}}), (json{{"metadata", 3}}));
  EXPECT_EQ(NodeNameFields(json::array()), json::array());
}

TEST(LeaseTest, LeaderIffHolderPrefixAndUnexpired) {
  json lease = {{"spec",
                 {{"holderIdentity", "sched-host_1234"},
                  {"renewTime", "2026-08-21T10:00:00.000000Z"},
                  {"leaseDurationSeconds", 15}}}};
  SystemTime t0 = SystemTime(std::chrono::seconds(1787306400));  // 2026-08-21 10:00:00 UTC
  EXPECT_TRUE(LeaseHeldBy(lease, "sched-host", t0 + std::chrono::seconds(14)));
  EXPECT_FALSE(LeaseHeldBy(lease, "sched-host", t0 + std::chrono::seconds(15)));
  EXPECT_FALSE(LeaseHeldBy(lease, "other", t0));
  EXPECT_FALSE(LeaseHeldBy(lease, "", t0));
  EXPECT_FALSE(LeaseHeldBy(json::object(), "sched-host", t0));
}

}  // namespace
}  // namespace hami::scheduler
