// The incremental usage index (docs/ARCHITECTURE.md#decisions, 3) and the pod -> allocation
// decoder.
#include "device/usage_index.h"

#include <gtest/gtest.h>

#include <thread>

#include "device/schedule.h"

namespace hami::device {
namespace {

DeviceUsage Gpu(std::string id) {
  return DeviceUsage{.id = std::move(id),
                     .type = "NVIDIA",
                     .vendor = "NVIDIA",
                     .health = true,
                     .count = 10,
                     .totalmem = 8000,
                     .totalcore = 100};
}

NodeUsage Node(std::string name, std::vector<std::string> ids) {
  NodeUsage n{.name = std::move(name)};
  for (auto& id : ids) n.devices.push_back(Gpu(std::move(id)));
  return n;
}

PodAllocation Alloc(std::string key, std::string node, std::vector<DeviceDelta> deltas) {
  std::string ns = key.substr(0, key.find('/'));
  return PodAllocation{.key = std::move(key),
                       .namespace_name = ns,
                       .node = std::move(node),
                       .deltas = std::move(deltas)};
}

DeviceDelta D(const char* uuid, int32_t mem, int32_t cores, int32_t slots = 1) {
  return {.uuid = uuid, .vendor = "NVIDIA", .usedmem = mem, .usedcores = cores, .slots = slots};
}

const DeviceUsage& Row(const UsageIndex& index, const std::string& node, size_t i) {
  static thread_local UsageIndex::Snapshot snap;
  snap = index.Rows({node});
  return snap.nodes.at(0).devices.at(i);
}

TEST(UsageIndex, AddUpdateRemove) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a", "b"}));
  index.UpsertPod(Alloc("ns/p1", "n1", {D("a", 1000, 10)}));
  index.UpsertPod(Alloc("ns/p2", "n1", {D("a", 500, 5, 2), D("b", 100, 1)}));
  EXPECT_EQ(Row(index, "n1", 0).used, 3);
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 1500);
  EXPECT_EQ(Row(index, "n1", 0).usedcores, 15);
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 100);
  // Update replaces p1's deltas (e.g. after its init containers finished).
  index.UpsertPod(Alloc("ns/p1", "n1", {D("a", 200, 2)}));
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 700);
  EXPECT_EQ(Row(index, "n1", 0).used, 3);
  EXPECT_TRUE(index.RemovePod("ns/p2"));
  EXPECT_FALSE(index.RemovePod("ns/p2"));
  EXPECT_EQ(Row(index, "n1", 0).used, 1);
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 200);
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 0);
  EXPECT_EQ(index.PodCount(), 1u);
  EXPECT_TRUE(index.RemovePod("ns/p1"));
  EXPECT_EQ(Row(index, "n1", 0), Gpu("a"));
}

DeviceDelta Tagged(const char* uuid, std::string tag, int32_t slots = 1) {
  DeviceDelta d = D(uuid, 10, 1, slots);
  d.tag = std::move(tag);
  return d;
}

using Tags = std::map<std::string, int32_t, std::less<>>;

