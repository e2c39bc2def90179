// Scores and policies (docs/protocol.md#filter-and-scores).
#include "device/policy.h"

#include <gtest/gtest.h>

#include <random>

namespace hami::device {
namespace {

DeviceUsage Usage(std::string type, int32_t count, int32_t used, int32_t totalcore,
                  int32_t usedcores, int32_t totalmem, int32_t usedmem) {
  return DeviceUsage{.id = "d",
                     .type = std::move(type),
                     .count = count,
                     .used = used,
                     .totalmem = totalmem,
                     .usedmem = usedmem,
                     .totalcore = totalcore,
                     .usedcores = usedcores};
}

// Vector 16 (TestComputeScore).
TEST(DeviceScore, SpecVector) {
  DeviceUsage d = Usage("type1", 10, 2, 4, 1, 8192, 2048);
  EXPECT_DOUBLE_EQ(DeviceScore(d, {}, DefaultScoringWeights()), 7.0);
  ContainerRequests reqs{
      {"type1", DeviceRequest{.nums = 1, .type = "type1", .memreq = 1024, .coresreq = 1}},
      {"type2", DeviceRequest{.nums = 1, .type = "type2", .memreq = 4096, .coresreq = 3}}};
  EXPECT_DOUBLE_EQ(DeviceScore(d, reqs, DefaultScoringWeights()), 11.75);
}

// Vector 16 (TestComputeScoreWithResourceWeights).
TEST(DeviceScore, Weights) {
  ContainerRequests reqs{
      {"t", DeviceRequest{.nums = 1, .type = "t", .memreq = 0, .mem_percentage = 40}}};
  DeviceUsage a = Usage("t", 10, 1, 100, 90, 100, 10);
  DeviceUsage b = Usage("t", 10, 7, 100, 10, 100, 20);
  EXPECT_DOUBLE_EQ(DeviceScore(a, reqs, DefaultScoringWeights()), 16);
  EXPECT_DOUBLE_EQ(DeviceScore(b, reqs, DefaultScoringWeights()), 15);
  protocol::ScoringWeights w{.slot = 1, .core = 1, .memory = 3};
  EXPECT_DOUBLE_EQ(DeviceScore(a, reqs, w), 26);
  EXPECT_DOUBLE_EQ(DeviceScore(b, reqs, w), 27);
}

TEST(DeviceScore, ZeroTotalsScoreZero) {
  EXPECT_EQ(DeviceScore(Usage("t", 0, 0, 100, 0, 100, 0), {}, DefaultScoringWeights()), 0);
  EXPECT_EQ(DeviceScore(Usage("t", 10, 1, 0, 0, 100, 0), {}, DefaultScoringWeights()), 0);
  EXPECT_EQ(DeviceScore(Usage("t", 10, 1, 100, 0, 0, 0), {}, DefaultScoringWeights()), 0);
}

// Vector 24's node scores.
TEST(NodeScore, SumsOverDevices) {
  std::vector<DeviceUsage> node1 = {Usage("t", 10, 1, 100, 25, 8000, 2000),
                                    Usage("t", 10, 0, 100, 0, 8000, 0)};
  EXPECT_DOUBLE_EQ(NodeScore(node1), 3.0);
  std::vector<DeviceUsage> node2 = {Usage("t", 10, 0, 100, 0, 8000, 0),
                                    Usage("t", 10, 1, 100, 75, 8000, 6000)};
  EXPECT_DOUBLE_EQ(NodeScore(node2), 8.0);
  EXPECT_EQ(NodeScore({}), 0);
}

TEST(Policy, Parse) {
  EXPECT_EQ(ParseNodePolicy("binpack"), NodePolicy::kBinpack);
  EXPECT_EQ(ParseNodePolicy("spread"), NodePolicy::kSpread);
  EXPECT_EQ(ParseNodePolicy("Binpack"), std::nullopt);
  auto p = ParseGpuPolicy("binpack, numa", true);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->keys,
            (std::vector<GpuPolicy::Key>{GpuPolicy::Key::kBinpack, GpuPolicy::Key::kNuma}));
  EXPECT_TRUE(p->chain);
  p = ParseGpuPolicy("mutex", true);
  EXPECT_TRUE(p->mutex && p->mutex_only && !p->chain);
  p = ParseGpuPolicy("topology-aware", true);
  EXPECT_TRUE(p->topology_aware && !p->chain && p->keys.empty());
  p = ParseGpuPolicy("numa", true);
  EXPECT_TRUE(p->chain);
  EXPECT_FALSE(ParseGpuPolicy("fast", true));
  EXPECT_FALSE(ParseGpuPolicy("", true));
  p = ParseGpuPolicy("fast", false);  // unknown: behaves as spread
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, GpuPolicy{});
}

