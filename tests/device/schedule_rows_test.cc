// The filter's fast path: UsageIndex::SharedRows (immutable rows, no copy) and Schedule over
// them must decide exactly as Schedule over copied rows and as FitPodOnNode node by node.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/schedule.h"
#include "device/usage_index.h"

namespace hami::device {
namespace {

using nlohmann::json;

DeviceUsage Gpu(std::string id, uint64_t index, int64_t numa) {
  return DeviceUsage{.id = std::move(id),
                     .index = index,
                     .type = "NVIDIA-Tesla V100",
                     .vendor = "NVIDIA",
                     .health = true,
                     .mode = "hami-core",
                     .numa = numa,
                     .count = 4,
                     .totalmem = 16000,
                     .totalcore = 100};
}

// Four nodes x four GPUs (two per NUMA node), filled unevenly by pods.
UsageIndex& Cluster() {
  static UsageIndex* index = [] {
    auto* idx = new UsageIndex;
    for (int n = 0; n < 4; ++n) {
      NodeUsage node{.name = "n" + std::to_string(n)};
      for (int g = 0; g < 4; ++g) {
        node.devices.push_back(Gpu("n" + std::to_string(n) + "-g" + std::to_string(g), g, g / 2));
      }
      if (n == 3) node.cordoned = {"n3-g3"};
      idx->SetNode(node);
    }
    int p = 0;
    for (int n = 0; n < 4; ++n) {
      for (int g = 0; g <= n; ++g) {
        idx->UpsertPod(
            PodAllocation{.key = "ns/p" + std::to_string(p++),
                          .namespace_name = "ns",
                          .node = "n" + std::to_string(n),
                          .deltas = {{.uuid = "n" + std::to_string(n) + "-g" + std::to_string(g),
                                      .vendor = "NVIDIA",
                                      .usedmem = 3000 * (g + 1),
                                      .usedcores = 20 * (n % 3),
                                      .slots = 1}}});
      }
    }
    return idx;
  }();
  return *index;
}

json Ctr(const char* name, const char* gpus, const char* mem, const char* cores) {
  return {
      {"name", name},
      {"resources",
       {{"limits",
         {{"nvidia.com/gpu", gpus}, {"nvidia.com/gpumem", mem}, {"nvidia.com/gpucores", cores}}}}}};
}

PodView Pod(json spec, json annotations = json::object()) {
  json pod = {{"metadata", {{"name", "new"}, {"namespace", "ns"}, {"annotations", annotations}}},
              {"spec", spec}};
  auto view = ParsePodView(pod);
  EXPECT_TRUE(view) << view.error();
  return *view;
}

std::vector<PodView> Pods() {
  return {
      Pod({{"containers", {Ctr("a", "1", "3000", "0")}}}),
      Pod({{"containers", {Ctr("a", "2", "8000", "30")}}}),
      Pod({{"containers", {Ctr("a", "1", "9000", "50"), Ctr("b", "1", "9000", "50")}}}),
      Pod({{"initContainers", {Ctr("i", "1", "12000", "10")}},
           {"containers", {Ctr("a", "1", "2000", "10"), Ctr("b", "2", "2000", "10")}}}),
      Pod({{"containers", {Ctr("a", "3", "1000", "10")}}}),
      Pod({{"containers", {Ctr("a", "2", "1000", "10")}}}, {{"nvidia.com/numa-bind", "true"}}),
      Pod({{"containers", {Ctr("a", "1", "1000", "100")}}},
          {{"hami.io/gpu-scheduler-policy", "binpack"}}),
      Pod({{"containers", {Ctr("a", "2", "1000", "10")}}},
          {{"hami.io/gpu-scheduler-policy", "topology-aware"}}),
      Pod({{"containers", {Ctr("a", "1", "1000", "10")}}},
          {{"hami.io/gpu-scheduler-policy", "mutex"}, {"hami.io/node-scheduler-policy", "spread"}}),
      Pod({{"containers", {Ctr("a", "5", "1000", "10")}}}),  // more than any node has
  };
}

TEST(SharedRows, EqualRowsAndStayFrozen) {
  UsageIndex index;
  index.SetNode(NodeUsage{.name = "n1", .devices = {Gpu("a", 0, 0)}});
  index.UpsertPod(PodAllocation{
      .key = "ns/p", .node = "n1", .deltas = {{.uuid = "a", .usedmem = 100, .slots = 1}}});
  auto shared = index.SharedRows({"n1", "ghost"});
  auto copied = index.Rows({"n1", "ghost"});
  ASSERT_EQ(shared.nodes.size(), 1u);
  EXPECT_EQ(*shared.nodes[0], copied.nodes[0]);
  EXPECT_EQ(shared.missing, copied.missing);
  // Later events replace the row; the one a caller holds keeps the state it was given.
  index.UpsertPod(PodAllocation{
      .key = "ns/q", .node = "n1", .deltas = {{.uuid = "a", .usedmem = 50, .slots = 1}}});
  index.SetNode(NodeUsage{.name = "n1", .devices = {Gpu("a", 0, 0), Gpu("b", 1, 0)}});
  EXPECT_EQ(shared.nodes[0]->devices.size(), 1u);
  EXPECT_EQ(shared.nodes[0]->devices[0].usedmem, 100);
  auto now = index.SharedRows({"n1"});
  EXPECT_EQ(now.nodes[0]->devices.size(), 2u);
  EXPECT_EQ(now.nodes[0]->devices[0].usedmem, 150);
  EXPECT_EQ(now.nodes[0]->devices[0].used, 2);
  index.RemovePod("ns/p");
  EXPECT_EQ(index.SharedRows({"n1"}).nodes[0]->devices[0].usedmem, 50);
  EXPECT_EQ(now.nodes[0]->devices[0].usedmem, 150);
}

TEST(ScheduleRows, SharedCopiedAndPerNodeFitsAgree) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  const std::vector<std::string> names = {"n2", "n0", "ghost", "n3", "n1"};
  auto shared = Cluster().SharedRows(names);
  auto copied = Cluster().Rows(names);
  // 9000 MiB of quota left: bigger requests fail with ResourceQuotaNotFit on every node.
  const NamespaceQuota quota = {
      {"nvidia.com/gpumem", {.used = 1000, .limit = 10000, .limit_set = true}}};
  const ScheduleOptions all_options[] = {
      {.node_policy = NodePolicy::kBinpack},
      {.node_policy = NodePolicy::kSpread},
      {.node_policy = NodePolicy::kBinpack, .gpu_policy = *ParseGpuPolicy("binpack", true)},
      {.node_policy = NodePolicy::kSpread, .quota = &quota},
  };
  for (const ScheduleOptions& options : all_options) {
    for (const PodView& pod : Pods()) {
      auto a = Schedule(registry, pod, shared.nodes, shared.missing, options);
      auto b = Schedule(registry, pod, copied.nodes, copied.missing, options);
      ASSERT_TRUE(a && b);
      ASSERT_EQ(a->nodes.size(), 5u);
      ASSERT_EQ(a->chosen, b->chosen);
      auto requests = NormalizePodRequests(registry, pod);
      auto resolved = ResolvePodPolicy(pod, options.node_policy, options.gpu_policy);
      ASSERT_TRUE(requests && resolved);
      for (size_t i = 0; i < a->nodes.size(); ++i) {
        const NodeFit& x = a->nodes[i];
        const NodeFit& y = b->nodes[i];
        EXPECT_EQ(std::tie(x.node, x.fit, x.reason, x.score, x.devices, x.usage_after),
                  std::tie(y.node, y.fit, y.reason, y.score, y.devices, y.usage_after));
        if (i >= copied.nodes.size()) continue;  // the unregistered name
        NodeFit full =
            FitPodOnNode(registry, pod, *requests, copied.nodes[i], *resolved, options.quota);
        EXPECT_EQ(std::tie(x.node, x.fit, x.reason, x.score),
                  std::tie(full.node, full.fit, full.reason, full.score));
        // Picks and usage_after: the chosen node only, equal to the full fit's.
        if (a->chosen == i) {
          EXPECT_EQ(x.devices, full.devices);
          EXPECT_EQ(x.usage_after, full.usage_after);
          EXPECT_FALSE(x.devices.empty());
          EXPECT_FALSE(x.usage_after.empty());
        } else {
          EXPECT_TRUE(x.devices.empty());
          EXPECT_TRUE(x.usage_after.empty());
        }
      }
    }
  }
}

}  // namespace
}  // namespace hami::device