// Device::UsageTag counts: each pod adds its tag on each device it holds, max(slots, 1) times
// like `used`; a changed pod moves its count from the old tag to the new one, a removed pod
// takes back exactly what it added, and a tag whose count is back at 0 is gone from the row.
TEST(UsageIndex, TagCountsFollowPods) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a", "b"}));
  index.UpsertPod(Alloc("ns/p1", "n1", {Tagged("a", "x", 2), Tagged("b", "x")}));
  index.UpsertPod(Alloc("ns/p2", "n1", {Tagged("a", "y")}));
  index.UpsertPod(Alloc("ns/p3", "n1", {D("a", 10, 1)}));  // untagged: counts in used only
  EXPECT_EQ(Row(index, "n1", 0).pod_tags, (Tags{{"x", 2}, {"y", 1}}));
  EXPECT_EQ(Row(index, "n1", 0).used, 4);
  EXPECT_EQ(Row(index, "n1", 1).pod_tags, (Tags{{"x", 1}}));
  // p1's tag changes (its annotations did) and it leaves b.
  index.UpsertPod(Alloc("ns/p1", "n1", {Tagged("a", "y")}));
  EXPECT_EQ(Row(index, "n1", 0).pod_tags, (Tags{{"y", 2}}));
  EXPECT_TRUE(Row(index, "n1", 1).pod_tags.empty());
  // The extender's claim takes the pod's tags out; a release without a write brings them back.
  index.Claim("ns/p2");
  EXPECT_EQ(Row(index, "n1", 0).pod_tags, (Tags{{"y", 1}}));
  index.Release("ns/p2", std::nullopt);
  EXPECT_EQ(Row(index, "n1", 0).pod_tags, (Tags{{"y", 2}}));
  EXPECT_TRUE(index.RemovePod("ns/p2"));
  index.ForgetPod("ns/p1");
  EXPECT_TRUE(Row(index, "n1", 0).pod_tags.empty());
  EXPECT_EQ(Row(index, "n1", 0).used, 1);
  index.ForgetPod("ns/p3");
  EXPECT_EQ(Row(index, "n1", 0), Gpu("a"));
  // Rebuilt from the same pods: the same counts.
  UsageIndex rebuilt;
  std::vector<PodAllocation> pods = {Alloc("ns/p1", "n1", {Tagged("a", "x", 3)}),
                                     Alloc("ns/p2", "n1", {Tagged("a", "y")})};
  rebuilt.Rebuild({Node("n1", {"a"})}, pods);
  EXPECT_EQ(Row(rebuilt, "n1", 0).pod_tags, (Tags{{"x", 3}, {"y", 1}}));
}

// Pod events apply in resourceVersion order: a late one never undoes newer state, a removal is
// remembered, 0 (unknown) always applies, and a deleted pod's version goes with it.
TEST(UsageIndex, OlderEventsAreIgnored) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a"}));
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 3000, 0)}), 10);
  EXPECT_TRUE(index.RemovePod("ns/p", 5));  // it held an allocation; the event is stale
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 3000);
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 1000, 0)}), 9);
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 3000);
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 1000, 0)}), 10);  // same version: applied
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 1000);
  EXPECT_TRUE(index.RemovePod("ns/p", 12));  // Succeeded at 12
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 0);
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 1000, 0)}), 11);  // a resync of the old copy
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 0);
  EXPECT_EQ(index.PodCount(), 0u);
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 500, 0)}), 0);  // unknown version
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 500);
  index.ForgetPod("ns/p");
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 0);
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 700, 0)}), 3);  // a new pod of the same name
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 700);
}

// The extender's write: the claim takes the pod's usage out, shows the decision while the patch
// is in flight, holds back the pod's events, and ends with the API server's answer.
TEST(UsageIndex, ClaimHoldsEventsUntilTheWriteIsKnown) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a", "b"}));
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 3000, 0)}), 10);
  std::optional<PodAllocation> before = index.Claim("ns/p");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->deltas.at(0).usedmem, 3000);
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 0);  // does not count against itself
  index.SetClaimed("ns/p", Alloc("ns/p", "n1", {D("b", 4000, 0)}));
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 4000);
  // A watch event from before the patch (the pod without the new decision) is held, not applied.
  index.RemovePod("ns/p", 11);
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 4000);
  index.Release("ns/p", UsageIndex::Written{Alloc("ns/p", "n1", {D("b", 4000, 0)}), 12});
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 0);
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 4000);
  // After the claim, events older than the write stay ignored; newer ones apply.
  index.RemovePod("ns/p", 11);
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 4000);
  index.RemovePod("ns/p", 13);
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 0);
}

