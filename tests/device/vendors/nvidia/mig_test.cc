// MIG placement (src/device/vendors/nvidia/mig.h) and the NVIDIA Fit in MIG mode, with HAMi
// v2.10's MIG tests as vectors: mig_topology_test.go, mig_capability_test.go,
// mig_profiles_test.go and the Fit cases of pkg/scheduler/mig_allocation_test.go.
#include "device/vendors/nvidia/mig.h"

#include <gtest/gtest.h>

#include "device/vendors/nvidia/nvidia.h"
#include "protocol/keys.h"
#include "support/vendor_test_util.h"

namespace hami::device::nvidia {
namespace {

using vendor_test::Ptrs;

using protocol::MigPlacement;
using protocol::MigProfile;

std::vector<MigPlacement> Ones(std::initializer_list<uint32_t> starts) {
  std::vector<MigPlacement> out;
  for (uint32_t s : starts) out.push_back({s, 1});
  return out;
}

// HAMi's a100MigProfiles (mig_capability_test.go).
std::vector<MigProfile> A100() {
  return {
      {"1g.5gb", 5120, 14, 1, Ones({0, 1, 2, 3, 4, 5, 6})},
      {"2g.10gb", 10240, 28, 2, {{0, 2}, {2, 2}, {4, 2}}},
      {"3g.20gb", 20480, 42, 3, {{0, 4}, {4, 4}}},
  };
}

DeviceUsage MigGpu(std::string id, std::vector<MigProfile> profiles) {
  return DeviceUsage{.id = std::move(id),
                     .type = "NVIDIA",
                     .vendor = "NVIDIA",
                     .health = true,
                     .mode = "mig",
                     .count = 7,
                     .totalmem = 40960,
                     .totalcore = 100,
                     .mig_profiles = std::move(profiles)};
}

MigInstance In(std::string profile, uint32_t start, uint32_t size) {
  return MigInstance{std::move(profile), {start, size}, std::nullopt};
}

FitResult Fit(const std::vector<DeviceUsage>& devs, const DeviceRequest& req,
              const PodView& pod = {}) {
  static const NvidiaDevice kDev{NvidiaConfig{}};
  NodeUsage node;
  FitContext ctx{.pod = &pod, .node = &node};
  return kDev.Fit(Ptrs(devs), req, ctx);
}

// --- mig_topology_test.go ---

TEST(MigTopology, CanPlaceMigProfilesA100) {
  auto allowed = A100();
  EXPECT_TRUE(CanPlaceMigProfiles(allowed, {}, {"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"}));
  EXPECT_TRUE(CanPlaceMigProfiles(allowed, {{4, 4}}, {"2g.10gb", "1g.5gb", "1g.5gb"}));
  EXPECT_FALSE(CanPlaceMigProfiles(allowed, {{0, 4}, {4, 4}}, {"1g.5gb"}));
  EXPECT_FALSE(CanPlaceMigProfiles(allowed, {{0, 2}, {2, 2}, {4, 2}}, {"2g.10gb"}));
  EXPECT_TRUE(CanPlaceMigProfiles(allowed, {{0, 4}, {4, 4}}, {}));
  EXPECT_FALSE(CanPlaceMigProfiles(allowed, {}, {"7g.40gb"}));  // not offered
}

TEST(MigTopology, SelectMigPlacementUsesBalancedPacking) {
  auto allowed = A100();
  std::vector<MigPlacement> occupied;
  const std::pair<const char*, uint32_t> steps[] = {
      {"3g.20gb", 4}, {"2g.10gb", 0}, {"1g.5gb", 3}, {"1g.5gb", 2}};
  for (const auto& [profile, start] : steps) {
    auto p = SelectMigPlacement(allowed, occupied, profile);
    ASSERT_TRUE(p.has_value()) << profile;
    EXPECT_EQ(p->start, start) << profile;
    occupied.push_back(*p);
  }
  EXPECT_FALSE(SelectMigPlacement(allowed, occupied, "2g.10gb").has_value());
  EXPECT_FALSE(SelectMigPlacement(allowed, {}, "4g.20gb").has_value());
}

TEST(MigTopology, OverlapAndOrder) {
  EXPECT_TRUE(MigPlacementsOverlap({0, 4}, {3, 1}));
  EXPECT_FALSE(MigPlacementsOverlap({0, 4}, {4, 4}));
  EXPECT_FALSE(MigPlacementsOverlap({0, 0}, {0, 4}));
  // Near the top of uint32 the sums must not wrap.
  EXPECT_TRUE(MigPlacementsOverlap({0xFFFFFFF0u, 0x20}, {0xFFFFFFFFu, 1}));
  EXPECT_FALSE(MigPlacementsOverlap({0xFFFFFFF0u, 0x10}, {0, 1}));
  auto high = OrderedMigPlacements("3g.20gb", {{0, 4}, {4, 4}});
  EXPECT_EQ(high, (std::vector<MigPlacement>{{4, 4}, {0, 4}}));
  auto low = OrderedMigPlacements("2g.10gb", {{4, 2}, {0, 2}, {2, 2}});
  EXPECT_EQ(low, (std::vector<MigPlacement>{{0, 2}, {2, 2}, {4, 2}}));
}

TEST(MigTopology, EmptyPlacementNeverChosen) {
  std::vector<MigProfile> profiles = {{"1g.5gb", 5120, 14, 1, {{0, 0}}}};
  EXPECT_FALSE(SelectMigPlacement(profiles, {}, "1g.5gb").has_value());
  EXPECT_FALSE(CanPlaceMigProfiles(profiles, {}, {"1g.5gb"}));
}

// --- mig_capability_test.go ---

TEST(MigCapability, AddResourceUsageUsesReportedProfileAndPlacement) {
  DeviceUsage gpu = MigGpu("GPU-a", A100());
  protocol::ContainerDevice ctr{"GPU-a", "NVIDIA", 10000, 0};
  auto instance = AddMigUsage(&gpu, &ctr);
  ASSERT_TRUE(instance.has_value());
  EXPECT_EQ(ctr.uuid, "GPU-a");  // the physical UUID is kept
  EXPECT_EQ(ctr.usedmem, 10240);
  EXPECT_EQ(ctr.usedcores, 28);
  EXPECT_EQ(*instance, In("2g.10gb", 0, 2));
  EXPECT_EQ(gpu.mig_in_use, std::vector<MigInstance>{In("2g.10gb", 0, 2)});
  EXPECT_EQ(gpu.used, 1);
  EXPECT_EQ(gpu.usedmem, 10240);
  EXPECT_EQ(gpu.usedcores, 28);
  // Nothing fits 30000 MiB: nothing changes.
  protocol::ContainerDevice big{"GPU-a", "NVIDIA", 30000, 0};
  EXPECT_FALSE(AddMigUsage(&gpu, &big).has_value());
  EXPECT_EQ(big.usedmem, 30000);
  EXPECT_EQ(gpu.used, 1);
}

TEST(MigCapability, CustomFilterUsesReportedPlacementCapacity) {
  DeviceUsage gpu = MigGpu("GPU-a", A100());
  gpu.mig_in_use = {In("2g.10gb", 0, 2), In("2g.10gb", 2, 2), In("2g.10gb", 4, 2)};
  EXPECT_FALSE(MigFits(gpu, {}, 10000));  // a fourth 2g
  EXPECT_TRUE(MigFits(gpu, {}, 5000));    // the 1g at slice 6
}

TEST(MigCapability, CustomFilterIgnoresQueuedAllocationsForOtherGPUs) {
  DeviceUsage gpu = MigGpu("GPU-a", A100());
  gpu.mig_in_use = {In("2g.10gb", 0, 2), In("2g.10gb", 2, 2), In("2g.10gb", 4, 2)};
  protocol::ContainerDevices queued = {{"GPU-b", "NVIDIA", 5000, 0}};
  EXPECT_TRUE(MigFits(gpu, queued, 5000));
  queued[0].uuid = "GPU-a";
  EXPECT_FALSE(MigFits(gpu, queued, 5000));
}

TEST(MigCapability, FitUsesEffectivePercentageMemoryForMigPlacement) {
  DeviceUsage gpu = MigGpu("GPU-a", A100());
  gpu.used = 3;
  gpu.usedmem = 30720;
  gpu.mig_in_use = {In("2g.10gb", 0, 2), In("2g.10gb", 2, 2), In("2g.10gb", 4, 2)};
  DeviceRequest req{.nums = 1, .type = "NVIDIA", .mem_percentage = 25};
  FitResult r = Fit({gpu}, req);
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/1 CardMigTopologyInfeasible");
  // 10 % (4096 MiB) fits the remaining 1g.
  req.mem_percentage = 10;
  r = Fit({gpu}, req);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0].usedmem, 4096);  // the request; AddMigUsage makes it the profile's
}

