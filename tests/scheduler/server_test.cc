// The whole scheduler::Server on loopback against the sim apiserver: registration at start
// (handshake written), /webhook, /filter and /bind over HTTP with the seed's annotations,
// /healthz, /readyz and /metrics (devices, pods, quota, build info, legacy names).
#include "scheduler/server.h"

#include <chrono>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/object.h"
#include "sim/apiserver.h"
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
  EXPECT_EQ(http.Get("/readyz")->status, 200);

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