TEST(UsageIndex, ReleaseWithoutWriteRestoresAndAppliesNewerHeldEvent) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a", "b"}));
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 3000, 0)}), 10);
  index.Claim("ns/p");
  index.SetClaimed("ns/p", Alloc("ns/p", "n1", {D("b", 4000, 0)}));
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 1000, 0)}), 9);  // stale: ignored at release
  index.Release("ns/p", std::nullopt);                         // the patch failed
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 3000);
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 0);

  index.Claim("ns/p");
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 1000, 0)}), 15);  // someone else wrote: applied
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 2000, 0)}), 14);  // older than the held one
  index.Release("ns/p", std::nullopt);
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 1000);

  // A write whose answer is older than a held event: the held event wins.
  index.Claim("ns/p");
  index.RemovePod("ns/p", 30);
  index.Release("ns/p", UsageIndex::Written{Alloc("ns/p", "n1", {D("b", 4000, 0)}), 20});
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 0);
  EXPECT_EQ(Row(index, "n1", 1).usedmem, 0);
  EXPECT_EQ(index.PodCount(), 0u);
}

TEST(UsageIndex, DeletionDuringClaimWins) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a"}));
  index.Claim("ns/p");  // a pod the index never saw
  index.SetClaimed("ns/p", Alloc("ns/p", "n1", {D("a", 4000, 0)}));
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 4000);
  index.ForgetPod("ns/p");
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 4000, 0)}), 50);  // after deletion: still gone
  index.Release("ns/p", UsageIndex::Written{Alloc("ns/p", "n1", {D("a", 4000, 0)}), 40});
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 0);
  EXPECT_FALSE(index.Pod("ns/p"));
  EXPECT_EQ(index.PodCount(), 0u);
}

TEST(UsageIndex, RowsOnlyForCandidatesAndMissingNames) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a"}));
  index.SetNode(Node("n2", {"b"}));
  auto snap = index.Rows({"n2", "ghost"});
  ASSERT_EQ(snap.nodes.size(), 1u);
  EXPECT_EQ(snap.nodes[0].name, "n2");
  EXPECT_EQ(snap.missing, std::vector<std::string>{"ghost"});
  EXPECT_EQ(index.NodeNames(), (std::vector<std::string>{"n1", "n2"}));
  index.RemoveNode("n1");
  EXPECT_EQ(index.Rows({"n1"}).missing, std::vector<std::string>{"n1"});
}

// Pods may be seen before their node registers, and a re-registration keeps usage.
TEST(UsageIndex, UsageSurvivesNodeChurn) {
  UsageIndex index;
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 1000, 10)}));
  NodeUsage n = Node("n1", {"a"});
  n.devices[0].usedmem = 12345;  // ignored: usage comes from pods
  index.SetNode(n);
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 1000);
  index.RemoveNode("n1");
  index.SetNode(Node("n1", {"a", "b"}));
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 1000);
}

TEST(UsageIndex, NamespaceUsage) {
  UsageIndex index;
  index.UpsertPod(Alloc("ns/p1", "n1", {D("a", 1000, 10)}));
  index.UpsertPod(Alloc("ns/p2", "n2", {D("b", 500, 5), D("c", 500, 5)}));
  index.UpsertPod(Alloc("other/p", "n2", {D("b", 1, 1)}));
  EXPECT_EQ(index.NamespaceUsage("ns"),
            (std::map<std::string, UsageIndex::Totals>{{"NVIDIA", {2000, 20}}}));
  index.RemovePod("ns/p1");
  index.RemovePod("ns/p2");
  EXPECT_TRUE(index.NamespaceUsage("ns").empty());
  EXPECT_EQ(index.NamespaceUsage("other").at("NVIDIA").usedmem, 1);
}

TEST(UsageIndex, RebuildEqualsIncremental) {
  UsageIndex incremental, rebuilt;
  std::vector<NodeUsage> nodes = {Node("n1", {"a", "b"}), Node("n2", {"c"})};
  std::vector<PodAllocation> pods = {Alloc("ns/p1", "n1", {D("a", 1000, 10)}),
                                     Alloc("ns/p2", "n2", {D("c", 300, 30)}),
                                     Alloc("ns/p3", "n1", {D("a", 10, 1), D("b", 20, 2)})};
  for (const auto& n : nodes) incremental.SetNode(n);
  for (const auto& p : pods) incremental.UpsertPod(p);
  incremental.UpsertPod(Alloc("ns/gone", "n1", {D("b", 7, 7)}));
  incremental.RemovePod("ns/gone");
  rebuilt.UpsertPod(Alloc("ns/stale", "n1", {D("a", 99, 9)}));
  rebuilt.Rebuild(nodes, pods);
  auto a = incremental.Rows({"n1", "n2"});
  auto b = rebuilt.Rows({"n1", "n2"});
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(rebuilt.PodCount(), 3u);
  EXPECT_FALSE(rebuilt.Pod("ns/stale"));
}