struct SortCase {
  const char* policy;
  bool numa_bind;
  std::vector<std::string> want;  // ids after sorting; the preferred device is last
};

// Devices: a (score 1, numa 0, used 2, index 0), b (score 3, numa 1, used 0, index 1),
// c (score 2, numa 0, used 1, index 2), d (score 3, numa 0, used 0, index 3).
TEST(Policy, SortOrders) {
  std::vector<DeviceUsage> devs(4);
  const char* ids[] = {"a", "b", "c", "d"};
  int64_t numa[] = {0, 1, 0, 0};
  int32_t used[] = {2, 0, 1, 0};
  double score[] = {1, 3, 2, 3};
  for (size_t i = 0; i < 4; ++i) {
    devs[i].id = ids[i];
    devs[i].numa = numa[i];
    devs[i].used = used[i];
    devs[i].index = i;
  }
  const SortCase cases[] = {
      {"binpack", false, {"a", "c", "d", "b"}},       {"spread", false, {"d", "b", "c", "a"}},
      {"unknown", false, {"d", "b", "c", "a"}},       {"mutex", false, {"a", "c", "d", "b"}},
      {"binpack", true, {"b", "a", "c", "d"}},        {"spread", true, {"d", "c", "a", "b"}},
      {"numa", false, {"d", "c", "a", "b"}},          {"binpack,numa", false, {"a", "c", "d", "b"}},
      {"numa,binpack", false, {"a", "c", "d", "b"}},  {"spread,numa", false, {"d", "b", "c", "a"}},
      {"binpack,spread", true, {"a", "c", "d", "b"}},
  };
  for (const auto& c : cases) {
    std::vector<ScoredDevice> sorted;
    for (size_t i = 0; i < 4; ++i) sorted.push_back({&devs[i], score[i]});
    SortDevices(*ParseGpuPolicy(c.policy, false), c.numa_bind, &sorted);
    std::vector<std::string> got;
    for (const auto& s : sorted) got.push_back(s.device->id);
    EXPECT_EQ(got, c.want) << c.policy << (c.numa_bind ? " numa-bind" : "");
  }
}

// A node's devices (at most 32) are sorted without std::stable_sort; a longer list still uses it.
// Both must give the one stable order: the order of a subset in a stable sort of a longer list
// is the subset's own stable order, so sorting 8 devices alone and as the first 8 of 40 must
// agree. Many ties (two values per key), every policy of SortOrders.
TEST(Policy, ShortListsSortAsStablyAsLongOnes) {
  std::mt19937 rng(29);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (const char* name : {"binpack", "spread", "mutex", "numa", "binpack,numa", "numa,binpack",
                           "spread,numa", "binpack,spread"}) {
    for (bool numa_bind : {false, true}) {
      for (int round = 0; round < 50; ++round) {
        std::vector<DeviceUsage> devs(40);
        std::vector<ScoredDevice> all;
        for (size_t i = 0; i < devs.size(); ++i) {
          devs[i].id = "d" + std::to_string(i);
          devs[i].numa = pick(2);
          devs[i].used = pick(2);
          devs[i].index = static_cast<uint64_t>(pick(4));
          all.push_back({&devs[i], static_cast<double>(pick(2))});
        }
        std::vector<ScoredDevice> few(all.begin(), all.begin() + 8);
        GpuPolicy policy = *ParseGpuPolicy(name, false);
        SortDevices(policy, numa_bind, &few);
        SortDevices(policy, numa_bind, &all);
        std::vector<std::string> alone, within;
        for (const auto& d : few) alone.push_back(d.device->id);
        for (const auto& d : all) {
          if (d.device < &devs[8]) within.push_back(d.device->id);
        }
        ASSERT_EQ(alone, within) << name << (numa_bind ? " numa-bind" : "") << " round " << round;
      }
    }
  }
}

}  // namespace
}  // namespace hami::device
