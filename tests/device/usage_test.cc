// Init-container collapse (docs/protocol.md#usage-of-a-pod), deltas, cordon parsing and quota
// (docs/protocol.md#resource-quotas).
#include "device/usage.h"

#include <gtest/gtest.h>

#include "device/quota.h"

namespace hami::device {
namespace {

protocol::ContainerDevice Gpu(const char* uuid, int32_t mem, int32_t cores) {
  return {uuid, "NVIDIA", mem, cores};
}

DeviceDelta Delta(const char* uuid, int32_t mem, int32_t cores, int32_t slots) {
  return {.uuid = uuid, .vendor = "NVIDIA", .usedmem = mem, .usedcores = cores, .slots = slots};
}

TEST(Collapse, SpecVector18) {
  struct Case {
    const char* name;
    protocol::PodDevices pod;
    size_t init_count;
    std::vector<DeviceDelta> want;
  };
  const Case cases[] = {
      {"init peak wins",
       {{Gpu("gpu0", 500, 50)}, {Gpu("gpu0", 100, 10)}},
       1,
       {Delta("gpu0", 500, 50, 1)}},
      {"apps add up",
       {{Gpu("gpu0", 100, 10)}, {Gpu("gpu0", 200, 20)}},
       0,
       {Delta("gpu0", 300, 30, 2)}},
      {"app sum wins",
       {{Gpu("gpu0", 100, 10)}, {Gpu("gpu0", 200, 20)}, {Gpu("gpu0", 300, 30)}},
       1,
       {Delta("gpu0", 500, 50, 2)}},
      {"init max",
       {{Gpu("gpu0", 100, 10)}, {Gpu("gpu0", 200, 30)}},
       2,
       {Delta("gpu0", 200, 30, 1)}},
      {"per field max",
       {{Gpu("gpu0", 500, 5)}, {Gpu("gpu0", 100, 10)}, {}},
       1,
       {Delta("gpu0", 500, 10, 1)}},
      {"sorted by uuid",
       {{Gpu("b", 1, 1), Gpu("a", 2, 2)}, {}},
       0,
       {Delta("a", 2, 2, 1), Delta("b", 1, 1, 1)}},
      {"empty", {{}, {}}, 0, {}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(CollapsePodDevices(c.pod, c.init_count, false), c.want) << c.name;
  }
}

TEST(Collapse, AfterInitContainersOnlyAppsCount) {
  protocol::PodDevices pod = {{Gpu("gpu0", 500, 50)}, {Gpu("gpu0", 100, 10)}};
  EXPECT_EQ(CollapsePodDevices(pod, 1, true),
            (std::vector<DeviceDelta>{Delta("gpu0", 100, 10, 1)}));
  pod = {{Gpu("gpu0", 500, 50)}, {}};
  EXPECT_TRUE(CollapsePodDevices(pod, 1, true).empty());
}

TEST(ApplyDeltas, AddsAndRemoves) {
  std::vector<DeviceUsage> devs(2);
  devs[0].id = "a";
  devs[1].id = "b";
  std::vector<DeviceDelta> deltas = {Delta("a", 100, 10, 2), Delta("b", 5, 1, 0),
                                     Delta("zz", 1, 1, 1)};
  deltas[0].tag = "t";  // Device::UsageTag: counted per slot like `used`
  deltas[1].tag = "t";
  ApplyDeltas(deltas, +1, &devs);
  EXPECT_EQ(devs[0].used, 2);
  EXPECT_EQ(devs[0].usedmem, 100);
  EXPECT_EQ(devs[0].usedcores, 10);
  EXPECT_EQ(devs[0].pod_tags, (std::map<std::string, int32_t, std::less<>>{{"t", 2}}));
  EXPECT_EQ(devs[1].used, 1);  // slots 0 counts as one
  EXPECT_EQ(devs[1].pod_tags.at("t"), 1);
  ApplyDeltas(deltas, -1, &devs);
  EXPECT_EQ(devs[0], (DeviceUsage{.id = "a"}));
  EXPECT_EQ(devs[1], (DeviceUsage{.id = "b"}));
}

TEST(Cordon, TrimsAndDropsEmpties) {
  EXPECT_EQ(ParseCordon("dev-0,dev-1"), (std::set<std::string>{"dev-0", "dev-1"}));
  EXPECT_EQ(ParseCordon("dev-1, "), (std::set<std::string>{"dev-1"}));
  EXPECT_TRUE(ParseCordon("").empty());
  EXPECT_TRUE(ParseCordon(" , ,").empty());
}

TEST(UsageFromDeviceInfo, CopiesCapacity) {
  protocol::DeviceInfo info{.id = "GPU-a",
                            .index = 3,
                            .count = 10,
                            .devmem = 8000,
                            .devcore = 100,
                            .type = "NVIDIA A10",
                            .numa = 1,
                            .mode = "hami-core",
                            .health = true};
  DeviceUsage u = UsageFromDeviceInfo(info, "NVIDIA");
  EXPECT_EQ(u, (DeviceUsage{.id = "GPU-a",
                            .index = 3,
                            .type = "NVIDIA A10",
                            .vendor = "NVIDIA",
                            .health = true,
                            .mode = "hami-core",
                            .numa = 1,
                            .count = 10,
                            .totalmem = 8000,
                            .totalcore = 100}));
}

// Vector 19.
TEST(Quota, LimitsFromHard) {
  const std::vector<std::string> tracked = {"nvidia.com/gpumem", "nvidia.com/gpucores"};
  auto r = QuotaLimitsFromHard({{"limits.nvidia.com/gpumem", "8k"},
                                {"limits.nvidia.com/gpucores", "200"},
                                {"nvidia.com/gpumem", "1"},
                                {"requests.nvidia.com/gpumem", "1"},
                                {"limits.cpu", "4"}},
                               tracked);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, (std::map<std::string, int64_t>{{"nvidia.com/gpumem", 8000},
                                                {"nvidia.com/gpucores", 200}}));
  auto bad = QuotaLimitsFromHard({{"limits.nvidia.com/gpumem", "lots"}}, tracked);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("limits.nvidia.com/gpumem"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("\"lots\""), std::string::npos) << bad.error();
}

TEST(Quota, Fit) {
  const char* mem = "nvidia.com/gpumem";
  const char* core = "nvidia.com/gpucores";
  NamespaceQuota zero{{mem, {.used = 0, .limit = 0, .limit_set = true}}};
  EXPECT_FALSE(FitQuota(zero, mem, 1, core, 0, 1));  // an explicit 0 blocks
  EXPECT_TRUE(FitQuota(zero, mem, 0, core, 0, 1));
  NamespaceQuota usage_only{{mem, {.used = 1000000, .limit = 0, .limit_set = false}}};
  EXPECT_TRUE(FitQuota(usage_only, mem, 1, core, 0, 1));
  NamespaceQuota q{{mem, {.used = 3000, .limit = 4, .limit_set = true}},
                   {core, {.used = 150, .limit = 200, .limit_set = true}}};
  EXPECT_TRUE(FitQuota(q, mem, 1096, core, 50, 1024));  // 4096 <= 4 x 1024
  EXPECT_FALSE(FitQuota(q, mem, 1097, core, 50, 1024));
  EXPECT_FALSE(FitQuota(q, mem, 0, core, 51, 1024));
  EXPECT_TRUE(FitQuota({}, mem, 1 << 30, core, 1000, 1));
}

}  // namespace
}  // namespace hami::device
