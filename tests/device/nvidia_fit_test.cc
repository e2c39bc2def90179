// NVIDIA Fit (docs/protocol.md#nvidias-fit).
#include <gtest/gtest.h>

#include "device/vendors/nvidia/nvidia.h"
#include "protocol/keys.h"

namespace hami::device::nvidia {
namespace {

DeviceUsage Dev(std::string id, int32_t used = 0, int32_t usedmem = 0, int32_t usedcores = 0) {
  return DeviceUsage{.id = std::move(id),
                     .type = "NVIDIA",
                     .vendor = "NVIDIA",
                     .health = true,
                     .mode = "hami-core",
                     .count = 100,
                     .used = used,
                     .totalmem = 128,
                     .usedmem = usedmem,
                     .totalcore = 100,
                     .usedcores = usedcores};
}

DeviceRequest Req(int32_t nums, int32_t mem, int32_t cores) {
  return DeviceRequest{.nums = nums, .type = "NVIDIA", .memreq = mem, .coresreq = cores};
}

std::vector<const DeviceUsage*> Ptrs(const std::vector<DeviceUsage>& devs) {
  std::vector<const DeviceUsage*> out;
  for (const auto& d : devs) out.push_back(&d);
  return out;
}

struct Fixture {
  NvidiaDevice dev{NvidiaConfig{}};
  PodView pod{};
  NodeUsage node{};
  GpuPolicy policy{};
  FitResult Fit(const std::vector<DeviceUsage>& devs, const DeviceRequest& req,
                const NamespaceQuota* quota = nullptr) {
    FitContext ctx{.pod = &pod, .node = &node, .policy = policy, .quota = quota};
    return dev.Fit(Ptrs(devs), req, ctx);
  }
};

std::vector<std::string> Ids(const FitResult& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices) out.push_back(d.uuid);
  return out;
}

// Vector 9.
TEST(NvidiaFit, CheckUuid) {
  const std::string use = "nvidia.com/use-gpuuuid", nouse = "nvidia.com/nouse-gpuuuid";
  EXPECT_TRUE(CheckUuid({{use, "abc,123"}}, use, nouse, "abc"));
  EXPECT_FALSE(CheckUuid({{use, "abc,123"}}, use, nouse, "1abc"));
  EXPECT_FALSE(CheckUuid({{nouse, "abc,123"}}, use, nouse, "abc"));
  EXPECT_TRUE(CheckUuid({{nouse, "abc,123"}}, use, nouse, "xyz"));
  EXPECT_FALSE(CheckUuid({{use, "abc,123"}, {nouse, "abc"}}, use, nouse, "abc"));
  EXPECT_TRUE(CheckUuid({{use, " abc , 123 "}}, use, nouse, "abc"));
  EXPECT_TRUE(CheckUuid({{use, ""}}, use, nouse, "abc"));
  EXPECT_TRUE(CheckUuid({{use, "   "}}, use, nouse, "abc"));
  EXPECT_TRUE(CheckUuid({}, use, nouse, "abc"));
}

// Vector 10, card NVIDIA-A100.
TEST(NvidiaFit, CheckType) {
  const std::string use = "nvidia.com/use-gputype", nouse = "nvidia.com/nouse-gputype";
  const std::string card = "NVIDIA-A100";
  EXPECT_TRUE(CheckType({{use, "A100,V100"}}, use, nouse, card));
  EXPECT_FALSE(CheckType({{use, "V100"}}, use, nouse, card));
  EXPECT_FALSE(CheckType({{nouse, "A100"}}, use, nouse, card));
  EXPECT_TRUE(CheckType({{nouse, "V100"}}, use, nouse, card));
  EXPECT_TRUE(CheckType({{use, ""}}, use, nouse, card));
  EXPECT_TRUE(CheckType({{nouse, "   "}}, use, nouse, card));
  EXPECT_FALSE(CheckType({{use, "A100"}, {nouse, "A100"}}, use, nouse, card));
  EXPECT_TRUE(CheckType({{nouse, "V100,"}}, use, nouse, card));
  EXPECT_TRUE(CheckType({{use, "a100"}}, use, nouse, card));  // case-insensitive
}

// Vector 11: one device, Totalmem 128, Totalcore 100, Count 100.
TEST(NvidiaFit, RejectionReasons) {
  struct Case {
    const char* name;
    DeviceUsage dev;
    DeviceRequest req;
    StringMap annotations;
    const char* want;
  };
  DeviceRequest other_type = Req(1, 64, 0);
  other_type.type = "OtherType";
  DeviceUsage sick = Dev("dev-0");
  sick.health = false;
  DeviceUsage mig = Dev("dev-0");
  mig.mode = "mig";
  const Case cases[] = {
      {"memory", Dev("dev-0"), Req(1, 512, 0), {}, "1/1 CardInsufficientMemory"},
      {"core", Dev("dev-0", 1, 0, 100), Req(1, 64, 50), {}, "1/1 CardInsufficientCore"},
      {"type", Dev("dev-0"), other_type, {}, "1/1 CardTypeMismatch"},
      {"uuid",
       Dev("dev-1"),
       Req(1, 64, 0),
       {{"nvidia.com/use-gpuuuid", "dev-0"}},
       "1/1 CardUuidMismatch"},
      {"slicing", Dev("dev-0", 100), Req(1, 64, 0), {}, "1/1 CardTimeSlicingExhausted"},
      {"exclusive", Dev("dev-0", 20), Req(1, 64, 100), {}, "1/1 ExclusiveDeviceAllocateConflict"},
      {"compute", Dev("dev-0", 1, 0, 100), Req(1, 64, 0), {}, "1/1 CardComputeUnitsExhausted"},
      {"nums", Dev("dev-0"), Req(2, 64, 0), {}, "1/1 AllocatedCardsInsufficientRequest"},
      {"health", sick, Req(1, 64, 0), {}, "1/1 CardNotHealth"},
      {"gputype",
       Dev("dev-0"),
       Req(1, 64, 0),
       {{"nvidia.com/use-gputype", "A100"}},
       "1/1 CardTypeMismatch"},
      {"vgpu-mode",
       Dev("dev-0"),
       Req(1, 64, 0),
       {{"nvidia.com/vgpu-mode", "mig"}},
       "1/1 CardTypeMismatch"},
      {"mig", mig, Req(1, 64, 0), {}, "1/1 CardMigTopologyInfeasible"},
  };
  for (const auto& c : cases) {
    Fixture f;
    f.pod.annotations = c.annotations;
    auto r = f.Fit({c.dev}, c.req);
    EXPECT_FALSE(r.fit) << c.name;
    EXPECT_EQ(r.Reason(), c.want) << c.name;
  }
}

TEST(NvidiaFit, CoresAbove100AreClamped) {
  Fixture f;
  auto r = f.Fit({Dev("dev-0")}, Req(1, 64, 120));
  ASSERT_TRUE(r.fit) << r.Reason();
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0], (protocol::ContainerDevice{"dev-0", "NVIDIA", 64, 100}));
}

