// Scenario YAML: a full document, defaults, expansion of node groups and replicas, and malformed
// input rejected with the field path and the offending value.
#include "sim/scenario.h"

#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/vendors/nvidia/nvidia_config.h"

namespace hami::sim {
namespace {

constexpr const char* kFull = R"(
name: t
description: a test
timing: {kubeletLatency: 5ms, timeout: 3s, podCreators: 2, podInitialBackoff: 50ms, podMaxBackoff: 2s}
policies: {nodeSchedulerPolicy: spread, gpuSchedulerPolicy: "binpack,numa"}
faults: {errorRate: 0.05, latency: 1ms, dropWatchEvery: 7}
deviceConfig:
  nvidia: {deviceSplitCount: 4, deviceMemoryScaling: 2}
nodes:
  - name: n-{i}
    count: 3
    labels: {pool: a}
    gpus:
      - {model: Tesla V100-PCIE-32GB, memory: 32768, count: 2, numa: 1}
      - {model: Tesla T4, memory: 15360}
  - name: solo
    gpus:
      - {model: A100, memory: 81920, uuids: [GPU-x]}
workloads:
  - name: w
    namespace: team
    replicas: 3
    arrival: 1s
    interval: 100ms
    duration: 1500ms
    annotations: {nvidia.com/use-gputype: V100}
    containers:
      - name: c
        resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 4000}
  - name: early
    containers:
      - name: c
        resources: {nvidia.com/gpu: "2"}
)";

TEST(ScenarioTest, ParsesEveryField) {
  auto s = ParseScenario(kFull);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->name, "t");
  EXPECT_EQ(s->kubelet_latency, std::chrono::milliseconds(5));
  EXPECT_EQ(s->timeout, std::chrono::milliseconds(3000));
  EXPECT_EQ(s->pod_creators, 2);
  EXPECT_EQ(s->pod_initial_backoff, std::chrono::milliseconds(50));
  EXPECT_EQ(s->pod_max_backoff, std::chrono::milliseconds(2000));
  EXPECT_EQ(s->node_scheduler_policy, "spread");
  EXPECT_EQ(s->gpu_scheduler_policy, "binpack,numa");
  EXPECT_DOUBLE_EQ(s->fault_error_rate, 0.05);
  EXPECT_EQ(s->fault_latency, std::chrono::milliseconds(1));
  EXPECT_EQ(s->fault_drop_watch_every, 7);
  EXPECT_EQ(device::nvidia::NvidiaSectionOrDefaults(s->device_config).device_split_count, 4);
  EXPECT_DOUBLE_EQ(device::nvidia::NvidiaSectionOrDefaults(s->device_config).device_memory_scaling,
                   2.0);
  auto plugin = PluginConfigFor(*s);
  ASSERT_TRUE(plugin.ok()) << plugin.error();
  EXPECT_EQ(plugin->device_split_count, 4);
  ASSERT_EQ(s->workloads.size(), 2u);
  const Workload& w = s->workloads[0];
  EXPECT_EQ(w.ns, "team");
  EXPECT_EQ(w.replicas, 3);
  EXPECT_DOUBLE_EQ(w.duration_seconds, 1.5);
  EXPECT_EQ(w.annotations.at("nvidia.com/use-gputype"), "V100");
  EXPECT_EQ(w.containers[0].resources.at("nvidia.com/gpumem"), "4000");
  EXPECT_EQ(s->workloads[1].ns, "default");
  EXPECT_EQ(s->workloads[1].containers[0].resources.at("nvidia.com/gpu"), "2");
}

TEST(ScenarioTest, ExpandsNodesWithStableUuids) {
  auto s = ParseScenario(kFull);
  ASSERT_TRUE(s.ok()) << s.error();
  std::vector<ExpandedNode> nodes = ExpandNodes(*s);
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].name, "n-0");
  EXPECT_EQ(nodes[2].name, "n-2");
  EXPECT_EQ(nodes[3].name, "solo");
  EXPECT_EQ(nodes[1].labels.at("pool"), "a");
  ASSERT_EQ(nodes[0].gpus.size(), 3u);
  EXPECT_EQ(nodes[0].gpus[1].index, 1u);
  EXPECT_EQ(nodes[0].gpus[1].numa, 1);
  EXPECT_EQ(nodes[0].gpus[2].model, "Tesla T4");
  EXPECT_EQ(nodes[0].gpus[2].index, 2u);
  EXPECT_EQ(nodes[3].gpus[0].uuid, "GPU-x");
  const std::regex uuid("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  EXPECT_TRUE(std::regex_match(nodes[0].gpus[0].uuid, uuid)) << nodes[0].gpus[0].uuid;
  EXPECT_EQ(nodes[0].gpus[0].uuid, GpuUuid("n-0", 0));
  EXPECT_NE(GpuUuid("n-0", 0), GpuUuid("n-0", 1));
  EXPECT_NE(GpuUuid("n-0", 1), GpuUuid("n-1", 0));
}