// Writers and readers on several threads; TSan/ASan builds check the locking. The final state
// is exact because every delta added is removed again.
TEST(UsageIndex, ConcurrentUse) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a"}));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&index, t] {
      for (int i = 0; i < 200; ++i) {
        std::string key = "ns/p" + std::to_string(t) + "-" + std::to_string(i);
        index.UpsertPod(Alloc(key, "n1", {D("a", 10, 1)}));
        auto snap = index.Rows({"n1"});
        EXPECT_GE(snap.nodes.at(0).devices.at(0).used, 1);
        EXPECT_TRUE(index.RemovePod(key));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(Row(index, "n1", 0), Gpu("a"));
  EXPECT_EQ(index.PodCount(), 0u);
}

PodView AnnotatedPod(StringMap annotations, size_t init = 0) {
  PodView pod{.name = "p", .namespace_name = "ns", .annotations = std::move(annotations)};
  pod.init_containers.resize(init);
  return pod;
}

TEST(PodAllocationFromPod, DecodesAndCollapses) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  PodView pod = AnnotatedPod({{"hami.io/vgpu-node", "n1"},
                              {"hami.io/vgpu-devices-allocated",
                               "GPU-a,NVIDIA,500,50:;GPU-a,NVIDIA,100,10:GPU-b,NVIDIA,1,1:;"}},
                             1);
  auto a = PodAllocationFromPod(registry, pod);
  ASSERT_TRUE(a) << a.error();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ(**a, Alloc("ns/p", "n1", {D("GPU-a", 500, 50), D("GPU-b", 1, 1)}));
  pod.init_done = true;
  a = PodAllocationFromPod(registry, pod);
  EXPECT_EQ((**a).deltas, (std::vector<DeviceDelta>{D("GPU-a", 100, 10), D("GPU-b", 1, 1)}));
}

TEST(PodAllocationFromPod, NothingHeld) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  const StringMap allocated = {{"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,1,1:;"}};
  auto a = PodAllocationFromPod(registry, AnnotatedPod(allocated));  // no vgpu-node
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->has_value());
  PodView done = AnnotatedPod({{"hami.io/vgpu-node", "n1"}, *allocated.begin()});
  done.phase = "Succeeded";
  EXPECT_FALSE(PodAllocationFromPod(registry, done)->has_value());
  done.phase = "Running";
  done.deleting = true;  // still holds its devices until gone
  EXPECT_TRUE(PodAllocationFromPod(registry, done)->has_value());
  // Consumed to-allocate strings leave ";;"-style empties in nothing but to-allocate.
  EXPECT_FALSE(
      PodAllocationFromPod(registry, AnnotatedPod({{"hami.io/vgpu-node", "n1"},
                                                   {"hami.io/vgpu-devices-allocated", ";;"}}))
          ->has_value());
  auto bad = PodAllocationFromPod(
      registry, AnnotatedPod({{"hami.io/vgpu-node", "n1"},
                              {"hami.io/vgpu-devices-allocated", "uuid,type,100:;"}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("hami.io/vgpu-devices-allocated"), std::string::npos) << bad.error();
}

// The filter path end to end: registration and pods into the index, a snapshot of the
// candidates, the decision, and the decision's annotations back into the index.
TEST(UsageIndex, FeedsSchedule) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  UsageIndex index;
  index.SetNode(Node("n1", {"a"}));
  PodView pod{.name = "p", .namespace_name = "ns"};
  pod.containers.push_back(ContainerView{
      .name = "main", .limits = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "5000"}}});
  for (int round = 0; round < 2; ++round) {
    auto snap = index.Rows({"n1", "n2"});
    auto d = Schedule(registry, pod, snap.nodes, snap.missing, ScheduleOptions{});
    ASSERT_TRUE(d) << d.error();
    if (round == 1) {  // 5000 + 5000 > 8000
      EXPECT_EQ(d->Chosen(), nullptr);
      EXPECT_EQ(d->FailedNodes().at("n1"), "1/1 CardInsufficientMemory");
      EXPECT_EQ(d->FailedNodes().at("n2"), "node unregistered");
      break;
    }
    PodView placed = pod;
    placed.name = "placed";
    const auto written = AllocationAnnotations(registry, *d);
    placed.annotations = StringMap(written.begin(), written.end());
    auto a = PodAllocationFromPod(registry, placed);
    ASSERT_TRUE(a && a->has_value());
    index.UpsertPod(**a);
  }
}

}  // namespace
}  // namespace hami::device