TEST(NvidiaFit, PercentageMemory) {
  Fixture f;
  DeviceRequest req = Req(1, 0, 0);
  req.mem_percentage = 50;
  auto r = f.Fit({Dev("dev-0")}, req);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0].usedmem, 64);
}

// Vector 12: the list is scanned from the end.
TEST(NvidiaFit, ScansFromTheEnd) {
  Fixture f;
  auto r = f.Fit({Dev("dev-0"), Dev("dev-1")}, Req(1, 64, 50));
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(Ids(r), std::vector<std::string>{"dev-1"});
}

// Vector 13.
TEST(NvidiaFit, Cordon) {
  Fixture f;
  f.node.cordoned = ParseCordon("dev-0,dev-1");
  auto r = f.Fit({Dev("dev-0"), Dev("dev-1")}, Req(1, 64, 0));
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "2/2 CardCordoned");
  f.node.cordoned = ParseCordon("dev-1, ");
  r = f.Fit({Dev("dev-0"), Dev("dev-1")}, Req(1, 64, 0));
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(Ids(r), std::vector<std::string>{"dev-0"});
}

// Vector 14.
TEST(NvidiaFit, MutexPolicy) {
  Fixture f;
  f.policy = *ParseGpuPolicy("mutex", true);
  auto r = f.Fit({Dev("used", 1), Dev("idle")}, Req(1, 10, 0));
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(Ids(r), std::vector<std::string>{"idle"});
  r = f.Fit({Dev("idle", 0), Dev("used", 1)}, Req(1, 10, 0));
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(Ids(r), std::vector<std::string>{"idle"});
  r = f.Fit({Dev("used", 1)}, Req(1, 10, 0));
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/1 ExclusiveDeviceAllocateConflict");
}

