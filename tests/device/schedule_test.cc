// The per-pod scheduling decision (docs/protocol.md#filter-and-scores, end to end).
#include "device/schedule.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::device {
namespace {

using nlohmann::json;

DeviceUsage Gpu(std::string id, uint64_t index, int32_t used, int32_t usedmem, int32_t usedcores) {
  return DeviceUsage{.id = std::move(id),
                     .index = index,
                     .type = "NVIDIA",
                     .vendor = "NVIDIA",
                     .health = true,
                     .mode = "hami-core",
                     .count = 10,
                     .used = used,
                     .totalmem = 8000,
                     .usedmem = usedmem,
                     .totalcore = 100,
                     .usedcores = usedcores};
}

// Vector 24: node1 has a pod on device1 (2000 MiB, 25 cores), node2 one on device4 (6000, 75).
std::vector<NodeUsage> Nodes() {
  return {NodeUsage{.name = "node1",
                    .devices = {Gpu("device1", 0, 1, 2000, 25), Gpu("device2", 1, 0, 0, 0)}},
          NodeUsage{.name = "node2",
                    .devices = {Gpu("device3", 0, 0, 0, 0), Gpu("device4", 1, 1, 6000, 75)}}};
}

json Container(const char* name, const char* mem, const char* cores) {
  return {
      {"name", name},
      {"resources",
       {{"limits",
         {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", mem}, {"nvidia.com/gpucores", cores}}}}}};
}

PodView Pod(json spec, json annotations = json::object()) {
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}, {"annotations", annotations}}},
              {"spec", spec}};
  auto view = ParsePodView(pod);
  EXPECT_TRUE(view) << view.error();
  return *view;
}

ScheduleOptions Options(NodePolicy node, const char* gpu) {
  return ScheduleOptions{.node_policy = node, .gpu_policy = *ParseGpuPolicy(gpu, true)};
}

struct Fixture {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
};

TEST(Schedule, SpecVector24) {
  Fixture f;
  PodView one = Pod({{"containers", {Container("main", "1000", "20")}}});
  struct Case {
    NodePolicy node;
    const char* gpu;
    const char* want_node;
    const char* want_device;
  };
  const Case cases[] = {
      {NodePolicy::kBinpack, "binpack", "node2", "device4"},
      {NodePolicy::kSpread, "binpack", "node1", "device1"},
      {NodePolicy::kSpread, "spread", "node1", "device2"},
  };
  for (const auto& c : cases) {
    auto d = Schedule(f.registry, one, Nodes(), {}, Options(c.node, c.gpu));
    ASSERT_TRUE(d) << d.error();
    ASSERT_NE(d->Chosen(), nullptr);
    EXPECT_EQ(d->Chosen()->node, c.want_node) << c.gpu;
    const auto& devices = d->Chosen()->devices.at("NVIDIA");
    ASSERT_EQ(devices.size(), 1u);
    ASSERT_EQ(devices[0].size(), 1u);
    EXPECT_EQ(devices[0][0].uuid, c.want_device) << c.gpu;
  }
  auto d = Schedule(f.registry, one, Nodes(), {}, Options(NodePolicy::kBinpack, "binpack"));
  ASSERT_TRUE(d);
  EXPECT_DOUBLE_EQ(d->nodes[0].score, 3.0);
  EXPECT_DOUBLE_EQ(d->nodes[1].score, 8.0);
}

TEST(Schedule, SpecVector24InitContainer) {
  Fixture f;
  PodView pod = Pod({{"initContainers", {Container("init", "5000", "20")}},
                     {"containers", {Container("main", "4000", "20")}}});
  auto d = Schedule(f.registry, pod, Nodes(), {}, Options(NodePolicy::kBinpack, "binpack"));
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr);
  EXPECT_EQ(d->Chosen()->node, "node2");
  auto annotations = AllocationAnnotations(f.registry, *d);
  const std::string want = "device3,NVIDIA,5000,20:;device3,NVIDIA,4000,20:;";
  EXPECT_EQ(annotations,
            (std::map<std::string, std::string>{{"hami.io/vgpu-node", "node2"},
                                                {"hami.io/vgpu-devices-to-allocate", want},
                                                {"hami.io/vgpu-devices-allocated", want}}));
}

// docs/protocol.md#device-lists-on-pods: one segment per init + regular container, empty ones
// included.
TEST(Schedule, PodDevicesAreIndexAligned) {
  Fixture f;
  json plain = {{"name", "sidecar"}};
  PodView pod = Pod({{"initContainers", {plain}},
                     {"containers", {plain, Container("main", "1000", "10"), plain}}});
  auto d = Schedule(f.registry, pod, Nodes(), {}, Options(NodePolicy::kSpread, "spread"));
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr);
  EXPECT_EQ(AllocationAnnotations(f.registry, *d).at("hami.io/vgpu-devices-allocated"),
            ";;device2,NVIDIA,1000,10:;;");
}