namespace hami::device {
namespace {

TEST(NamespaceQuotaFor, CombinesLimitsAndUsage) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  UsageIndex index;
  index.UpsertPod(Alloc("ns/p", "n1", {D("a", 3000, 30)}));
  auto q = NamespaceQuotaFor(registry, {{"nvidia.com/gpumem", 4000}}, index.NamespaceUsage("ns"));
  EXPECT_EQ(q,
            (NamespaceQuota{{"nvidia.com/gpumem", {.used = 3000, .limit = 4000, .limit_set = true}},
                            {"nvidia.com/gpucores", {.used = 30}}}));
  EXPECT_TRUE(FitQuota(q, "nvidia.com/gpumem", 1000, "nvidia.com/gpucores", 1000, 1));
  EXPECT_FALSE(FitQuota(q, "nvidia.com/gpumem", 1001, "nvidia.com/gpucores", 0, 1));
  EXPECT_TRUE(NamespaceQuotaFor(registry, {}, {}).empty());
}

// Issue 19: a negative size (an annotation anyone who creates pods can write) must not create
// free memory, and huge sizes must not wrap to negative totals.
TEST(UsageIndex, NeverBelowWhatIsHeld) {
  UsageIndex index;
  index.SetNode(Node("n1", {"a"}));
  index.UpsertPod(Alloc("ns/holder", "n1", {D("a", 4000, 10)}));
  index.UpsertPod(Alloc("ns/evil", "n1", {D("a", -99999, -50)}));
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 4000);
  EXPECT_EQ(Row(index, "n1", 0).usedcores, 10);
  EXPECT_TRUE(index.RemovePod("ns/evil"));
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 4000);
  index.UpsertPod(Alloc("ns/big1", "n1", {D("a", 2147483647, 0)}));
  index.UpsertPod(Alloc("ns/big2", "n1", {D("a", 2147483647, 0)}));
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 2147483647);
  EXPECT_TRUE(index.RemovePod("ns/big1"));
  EXPECT_TRUE(index.RemovePod("ns/big2"));
  EXPECT_EQ(Row(index, "n1", 0).usedmem, 4000);
}

TEST(CollapsePodDevices, SumsSaturateAndIgnoreNegatives) {
  protocol::PodDevices pod = {{{"a", "NVIDIA", 2147483647, 60}, {"a", "NVIDIA", 2147483647, 60}},
                              {{"a", "NVIDIA", -5, -5}}};
  auto deltas = CollapsePodDevices(pod, 0, false);
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0].usedmem, 2147483647);
  EXPECT_EQ(deltas[0].usedcores, 120);
  std::vector<DeviceUsage> rows = {Gpu("a")};
  rows[0].usedmem = 4000;
  ApplyDeltas({D("a", -99999, 0)}, +1, &rows);
  EXPECT_EQ(rows[0].usedmem, 4000);
  ApplyDeltas({D("a", 2147483647, 0)}, +1, &rows);
  EXPECT_EQ(rows[0].usedmem, 2147483647);
}

}  // namespace
}  // namespace hami::device