// --- device_test.go TestFit_MigPercentageRequestRejectsUndersizedTemplate, on profiles ---

TEST(MigCapability, PercentageRequestRejectsUndersizedProfile) {
  DeviceUsage gpu = MigGpu("dev-0", {{"1g.5gb", 1024, 14, 1, Ones({0})}});
  gpu.count = 1;
  gpu.totalmem = 8192;
  DeviceRequest req{.nums = 1, .type = "NVIDIA", .mem_percentage = 50, .coresreq = 10};
  EXPECT_FALSE(Fit({gpu}, req).fit);
}

// --- mig_profiles_test.go ---

TEST(MigProfiles, ValidateMigProfileAllowlist) {
  EXPECT_TRUE(ValidateMigProfileAllowlist({{{"A100"}, {"1g.5gb", "2g.10gb"}}}));
  auto no_profiles = ValidateMigProfileAllowlist({{{"A100"}, {}}});
  ASSERT_FALSE(no_profiles);
  EXPECT_EQ(no_profiles.error(), "migProfileAllowlist[0].profiles: want at least one profile");
  EXPECT_FALSE(ValidateMigProfileAllowlist({{{}, {"1g.5gb"}}}));
  auto bad = ValidateMigProfileAllowlist({{{"A100"}, {"1g.5gb", "g.5gb"}}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(),
            "migProfileAllowlist[0].profiles: invalid MIG profile \"g.5gb\": want "
            "<N>g.<memory>, e.g. \"1g.5gb\"");
  EXPECT_FALSE(ValidateMigProfileAllowlist({{{"A100"}, {"1g5gb"}}}));
  EXPECT_FALSE(ValidateMigProfileAllowlist({{{"A100"}, {"1x.5gb"}}}));
}

TEST(MigProfiles, AllowedMigProfilesMatchesModelSubstring) {
  std::vector<MigAllowlistEntry> allow = {{{"A30"}, {"1g.6gb"}},
                                          {{"A100-SXM4-40GB", "A100-PCIE-40GB"}, {"1g.5gb"}}};
  EXPECT_EQ(AllowedMigProfiles(allow, "NVIDIA A100-SXM4-40GB"), std::vector<std::string>{"1g.5gb"});
  EXPECT_EQ(AllowedMigProfiles(allow, "NVIDIA A30"), std::vector<std::string>{"1g.6gb"});
  EXPECT_TRUE(AllowedMigProfiles(allow, "NVIDIA a30").empty());  // case-sensitive, as HAMi
  EXPECT_TRUE(AllowedMigProfiles(allow, "Tesla T4").empty());
}

// --- pkg/scheduler/mig_allocation_test.go: Fit and IsMigRequest ---

TEST(MigFit, IsMigRequest) {
  DeviceUsage mig = MigGpu("GPU-a", A100());
  DeviceUsage core = mig;
  core.mode = "hami-core";
  DeviceRequest nvidia{.nums = 2, .type = "NVIDIA"};
  const std::string mig_mode = "mig", core_mode = "hami-core";
  EXPECT_FALSE(IsMigRequest(DeviceRequest{.nums = 2, .type = "AMD"}, {&mig}, &mig_mode));
  EXPECT_FALSE(IsMigRequest(nvidia, {&mig}, &core_mode));  // explicit hami-core mode
  EXPECT_TRUE(IsMigRequest(nvidia, {&mig}, nullptr));      // no annotation
  EXPECT_TRUE(IsMigRequest(nvidia, {&mig}, &mig_mode));
  EXPECT_FALSE(IsMigRequest(nvidia, {&core}, nullptr));  // no MIG device
}

TEST(MigFit, AllowsMultipleMigPlacementsOnSingleGpu) {
  DeviceUsage gpu = MigGpu("GPU-a", {{"1g.5gb", 5120, 14, 1, Ones({0, 1, 2, 3, 4, 5, 6})}});
  PodView pod;
  pod.annotations[std::string(protocol::kVgpuModeKey)] = "mig";
  FitResult r = Fit({gpu}, DeviceRequest{.nums = 2, .type = "NVIDIA", .memreq = 4000}, pod);
  ASSERT_TRUE(r.fit) << r.Reason();
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].uuid, "GPU-a");
  EXPECT_EQ(r.devices[1].uuid, "GPU-a");
  // AddMigUsage gives them distinct placements, highest start first for 1g.
  DeviceUsage after = gpu;
  auto first = AddMigUsage(&after, &r.devices[0]);
  auto second = AddMigUsage(&after, &r.devices[1]);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->placement, (MigPlacement{6, 1}));
  EXPECT_EQ(second->placement, (MigPlacement{5, 1}));
}