TEST(ScenarioTest, ExpandsPodsByArrival) {
  auto s = ParseScenario(kFull);
  ASSERT_TRUE(s.ok()) << s.error();
  std::vector<PlannedPod> pods = ExpandPods(*s);
  ASSERT_EQ(pods.size(), 4u);
  EXPECT_EQ(pods[0].name, "early");  // arrival 0 sorts before w's 1 s
  EXPECT_EQ(pods[1].name, "w-0");
  EXPECT_EQ(pods[1].ns, "team");
  EXPECT_EQ(pods[1].arrival, std::chrono::milliseconds(1000));
  EXPECT_EQ(pods[3].name, "w-2");
  EXPECT_EQ(pods[3].arrival, std::chrono::milliseconds(1200));
  EXPECT_EQ(pods[3].workload_index, 0u);
}

TEST(ScenarioTest, Defaults) {
  auto s = ParseScenario(R"(
nodes: [{name: a, gpus: [{model: T4, memory: 15360}]}]
workloads: [{name: p, containers: [{name: c}]}]
)");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->kubelet_latency, std::chrono::milliseconds(20));
  EXPECT_EQ(s->pod_initial_backoff, std::chrono::milliseconds(1000));  // kube-scheduler's
  EXPECT_EQ(s->pod_max_backoff, std::chrono::milliseconds(10000));
  EXPECT_EQ(s->node_scheduler_policy, "binpack");
  EXPECT_EQ(s->gpu_scheduler_policy, "spread");
  EXPECT_EQ(device::nvidia::NvidiaSectionOrDefaults(s->device_config).device_split_count, 10);
  EXPECT_TRUE(s->device_config_yaml.empty());
  EXPECT_EQ(s->workloads[0].replicas, 1);
  EXPECT_EQ(ExpandPods(*s)[0].name, "p");
}

struct Bad {
  const char* name;
  std::string yaml;
  std::string want;  // substring of the error
};

const std::string kNodes = "nodes: [{name: a, gpus: [{model: T4, memory: 15360}]}]\n";
const std::string kWork = "workloads: [{name: p, containers: [{name: c}]}]\n";

