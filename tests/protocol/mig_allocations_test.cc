#include "protocol/mig_allocations.h"

#include <gtest/gtest.h>

#include <string>

namespace hami::protocol {
namespace {

MigAllocation Reserved(int64_t container, int64_t device, const char* gpu, const char* profile,
                       uint32_t start, uint32_t size) {
  MigAllocation a;
  a.container_index = container;
  a.device_index = device;
  a.gpu_uuid = gpu;
  a.profile = profile;
  a.placement = {start, size};
  return a;
}

TEST(MigAllocations, EncodeKeyOrder) {
  MigAllocation plain = Reserved(0, 0, "GPU-a", "1g.5gb", 6, 1);
  MigAllocation realized = Reserved(1, 2, "GPU-b", "3g.20gb", 0, 4);
  realized.runtime = MigRuntimeIdentity{"MIG-1234", 0, 0};
  EXPECT_EQ(EncodeMigAllocations({plain, realized}),
            R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb",)"
            R"("placement":{"start":6,"size":1}},)"
            R"({"containerIndex":1,"deviceIndex":2,"gpuUUID":"GPU-b","profile":"3g.20gb",)"
            R"("placement":{"start":0,"size":4},"migUUID":"MIG-1234","gpuInstanceID":0,)"
            R"("computeInstanceID":0}])");
  EXPECT_EQ(EncodeMigAllocations({}), "[]");
}

TEST(MigAllocations, RoundTrip) {
  MigAllocation a = Reserved(3, 1, "GPU-<x>", "1g.10gb", 2, 2);
  MigAllocation b = Reserved(3, 0, "GPU-y", "2g.20gb", 4, 2);
  b.runtime = MigRuntimeIdentity{"MIG-y", 7, 4294967295u};
  std::vector<MigAllocation> in = {a, b};
  std::string enc = EncodeMigAllocations(in);
  auto r = DecodeMigAllocations(enc);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, in);
  EXPECT_EQ(EncodeMigAllocations(*r), enc);
}

TEST(MigAllocations, DecodeEmptyForms) {
  for (const char* v : {"", "null", "[]", " [ ] "}) {
    auto r = DecodeMigAllocations(v);
    ASSERT_TRUE(r) << v << ": " << r.error();
    EXPECT_TRUE(r->empty()) << v;
  }
}

TEST(MigAllocations, DecodeLenientLikeGo) {
  // Unknown keys ignored; case-insensitive keys; null fields keep zero.
  auto r = DecodeMigAllocations(
      R"([{"ContainerIndex":2,"deviceindex":1,"GPUUUID":"GPU-a","profile":"1g.5gb",)"
      R"("placement":{"Start":1,"size":1},"extra":[1,2],"migUUID":null}])");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], Reserved(2, 1, "GPU-a", "1g.5gb", 1, 1));
  // An empty migUUID counts as absent, so ids without it are partial, but nothing at all is fine.
  auto none =
      DecodeMigAllocations(R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"g","profile":"p",)"
                           R"("placement":{"start":0,"size":1},"migUUID":""}])");
  ASSERT_TRUE(none) << none.error();
  EXPECT_FALSE((*none)[0].runtime.has_value());
}

TEST(MigAllocations, RejectsInvalidNamingAllocationAndField) {
  const std::string ok_head = R"({"containerIndex":0,"deviceIndex":0,"gpuUUID":"g","profile":"p",)";
  struct Case {
    std::string in;
    const char* want;
  };
  const Case cases[] = {
      {R"([{"containerIndex":-1,"deviceIndex":0,"gpuUUID":"g","profile":"p","placement":{"size":1}}])",
       R"(MIG allocation 0: field "containerIndex": must not be negative, got -1)"},
      {R"([{"containerIndex":0,"deviceIndex":-2,"gpuUUID":"g","profile":"p","placement":{"size":1}}])",
       R"(MIG allocation 0: field "deviceIndex": must not be negative, got -2)"},
      {R"([{"profile":"p","placement":{"size":1}}])",
       R"(MIG allocation 0: field "gpuUUID": must not be empty)"},
      {R"([{"gpuUUID":"g","profile":"","placement":{"size":1}}])",
       R"(MIG allocation 0: field "profile": must not be empty)"},
      {R"([{"gpuUUID":"g","profile":"p","placement":{"start":3}}])",
       R"(MIG allocation 0: field "placement.size": must not be 0)"},
      {R"([{"gpuUUID":"g","profile":"p"}])", R"(field "placement.size": must not be 0)"},
      {"[" + ok_head + R"("placement":{"size":1},"migUUID":"MIG-x"}])",
       R"(MIG allocation 0: partial runtime identity (migUUID "MIG-x", gpuInstanceID absent)"},
      {"[" + ok_head + R"("placement":{"size":1},"gpuInstanceID":0,"computeInstanceID":0}])",
       "partial runtime identity (migUUID absent, gpuInstanceID set, computeInstanceID set)"},
      {"[" + ok_head + R"("placement":{"size":1},"migUUID":"m","gpuInstanceID":1}])",
       "computeInstanceID absent"},
      {"[" + ok_head + R"("placement":{"size":1}},)" + ok_head + R"("placement":{"size":2}}])",
       "MIG allocation 1: duplicate allocation for containerIndex 0 deviceIndex 0"},
      {R"([{"containerIndex":"0"}])",
       R"(MIG allocation 0: field "containerIndex": want an integer, got "0")"},
      {R"([{"containerIndex":1.0}])", R"(field "containerIndex": want an integer, got 1.0)"},
      {R"([{"placement":{"size":4294967296}}])",
       R"(field "placement.size": 4294967296 is out of range)"},
      {R"([{"placement":{"start":-1}}])", R"(field "placement.start": -1 is out of range)"},
      {R"([{"placement":[1]}])", R"(field "placement": want an object, got [1])"},
      {R"([{"gpuInstanceID":-1}])", R"(field "gpuInstanceID": -1 is out of range)"},
      {R"([{"gpuUUID":1}])", R"(field "gpuUUID": want a string, got 1)"},
      {R"([7])", "MIG allocation 0: want an object, got 7"},
      {R"({})", "MIG allocations: want a JSON list, got {}"},
      {R"([)", "MIG allocations: not valid JSON"},
  };
  for (const auto& c : cases) {
    auto r = DecodeMigAllocations(c.in);
    ASSERT_FALSE(r) << c.in;
    EXPECT_NE(r.error().find(c.want), std::string::npos) << c.in << " -> " << r.error();
  }
}

// 100,000 levels of `[` (200 KB, under the annotation size limit) crashed the decoder's caller.
TEST(DeepNesting, MigAllocationsIsACleanError) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = DecodeMigAllocations(deep);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("MIG allocations: nested deeper than 10000 levels"), std::string::npos)
      << r.error().substr(0, 200);
}

}  // namespace
}  // namespace hami::protocol