TEST(Schedule, LaterContainersSeeEarlierPicks) {
  Fixture f;
  // Two 3000 MiB containers on node2 under binpack: device4 has 2000 free, so both go to
  // device3, the second seeing the first's usage.
  PodView pod = Pod({{"containers", {Container("a", "3000", "10"), Container("b", "3000", "10")}}});
  std::vector<NodeUsage> nodes = {Nodes()[1]};
  auto d = Schedule(f.registry, pod, nodes, {}, Options(NodePolicy::kBinpack, "binpack"));
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(AllocationAnnotations(f.registry, *d).at("hami.io/vgpu-devices-allocated"),
            "device3,NVIDIA,3000,10:;device3,NVIDIA,3000,10:;");
  // A third would not fit: 8000 - 6000 < 3000 on device3, device4 has 2000.
  pod = Pod({{"containers",
              {Container("a", "3000", "10"), Container("b", "3000", "10"),
               Container("c", "3000", "10")}}});
  d = Schedule(f.registry, pod, nodes, {}, Options(NodePolicy::kBinpack, "binpack"));
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->Chosen(), nullptr);
  EXPECT_EQ(d->FailedNodes(),
            (std::map<std::string, std::string>{{"node2", "2/2 CardInsufficientMemory"}}));
}

TEST(Schedule, FailuresAndUnregisteredNodes) {
  Fixture f;
  PodView big = Pod({{"containers", {Container("main", "7000", "20")}}});
  auto d = Schedule(f.registry, big, Nodes(), {"node3"}, Options(NodePolicy::kBinpack, "spread"));
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->Chosen()->node, "node2");  // device3 (idle) fits; node2 scores higher
  PodView huge = Pod({{"containers", {Container("main", "9000", "20")}}});
  d = Schedule(f.registry, huge, Nodes(), {"node3"}, Options(NodePolicy::kBinpack, "spread"));
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->Chosen(), nullptr);
  EXPECT_EQ(d->FailedNodes(),
            (std::map<std::string, std::string>{{"node1", "2/2 CardInsufficientMemory"},
                                                {"node2", "2/2 CardInsufficientMemory"},
                                                {"node3", "node unregistered"}}));
  json three = Container("main", "100", "0");
  three["resources"]["limits"]["nvidia.com/gpu"] = "3";
  d = Schedule(f.registry, Pod({{"containers", {three}}}), Nodes(), {},
               Options(NodePolicy::kBinpack, "spread"));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->FailedNodes().at("node1"), "NodeInsufficientDevice");
  EXPECT_TRUE(AllocationAnnotations(f.registry, *d).empty());
}

TEST(Schedule, PassThroughWithoutRequests) {
  Fixture f;
  auto d = Schedule(f.registry, Pod({{"containers", {{{"name", "c"}}}}}), Nodes(), {},
                    Options(NodePolicy::kBinpack, "spread"));
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->pass_through);
  EXPECT_TRUE(d->nodes.empty());
}

TEST(Schedule, ErrorsAreValues) {
  Fixture f;
  auto d = Schedule(f.registry, Pod({{"containers", {Container("main", "lots", "20")}}}), Nodes(),
                    {}, Options(NodePolicy::kBinpack, "spread"));
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().find("container \"main\""), std::string::npos) << d.error();
  EXPECT_NE(d.error().find("\"lots\""), std::string::npos) << d.error();
  d = Schedule(f.registry,
               Pod({{"containers", {Container("main", "1000", "20")}}},
                   {{"hami.io/device-scoring-weights", "slot=1"}}),
               Nodes(), {}, Options(NodePolicy::kBinpack, "spread"));
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().find("hami.io/device-scoring-weights"), std::string::npos) << d.error();
}