TEST(ScenarioTest, RejectsMalformedInputNamingFieldAndValue) {
  const std::vector<Bad> cases = {
      {"not yaml", "nodes: [", "not valid YAML"},
      {"not a map", "- a\n- b\n", "scenario: want a map"},
      {"unknown top key", kNodes + kWork + "node: 1\n", "node: unknown key"},
      {"no nodes", kWork, "nodes: want a non-empty list, got \"<missing>\""},
      {"no workloads", kNodes, "workloads: want a non-empty list"},
      {"bad replicas", kNodes + "workloads: [{name: p, replicas: many, containers: [{name: c}]}]",
       "workloads[0].replicas: want an integer in [0, 1000000], got \"many\""},
      {"negative count",
       "nodes: [{name: \"a-{i}\", count: -1, gpus: [{model: T4, memory: 1}]}]\n" + kWork,
       "nodes[0].count: want an integer in [1, 100000], got \"-1\""},
      {"pattern without {i}",
       "nodes: [{name: a, count: 2, gpus: [{model: T4, memory: 1}]}]\n" + kWork,
       "nodes[0].name: want a pattern with {i} when count > 1, got \"a\""},
      {"gpu memory", "nodes: [{name: a, gpus: [{model: T4, memory: 16GB}]}]\n" + kWork,
       "nodes[0].gpus[0].memory: want an integer in [1, 16777216], got \"16GB\""},
      {"gpu model missing", "nodes: [{name: a, gpus: [{memory: 1}]}]\n" + kWork,
       "nodes[0].gpus[0].model: want a non-empty string, got \"<missing>\""},
      {"uuid count",
       "nodes: [{name: a, gpus: [{model: T4, memory: 1, count: 2, uuids: [x]}]}]\n" + kWork,
       "nodes[0].gpus[0].uuids: want 2 UUIDs (count), got \"1 UUIDs\""},
      {"bad duration", kNodes + "workloads: [{name: p, arrival: soon, containers: [{name: c}]}]",
       "workloads[0].arrival: want a duration like 250ms or 2s, got \"soon\""},
      {"bad quantity",
       kNodes +
           "workloads: [{name: p, containers: [{name: c, resources: {nvidia.com/gpumem: lots}}]}]",
       "workloads[0].containers[0].resources.nvidia.com/gpumem: want a quantity, got \"lots\""},
      {"no containers", kNodes + "workloads: [{name: p}]",
       "workloads[0].containers: want a non-empty list"},
      {"unknown workload key",
       kNodes + "workloads: [{name: p, replica: 2, containers: [{name: c}]}]",
       "workloads[0].replica: unknown key"},
      {"bad node policy", kNodes + kWork + "policies: {nodeSchedulerPolicy: random}",
       "policies.nodeSchedulerPolicy: want binpack or spread, got \"random\""},
      {"bad gpu policy", kNodes + kWork + "policies: {gpuSchedulerPolicy: fastest}",
       "policies.gpuSchedulerPolicy: "},
      {"error rate", kNodes + kWork + "faults: {errorRate: 2}",
       "faults.errorRate: want a fraction in [0, 0.5], got \"2\""},
      {"device config", kNodes + kWork + "deviceConfig: {nvidia: {deviceSplitCount: x}}",
       "deviceConfig: nvidia.deviceSplitCount"},
      {"duplicate node",
       "nodes: [{name: a, gpus: [{model: T4, memory: 1}]}, {name: a, gpus: "
       "[{model: T4, memory: 1}]}]\n" +
           kWork,
       "duplicate node name \"a\""},
      {"duplicate pod",
       kNodes + "workloads: [{name: p, containers: [{name: c}]}, {name: p, "
                "containers: [{name: c}]}]",
       "duplicate pod name \"default/p\""},
      {"timeout zero", kNodes + kWork + "timing: {timeout: 0s}", "timing.timeout: want a positive"},
      {"backoff zero", kNodes + kWork + "timing: {podInitialBackoff: 0s}",
       "timing.podInitialBackoff: want a positive duration, got \"0\""},
      {"backoff order", kNodes + kWork + "timing: {podInitialBackoff: 5s, podMaxBackoff: 1s}",
       "timing.podMaxBackoff: want at least podInitialBackoff, got \"1000ms\""},
      {"fault without schedule", kNodes + kWork + "faults: {killPlugin: {down: 1s}}",
       "faults.killPlugin: want a schedule: `at` offsets or an `every` period"},
      {"fault at", kNodes + kWork + "faults: {restartKubelet: {at: [1s, later]}}",
       "faults.restartKubelet.at[1]: want a duration like 250ms or 2s, got \"later\""},
      {"fault every zero", kNodes + kWork + "faults: {killScheduler: {every: 0s}}",
       "faults.killScheduler.every: want a positive duration, got \"0\""},
      {"fault unknown key", kNodes + kWork + "faults: {deleteNode: {at: [1s], target: leader}}",
       "faults.deleteNode.target: unknown key"},
      {"fault target", kNodes + kWork + "faults: {killScheduler: {every: 1s, target: boss}}",
       "faults.killScheduler.target: want any, leader or follower, got \"boss\""},
      {"leader target, one replica",
       kNodes + kWork + "faults: {killScheduler: {every: 1s, target: leader}}",
       "faults.killScheduler.target: want any with schedulerReplicas 1, got \"leader\""},
      {"clock skew", kNodes + kWork + "faults: {clockSkew: {scheduler: ahead}}",
       "faults.clockSkew.scheduler: want a duration like 30s or -2m, got \"ahead\""},
      {"monitors", kNodes + kWork + "monitors: sometimes",
       "monitors: want auto, on or off, got \"sometimes\""},
      {"replicas", kNodes + kWork + "schedulerReplicas: 4",
       "schedulerReplicas: want an integer in [1, 3], got \"4\""},
      {"lease seconds", kNodes + kWork + "leaderElection: {leaseDuration: 1500ms}",
       "leaderElection.leaseDuration: want whole seconds, at least 1s, got \"1500ms\""},
      {"lease order", kNodes + kWork + "leaderElection: {leaseDuration: 2s, renewDeadline: 3s}",
       "leaderElection.renewDeadline: want less than leaseDuration, got \"3000ms\""},
  };
  for (const Bad& c : cases) {
    auto s = ParseScenario(c.yaml);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_NE(s.error().find(c.want), std::string::npos) << c.name << ": " << s.error();
  }
}