TEST(MigFit, RejectsInsufficientMigPlacementsOnSingleGpu) {
  DeviceUsage gpu = MigGpu("GPU-a", {{"1g.5gb", 5120, 14, 1, Ones({6})}});
  PodView pod;
  pod.annotations[std::string(protocol::kVgpuModeKey)] = "mig";
  FitResult r = Fit({gpu}, DeviceRequest{.nums = 2, .type = "NVIDIA", .memreq = 4000}, pod);
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.reasons.at("CardMigTopologyInfeasible"), 1);
  EXPECT_EQ(r.Reason(), "1/1 AllocatedCardsInsufficientRequest, 1/1 CardMigTopologyInfeasible");
}

TEST(MigFit, VgpuModeAnnotationSelectsTheMode) {
  DeviceUsage mig = MigGpu("GPU-mig", A100());
  DeviceUsage core = MigGpu("GPU-core", {});
  core.mode = "hami-core";
  core.count = 10;
  PodView pod;
  pod.annotations[std::string(protocol::kVgpuModeKey)] = "hami-core";
  FitResult r = Fit({mig, core}, DeviceRequest{.nums = 1, .type = "NVIDIA", .memreq = 4000}, pod);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0].uuid, "GPU-core");
  pod.annotations[std::string(protocol::kVgpuModeKey)] = "mig";
  r = Fit({core, mig}, DeviceRequest{.nums = 1, .type = "NVIDIA", .memreq = 4000}, pod);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0].uuid, "GPU-mig");
  r = Fit({mig}, DeviceRequest{.nums = 1, .type = "NVIDIA", .memreq = 4000},
          PodView{.annotations = {{std::string(protocol::kVgpuModeKey), "hami-core"}}});
  EXPECT_EQ(r.Reason(), "1/1 CardTypeMismatch");
}