TEST(Schedule, PodAnnotationsOverrideDefaults) {
  Fixture f;
  PodView pod = Pod(
      {{"containers", {Container("main", "1000", "20")}}},
      {{"hami.io/node-scheduler-policy", "spread"}, {"hami.io/gpu-scheduler-policy", "spread"}});
  auto d = Schedule(f.registry, pod, Nodes(), {}, Options(NodePolicy::kBinpack, "binpack"));
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->Chosen()->node, "node1");
  EXPECT_EQ(d->Chosen()->devices.at("NVIDIA")[0][0].uuid, "device2");
}

TEST(Schedule, TiesGoToTheFirstNodeName) {
  Fixture f;
  std::vector<NodeUsage> nodes = {NodeUsage{.name = "node-b", .devices = {Gpu("b0", 0, 0, 0, 0)}},
                                  NodeUsage{.name = "node-a", .devices = {Gpu("a0", 0, 0, 0, 0)}},
                                  NodeUsage{.name = "node-c", .devices = {Gpu("c0", 0, 0, 0, 0)}}};
  PodView pod = Pod({{"containers", {Container("main", "1000", "20")}}});
  for (NodePolicy p : {NodePolicy::kBinpack, NodePolicy::kSpread}) {
    auto d = Schedule(f.registry, pod, nodes, {}, ScheduleOptions{.node_policy = p});
    ASSERT_TRUE(d);
    EXPECT_EQ(d->Chosen()->node, "node-a");
  }
}

TEST(Schedule, QuotaBlocksEveryNode) {
  Fixture f;
  NamespaceQuota quota{{"nvidia.com/gpumem", {.used = 0, .limit = 0, .limit_set = true}}};
  ScheduleOptions options = Options(NodePolicy::kBinpack, "spread");
  options.quota = &quota;
  auto d = Schedule(f.registry, Pod({{"containers", {Container("main", "1000", "20")}}}), Nodes(),
                    {}, options);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->Chosen(), nullptr);
  EXPECT_EQ(d->FailedNodes().at("node1"), "2/2 ResourceQuotaNotFit");
}

TEST(NodeUsageFromAnnotations, ReadsDevicesCordonAndScores) {
  Fixture f;
  auto n = NodeUsageFromAnnotations(
      f.registry, "n1",
      {{"hami.io/node-nvidia-register",
        R"([{"id":"GPU-a","count":10,"devmem":100,"devcore":100,"type":"NVIDIA A10","health":true}])"},
       {"hami.io/device-cordon", "GPU-a"},
       {"hami.io/node-nvidia-score", R"([{"uuid":"GPU-a","score":{"GPU-b":200}}])"}});
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(n->name, "n1");
  ASSERT_EQ(n->devices.size(), 1u);
  EXPECT_EQ(n->cordoned, std::set<std::string>{"GPU-a"});
  ASSERT_EQ(n->pair_scores.size(), 1u);
  auto bad = NodeUsageFromAnnotations(f.registry, "n1", {{"hami.io/node-nvidia-score", "{"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("hami.io/node-nvidia-score"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace hami::device

namespace hami::device {
namespace {

TEST(Schedule, UsageAfterCountsInitPeakAndAppSum) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  PodView pod = Pod({{"initContainers", {Container("init", "5000", "20")}},
                     {"containers", {Container("a", "1000", "10"), Container("b", "1000", "10")}}});
  std::vector<NodeUsage> nodes = {NodeUsage{.name = "n", .devices = {Gpu("g", 0, 0, 0, 0)}}};
  auto d = Schedule(registry, pod, nodes, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr);
  ASSERT_EQ(d->Chosen()->usage_after.size(), 1u);
  const DeviceUsage& g = d->Chosen()->usage_after[0];
  EXPECT_EQ(g.used, 2);        // two app containers share it
  EXPECT_EQ(g.usedmem, 5000);  // init peak 5000 > app sum 2000
  EXPECT_EQ(g.usedcores, 20);  // init 20 = app sum 20
}

TEST(NodeUsageFromNode, ReadsNameAndAnnotations) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  auto node = nlohmann::json::parse(R"({"metadata": {"name": "n1", "annotations": {
      "hami.io/node-nvidia-register":
        "[{\"id\":\"GPU-a\",\"count\":10,\"devmem\":100,\"devcore\":100,\"type\":\"NVIDIA\",\"health\":true}]"}}})");
  auto n = NodeUsageFromNode(registry, node);
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(n->name, "n1");
  ASSERT_EQ(n->devices.size(), 1u);
  EXPECT_EQ(n->devices[0].id, "GPU-a");
}

}  // namespace
}  // namespace hami::device