TEST(ScenarioTest, ParsesProcessFaultsAndReplicas) {
  auto s = ParseScenario(kNodes + kWork + R"(
schedulerReplicas: 2
leaderElection: {leaseDuration: 2s, renewDeadline: 1s, retryPeriod: 200ms}
faults:
  seed: 7
  killScheduler: {every: 3s, start: 1s, count: 2, down: 100ms, target: leader}
  killPlugin: {every: 500ms}
  restartKubelet: {at: [2s, 1s]}
  restartApiServer: {at: [4s]}
  deleteNode: {at: [3s], down: 2s}
  unhealthyGpu: {at: [5s]}
  clockSkew: {scheduler: 6m, plugins: -90s}
)");
  ASSERT_TRUE(s.ok()) << s.error();
  using std::chrono::milliseconds;
  EXPECT_EQ(s->scheduler_replicas, 2);
  EXPECT_EQ(s->leader_election.lease_duration, std::chrono::seconds(2));
  EXPECT_EQ(s->leader_election.renew_deadline, milliseconds(1000));
  EXPECT_EQ(s->leader_election.retry_period, milliseconds(200));
  const ProcessFaults& f = s->process_faults;
  EXPECT_TRUE(f.any());
  EXPECT_EQ(f.seed, 7u);
  EXPECT_EQ(f.kill_scheduler_target, KillTarget::kLeader);
  EXPECT_EQ(f.kill_scheduler.down, milliseconds(100));
  EXPECT_EQ(f.kill_scheduler.Times(milliseconds(60000)),
            (std::vector<milliseconds>{milliseconds(1000), milliseconds(4000)}));
  EXPECT_EQ(f.kill_plugin.Times(milliseconds(1200)),
            (std::vector<milliseconds>{milliseconds(0), milliseconds(500), milliseconds(1000)}));
  EXPECT_EQ(f.restart_kubelet.Times(milliseconds(60000)),
            (std::vector<milliseconds>{milliseconds(1000), milliseconds(2000)}));
  EXPECT_EQ(f.restart_api_server.Times(milliseconds(3000)), std::vector<milliseconds>{});
  EXPECT_EQ(f.delete_node.down, milliseconds(2000));
  EXPECT_TRUE(f.unhealthy_gpu.enabled());
  EXPECT_EQ(f.scheduler_clock_skew, milliseconds(360000));
  EXPECT_EQ(f.plugin_clock_skew, milliseconds(-90000));
}

TEST(ScenarioTest, NoProcessFaultsByDefault) {
  auto s = ParseScenario(kNodes + kWork);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_FALSE(s->process_faults.any());
  EXPECT_EQ(s->scheduler_replicas, 1);
  EXPECT_EQ(s->leader_election.lease_duration, std::chrono::seconds(15));
}

// The monitors (one pod informer each) run where someone reads them: a container's `usage:`, a
// --serve run, or `monitors: on`; 1,000 of them made examples/scale.yaml several times slower.
TEST(ScenarioTest, MonitorsRunWhereSomethingReadsThem) {
  const std::string used =
      "workloads: [{name: p, containers: [{name: c, usage: {memory: 100, utilization: 5}}]}]\n";
  struct Case {
    std::string yaml;
    bool serving;
    bool want;
  };
  const Case cases[] = {
      {kNodes + kWork, false, false},
      {kNodes + kWork, true, true},
      {kNodes + used, false, true},
      {kNodes + kWork + "monitors: auto\n", false, false},
      {kNodes + kWork + "monitors: on\n", false, true},
      {kNodes + used + "monitors: off\n", true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml + (c.serving ? " (serving)" : ""));
    auto s = ParseScenario(c.yaml);
    ASSERT_TRUE(s.ok()) << s.error();
    EXPECT_EQ(RunsMonitors(*s, c.serving), c.want);
  }
}

TEST(ScenarioTest, LoadFileNamesThePath) {
  auto s = LoadScenarioFile("/nonexistent/x.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("/nonexistent/x.yaml"), std::string::npos);
}

}  // namespace
}  // namespace hami::sim

