#include "vgpu/memory_math.h"

#include <gtest/gtest.h>

namespace hami::vgpu {
namespace {

constexpr std::uint64_t kGiB = 1ULL << 30;

TEST(VirtualMemoryTest, Table) {
  struct Case {
    const char* name;
    std::uint64_t limit, usage;
    MemoryView physical, want;
  } cases[] = {
      {"unlimited is physical",
       0,
       5 * kGiB,
       {80 * kGiB, 70 * kGiB, 10 * kGiB},
       {80 * kGiB, 70 * kGiB, 10 * kGiB}},
      {"limit below physical",
       4 * kGiB,
       1 * kGiB,
       {80 * kGiB, 70 * kGiB, 10 * kGiB},
       {4 * kGiB, 3 * kGiB, 1 * kGiB}},
      {"limit above physical",
       100 * kGiB,
       1 * kGiB,
       {80 * kGiB, 70 * kGiB, 10 * kGiB},
       {80 * kGiB, 70 * kGiB, 10 * kGiB}},
      {"usage over limit saturates",
       4 * kGiB,
       9 * kGiB,
       {80 * kGiB, 70 * kGiB, 10 * kGiB},
       {4 * kGiB, 0, 4 * kGiB}},
      {"co-tenants bound free",
       4 * kGiB,
       1 * kGiB,
       {80 * kGiB, kGiB / 2, 79 * kGiB},
       {4 * kGiB, kGiB / 2, 4 * kGiB - kGiB / 2}},
      {"physical full", 4 * kGiB, 0, {80 * kGiB, 0, 80 * kGiB}, {4 * kGiB, 0, 4 * kGiB}},
  };
  for (const Case& c : cases) {
    MemoryView v = VirtualMemory(c.limit, c.usage, c.physical);
    EXPECT_EQ(v.total, c.want.total) << c.name;
    EXPECT_EQ(v.free, c.want.free) << c.name;
    EXPECT_EQ(v.used, c.want.used) << c.name;
    if (c.limit != 0) {
      EXPECT_EQ(v.used + v.free, v.total) << c.name;
      EXPECT_LE(v.free, c.physical.free) << c.name;
    }
  }
}

TEST(SaturatingTest, AddAndMul) {
  EXPECT_EQ(SatAdd(UINT64_MAX - 1, 5), UINT64_MAX);
  EXPECT_EQ(SatAdd(2, 3), 5u);
  EXPECT_EQ(SatMul(1ULL << 40, 1ULL << 40), UINT64_MAX);
  EXPECT_EQ(SatMul(0, UINT64_MAX), 0u);
  EXPECT_EQ(SatMul(3, 7), 21u);
}

}  // namespace
}  // namespace hami::vgpu