namespace hami::device {
namespace {

// topology-aware through the whole path: pair scores come from the node row.
TEST(Schedule, TopologyAwareUsesTheNodesPairScores) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  NodeUsage node{.name = "n",
                 .devices = {Gpu("g0", 0, 0, 0, 0), Gpu("g1", 1, 0, 0, 0), Gpu("g2", 2, 0, 0, 0),
                             Gpu("g3", 3, 0, 0, 0)},
                 .pair_scores = {{"g0", {{"g1", 10}, {"g2", 20}, {"g3", 30}}},
                                 {"g1", {{"g2", 600}, {"g3", 40}}},
                                 {"g2", {{"g3", 50}}}}};
  json two = Container("main", "1000", "10");
  two["resources"]["limits"]["nvidia.com/gpu"] = "2";
  PodView pod = Pod({{"containers", {two}}}, {{"hami.io/gpu-scheduler-policy", "topology-aware"}});
  auto d = Schedule(registry, pod, {node}, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr);
  std::vector<std::string> ids;
  for (const auto& dev : d->Chosen()->devices.at("NVIDIA")[0]) ids.push_back(dev.uuid);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"g1", "g2"}));  // the NVLink pair
}

TEST(Schedule, NumaBindKeepsAContainerOnOneNuma) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  NodeUsage node{.name = "n",
                 .devices = {Gpu("a", 0, 0, 0, 0), Gpu("b", 1, 0, 0, 0), Gpu("c", 2, 0, 0, 0)}};
  node.devices[1].numa = 1;
  node.devices[2].numa = 1;
  node.devices[2].usedmem = 7500;  // c cannot take 1000 MiB
  json two = Container("main", "1000", "10");
  two["resources"]["limits"]["nvidia.com/gpu"] = "2";
  PodView pod = Pod({{"containers", {two}}}, {{"nvidia.com/numa-bind", "true"}});
  auto d = Schedule(registry, pod, {node}, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->Chosen(), nullptr);  // numa 0 has one GPU, numa 1 one usable GPU
  pod.annotations.erase("nvidia.com/numa-bind");
  d = Schedule(registry, pod, {node}, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  EXPECT_NE(d->Chosen(), nullptr);
}

}  // namespace
}  // namespace hami::device

namespace hami::device {
namespace {

// A device registered by another backend is a candidate when its type contains the vendor key,
// whatever the case (HAMi: "nvidia" in "NVIDIA A100"); one whose type does not is not.
TEST(Schedule, CandidatesByTypeIgnoreCase) {
  Fixture f;
  PodView one = Pod({{"containers", {Container("main", "1000", "20")}}});
  auto gpu = [](std::string id, std::string type) {
    DeviceUsage d = Gpu(std::move(id), 0, 0, 0, 0);
    d.vendor = "other";
    d.type = std::move(type);
    return d;
  };
  std::vector<NodeUsage> nodes = {
      NodeUsage{.name = "lower", .devices = {gpu("d-lower", "a100 (nvidia)")}},
      NodeUsage{.name = "mixed", .devices = {gpu("d-mixed", "NviDia-A100-SXM4-80GB")}},
      NodeUsage{.name = "other", .devices = {gpu("d-other", "NVIDI-A100")}},
  };
  auto d = Schedule(f.registry, one, nodes, {}, Options(NodePolicy::kBinpack, "spread"));
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr);
  EXPECT_EQ(d->Chosen()->node, "lower");  // the two that fit tie at score 0: first name wins
  EXPECT_EQ(d->Chosen()->devices.at("NVIDIA")[0][0].uuid, "d-lower");
  auto failed = d->FailedNodes();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed.at("other"), "NodeInsufficientDevice");
  EXPECT_TRUE(d->nodes[1].fit);
}