protocol::PairScores Scores() {
  return {{"dev-0", {{"dev-1", 100}, {"dev-2", 200}}},
          {"dev-1", {{"dev-0", 100}, {"dev-2", 150}}},
          {"dev-2", {{"dev-0", 200}, {"dev-1", 150}}}};
}

// Vector 15.
TEST(NvidiaFit, TopologyBestCombination) {
  Fixture f;
  f.policy = *ParseGpuPolicy("topology-aware", true);
  f.node.pair_scores = Scores();
  std::vector<DeviceUsage> devs = {Dev("dev-0"), Dev("dev-1"), Dev("dev-2")};
  auto r = f.Fit(devs, Req(2, 10, 0));
  ASSERT_TRUE(r.fit);
  auto ids = Ids(r);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"dev-0", "dev-2"}));
  // Nums 1: the device with the lowest score sum (dev-1: 250).
  r = f.Fit(devs, Req(1, 10, 0));
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(Ids(r), std::vector<std::string>{"dev-1"});
  // All zero: any two (deterministically the first combination in pick order).
  f.node.pair_scores = {};
  r = f.Fit(devs, Req(2, 10, 0));
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(Ids(r), (std::vector<std::string>{"dev-2", "dev-1"}));
  // Too few pass.
  r = f.Fit({Dev("dev-0")}, Req(2, 10, 0));
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/1 AllocatedCardsInsufficientRequest");
}

TEST(NvidiaFit, PickByTopologyExactCount) {
  std::vector<DeviceUsage> devs = {Dev("a"), Dev("b")};
  EXPECT_EQ(PickByTopology(Ptrs(devs), 2, {}), (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(PickByTopology(Ptrs(devs), 3, {}).empty());
}

TEST(NvidiaFit, NumaBindRestartsOnANewNuma) {
  Fixture f;
  f.pod.annotations[std::string(protocol::kNumaBindKey)] = "true";
  // Scanned from the end: numa 1 (one device), then numa 0 (two devices).
  std::vector<DeviceUsage> devs = {Dev("a"), Dev("b"), Dev("c")};
  devs[2].numa = 1;
  auto r = f.Fit(devs, Req(2, 10, 0));
  ASSERT_TRUE(r.fit) << r.Reason();
  EXPECT_EQ(Ids(r), (std::vector<std::string>{"b", "a"}));
  // Only one device per NUMA: partial picks count as NumaNotFit.
  devs[1].numa = 2;
  r = f.Fit(devs, Req(2, 10, 0));
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/3 AllocatedCardsInsufficientRequest, 2/3 NumaNotFit");
}

TEST(NvidiaFit, ResourceQuota) {
  Fixture f;
  NamespaceQuota quota{{"nvidia.com/gpumem", {.used = 100, .limit = 150, .limit_set = true}}};
  auto r = f.Fit({Dev("dev-0")}, Req(1, 64, 0), &quota);
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/1 ResourceQuotaNotFit");
  r = f.Fit({Dev("dev-0")}, Req(1, 50, 0), &quota);
  EXPECT_TRUE(r.fit) << r.Reason();
  // Two devices of 40: the second one would bring the pod to 80 > 50 left.
  r = f.Fit({Dev("dev-0"), Dev("dev-1")}, Req(2, 40, 0), &quota);
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/2 AllocatedCardsInsufficientRequest, 1/2 ResourceQuotaNotFit");
}

TEST(NvidiaFit, MixedReasonsAreCounted) {
  Fixture f;
  DeviceUsage sick = Dev("s");
  sick.health = false;
  auto r = f.Fit({sick, Dev("full", 100), Dev("small", 1, 100)}, Req(1, 64, 0));
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(),
            "1/3 CardInsufficientMemory, 1/3 CardNotHealth, 1/3 CardTimeSlicingExhausted");
}

}  // namespace
}  // namespace hami::device::nvidia
