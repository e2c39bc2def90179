// NVIDIA request normalisation (docs/protocol.md#request-normalisation) and node devices.
#include <gtest/gtest.h>

#include "device/vendors/nvidia/nvidia.h"

namespace hami::device::nvidia {
namespace {

ContainerView Limits(StringMap limits) {
  return ContainerView{.name = "main", .limits = std::move(limits), .requests = {}};
}

DeviceRequest Req(int32_t nums, int32_t mem, int32_t pct, int32_t cores) {
  return DeviceRequest{
      .nums = nums, .type = "NVIDIA", .memreq = mem, .mem_percentage = pct, .coresreq = cores};
}

TEST(NvidiaRequest, SpecVector6) {
  NvidiaDevice dev{NvidiaConfig{}};
  struct Case {
    StringMap limits;
    DeviceRequest want;
  };
  const Case cases[] = {
      {{{"nvidia.com/gpu", "1"}}, Req(1, 0, 100, 0)},
      {{{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "4096"}}, Req(2, 4096, 101, 0)},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}}, Req(1, 0, 50, 0)},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "150"}}, Req(1, 0, 100, 0)},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "101"}}, Req(1, 0, 100, 0)},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "4294967346"}},
       Req(1, 0, 100, 0)},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "0"}}, Req(1, 0, 100, 0)},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "50"}}, Req(1, 0, 100, 50)},
      // The API server's canonical form of 3000 is "3k".
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3k"}}, Req(1, 3000, 101, 0)},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3Gi"}}, Req(1, 3072, 101, 0)},
  };
  for (const auto& c : cases) {
    auto r = dev.NormalizeRequest(Limits(c.limits));
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(*r, c.want) << c.limits.begin()->second << " " << c.limits.rbegin()->second;
  }
}

TEST(NvidiaRequest, RequestsAreReadWhenLimitsLackTheResource) {
  NvidiaDevice dev{NvidiaConfig{}};
  ContainerView c{.name = "main", .limits = {}, .requests = {{"nvidia.com/gpu", "1"}}};
  auto r = dev.NormalizeRequest(c);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, Req(1, 0, 100, 0));
  // Limits win over requests, per resource.
  c.limits = {{"nvidia.com/gpu", "2"}};
  c.requests["nvidia.com/gpumem"] = "1000";
  r = dev.NormalizeRequest(c);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, Req(2, 1000, 101, 0));
}

TEST(NvidiaRequest, NoCountNoRequest) {
  NvidiaDevice dev{NvidiaConfig{}};
  for (StringMap limits : {StringMap{}, StringMap{{"nvidia.com/gpumem", "1000"}},
                           StringMap{{"nvidia.com/gpu", "0"}}, StringMap{{"cpu", "2"}}}) {
    auto r = dev.NormalizeRequest(Limits(limits));
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->nums, 0);
  }
}

TEST(NvidiaRequest, ConfigDefaultsAndFactor) {
  NvidiaConfig config;
  config.default_memory = 2048;
  config.default_cores = 30;
  NvidiaDevice dev{config};
  auto r = dev.NormalizeRequest(Limits({{"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, Req(1, 2048, 101, 30));

  config = NvidiaConfig{};
  config.memory_factor = 1024;
  config.resource_count_name = "example.com/vgpu";
  NvidiaDevice factored{config};
  r = factored.NormalizeRequest(Limits({{"example.com/vgpu", "1"}, {"nvidia.com/gpumem", "3"}}));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, Req(1, 3072, 101, 0));
  EXPECT_EQ(factored.Info().count_resource, "example.com/vgpu");
  r = factored.NormalizeRequest(
      Limits({{"example.com/vgpu", "1"}, {"nvidia.com/gpumem", "2097152"}}));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("memoryFactor"), std::string::npos) << r.error();
}

// HAMi drops a pod with a bad quantity from scheduling silently; we report which one.
TEST(NvidiaRequest, BadQuantitiesNameContainerResourceAndValue) {
  NvidiaDevice dev{NvidiaConfig{}};
  struct Case {
    StringMap limits;
    const char* resource;
    const char* value;
  };
  const Case cases[] = {
      {{{"nvidia.com/gpu", "x"}}, "nvidia.com/gpu", "\"x\""},
      {{{"nvidia.com/gpu", "1.5"}}, "nvidia.com/gpu", "\"1.5\""},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "-5"}}, "nvidia.com/gpumem", "\"-5\""},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "10Ei"}}, "nvidia.com/gpumem", "\"10Ei\""},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "abc"}}, "nvidia.com/gpucores", "\"abc\""},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50.5"}},
       "nvidia.com/gpumem-percentage",
       "\"50.5\""},
  };
  for (const auto& c : cases) {
    auto r = dev.NormalizeRequest(Limits(c.limits));
    ASSERT_FALSE(r) << c.value;
    EXPECT_NE(r.error().find("container \"main\""), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(c.resource), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(c.value), std::string::npos) << r.error();
  }
}

TEST(NvidiaNodeDevices, JsonLegacyAndAbsent) {
  NvidiaDevice dev{NvidiaConfig{}};
  auto none = dev.NodeDevices({});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto json = dev.NodeDevices(NodeView{
      "n1",
      {{"hami.io/node-nvidia-register",
        R"([{"id":"GPU-a","count":10,"devmem":24576,"devcore":100,"type":"NVIDIA A10",)"
        R"("mode":"hami-core","health":true},{"id":"GPU-b","index":1,"count":10,)"
        R"("devmem":24576,"devcore":100,"type":"NVIDIA A10","numa":1,"mode":"hami-core"}])"}}});
  ASSERT_TRUE(json) << json.error();
  ASSERT_EQ(json->size(), 2u);
  EXPECT_EQ((*json)[0].id, "GPU-a");
  EXPECT_EQ((*json)[0].vendor, "NVIDIA");
  EXPECT_EQ((*json)[0].count, 10);
  EXPECT_EQ((*json)[0].totalmem, 24576);
  EXPECT_EQ((*json)[0].totalcore, 100);
  EXPECT_TRUE((*json)[0].health);
  EXPECT_EQ((*json)[1].index, 1u);
  EXPECT_EQ((*json)[1].numa, 1);
  EXPECT_FALSE((*json)[1].health);  // absent health = unhealthy
  EXPECT_EQ((*json)[1].used, 0);

  auto legacy = dev.NodeDevices(
      NodeView{"n1",
               {{"hami.io/node-nvidia-register",
                 "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true:"}}});
  ASSERT_TRUE(legacy) << legacy.error();
  ASSERT_EQ(legacy->size(), 1u);
  EXPECT_EQ((*legacy)[0].totalmem, 7680);
  EXPECT_EQ((*legacy)[0].mode, "hami-core");

  auto bad =
      dev.NodeDevices(NodeView{"n1", {{"hami.io/node-nvidia-register", "[{\"devmem\":\"x\"}]"}}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("hami.io/node-nvidia-register"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace hami::device::nvidia