// The filter asks the registry for every device type of every candidate; a type whose length
// no key has is answered before any text is compared, with the same answers as before.
TEST(Registry, FindAnswersByKeyAndLengthWithoutOthers) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  ASSERT_NE(registry.Find("NVIDIA"), nullptr);
  EXPECT_EQ(registry.Find("NVIDIA")->VendorKey(), "NVIDIA");
  const std::vector<std::string_view> others = {"", "nvidia", "NVIDIA A100-SXM4-80GB", "NVIDIAX",
                                                std::string_view("NVIDIA\0", 7)};
  for (std::string_view other : others) {
    EXPECT_EQ(registry.Find(other), nullptr) << other;
  }
  for (const Device* d : registry.All()) EXPECT_EQ(registry.Find(d->VendorKey()), d);
  auto released = registry.Release();
  EXPECT_FALSE(released.empty());
  EXPECT_EQ(registry.Find("NVIDIA"), nullptr);
}

// The filter asks only the backends that score nodes (Device::ScoresNodes) for a node's score;
// leaving the others out must change no score: each adds 0, with picks or without, under either
// policy. The scorers are pinned by key, so a backend that starts scoring nodes says so here too.
TEST(Registry, EveryBackendThatScoresNoNodeScoresZero) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  std::vector<std::string> scorers;
  for (const Device* d : registry.All()) {
    const std::string key = d->VendorKey();
    if (d->ScoresNodes()) {
      scorers.push_back(key);
      EXPECT_EQ(registry.FindScoring(key), d) << key;
      continue;
    }
    EXPECT_EQ(registry.FindScoring(key), nullptr) << key;
    DeviceUsage dev = Gpu("dev-0", 0, 1, 4000, 20);
    dev.type = key;
    dev.vendor = key;
    NodeUsage node{.name = "n", .devices = {dev}};
    const protocol::PodDevices picks = {{protocol::ContainerDevice{"dev-0", key, 1000, 10}}};
    const protocol::PodDevices none = {{}};
    for (NodePolicy policy : {NodePolicy::kBinpack, NodePolicy::kSpread}) {
      for (const protocol::PodDevices* p : {&picks, &none}) {
        EXPECT_EQ(d->ScoreNode({.node = &node, .picks = p, .policy = policy}), 0.0) << key;
      }
    }
  }
  EXPECT_EQ(scorers,
            (std::vector<std::string>{"Ascend310P", "Ascend910A", "Ascend910B2", "Ascend910B3",
                                      "Ascend910B4", "Ascend910B4-1", "Ascend910C", "Metax-GPU",
                                      "Metax-SGPU", "Vastai", "kunlun"}));
  EXPECT_EQ(registry.FindScoring("NVIDIA A100-SXM4-80GB"), nullptr);
}

TEST(ScheduleOptionsFromConfig, ParsesOrNamesTheBadValue) {
  auto o = ScheduleOptionsFromConfig(SchedulerPolicyConfig{});
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->node_policy, NodePolicy::kBinpack);
  EXPECT_EQ(o->gpu_policy.keys, std::vector<GpuPolicy::Key>{GpuPolicy::Key::kSpread});
  o = ScheduleOptionsFromConfig(
      {.node_scheduler_policy = "spread", .gpu_scheduler_policy = "binpack,numa"});
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->node_policy, NodePolicy::kSpread);
  EXPECT_TRUE(o->gpu_policy.chain);
  o = ScheduleOptionsFromConfig({.node_scheduler_policy = "tight"});
  ASSERT_FALSE(o);
  EXPECT_NE(o.error().find("\"tight\""), std::string::npos) << o.error();
  o = ScheduleOptionsFromConfig({.gpu_scheduler_policy = "fastest"});
  ASSERT_FALSE(o);
  EXPECT_NE(o.error().find("\"fastest\""), std::string::npos) << o.error();
}

}  // namespace
}  // namespace hami::device