namespace hami::sim {
namespace {

const std::string kDraNodes = "nodes: [{name: a, gpus: [{model: T4, memory: 15360}]}]\n";
const std::string kDraObjects =
    "resourceClaimTemplates: [{name: half, spec: {devices: {requests: [{name: gpu, exactly: "
    "{deviceClassName: hami-core-gpu.project-hami.io}}]}}}]\n"
    "resourceClaims: [{name: shared, namespace: ml, spec: {devices: {requests: [{name: gpu, "
    "exactly: {deviceClassName: hami-core-gpu.project-hami.io, count: 2}}]}}}]\n";

TEST(ScenarioDraTest, ParsesClaimsTemplatesAndDeletions) {
  auto s = ParseScenario("dra: true\n" + kDraNodes + kDraObjects +
                         "workloads:\n"
                         "  - name: p\n"
                         "    deleteAfter: 2s\n"
                         "    claims: [{name: gpu, template: half}]\n"
                         "    containers: [{name: c, claims: [gpu]}]\n"
                         "  - name: q\n"
                         "    namespace: ml\n"
                         "    claims: [{name: g, claim: shared}]\n"
                         "    containers: [{name: c, claims: [g]}]\n");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(s->dra);
  ASSERT_EQ(s->claim_templates.size(), 1u);
  EXPECT_EQ(s->claim_templates[0].ns, "default");
  EXPECT_EQ(
      nlohmann::json::parse(s->claim_templates[0].spec_json)["devices"]["requests"][0]["name"],
      "gpu");
  ASSERT_EQ(s->claims.size(), 1u);
  // YAML scalars keep their JSON types: count stays an integer for the API server.
  EXPECT_EQ(
      nlohmann::json::parse(s->claims[0].spec_json)["devices"]["requests"][0]["exactly"]["count"],
      2);
  EXPECT_EQ(s->workloads[0].delete_after, std::chrono::milliseconds(2000));
  ASSERT_EQ(s->workloads[0].claims.size(), 1u);
  EXPECT_EQ(s->workloads[0].claims[0].claim_template, "half");
  EXPECT_EQ(s->workloads[1].claims[0].claim, "shared");
  EXPECT_EQ(s->workloads[1].containers[0].claims, std::vector<std::string>{"g"});
}

TEST(ScenarioDraTest, RejectsClaimsThatNameNothingOrNeedDraMode) {
  const std::string one =
      "workloads: [{name: p, claims: [{name: gpu, template: half}], "
      "containers: [{name: c, claims: [gpu]}]}]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kDraNodes + kDraObjects + one,
       "workloads[0].claims: want dra: true (claims are DRA's), got \"gpu\""},
      {"dra: yes\n" + kDraNodes + one, "dra: want true or false, got \"yes\""},
      {"dra: true\n" + kDraNodes + one,
       "workloads[0].claims[0].template: want one of resourceClaimTemplates in namespace "
       "\"default\", got \"half\""},
      {"dra: true\n" + kDraNodes + kDraObjects +
           "workloads: [{name: p, claims: [{name: gpu, claim: half}], containers: [{name: c}]}]\n",
       "workloads[0].claims[0].claim: want one of resourceClaims in namespace \"default\", got "
       "\"half\""},
      {"dra: true\n" + kDraNodes + kDraObjects +
           "workloads: [{name: p, claims: [{name: gpu, template: half}], containers: [{name: c, "
           "claims: [gpus]}]}]\n",
       "workloads[0].containers[0].claims[0]: want the name of one of the workload's claims, got "
       "\"gpus\""},
      {"dra: true\n" + kDraNodes + kDraObjects +
           "workloads: [{name: p, claims: [{name: gpu, template: half, claim: shared}], "
           "containers: [{name: c}]}]\n",
       "workloads[0].claims[0]: want exactly one of template and claim, got \"both\""},
      {"dra: true\n" + kDraNodes + "resourceClaims: [{name: x, spec: 3}]\n" + one,
       "resourceClaims[0].spec: want a map"},
      {"dra: true\nschedulerReplicas: 2\n" + kDraNodes + kDraObjects + one,
       "schedulerReplicas: want 1 with dra: true, got \"2\""},
  };
  for (const auto& [yaml, want] : cases) {
    auto s = ParseScenario(yaml);
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_NE(s.error().find(want), std::string::npos) << s.error() << "\nwant: " << want;
  }
}

}  // namespace
}  // namespace hami::sim