TEST(MigFit, InconsistentMigStateIsUnhealthy) {
  DeviceUsage gpu = MigGpu("GPU-a", A100());
  gpu.mig_inconsistent = true;
  FitResult r = Fit({gpu}, DeviceRequest{.nums = 1, .type = "NVIDIA", .memreq = 1000});
  EXPECT_EQ(r.Reason(), "1/1 CardNotHealth");
}

TEST(MigFit, RevisitsStopAtTheInstanceCount) {
  // Placements of size 0 never count; a count of 2 bounds the instances one container gets.
  DeviceUsage gpu = MigGpu("GPU-a", {{"1g.5gb", 5120, 14, 1, Ones({0, 1, 2, 3, 4, 5, 6})}});
  gpu.count = 2;
  FitResult r = Fit({gpu}, DeviceRequest{.nums = 3, .type = "NVIDIA", .memreq = 1000});
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "2/1 AllocatedCardsInsufficientRequest");
  // Topology-aware never stops on the count of picks: it ends when the GPU is full.
  DeviceUsage big = MigGpu("GPU-a", {{"1g.5gb", 5120, 14, 1, Ones({0, 1, 2})}});
  const NvidiaDevice dev{NvidiaConfig{}};
  PodView pod;
  NodeUsage node;
  GpuPolicy policy;
  policy.topology_aware = true;
  FitContext ctx{.pod = &pod, .node = &node, .policy = policy};
  std::vector<const DeviceUsage*> cands = {&big};
  FitResult t = dev.Fit(cands, DeviceRequest{.nums = 2, .type = "NVIDIA", .memreq = 1000}, ctx);
  ASSERT_TRUE(t.fit);
  EXPECT_EQ(t.devices.size(), 2u);
}

TEST(MigFit, ProfilesSortedByMemoryThenSlices) {
  // Two profiles of equal memory: the one with fewer slices wins; a larger request skips both.
  std::vector<MigProfile> profiles = {{"2g.10gb", 10240, 28, 2, {{0, 2}}},
                                      {"1g.10gb", 10240, 14, 1, Ones({6})},
                                      {"3g.20gb", 20480, 42, 3, {{4, 4}}}};
  auto c = SelectMigInstance(profiles, {}, 8000);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->profile.name, "1g.10gb");
  c = SelectMigInstance(profiles, {{6, 1}}, 8000);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->profile.name, "2g.10gb");
  c = SelectMigInstance(profiles, {}, 15000);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->profile.name, "3g.20gb");
  EXPECT_FALSE(SelectMigInstance(profiles, {}, 30000));
}

}  // namespace
}  // namespace hami::device::nvidia
