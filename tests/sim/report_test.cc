// Report math on crafted observations: states and reasons, per-GPU usage, over-commit detection
// (memory, cores, split count, scaling), finished pods releasing their devices, latency
// percentiles, the JSON contract and the text rendering.
#include "sim/report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace hami::sim {
namespace {

using std::chrono::milliseconds;

const SystemTime kT0 = SystemTime(std::chrono::seconds(1700000000));

ExpandedNode Node(const std::string& name, std::vector<std::string> uuids, int64_t mem) {
  ExpandedNode n;
  n.name = name;
  for (size_t i = 0; i < uuids.size(); ++i) {
    deviceplugin::GpuDevice g;
    g.index = i;
    g.uuid = uuids[i];
    g.model = "Tesla V100-PCIE-32GB";
    g.memory_mib = mem;
    n.gpus.push_back(g);
  }
  return n;
}

PodObservation Running(const std::string& name, const std::string& node,
                       const std::string& allocated, int created_ms, int bound_ms, int run_ms) {
  PodObservation p;
  p.ns = "default";
  p.name = name;
  p.workload = "w";
  p.created = true;
  p.created_at = kT0 + milliseconds(created_ms);
  p.phase = "Running";
  p.node = node;
  p.scheduler_name = "hami-scheduler";
  p.allocated = allocated;
  p.bind_phase = "success";
  p.bound = true;
  p.bound_at = kT0 + milliseconds(bound_ms);
  p.attempts = 1;
  p.running = true;
  p.running_at = kT0 + milliseconds(run_ms);
  return p;
}

ReportInput Input() {
  ReportInput in;
  in.scenario_name = "t";
  in.nodes = {Node("n1", {"GPU-aaaa1111-0000", "GPU-bbbb2222-0000"}, 32768),
              Node("n2", {"GPU-cccc3333-0000"}, 16000)};
  in.first_created = kT0;
  in.settled_at = kT0 + milliseconds(2000);
  return in;
}

TEST(ReportTest, UsageAndNoOvercommitWhenWithinLimits) {
  ReportInput in = Input();
  in.pods = {Running("a", "n1", "GPU-aaaa1111-0000,NVIDIA,16000,30:;", 0, 10, 40),
             Running("b", "n1", "GPU-aaaa1111-0000,NVIDIA,16768,70:GPU-bbbb2222-0000,NVIDIA,1,0:;",
                     0, 20, 60)};
  Report r = BuildReport(in);
  EXPECT_EQ(r.pods_total, 2);
  EXPECT_EQ(r.pods_running, 2);
  EXPECT_EQ(r.overcommitted_devices, 0);
  ASSERT_EQ(r.gpus.size(), 3u);
  EXPECT_EQ(r.gpus[0].used_memory_mib, 32768);
  EXPECT_EQ(r.gpus[0].used_cores, 100);
  EXPECT_EQ(r.gpus[0].used_slots, 2);
  EXPECT_EQ(r.gpus[0].pods, (std::vector<std::string>{"default/a", "default/b"}));
  EXPECT_EQ(r.gpus[1].used_slots, 1);
  EXPECT_EQ(r.gpus[2].used_slots, 0);
  ASSERT_EQ(r.pods[1].devices.size(), 2u);
  EXPECT_EQ(r.pods[1].devices[1].device.uuid, "GPU-bbbb2222-0000");
  EXPECT_DOUBLE_EQ(r.wall_seconds, 2.0);
  EXPECT_DOUBLE_EQ(r.pods_per_second, 1.0);
}

TEST(ReportTest, DetectsEachKindOfOvercommit) {
  ReportInput in = Input();
  in.split_count = 2;
  in.pods = {
      // n1 GPU a: memory 32769 > 32768.
      Running("m1", "n1", "GPU-aaaa1111-0000,NVIDIA,16000,0:;", 0, 1, 2),
      Running("m2", "n1", "GPU-aaaa1111-0000,NVIDIA,16769,0:;", 0, 1, 2),
      // n1 GPU b: cores 101 > 100.
      Running("c1", "n1", "GPU-bbbb2222-0000,NVIDIA,1,51:;", 0, 1, 2),
      Running("c2", "n1", "GPU-bbbb2222-0000,NVIDIA,1,50:;", 0, 1, 2),
      // n2: three pods > split count 2.
      Running("s1", "n2", "GPU-cccc3333-0000,NVIDIA,1,0:;", 0, 1, 2),
      Running("s2", "n2", "GPU-cccc3333-0000,NVIDIA,1,0:;", 0, 1, 2),
      Running("s3", "n2", ";GPU-cccc3333-0000,NVIDIA,1,0:;", 0, 1, 2),
  };
  Report r = BuildReport(in);
  EXPECT_EQ(r.overcommitted_devices, 3);
  ASSERT_EQ(r.gpus[0].overcommit.size(), 1u);
  EXPECT_EQ(r.gpus[0].overcommit[0], "memory 32769 > 32768 MiB");
  EXPECT_EQ(r.gpus[1].overcommit[0], "cores 101 > 100 %");
  EXPECT_EQ(r.gpus[2].overcommit[0], "pods 3 > split count 2");
  EXPECT_EQ(r.pods[6].devices[0].container, 1u);
  nlohmann::json j = ReportToJson(r);
  EXPECT_EQ(j["overcommitted_devices"], 3);
  EXPECT_EQ(j["gpus"][2]["overcommitted"], true);
}

TEST(ReportTest, ScalingRaisesTheLimits) {
  ReportInput in = Input();
  in.memory_scaling = 2.0;
  in.core_scaling = 1.5;
  in.pods = {Running("a", "n2", "GPU-cccc3333-0000,NVIDIA,30000,150:;", 0, 1, 2)};
  Report r = BuildReport(in);
  EXPECT_EQ(r.gpus[2].memory_limit_mib, 32000);
  EXPECT_EQ(r.gpus[2].cores_limit, 150);
  EXPECT_EQ(r.overcommitted_devices, 0);
}

TEST(ReportTest, FinishedPodsHoldNothingAndUnknownDevicesAreCounted) {
  ReportInput in = Input();
  PodObservation done = Running("done", "n2", "GPU-cccc3333-0000,NVIDIA,16000,100:;", 0, 1, 2);
  done.phase = "Succeeded";
  PodObservation failed = Running("failed", "n2", "GPU-cccc3333-0000,NVIDIA,16000,100:;", 0, 1, 2);
  failed.phase = "Failed";
  failed.running = false;
  failed.message = "Allocate: no device";
  in.pods = {done,
             failed,
             Running("now", "n2", "GPU-cccc3333-0000,NVIDIA,16000,100:;", 0, 1, 2),
             Running("ghost", "n2", "GPU-nothere-0000,NVIDIA,1,0:;", 0, 1, 2),
             Running("wrongnode", "n2", "GPU-aaaa1111-0000,NVIDIA,1,0:;", 0, 1, 2),
             Running("garbled", "n2", "GPU-x,NVIDIA,lots,0:;", 0, 1, 2)};
  Report r = BuildReport(in);
  EXPECT_EQ(r.overcommitted_devices, 0);
  EXPECT_EQ(r.gpus[2].used_memory_mib, 16000);
  EXPECT_EQ(r.gpus[0].used_slots, 0);
  EXPECT_EQ(r.unknown_device_allocations, 3);
  EXPECT_EQ(r.pods_succeeded, 1);
  EXPECT_EQ(r.pods_failed, 1);
  EXPECT_EQ(r.pods[1].reason, "Allocate: no device");
}

TEST(ReportTest, StatesAndReasons) {
  ReportInput in = Input();
  PodObservation denied;
  denied.name = "denied";
  denied.denied = true;
  denied.message = "container main is privileged";
  PodObservation unsched;
  unsched.name = "big";
  unsched.created = true;
  unsched.created_at = kT0;
  unsched.phase = "Pending";
  unsched.scheduler_name = "hami-scheduler";
  unsched.attempts = 3;
  unsched.last_failure = "0/2 nodes are available: 2 CardInsufficientMemory.";
  PodObservation cpu = unsched;
  cpu.name = "cpu";
  cpu.scheduler_name = "default-scheduler";
  cpu.attempts = 0;
  PodObservation allocating = Running("alloc", "n1", "GPU-aaaa1111-0000,NVIDIA,1,0:;", 0, 1, 2);
  allocating.phase = "Pending";
  allocating.bind_phase = "allocating";
  allocating.running = false;
  in.pods = {denied, unsched, cpu, allocating};
  Report r = BuildReport(in);
  EXPECT_EQ(r.pods_denied, 1);
  EXPECT_EQ(r.pods[0].reason, "admission webhook denied it: container main is privileged");
  EXPECT_EQ(r.pods_unschedulable, 1);
  EXPECT_EQ(r.pods[1].state, PodState::kUnschedulable);
  EXPECT_EQ(r.pods[1].reason, "0/2 nodes are available: 2 CardInsufficientMemory.");
  EXPECT_EQ(r.pods[2].state, PodState::kPending);
  EXPECT_NE(r.pods[2].reason.find("default-scheduler"), std::string::npos);
  EXPECT_EQ(r.pods_pending, 2);
  EXPECT_EQ(r.pods_allocating, 1);
  // A bound, not yet running pod still holds its device.
  EXPECT_EQ(r.gpus[0].used_slots, 1);
  EXPECT_NE(r.pods[3].reason.find("bind-phase allocating"), std::string::npos);
}

// lost_allocations: a Running pod the live scheduler's index does not count on its devices.
TEST(ReportTest, LostAllocationsAgainstTheLiveIndex) {
  ReportInput in = Input();
  in.pods = {Running("counted", "n1", "GPU-aaaa1111-0000,NVIDIA,1000,0:;", 0, 1, 2),
             Running("missing", "n1", "GPU-aaaa1111-0000,NVIDIA,1000,0:;", 0, 1, 2),
             Running("moved", "n1", "GPU-bbbb2222-0000,NVIDIA,1000,0:;", 0, 1, 2),
             Running("nodevices", "n1", "", 0, 1, 2)};
  Report unknown = BuildReport(in);
  EXPECT_EQ(unknown.lost_allocations, -1);  // nobody to ask
  in.scheduler_counted = std::map<std::string, std::set<std::string>>{
      {"default/counted", {"GPU-aaaa1111-0000"}}, {"default/moved", {"GPU-aaaa1111-0000"}}};
  in.scheduler_restarts = 3;
  in.plugin_restarts = 2;
  in.leader_changes = 1;
  in.failover_seconds_max = 4.5;
  in.faults_injected = {{"killScheduler", 3}};
  in.pods_recreated = 1;
  Report r = BuildReport(in);
  EXPECT_EQ(r.lost_allocations, 2);
  EXPECT_EQ(r.lost, (std::vector<std::string>{"default/missing", "default/moved"}));
  nlohmann::json j = ReportToJson(r);
  EXPECT_EQ(j["lost_allocations"], 2);
  EXPECT_EQ(j["scheduler_restarts"], 3);
  EXPECT_EQ(j["plugin_restarts"], 2);
  EXPECT_EQ(j["leader_changes"], 1);
  EXPECT_DOUBLE_EQ(j["failover_seconds_max"].get<double>(), 4.5);
  EXPECT_EQ(j["faults_injected"]["killScheduler"], 3);
  EXPECT_EQ(j["pods_recreated"], 1);
  EXPECT_NE(RenderText(r, false).find("lost allocations: 2"), std::string::npos);
}

TEST(ReportTest, LatencyPercentiles) {
  ReportInput in = Input();
  for (int i = 1; i <= 100; ++i) {
    // schedule = i ms, bind = 2i ms.
    in.pods.push_back(Running("p" + std::to_string(i), "n1", "", 0, i, 3 * i));
  }
  for (int i = 1; i <= 200; ++i) in.filter_latencies_ms.push_back(i / 100.0);  // 0.01..2 ms
  Report r = BuildReport(in);
  EXPECT_EQ(r.schedule.count, 100u);
  EXPECT_EQ(r.filter.count, 200u);
  EXPECT_DOUBLE_EQ(r.filter.p50_ms, 1.0);
  EXPECT_DOUBLE_EQ(r.filter.p99_ms, 1.98);
  EXPECT_DOUBLE_EQ(r.schedule.p50_ms, 50);
  EXPECT_DOUBLE_EQ(r.schedule.p99_ms, 99);
  EXPECT_DOUBLE_EQ(r.schedule.max_ms, 100);
  EXPECT_DOUBLE_EQ(r.bind.p99_ms, 198);
  EXPECT_DOUBLE_EQ(r.e2e.p50_ms, 150);
  nlohmann::json j = ReportToJson(r);
  EXPECT_DOUBLE_EQ(j["bind_latency_p99_ms"].get<double>(), 198);
  EXPECT_DOUBLE_EQ(j["filter_latency_p50_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["filter_latency_p99_ms"].get<double>(), 1.98);
  EXPECT_DOUBLE_EQ(j["latency"]["filter"]["p99_ms"].get<double>(), 1.98);
  for (const char* key :
       {"pods_total", "pods_running", "pods_unschedulable", "overcommitted_devices", "wall_seconds",
        "pods_per_second", "bind_latency_p99_ms", "pods", "gpus"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_DOUBLE_EQ(Percentile({}, 99), 0);
  EXPECT_DOUBLE_EQ(Percentile({5}, 1), 5);
  EXPECT_DOUBLE_EQ(Percentile({3, 1, 2}, 50), 2);
}

TEST(ReportTest, BarsUuidsAndText) {
  EXPECT_EQ(UsageBar(16384, 32768, 10), "[#####.....]");
  EXPECT_EQ(UsageBar(0, 100, 4), "[....]");
  EXPECT_EQ(UsageBar(1, 1000, 4), "[#...]");
  EXPECT_EQ(UsageBar(100, 100, 4), "[####]");
  EXPECT_EQ(UsageBar(150, 100, 4), "[!!!!]");
  EXPECT_EQ(ShortUuid("GPU-0fc3eda5-e98b-a25b"), "GPU-0fc3eda5");
  EXPECT_EQ(ShortUuid("plain"), "plain");

  ReportInput in = Input();
  in.pods = {Running("a", "n1", "GPU-aaaa1111-0000,NVIDIA,16384,30:;", 0, 1, 2)};
  PodObservation big;
  big.name = "big";
  big.created = true;
  big.scheduler_name = "hami-scheduler";
  big.attempts = 1;
  big.last_failure = "0/2 nodes are available: 2 CardInsufficientMemory.";
  in.pods.push_back(big);
  std::string text = RenderText(BuildReport(in), /*color=*/false);
  EXPECT_NE(text.find("== Placements"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU-aaaa1111"), std::string::npos);
  EXPECT_NE(text.find("[##########..........] 16384/32768 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("big"), std::string::npos);
  EXPECT_NE(text.find("CardInsufficientMemory"), std::string::npos);
  EXPECT_NE(text.find("over-committed GPUs: 0"), std::string::npos);
  EXPECT_EQ(text.find("\033["), std::string::npos);
}

}  // namespace
}  // namespace hami::sim

namespace hami::sim {
namespace {

// A ResourceClaim as kube-scheduler leaves it: allocation results on pool `node`, reserved for
// `pods`, owned by the pod with `owner_uid` ("" = a standalone claim).
nlohmann::json DraClaim(const std::string& name, const std::string& node,
                        const std::vector<std::pair<std::string, nlohmann::json>>& results,
                        const std::vector<std::string>& pods, const std::string& owner_uid) {
  nlohmann::json claim = {{"metadata", {{"namespace", "default"}, {"name", name}}}};
  if (!owner_uid.empty()) {
    claim["metadata"]["ownerReferences"] = {
        {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", "p"}, {"uid", owner_uid}}};
  }
  if (results.empty()) return claim;
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& [device, consumed] : results) {
    nlohmann::json r = {{"request", "gpu"},
                        {"driver", "hami-core-gpu.project-hami.io"},
                        {"pool", node},
                        {"device", device}};
    if (!consumed.is_null()) {
      r["shareID"] = "s-" + device;
      r["consumedCapacity"] = consumed;
    }
    rs.push_back(r);
  }
  claim["status"]["allocation"]["devices"]["results"] = rs;
  for (const std::string& p : pods) {
    claim["status"]["reservedFor"].push_back({{"resource", "pods"}, {"name", p}, {"uid", p}});
  }
  return claim;
}

TEST(ReportDraTest, SharesFillTheirGpusAndOrphansAndLimitsAreCounted) {
  ReportInput in = Input();
  in.dra = true;
  // n1's second GPU is in MIG mode (DRA: per GPU) with a 1g.5gb profile at slices 0 and 1.
  deviceplugin::MigProfileCapacity one_g;
  one_g.profile = {"1g.5gb", 4864, 14, 1, {{0, 1}, {1, 1}}};
  one_g.instance_count = 2;
  in.nodes[0].gpus[1].mig_profiles = {one_g};
  const std::vector<nlohmann::json> claims = {
      DraClaim("a-gpu", "n1", {{"hami-gpu-0", {{"memory", "3000Mi"}, {"cores", "30"}}}}, {"a"},
               "uid-a"),
      DraClaim("b-gpu", "n1",
               {{"hami-gpu-0", {{"memory", "30000Mi"}, {"cores", "80"}}},
                {"hami-gpu-0", {{"memory", "1Gi"}, {"cores", "10"}}}},
               {"b"}, "uid-b"),
      DraClaim("whole", "n2", {{"hami-gpu-0", nullptr}}, {"c", "d"}, ""),
      DraClaim("gone-gpu", "n1", {}, {}, "uid-deleted"),
      DraClaim("mig", "n1", {{"hami-gpu-1-mig-1g-5gb-0", nullptr}}, {"e"}, "uid-e"),
      DraClaim("mig2", "n1", {{"hami-gpu-1-mig-1g-5gb-1", nullptr}}, {"f"}, "uid-e"),
      DraClaim("nowhere", "n1", {{"hami-gpu-1-mig-1g-5gb-5", nullptr}}, {"g"}, "uid-e"),
  };
  in.dra_claims = ObserveDraClaims(claims, {"uid-a", "uid-b", "uid-e"});
  EXPECT_EQ(in.dra_claims.claims_total, 7);
  EXPECT_EQ(in.dra_claims.claims_allocated, 6);
  ASSERT_EQ(in.dra_claims.orphaned, std::vector<std::string>{"default/gone-gpu"});

  PodObservation a = Running("a", "n1", "", 0, 10, 20);
  a.container_claims = {{"default/a-gpu"}};
  a.container_envs = {{{"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"}, {"CUDA_DEVICE_SM_LIMIT_0", "30"}}};
  PodObservation b = Running("b", "n1", "", 0, 10, 20);
  b.container_claims = {{"default/b-gpu"}};  // two shares of one GPU: summed, as the plugin does
  b.container_envs = {{{"CUDA_DEVICE_MEMORY_LIMIT_0", "30000m"}, {"CUDA_DEVICE_SM_LIMIT_0", "90"}}};
  PodObservation c = Running("c", "n2", "", 0, 10, 20);
  c.container_claims = {{"default/whole"}};  // a whole GPU: no limits
  c.container_envs = {{{"NVIDIA_VISIBLE_DEVICES", "GPU-cccc3333-0000"}}};
  in.pods = {a, b, c};

  const Report r = BuildReport(in);
  EXPECT_TRUE(r.dra);
  EXPECT_EQ(r.dra_claims_allocated, 6);
  EXPECT_EQ(r.dra_claims_orphaned, 1);
  EXPECT_EQ(r.unknown_device_allocations, 1);  // no 1g.5gb placement starts at slice 5
  // n1 GPU 0: 3000 + 30000 + 1024 MiB = 34024 > 32768: over-committed, and reported so.
  ASSERT_EQ(r.gpus[0].dra_shares.size(), 3u);
  EXPECT_EQ(r.gpus[0].used_memory_mib, 34024);
  EXPECT_EQ(r.gpus[0].used_cores, 120);
  EXPECT_EQ(r.overcommitted_devices, 1);
  // The MIG devices are instances of their GPU: the profile's memory, checked for overlap.
  ASSERT_EQ(r.gpus[1].dra_shares.size(), 2u);
  EXPECT_EQ(r.gpus[1].dra_shares[0].memory_mib, 4864);
  EXPECT_EQ(r.gpus[1].used_memory_mib, 9728);
  EXPECT_EQ(r.gpus[1].mode, "mig");
  ASSERT_EQ(r.gpus[1].mig_instances.size(), 2u);
  EXPECT_EQ(r.gpus[1].mig_instances[1].start, 1u);
  EXPECT_EQ(r.overlapping_mig_placements, 0);
  EXPECT_EQ(r.gpus[2].dra_shares[0].memory_mib, 16000);
  EXPECT_EQ(r.gpus[2].pods, (std::vector<std::string>{"default/c", "default/d"}));
  // b's env says 30000m for 31024 MiB of shares: a mismatch, named.
  EXPECT_EQ(r.dra_env_checked, 3);
  EXPECT_EQ(r.dra_env_mismatches, 1);
  ASSERT_EQ(r.dra_env_mismatch.size(), 1u);
  EXPECT_EQ(r.dra_env_mismatch[0],
            "default/b container 0: CUDA_DEVICE_MEMORY_LIMIT_0 = 30000m, want 31024m");

  const nlohmann::json j = ReportToJson(r);
  EXPECT_EQ(j["dra_claims_allocated"], 6);
  EXPECT_EQ(j["dra_claims_orphaned"], 1);
  EXPECT_EQ(j["dra_env_mismatches"], 1);
  EXPECT_EQ(j["gpus"][0]["dra_shares"][0]["claim"], "default/a-gpu");
  EXPECT_EQ(j["gpus"][0]["dra_shares"][0]["memory_mib"], 3000);
  EXPECT_EQ(j["pods"][0]["limits_env"][0]["CUDA_DEVICE_MEMORY_LIMIT_0"], "3000m");
  EXPECT_EQ(j["pods"][0]["limits_env"][0]["CUDA_DEVICE_SM_LIMIT_0"], "30");
  EXPECT_EQ(j["pods"][2]["limits_env"][0]["NVIDIA_VISIBLE_DEVICES"], "GPU-cccc3333-0000");
  EXPECT_NE(RenderText(r, false).find("6 of 7 claims allocated, 1 orphaned"), std::string::npos);
}

TEST(ReportDraTest, WithoutDraTheJsonHasNoDraFields) {
  const nlohmann::json j = ReportToJson(BuildReport(Input()));
  EXPECT_FALSE(j.contains("dra_claims_allocated"));
}

}  // namespace
}  // namespace hami::sim
