// scheduler::Server's registration loop on a FakeClock, without sleeping: the 15 s period and
// the 60 s handshake window follow the injected clock (Kick() after each move), and the leader
// labels the scheduler pods with hami.io/scheduler-role; a follower does neither until the Lease
// moves to it, which starts a pass at once.
#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "scheduler/scheduler_role.h"
#include "scheduler/server.h"
#include "sim/apiserver/apiserver.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr const char* kRegister =
    R"([{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100","health":true}])";
constexpr std::chrono::milliseconds kWait{20000};  // a pass normally takes milliseconds

class ServerLoopTest : public testing::SimTest {
 protected:
  void CreatePod(const std::string& ns, const std::string& name, bool scheduler) {
    json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    pod["metadata"] = {{"name", name}, {"namespace", ns}};
    if (scheduler) pod["metadata"]["labels"]["app.kubernetes.io/component"] = "hami-scheduler";
    pod["spec"]["containers"] = json::array({{{"name", "c"}, {"image", "x"}}});
    ASSERT_TRUE(client_->Create(k8s::resources::kPods, ns, pod).ok());
  }
  std::optional<std::string> Role(const std::string& ns, const std::string& name) {
    auto pod = client_->Get(k8s::resources::kPods, ns, name);
    if (!pod) return std::nullopt;
    auto labels = k8s::Labels(*pod);
    auto it = labels.find(std::string(kSchedulerRoleLabel));
    if (it == labels.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> Handshake() {
    return k8s::Annotation(*client_->Get(k8s::resources::kNodes, "", "node-1"),
                           "hami.io/node-handshake");
  }
};

TEST_F(ServerLoopTest, PeriodAndHandshakeWindowFollowTheInjectedClock) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = kRegister;
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", node).ok());  // nothing allocatable
  CreatePod("kube-system", "sched-a", true);
  CreatePod("kube-system", "sched-b", true);

  FakeClock clock(SystemTime(seconds(1787306400)));  // 2026-08-21 10:00:00 UTC
  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "127.0.0.1:0";
  opts.registration.zone = Zone::Utc();
  opts.extender.zone = Zone::Utc();
  opts.pod_name = "sched-a";
  opts.pod_namespace = "kube-system";
  Server server(*client_, device::DefaultDeviceConfig(), opts, clock);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE(server.WaitForPass(0, kWait));
  EXPECT_EQ(Handshake(), "Requesting_2026-08-21 10:00:00");
  EXPECT_TRUE(server.synced());
  EXPECT_EQ(Role("kube-system", "sched-a"), "leader");
  EXPECT_EQ(Role("kube-system", "sched-b"), "follower");
  httplib::Client metrics("127.0.0.1", server.metrics_port());
  auto registered = [&] {
    auto m = metrics.Get("/metrics");
    return m && m->body.find("hami_gpu_memory_limit_bytes{node=\"node-1\"") != std::string::npos;
  };
  EXPECT_TRUE(registered());

  // A kick without the clock reaching the next pass starts nothing.
  uint64_t passes = server.passes();
  clock.Advance(seconds(14));
  server.Kick();
  EXPECT_FALSE(server.WaitForPass(passes, std::chrono::milliseconds(200)));
  // Up to 60 s the pending Requesting is left alone and the node stays registered.
  clock.Advance(seconds(1));
  server.Kick();
  ASSERT_TRUE(server.WaitForPass(passes++, kWait));
  for (int t = 30; t <= 60; t += 15) {
    clock.Advance(seconds(15));
    server.Kick();
    ASSERT_TRUE(server.WaitForPass(passes++, kWait)) << t;
    EXPECT_EQ(Handshake(), "Requesting_2026-08-21 10:00:00") << t;
    EXPECT_TRUE(registered()) << t;
  }
  // 75 s: expired with nothing allocatable: cleanup deletes the key, the devices leave.
  clock.Advance(seconds(15));
  server.Kick();
  ASSERT_TRUE(server.WaitForPass(passes++, kWait));
  EXPECT_FALSE(Handshake().has_value());
  EXPECT_FALSE(registered());
  // 90 s: asked again, registered again.
  clock.Advance(seconds(15));
  server.Kick();
  ASSERT_TRUE(server.WaitForPass(passes++, kWait));
  EXPECT_EQ(Handshake(), "Requesting_2026-08-21 10:01:30");
  EXPECT_TRUE(registered());
  server.Stop();
}

TEST_F(ServerLoopTest, FollowerWaitsAndBecomingLeaderStartsAPassAtOnce) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = kRegister;
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", node).ok());
  CreatePod("kube-system", "sched-a", true);
  json lease = {{"apiVersion", "coordination.k8s.io/v1"}, {"kind", "Lease"}};
  lease["metadata"] = {{"name", "hami-scheduler"}, {"namespace", "kube-system"}};
  lease["spec"] = {{"holderIdentity", "other-host_1"},
                   {"renewTime", "2026-08-21T10:00:00.000000Z"},
                   {"leaseDurationSeconds", 15}};
  ASSERT_TRUE(client_->Create(k8s::resources::kLeases, "kube-system", lease).ok());
  FakeClock clock(SystemTime(seconds(1787306400)));
  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "";
  opts.leader_elect = true;
  opts.lease_name = "hami-scheduler";
  opts.lease_namespace = "kube-system";
  opts.identity = "this-host";
  opts.pod_name = "sched-a";
  opts.pod_namespace = "kube-system";
  Server server(*client_, device::DefaultDeviceConfig(), opts, clock);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE(server.WaitForPass(0, kWait));
  EXPECT_FALSE(server.synced());
  // A follower is ready (its informers synced) though it made no pass: a rolling update of a
  // replicated scheduler must not wait for a pod that never leads.
  EXPECT_TRUE(server.ready());
  httplib::Client http("127.0.0.1", server.port());
  auto readyz = http.Get("/readyz");
  ASSERT_TRUE(readyz);
  EXPECT_EQ(readyz->status, 200);
  EXPECT_FALSE(Handshake().has_value());
  EXPECT_FALSE(Role("kube-system", "sched-a").has_value());
  // The Lease moves to this host: a pass starts at once, without the clock reaching the period.
  uint64_t passes = server.passes();
  lease = *client_->Get(k8s::resources::kLeases, "kube-system", "hami-scheduler");
  lease["spec"]["holderIdentity"] = "this-host_2";
  ASSERT_TRUE(client_->Update(k8s::resources::kLeases, lease).ok());
  ASSERT_TRUE(server.WaitForPass(passes, kWait));
  EXPECT_TRUE(server.synced());
  EXPECT_EQ(Handshake(), "Requesting_2026-08-21 10:00:00");
  EXPECT_EQ(Role("kube-system", "sched-a"), "leader");
  server.Stop();
}

TEST_F(ServerLoopTest, LabelSchedulerPodsPatchesOnlyWhatDiffers) {
  CreatePod("kube-public", "sched-a", true);
  CreatePod("kube-public", "sched-b", true);
  CreatePod("kube-public", "web", false);
  CreatePod("default", "sched-c", true);
  auto n = LabelSchedulerPods(*client_, "kube-public", "sched-b");
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(Role("kube-public", "sched-a"), "follower");
  EXPECT_EQ(Role("kube-public", "sched-b"), "leader");
  EXPECT_FALSE(Role("kube-public", "web").has_value());
  EXPECT_FALSE(Role("default", "sched-c").has_value());
  // Steady state: nothing to patch. A new leader flips both.
  EXPECT_EQ(*LabelSchedulerPods(*client_, "kube-public", "sched-b"), 0u);
  EXPECT_EQ(*LabelSchedulerPods(*client_, "kube-public", "sched-a"), 2u);
  EXPECT_EQ(Role("kube-public", "sched-a"), "leader");
  EXPECT_EQ(Role("kube-public", "sched-b"), "follower");
}

}  // namespace
}  // namespace hami::scheduler
