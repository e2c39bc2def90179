// MIG through the scheduling decision and the usage index (src/device/schedule.h,
// usage_index.h), with HAMi v2.10's pkg/scheduler/mig_allocation_test.go as vectors: several
// instances on one GPU, no early device-count rejection for MIG, the placements in
// hami.io/vgpu-mig-allocations, reservations restored from pods, fail-closed without one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/schedule.h"
#include "device/usage_index.h"
#include "protocol/keys.h"
#include "protocol/mig_allocations.h"

namespace hami::device {
namespace {

using nlohmann::json;
using protocol::MigPlacement;
using protocol::MigProfile;

std::vector<MigPlacement> Ones(std::initializer_list<uint32_t> starts) {
  std::vector<MigPlacement> out;
  for (uint32_t s : starts) out.push_back({s, 1});
  return out;
}

std::vector<MigProfile> A100() {
  return {
      {"1g.5gb", 5120, 14, 1, Ones({0, 1, 2, 3, 4, 5, 6})},
      {"2g.10gb", 10240, 28, 2, {{0, 2}, {2, 2}, {4, 2}}},
      {"3g.20gb", 20480, 42, 3, {{0, 4}, {4, 4}}},
      {"7g.40gb", 40960, 100, 7, {{0, 8}}},
  };
}

DeviceUsage Gpu(std::string id, std::string mode, std::vector<MigProfile> profiles = {}) {
  return DeviceUsage{.id = std::move(id),
                     .type = "NVIDIA A100-SXM4-40GB",
                     .vendor = "NVIDIA",
                     .health = true,
                     .mode = std::move(mode),
                     .count = 7,
                     .totalmem = 40960,
                     .totalcore = 100,
                     .mig_profiles = std::move(profiles)};
}

json Container(const char* name, const char* count, const char* mem) {
  return {{"name", name},
          {"resources", {{"limits", {{"nvidia.com/gpu", count}, {"nvidia.com/gpumem", mem}}}}}};
}

PodView Pod(json spec, json annotations = json::object(), const char* name = "p") {
  json pod = {{"metadata", {{"name", name}, {"namespace", "ns"}, {"annotations", annotations}}},
              {"spec", spec}};
  auto view = ParsePodView(pod);
  EXPECT_TRUE(view) << view.error();
  return *view;
}

struct Fixture {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  PodPolicy policy{};
  NodeFit FitOn(const PodView& pod, const NodeUsage& node) {
    auto requests = NormalizePodRequests(registry, pod);
    EXPECT_TRUE(requests) << requests.error();
    return FitPodOnNode(registry, pod, *requests, node, policy, nullptr);
  }
};

TEST(MigSchedule, MultiplePlacementsOnSingleGpu) {
  Fixture f;
  NodeUsage node{
      .name = "n1",
      .devices = {Gpu("GPU-a", "mig", {{"1g.5gb", 5120, 14, 1, Ones({0, 1, 2, 3, 4, 5, 6})}})}};
  PodView pod = Pod({{"containers", {Container("workload", "2", "4000")}}},
                    {{"nvidia.com/vgpu-mode", "mig"}});
  NodeFit fit = f.FitOn(pod, node);
  ASSERT_TRUE(fit.fit) << fit.reason;
  const auto& devices = fit.devices.at("NVIDIA");
  ASSERT_EQ(devices.size(), 1u);  // one container
  ASSERT_EQ(devices[0].size(), 2u);
  // The annotation carries the profile's memory and cores, not the request.
  EXPECT_EQ(devices[0][0], (protocol::ContainerDevice{"GPU-a", "NVIDIA", 5120, 14}));
  EXPECT_EQ(devices[0][1], (protocol::ContainerDevice{"GPU-a", "NVIDIA", 5120, 14}));
  ASSERT_EQ(fit.mig_allocations.size(), 2u);
  EXPECT_EQ(fit.mig_allocations[0].placement, (MigPlacement{6, 1}));
  EXPECT_EQ(fit.mig_allocations[1].placement, (MigPlacement{5, 1}));
  EXPECT_EQ(fit.mig_allocations[1].device_index, 1);
  EXPECT_EQ(fit.usage_after[0].used, 2);
  EXPECT_EQ(fit.usage_after[0].usedmem, 10240);
  EXPECT_EQ(fit.usage_after[0].mig_in_use.size(), 2u);
}

TEST(MigSchedule, InsufficientPlacementsKeepFitsReason) {
  Fixture f;
  NodeUsage node{.name = "n1",
                 .devices = {Gpu("GPU-a", "mig", {{"1g.5gb", 5120, 14, 1, Ones({6})}})}};
  PodView pod = Pod({{"containers", {Container("workload", "2", "4000")}}},
                    {{"nvidia.com/vgpu-mode", "mig"}});
  NodeFit fit = f.FitOn(pod, node);
  EXPECT_FALSE(fit.fit);
  EXPECT_EQ(fit.reason, "1/1 AllocatedCardsInsufficientRequest, 1/1 CardMigTopologyInfeasible");
}

TEST(MigSchedule, NonMigGpuRetainsPhysicalCountCheck) {
  Fixture f;
  NodeUsage node{.name = "n1", .devices = {Gpu("GPU-a", "hami-core")}};
  PodView pod = Pod({{"containers", {Container("workload", "2", "4000")}}},
                    {{"nvidia.com/vgpu-mode", "hami-core"}});
  EXPECT_EQ(f.FitOn(pod, node).reason, "NodeInsufficientDevice");
  // A MIG GPU, but the pod asks for hami-core: the early rejection applies again.
  NodeUsage mig{.name = "n1", .devices = {Gpu("GPU-a", "mig", A100())}};
  EXPECT_EQ(f.FitOn(pod, mig).reason, "NodeInsufficientDevice");
}

TEST(MigSchedule, AnnotationsCarryThePlacements) {
  Fixture f;
  NodeUsage node{.name = "n1", .devices = {Gpu("GPU-a", "mig", A100())}};
  PodView pod = Pod({{"containers", {Container("a", "1", "8000"), Container("b", "1", "3000")}}});
  auto d = Schedule(f.registry, pod, {node}, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr);
  auto annos = AllocationAnnotations(f.registry, *d);
  EXPECT_EQ(annos.at("hami.io/vgpu-devices-allocated"),
            "GPU-a,NVIDIA,10240,28:;GPU-a,NVIDIA,5120,14:;");
  EXPECT_EQ(annos.at(std::string(protocol::kVgpuMigAllocationsKey)),
            R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"2g.10gb",)"
            R"("placement":{"start":0,"size":2}},{"containerIndex":1,"deviceIndex":0,)"
            R"("gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":6,"size":1}}])");
  // A hami-core GPU gets no MIG annotation ...
  NodeUsage core{.name = "n1", .devices = {Gpu("GPU-a", "hami-core")}};
  d = Schedule(f.registry, pod, {core}, {}, ScheduleOptions{});
  ASSERT_TRUE(d && d->Chosen());
  EXPECT_EQ(AllocationAnnotations(f.registry, *d).count("hami.io/vgpu-mig-allocations"), 0u);
  // ... unless the pod carries reservations of an earlier decision: they are emptied, so the
  // index does not read the hami-core GPU as holding a MIG instance.
  pod.annotations["hami.io/vgpu-mig-allocations"] =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-x","profile":"1g.5gb",)"
      R"("placement":{"start":6,"size":1}}])";
  auto annos2 = AllocationAnnotations(f.registry, pod, *d);
  EXPECT_EQ(annos2.at("hami.io/vgpu-mig-allocations"), "[]");
  for (const auto& [k, v] : annos2) pod.annotations[k] = v;
  auto held = PodAllocationFromPod(f.registry, pod);
  ASSERT_TRUE(held && *held);
  EXPECT_TRUE((*held)->mig.empty());
}

TEST(MigSchedule, InitContainerInstancesStayReserved) {
  Fixture f;
  NodeUsage node{.name = "n1",
                 .devices = {Gpu("GPU-a", "mig", {{"3g.20gb", 20480, 42, 3, {{0, 4}, {4, 4}}}})}};
  json spec = {{"initContainers", {Container("init", "1", "10000")}},
               {"containers", {Container("app", "1", "10000")}}};
  NodeFit fit = f.FitOn(Pod(spec), node);
  ASSERT_TRUE(fit.fit) << fit.reason;
  ASSERT_EQ(fit.mig_allocations.size(), 2u);
  EXPECT_EQ(fit.mig_allocations[0].placement, (MigPlacement{4, 4}));
  EXPECT_EQ(fit.mig_allocations[1].placement, (MigPlacement{0, 4}));
  EXPECT_EQ(fit.mig_allocations[1].container_index, 1);
  // One placement only: the app container cannot reuse the init container's.
  node.devices[0].mig_profiles[0].placements = {{0, 4}};
  EXPECT_EQ(f.FitOn(Pod(spec), node).reason, "1/1 CardMigTopologyInfeasible");
}

// --- the usage index (HAMi getNodesUsage) ---

PodView Placed(const std::string& name, const std::string& devices, const std::string& mig) {
  json annos = {{"hami.io/vgpu-node", "n1"}, {"hami.io/vgpu-devices-allocated", devices}};
  if (!mig.empty()) annos["hami.io/vgpu-mig-allocations"] = mig;
  return Pod({{"containers", {Container("c", "1", "1")}}}, annos, name.c_str());
}

const DeviceUsage& Row(const UsageIndex& index, size_t i = 0) {
  static thread_local UsageIndex::Snapshot snap;
  snap = index.Rows({"n1"});
  return snap.nodes.at(0).devices.at(i);
}

struct IndexFixture {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  UsageIndex index;
  IndexFixture(std::vector<DeviceUsage> devices) {
    index.SetNode(NodeUsage{.name = "n1", .devices = std::move(devices)});
  }
  void Add(const PodView& pod) {
    auto a = PodAllocationFromPod(registry, pod);
    ASSERT_TRUE(a && *a) << (a ? "nothing held" : a.error());
    index.UpsertPod(std::move(**a));
  }
};

TEST(MigUsageIndex, RestoresAllocationByProfileAndPlacement) {
  IndexFixture f({Gpu("GPU-a", "mig", {{"1g.5gb", 5120, 14, 1, Ones({6})}})});
  f.Add(Placed("p1", "GPU-a,NVIDIA,5120,14:;",
               R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb",)"
               R"("placement":{"start":6,"size":1},"migUUID":"MIG-a","gpuInstanceID":7,)"
               R"("computeInstanceID":0}])"));
  const DeviceUsage& d = Row(f.index);
  EXPECT_FALSE(d.mig_inconsistent);
  ASSERT_EQ(d.mig_in_use.size(), 1u);
  EXPECT_EQ(d.mig_in_use[0].profile, "1g.5gb");
  EXPECT_EQ(d.mig_in_use[0].placement, (MigPlacement{6, 1}));
  ASSERT_TRUE(d.mig_in_use[0].runtime.has_value());
  EXPECT_EQ(*d.mig_in_use[0].runtime, (protocol::MigRuntimeIdentity{"MIG-a", 7, 0}));
  EXPECT_EQ(d.used, 1);
  EXPECT_EQ(d.usedmem, 5120);
  // The pod goes: the placement is free again.
  f.index.ForgetPod("ns/p1");
  EXPECT_TRUE(Row(f.index).mig_in_use.empty());
  EXPECT_EQ(Row(f.index), Gpu("GPU-a", "mig", {{"1g.5gb", 5120, 14, 1, Ones({6})}}));
}

TEST(MigUsageIndex, FailsClosedWithoutMigAllocation) {
  IndexFixture f({Gpu("GPU-a", "mig", A100())});
  f.Add(Placed("p1", "GPU-a,NVIDIA,5120,14:;", ""));
  EXPECT_TRUE(Row(f.index).mig_inconsistent);
  // An undecodable reservation reserves nothing: the same.
  f.Add(Placed("p1", "GPU-a,NVIDIA,5120,14:;", "[{]"));
  EXPECT_TRUE(Row(f.index).mig_inconsistent);
  f.index.ForgetPod("ns/p1");
  EXPECT_FALSE(Row(f.index).mig_inconsistent);  // recovers once the state is consistent
}

TEST(MigUsageIndex, RestoresUnconsumedMigReservations) {
  IndexFixture f({Gpu("GPU-a", "mig", {{"1g.5gb", 5120, 14, 1, Ones({5, 6})}})});
  f.Add(Placed("p1", "GPU-a,NVIDIA,5120,14:;",
               R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb",)"
               R"("placement":{"start":6,"size":1}},{"containerIndex":0,"deviceIndex":1,)"
               R"("gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":5,"size":1}}])"));
  const DeviceUsage& d = Row(f.index);
  EXPECT_FALSE(d.mig_inconsistent);
  ASSERT_EQ(d.mig_in_use.size(), 2u);
  EXPECT_EQ(d.mig_in_use[0].placement, (MigPlacement{6, 1}));
  EXPECT_EQ(d.mig_in_use[1].placement, (MigPlacement{5, 1}));
}

TEST(MigUsageIndex, ReservationOnNonMigOrUnknownGpu) {
  const std::string on_b =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-b","profile":"1g.5gb",)"
      R"("placement":{"start":6,"size":1}}])";
  IndexFixture f({Gpu("GPU-a", "mig", A100()), Gpu("GPU-b", "hami-core")});
  f.Add(Placed("p1", "GPU-b,NVIDIA,5120,14:;", on_b));
  EXPECT_FALSE(Row(f.index, 0).mig_inconsistent);
  EXPECT_TRUE(Row(f.index, 1).mig_inconsistent);  // a reservation on a hami-core GPU
  f.index.ForgetPod("ns/p1");
  EXPECT_FALSE(Row(f.index, 1).mig_inconsistent);
  // A reservation naming a GPU the node lacks: every MIG GPU of the node fails closed.
  IndexFixture g({Gpu("GPU-a", "mig", A100()), Gpu("GPU-c", "hami-core")});
  g.Add(Placed("p1", "GPU-c,NVIDIA,5120,14:;", on_b));
  EXPECT_TRUE(Row(g.index, 0).mig_inconsistent);
  EXPECT_FALSE(Row(g.index, 1).mig_inconsistent);
}

TEST(MigUsageIndex, ScheduledPodsNeverOverlap) {
  // The decision's annotations, read back by the index, keep the next pod off its placements.
  Fixture s;
  IndexFixture f({Gpu("GPU-a", "mig", A100())});
  std::vector<MigPlacement> seen;
  for (int i = 0; i < 7; ++i) {
    PodView pod = Pod({{"containers", {Container("c", "1", "4000")}}}, json::object(),
                      ("p" + std::to_string(i)).c_str());
    auto snap = f.index.Rows({"n1"});
    auto d = Schedule(s.registry, pod, snap.nodes, {}, ScheduleOptions{});
    ASSERT_TRUE(d && d->Chosen()) << i;
    for (const auto& [k, v] : AllocationAnnotations(s.registry, *d)) pod.annotations[k] = v;
    f.Add(pod);
    auto mig = protocol::DecodeMigAllocations(
        pod.annotations.at(std::string(protocol::kVgpuMigAllocationsKey)));
    ASSERT_TRUE(mig && mig->size() == 1u);
    for (const auto& p : seen) EXPECT_FALSE(p == (*mig)[0].placement);
    seen.push_back((*mig)[0].placement);
  }
  // Seven 1g instances fill the A100; the eighth pod does not fit.
  PodView eighth = Pod({{"containers", {Container("c", "1", "4000")}}});
  auto d = Schedule(s.registry, eighth, f.index.Rows({"n1"}).nodes, {}, ScheduleOptions{});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->Chosen(), nullptr);
  EXPECT_EQ(d->nodes[0].reason, "1/1 CardTimeSlicingExhausted");
}

}  // namespace
}  // namespace hami::device
