#include "vgpu/alloc_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace hami::vgpu {
namespace {

TEST(AllocTableTest, InsertEraseAndDuplicates) {
  AllocTable t;
  ASSERT_TRUE(t.Init(64));
  EXPECT_FALSE(t.Insert(AllocEntry{0, 1, 0, 0}));  // key 0 reserved
  EXPECT_TRUE(t.Insert(AllocEntry{0x1000, 10, 1, 2}));
  EXPECT_FALSE(t.Insert(AllocEntry{0x1000, 20, 1, 2}));
  AllocEntry e{};
  EXPECT_FALSE(t.Erase(0x2000, &e));
  ASSERT_TRUE(t.Erase(0x1000, &e));
  EXPECT_EQ(e.bytes, 10u);
  EXPECT_EQ(e.dev, 1);
  EXPECT_EQ(e.kind, 2);
  EXPECT_EQ(t.size(), 0u);
}

TEST(AllocTableTest, MatchesReferenceMapUnderRandomChurn) {
  AllocTable t;
  ASSERT_TRUE(t.Init(1024));
  std::map<std::uint64_t, std::uint64_t> ref;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Few distinct keys with aligned low bits force long probe runs and wrap-around.
    std::uint64_t key = ((rng() % 3000) + 1) << 21;
    if (rng() % 2 == 0) {
      bool ok = t.Insert(AllocEntry{key, key >> 21, 0, 0});
      EXPECT_EQ(ok, ref.count(key) == 0);
      if (ok) ref[key] = key >> 21;
    } else {
      AllocEntry e{};
      bool ok = t.Erase(key, &e);
      ASSERT_EQ(ok, ref.count(key) == 1);
      if (ok) {
        EXPECT_EQ(e.bytes, ref[key]);
        ref.erase(key);
      }
    }
    ASSERT_EQ(t.size(), ref.size());
  }
  for (auto& [key, bytes] : ref) {
    AllocEntry e{};
    ASSERT_TRUE(t.Erase(key, &e));
    EXPECT_EQ(e.bytes, bytes);
  }
}

TEST(AllocTableTest, GrowsPastItsInitialCapacityKeepingEveryEntry) {
  AllocTable t;
  ASSERT_TRUE(t.Init(16));
  for (std::uint64_t k = 1; k <= 5000; ++k) ASSERT_TRUE(t.Insert(AllocEntry{k * 4096, k, 0, 0}));
  EXPECT_EQ(t.size(), 5000u);
  for (std::uint64_t k = 1; k <= 5000; ++k) {
    AllocEntry e{};
    ASSERT_TRUE(t.Erase(k * 4096, &e));
    EXPECT_EQ(e.bytes, k);
  }
  t.Insert(AllocEntry{4096, 1, 0, 0});
  t.Clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_TRUE(t.Insert(AllocEntry{4096, 1, 0, 0}));
}

TEST(AllocTableTest, RefusesPastSevenEighthsOfItsMaximum) {
  AllocTable t;
  ASSERT_TRUE(t.Init(16, 64));
  std::uint64_t k = 1;
  while (t.Insert(AllocEntry{k * 4096, k, 0, 0})) ++k;
  EXPECT_EQ(t.size(), 56u);  // 7/8 of 64: the caller must refuse the allocation
  AllocEntry e{};
  ASSERT_TRUE(t.Erase(4096, &e));
  EXPECT_TRUE(t.Insert(AllocEntry{k * 4096, k, 0, 0}));
}

}  // namespace
}  // namespace hami::vgpu
