// AMD backend: vectors from HAMi v2.10.0 pkg/device/amd/device_test.go (Test_MutateAdmission,
// Test_GetNodeDevices, Test_PatchAnnotations, Test_checkType, Test_GenerateResourceRequests,
// TestDevices_Fit, TestCheckAMDType).
#include "device/vendors/amd/amd.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "device/schedule.h"
#include "support/vendor_test_util.h"

namespace hami::device::amd {
namespace {

// The upstream tests' resource names.
AmdConfig TestConfig() {
  return AmdConfig{.resource_count_name = "amd.com/gpu",
                   .resource_memory_name = "amd.com/gpu-mem",
                   .resource_core_name = "amd.com/gpu-core-pct"};
}

using vendor_test::FakeEdit;

DeviceUsage Dev(std::string id, int32_t count, int32_t totalcore, int32_t used = 0,
                int32_t usedmem = 0, int32_t usedcores = 0, bool health = true,
                std::string type = "AMD") {
  return DeviceUsage{.id = std::move(id),
                     .type = std::move(type),
                     .vendor = "AMD",
                     .health = health,
                     .count = count,
                     .used = used,
                     .totalmem = 1000,
                     .usedmem = usedmem,
                     .totalcore = totalcore,
                     .usedcores = usedcores};
}

DeviceRequest Req(int32_t nums, int32_t mem, int32_t cores) {
  return DeviceRequest{
      .nums = nums, .type = "AMD", .memreq = mem, .mem_percentage = 0, .coresreq = cores};
}

TEST(AmdInfo, KeysAndConfig) {
  AmdDevice dev{AmdConfig{}};
  EXPECT_EQ(dev.VendorKey(), "AMD");
  EXPECT_EQ(dev.Info().register_key, "hami.io/node-amd-register");
  EXPECT_EQ(dev.Info().to_allocate_key, "hami.io/amd-devices-to-allocate");
  EXPECT_EQ(dev.Info().allocated_key, "hami.io/amd-devices-allocated");
  const VendorFactory* factory = FindVendorFactory("amd");
  ASSERT_NE(factory, nullptr);
  auto made = (*factory)(YAML::Load(R"(
resourceCountName: "amd.com/gpu"
resourceCoreName: "amd.com/gpucores"
resourceMemoryName: "amd.com/gpumem")"),
                         DeviceConfig{});
  ASSERT_TRUE(made) << made.error();
  EXPECT_EQ((*made)[0]->Info().memory_resource, "amd.com/gpumem");
  auto bad = ParseAmdConfig(YAML::Load("resourceMemoryName: [x]"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "amd.resourceMemoryName: want a resource name, got \"<sequence>\"");
}

TEST(AmdWebhook, MutateAdmission) {
  AmdDevice dev{TestConfig()};
  struct Case {
    const char* name;
    const char* ctr;
    bool want;
  };
  std::vector<Case> cases = {
      {"gpu count in limits", R"({"resources":{"limits":{"amd.com/gpu":"1"}}})", true},
      {"gpu memory in limits", R"({"resources":{"limits":{"amd.com/gpu-mem":"1024"}}})", true},
      {"core percentage in limits", R"({"resources":{"limits":{"amd.com/gpu-core-pct":50}}})",
       true},
      {"requests only", R"({"resources":{"requests":{"amd.com/gpu":"1"}}})", false},
      {"partial memory without a core percentage",
       R"({"resources":{"limits":{"amd.com/gpu":"1","amd.com/gpu-mem":"1024"}}})", true},
      {"no resources", R"({"resources":{"limits":{}}})", false},
  };
  for (const auto& c : cases) {
    FakeEdit edit(c.ctr);
    auto r = dev.MutateAdmission(edit);
    ASSERT_TRUE(r) << c.name << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.name;
    EXPECT_EQ(edit.Count(), 0) << c.name;
  }
  for (const char* pct : {"0", "101", "1.5"}) {
    std::string ctr =
        std::string(R"({"resources":{"limits":{"amd.com/gpu":"1","amd.com/gpu-core-pct":")") + pct +
        "\"}}}";
    FakeEdit edit(ctr.c_str());
    auto r = dev.MutateAdmission(edit);
    ASSERT_FALSE(r) << pct;
    EXPECT_EQ(r.error(), std::string("amd.com/gpu-core-pct must be an integer percentage between 1 "
                                     "and 100, got \"") +
                             pct + "\"");
  }
}

TEST(AmdNodeDevices, Register) {
  AmdDevice dev{AmdConfig{}};
  auto r = dev.NodeDevices(NodeView{
      .name = "node-1",
      .annotations = {
          {"hami.io/node-amd-register",
           R"([{"id":"GPU-0","index":0,"count":1,"devmem":8192,"devcore":100,"type":"amd","numa":0,"health":true}])"}}});
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, "GPU-0");
  EXPECT_EQ((*r)[0].type, "amd");
  EXPECT_EQ((*r)[0].vendor, "AMD");
  EXPECT_EQ((*r)[0].totalmem, 8192);
  auto none = dev.NodeDevices(NodeView{.name = "node-2"});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto bad =
      dev.NodeDevices(NodeView{.name = "n", .annotations = {{"hami.io/node-amd-register", "x"}}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("annotation hami.io/node-amd-register: ", 0), 0u) << bad.error();
  // Every device needs an id of its own (two without one would be one device, picked twice).
  vendor_test::ExpectRegisterErrors(
      [&](const std::string& v) {
        return dev.NodeDevices(vendor_test::Node({{"hami.io/node-amd-register", v}}));
      },
      vendor_test::IdRuleCases("annotation hami.io/node-amd-register: "));
}

TEST(AmdHealth, CountCapacityDecides) {
  AmdDevice dev{AmdConfig{}};
  EXPECT_EQ(dev.CheckHealth(NodeView{.capacity = {{"amd.com/gpu", "8"}}}, Health{false, false}),
            (Health{true, true}));
  EXPECT_EQ(dev.CheckHealth(NodeView{.capacity = {{"amd.com/gpu", "0"}}}, Health{true, true}),
            (Health{false, false}));
  EXPECT_EQ(dev.CheckHealth(NodeView{}, Health{true, true}), (Health{false, false}));
  EXPECT_EQ(dev.CheckHealth(NodeView{.capacity = {{"amd.com/gpu", "x"}}}, Health{true, true}),
            (Health{false, false}));
}

TEST(AmdRequest, GenerateResourceRequests) {
  AmdDevice dev{TestConfig()};
  ContainerView both{
      .name = "c1",
      .limits = {{"amd.com/gpu", "2"}, {"amd.com/gpu-mem", "4096"}, {"amd.com/gpu-core-pct", "33"}},
      .requests = {
          {"amd.com/gpu", "99"}, {"amd.com/gpu-mem", "99"}, {"amd.com/gpu-core-pct", "99"}}};
  EXPECT_EQ(dev.NormalizeRequest(both).value(), Req(2, 4096, 33));
  ContainerView requests_only{.name = "c", .requests = {{"amd.com/gpu", "1"}}};
  EXPECT_EQ(dev.NormalizeRequest(requests_only).value(), DeviceRequest{});
  ContainerView no_core{.name = "c", .limits = {{"amd.com/gpu", "1"}}};
  EXPECT_EQ(dev.NormalizeRequest(no_core).value().coresreq, 100);
  ContainerView zero{.name = "c", .limits = {{"amd.com/gpu", "0"}}};
  EXPECT_EQ(dev.NormalizeRequest(zero).value(), DeviceRequest{});
  struct Bad {
    const char* resource;
    const char* value;
  };
  for (Bad b : {Bad{"amd.com/gpu", "2147483648"}, Bad{"amd.com/gpu-mem", "-1"},
                Bad{"amd.com/gpu-mem", "2147483648"}, Bad{"amd.com/gpu-core-pct", "0"},
                Bad{"amd.com/gpu-core-pct", "101"}}) {
    ContainerView c{.name = "c", .limits = {{"amd.com/gpu", "1"}}};
    c.limits[b.resource] = b.value;
    auto r = dev.NormalizeRequest(c);
    ASSERT_FALSE(r) << b.resource << "=" << b.value;
    EXPECT_NE(r.error().find(b.resource), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(b.value), std::string::npos) << r.error();
  }
}

TEST(AmdFit, CheckAmdType) {
  struct Case {
    StringMap annos;
    const char* card;
    bool want;
  };
  const std::string use = "amd.com/use-gputype", nouse = "amd.com/nouse-gputype";
  std::vector<Case> cases = {
      {{}, "MI300X", true},
      {{{use, "MI300"}}, "MI300X", true},
      {{{use, "MI250"}}, "MI300X", false},
      {{{nouse, "MI300"}}, "MI300X", false},
      {{{nouse, "MI250"}}, "MI300X", true},
      {{{nouse, ""}}, "MI300X", true},
      {{{use, ""}}, "MI300X", true},
      {{{nouse, "   "}}, "MI300X", true},
      {{{use, "   "}}, "MI300X", true},
      {{{nouse, "MI250,"}}, "MI300X", true},
      {{{nouse, ",MI250"}}, "MI300X", true},
      {{{nouse, " MI250 , "}}, "MI250X", false},
      {{{nouse, ", "}}, "MI300X", true},
      {{{use, "MI300,"}}, "MI250X", false},
      {{{use, ", "}}, "MI300X", false},
      {{{use, "mi300"}}, "AMD-MI300X", true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(CheckAmdType(c.annos, c.card), c.want)
        << c.card << " " << (c.annos.empty() ? "" : c.annos.begin()->second);
  }
}

struct Fixture {
  AmdDevice dev{AmdConfig{}};
  PodView pod{};
  FitResult Fit(const std::vector<DeviceUsage>& devs, const DeviceRequest& req) {
    return dev.Fit(vendor_test::Ptrs(devs), req, FitContext{.pod = &pod});
  }
};

TEST(AmdFit, UpstreamVectors) {
  Fixture f;
  // Two whole cards: memreq 0 takes the card's memory, and then every compute unit.
  FitResult whole = f.Fit({Dev("dev-0", 2, 100), Dev("dev-1", 12, 100)}, Req(2, 0, 0));
  ASSERT_TRUE(whole.fit) << whole.Reason();
  EXPECT_EQ(whole.devices,
            (protocol::ContainerDevices{{"dev-1", "AMD", 1000, 100}, {"dev-0", "AMD", 1000, 100}}));
  // The percentage maps to each card's units.
  FitResult half = f.Fit({Dev("dev-0", 2, 10), Dev("dev-1", 12, 100)}, Req(1, 500, 50));
  ASSERT_TRUE(half.fit);
  EXPECT_EQ(half.devices, (protocol::ContainerDevices{{"dev-1", "AMD", 500, 50}}));
  // The allocation keeps the registered product type.
  FitResult product =
      f.Fit({Dev("dev-0", 2, 100, 0, 0, 0, true, "AMD_Instinct_MI300X_VF")}, Req(1, 100, 10));
  ASSERT_TRUE(product.fit);
  EXPECT_EQ(product.devices[0].type, "AMD_Instinct_MI300X_VF");
  // At least one unit, at most all of them.
  EXPECT_EQ(f.Fit({Dev("dev-0", 2, 64)}, Req(1, 100, 1)).devices.at(0).usedcores, 1);
  EXPECT_EQ(f.Fit({Dev("dev-0", 2, 64)}, Req(1, 100, 101)).devices.at(0).usedcores, 64);

  struct Case {
    const char* name;
    DeviceUsage dev;
    DeviceRequest req;
    StringMap annos;
    const char* reason;
  };
  std::vector<Case> cases = {
      {"insufficient memory",
       Dev("dev-0", 2, 100, 0, 900),
       Req(1, 500, 10),
       {},
       "1/1 CardInsufficientMemory"},
      {"insufficient core",
       Dev("dev-0", 2, 10, 0, 0, 9),
       Req(1, 100, 100),
       {},
       "1/1 CardInsufficientCore"},
      {"a percentage on a card without units",
       Dev("dev-0", 2, 0),
       Req(1, 100, 10),
       {},
       "1/1 CardInsufficientCore"},
      {"uuid mismatch",
       Dev("dev-1", 2, 100),
       Req(1, 100, 10),
       {{"amd.com/use-gpu-uuid", "dev-0"}},
       "1/1 CardUuidMismatch"},
      {"time slicing exhausted",
       Dev("dev-0", 2, 100, 2),
       Req(1, 100, 10),
       {},
       "1/1 CardTimeSlicingExhausted"},
      {"unhealthy", Dev("dev-0", 2, 100, 0, 0, 0, false), Req(1, 100, 10), {}, "1/1 CardNotHealth"},
      {"type annotation",
       Dev("dev-0", 2, 100, 0, 0, 0, true, "AMD-MI300X"),
       Req(1, 100, 10),
       {{"amd.com/use-gputype", "MI250"}},
       "1/1 CardTypeMismatch"},
  };
  for (const auto& c : cases) {
    f.pod.annotations = c.annos;
    FitResult r = f.Fit({c.dev}, c.req);
    EXPECT_FALSE(r.fit) << c.name;
    EXPECT_EQ(r.Reason(), c.reason) << c.name;
  }
  f.pod.annotations = {};
  DeviceRequest other = Req(1, 100, 10);
  other.type = "other";
  EXPECT_EQ(f.Fit({Dev("dev-0", 2, 100)}, other).Reason(), "1/1 CardTypeMismatch");
  other.type = "amd";
  EXPECT_TRUE(f.Fit({Dev("dev-0", 2, 100)}, other).fit);
}

// Test_PatchAnnotations through the scheduler, and the usage the allocation counts.
TEST(AmdSchedule, KeysAndUsage) {
  Registry registry;
  registry.Register(std::make_unique<AmdDevice>(AmdConfig{}));
  auto node = NodeUsageFromAnnotations(
      registry, "n1",
      {{"hami.io/node-amd-register",
        R"([{"id":"GPU-0","count":4,"devmem":8192,"devcore":100,"type":"AMD_Instinct_MI300X_VF","health":true}])"}});
  ASSERT_TRUE(node) << node.error();
  StringMap annos = vendor_test::ScheduleAnnotations(
      registry, *node,
      vendor_test::Pod({vendor_test::NamedCtr(
          "c", {{"amd.com/gpu", "1"}, {"amd.com/gpumem", "2048"}, {"amd.com/gpucores", "25"}})}));
  vendor_test::ExpectAllocateKeys(annos, "hami.io/amd-devices-to-allocate",
                                  "hami.io/amd-devices-allocated",
                                  "GPU-0,AMD_Instinct_MI300X_VF,2048,25:;");
  const Device* amd = registry.Find("AMD");
  auto allocated = amd->PodAllocated(StringMap(annos.begin(), annos.end()));
  ASSERT_TRUE(allocated) << allocated.error();
  ASSERT_TRUE(allocated->has_value());
  std::vector<DeviceUsage> devices = node->devices;
  ApplyDeltas(amd->UsageDeltas(**allocated, 0, false), +1, &devices);
  EXPECT_EQ(devices[0].used, 1);
  EXPECT_EQ(devices[0].usedmem, 2048);
  EXPECT_EQ(devices[0].usedcores, 25);
}

// The scheduler's way in: the section in device-config.yaml makes the backend active.
TEST(AmdRegistry, ActiveWhenTheSectionIsPresent) {
  vendor_test::ExpectActiveWithSection("amd:\n  resourceCountName: amd.com/gpu\n", {"AMD"});
}

}  // namespace
}  // namespace hami::device::amd
