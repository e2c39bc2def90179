// Hygon DCU backend: vectors from HAMi v2.10.0 pkg/device/hygon/device_test.go
// (Test_GetNodeDevices, Test_GenerateResourceRequests*, Test_checkDCUtype, Test_MutateAdmission,
// TestDevices_Fit, Test_PatchAnnotations), plus the seed's to-allocate key.
#include "device/vendors/hygon/hygon.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "device/schedule.h"
#include "protocol/pod_devices.h"
#include "support/vendor_test_util.h"

namespace hami::device::hygon {
namespace {

using vendor_test::Ctr;
using vendor_test::ExpectFits;
using vendor_test::FakeEdit;
using vendor_test::FitCase;
using vendor_test::Node;

DeviceUsage Dev(std::string id, int32_t used, int32_t totalmem, int32_t usedcores,
                bool health = true, int32_t count = 100) {
  return vendor_test::ShareDev("DCU", std::move(id), used, totalmem, usedcores, health, count,
                               "hami-core");
}

DeviceRequest Req(int32_t nums, int32_t mem, int32_t cores, int32_t pct = 0,
                  std::string type = "DCU") {
  return vendor_test::ShareReq(std::move(type), nums, mem, cores, pct);
}

TEST(HygonInfo, SeedKeyWrittenOldKeyRead) {
  HygonDevice dev{HygonConfig{}};
  EXPECT_EQ(dev.Info().to_allocate_key, "hami.io/hcu-devices-to-allocate");
  EXPECT_EQ(dev.Info().to_allocate_read_keys,
            std::vector<std::string>{"hami.io/dcu-devices-to-allocate"});
  EXPECT_EQ(dev.Info().allocated_key, "hami.io/dcu-devices-allocated");
  EXPECT_EQ(dev.Info().register_key, "hami.io/node-dcu-register");
  EXPECT_EQ(dev.Info().handshake_key, "hami.io/node-handshake-dcu");
  EXPECT_EQ(dev.VendorKey(), "DCU");
}

Result<HygonConfig> Parse(const std::string& yaml) { return ParseHygonConfig(YAML::Load(yaml)); }

// The plugin side: the seed's key first, then the name older schedulers wrote.
TEST(HygonInfo, PluginReadsBothToAllocateKeys) {
  HygonDevice dev{HygonConfig{}};
  auto seed = dev.PodToAllocate({{"hami.io/hcu-devices-to-allocate", "a,DCU,10,20:;"},
                                 {"hami.io/dcu-devices-to-allocate", "b,DCU,10,20:;"}});
  ASSERT_TRUE(seed) << seed.error();
  ASSERT_TRUE(seed->has_value());
  EXPECT_EQ((**seed)[0][0].uuid, "a");
  auto old = dev.PodToAllocate({{"hami.io/dcu-devices-to-allocate", "b,DCU,10,20:;"}});
  ASSERT_TRUE(old) << old.error();
  ASSERT_TRUE(old->has_value());
  EXPECT_EQ((**old)[0][0].uuid, "b");
  auto none = dev.PodToAllocate({});
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
}

TEST(HygonConfig, DefaultsAndSection) {
  for (const char* empty : {"", "~", "{}"}) {
    auto def = Parse(empty);
    ASSERT_TRUE(def) << def.error();
    EXPECT_EQ(*def, HygonConfig{});
  }
  auto c = Parse(
      "resourceCountName: x.com/n\nresourceMemoryName: x.com/m\nresourceCoreName: x.com/c\n"
      "memoryFactor: 4\nsomethingNew: 1\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->resource_count_name, "x.com/n");
  EXPECT_EQ(c->resource_memory_name, "x.com/m");
  EXPECT_EQ(c->resource_core_name, "x.com/c");
  EXPECT_EQ(c->memory_factor, 4);
  HygonDevice dev{*c};
  EXPECT_EQ(dev.Info().count_resource, "x.com/n");
  EXPECT_EQ(dev.Info().memory_resource, "x.com/m");
  EXPECT_EQ(dev.Info().core_resource, "x.com/c");
  EXPECT_EQ(dev.MemoryFactor(), 4);
}

TEST(HygonConfig, BadValuesNameTheField) {
  struct Case {
    const char* yaml;
    const char* error;
  };
  std::vector<Case> cases = {
      {"memoryFactor: 0", "hygon.memoryFactor: want a positive integer, got \"0\""},
      {"memoryFactor: x", "hygon.memoryFactor: want a positive integer, got \"x\""},
      {"memoryFactor: [1]", "hygon.memoryFactor: want a positive integer, got \"<sequence>\""},
      {"resourceCountName: ''", "hygon.resourceCountName: want a resource name, got \"\""},
      {"resourceCoreName: {a: b}", "hygon.resourceCoreName: want a resource name, got \"<map>\""},
      {"[1]", "hygon: want a map, got \"<sequence>\""},
  };
  for (const auto& c : cases) {
    auto r = Parse(c.yaml);
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_EQ(r.error(), c.error) << c.yaml;
  }
}

// The section of the chart's device-config.yaml registers the backend by itself.
TEST(HygonConfig, SelfRegistered) {
  const VendorFactory* factory = FindVendorFactory("hygon");
  ASSERT_NE(factory, nullptr);
  auto made = (*factory)(YAML::Load("resourceCountName: hygon.com/dcunum\nmemoryFactor: 1\n"),
                         DeviceConfig{});
  ASSERT_TRUE(made) << made.error();
  ASSERT_EQ(made->size(), 1u);
  EXPECT_EQ((*made)[0]->VendorKey(), "DCU");
  auto bad = (*factory)(YAML::Load("memoryFactor: -1"), DeviceConfig{});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "hygon.memoryFactor: want a positive integer, got \"-1\"");
}

TEST(HygonNodeDevices, Register) {
  HygonDevice dev{HygonConfig{}};
  auto none = dev.NodeDevices(Node({}));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());

  auto one = dev.NodeDevices(
      Node(StringMap{{"hami.io/node-dcu-register", "test-0,1,1024,100,DCU,0,true,0,test:"}}));
  ASSERT_TRUE(one) << one.error();
  ASSERT_EQ(one->size(), 1u);
  const DeviceUsage& d = (*one)[0];
  EXPECT_EQ(d.id, "test-0");
  EXPECT_EQ(d.count, 1);
  EXPECT_EQ(d.totalmem, 1024);
  EXPECT_EQ(d.totalcore, 100);
  EXPECT_EQ(d.type, "DCU");
  EXPECT_EQ(d.vendor, "DCU");
  EXPECT_TRUE(d.health);
  EXPECT_EQ(d.mode, "test");
  EXPECT_EQ(d.used, 0);

  auto seven = dev.NodeDevices(
      Node(StringMap{{"hami.io/node-dcu-register", "a,4,16384,100,DCU-Z100,1,false:"}}));
  ASSERT_TRUE(seven) << seven.error();
  ASSERT_EQ(seven->size(), 1u);
  EXPECT_EQ((*seven)[0].mode, "hami-core");
  EXPECT_EQ((*seven)[0].numa, 1);
  EXPECT_FALSE((*seven)[0].health);

  auto empty_list = dev.NodeDevices(Node(StringMap{{"hami.io/node-dcu-register", ":"}}));
  ASSERT_TRUE(empty_list);
  EXPECT_TRUE(empty_list->empty());
}

TEST(HygonNodeDevices, UndecodableIsAnErrorNamingTheKey) {
  HygonDevice dev{HygonConfig{}};
  for (const char* value : {"", "test-0,1,1024,100,DCU:", "a,x,1,1,DCU,0,true:"}) {
    auto r = dev.NodeDevices(Node(StringMap{{"hami.io/node-dcu-register", value}}));
    ASSERT_FALSE(r) << value;
    EXPECT_EQ(r.error().rfind("annotation hami.io/node-dcu-register: ", 0), 0u) << r.error();
  }
}

TEST(HygonRequest, GenerateResourceRequests) {
  HygonDevice dev{HygonConfig{}};
  struct Case {
    const char* name;
    ContainerView ctr;
    DeviceRequest want;
  };
  const StringMap all = {
      {"hygon.com/dcunum", "1"}, {"hygon.com/dcucores", "1"}, {"hygon.com/dcumem", "1024"}};
  std::vector<Case> cases = {
      {"nothing set", Ctr({}, {}), DeviceRequest{}},
      {"all three in limits and requests", Ctr(all, all), Req(1, 1024, 1, 0)},
      {"count in limits, mem and cores in requests", Ctr({{"hygon.com/dcunum", "1"}}, all),
       Req(1, 1024, 1, 0)},
      {"no memory: 100 percent",
       Ctr({{"hygon.com/dcunum", "1"}}, {{"hygon.com/dcunum", "1"}, {"hygon.com/dcucores", "1"}}),
       Req(1, 0, 1, 100)},
      {"no cores: 100", Ctr({{"hygon.com/dcunum", "2"}, {"hygon.com/dcumem", "3k"}}),
       Req(2, 3000, 100, 0)},
      {"count 0: no request", Ctr({{"hygon.com/dcunum", "0"}, {"hygon.com/dcumem", "1"}}),
       DeviceRequest{}},
  };
  for (const auto& c : cases) {
    auto r = dev.NormalizeRequest(c.ctr);
    ASSERT_TRUE(r) << c.name << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.name;
  }
}

TEST(HygonRequest, MemoryFactor) {
  HygonDevice dev{HygonConfig{.memory_factor = 4}};
  auto r = dev.NormalizeRequest(Ctr({{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "1000"}}));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->memreq, 4000);
}

// HAMi drops these requests silently; we report them, naming the container, resource and value.
TEST(HygonRequest, OutOfRangeValuesAreErrors) {
  struct Case {
    const char* name;
    int32_t factor;
    StringMap limits;
    const char* resource;
    const char* value;
  };
  std::vector<Case> cases = {
      {"count beyond int32",
       1,
       {{"hygon.com/dcunum", "2200000000"}},
       "hygon.com/dcunum",
       "2200000000"},
      {"negative cores",
       1,
       {{"hygon.com/dcunum", "1"}, {"hygon.com/dcucores", "-1"}},
       "hygon.com/dcucores",
       "-1"},
      {"memory x factor beyond int32",
       1024,
       {{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "3000000"}},
       "hygon.com/dcumem",
       "3000000"},
      {"fractional count", 1, {{"hygon.com/dcunum", "500m"}}, "hygon.com/dcunum", "500m"},
  };
  for (const auto& c : cases) {
    HygonDevice dev{HygonConfig{.memory_factor = c.factor}};
    auto r = dev.NormalizeRequest(Ctr(c.limits));
    ASSERT_FALSE(r) << c.name;
    EXPECT_NE(r.error().find("container \"main\""), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(c.resource), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(c.value), std::string::npos) << r.error();
  }
}

// Test_MutateAdmission: the count resource in limits admits; requests alone do not.
TEST(HygonWebhook, MutateAdmission) {
  HygonDevice dev{HygonConfig{}};
  struct Case {
    const char* ctr;
    bool want;
  };
  std::vector<Case> cases = {
      {R"({"name":"c","resources":{"limits":{"hygon.com/dcunum":"1"}}})", true},
      {R"({"name":"c","resources":{"requests":{"hygon.com/dcunum":"1"}}})", false},
      {R"({"name":"c","resources":{"limits":{"hygon.com/dcumem":"1"}}})", false},
      {R"({"name":"c"})", false},
      {R"({"name":"c","resources":[]})", false},
  };
  for (const auto& c : cases) {
    FakeEdit edit(nlohmann::json::parse(c.ctr));
    auto r = dev.MutateAdmission(edit);
    ASSERT_TRUE(r) << c.ctr;
    EXPECT_EQ(*r, c.want) << c.ctr;
    EXPECT_TRUE(edit.edits().empty()) << c.ctr;
  }
}

TEST(HygonFit, UpstreamVectors) {
  HygonDevice dev{HygonConfig{}};
  const std::string use = "hygon.com/use-gpuuuid", nouse = "hygon.com/nouse-gpuuuid";
  std::vector<FitCase> cases = {
      {"fit success",
       {Dev("dev-0", 0, 128, 0), Dev("dev-1", 0, 128, 0)},
       Req(1, 64, 50),
       {},
       false,
       true,
       {"dev-1"},
       ""},
      {"memory not enough",
       {Dev("dev-0", 0, 128, 0)},
       Req(1, 512, 50),
       {},
       false,
       false,
       {},
       "1/1 CardInsufficientMemory"},
      {"core not enough",
       {Dev("dev-0", 0, 1024, 100)},
       Req(1, 512, 50),
       {},
       false,
       false,
       {},
       "1/1 CardInsufficientCore"},
      {"type mismatch",
       {Dev("dev-0", 0, 128, 0)},
       Req(1, 512, 50, 0, "OtherType"),
       {},
       false,
       false,
       {},
       "1/1 CardTypeMismatch"},
      {"use uuid mismatch",
       {Dev("dev-1", 0, 1280, 0)},
       Req(2, 512, 50),
       {{use, "dev-0"}},
       false,
       false,
       {},
       "1/1 CardUuidMismatch"},
      {"nouse uuid match",
       {Dev("dev-0", 0, 1280, 0)},
       Req(2, 512, 50),
       {{nouse, "dev-0"}},
       false,
       false,
       {},
       "1/1 CardUuidMismatch"},
      {"card overused",
       {Dev("dev-0", 100, 1280, 0)},
       Req(1, 512, 50),
       {},
       false,
       false,
       {},
       "1/1 CardTimeSlicingExhausted"},
      {"cores clamped to 100",
       {Dev("dev-0", 0, 1280, 0)},
       Req(1, 512, 120),
       {},
       false,
       true,
       {"dev-0"},
       ""},
      {"card exclusively",
       {Dev("dev-0", 20, 1280, 0)},
       Req(1, 512, 100),
       {},
       false,
       false,
       {},
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"compute units exhausted",
       {Dev("dev-0", 20, 1280, 100)},
       Req(1, 512, 0),
       {},
       false,
       false,
       {},
       "1/1 CardComputeUnitsExhausted"},
      {"allocated cards insufficient",
       {Dev("dev-0", 20, 1280, 10)},
       Req(2, 512, 20),
       {},
       false,
       false,
       {},
       "1/1 AllocatedCardsInsufficientRequest"},
      {"memory percentage",
       {Dev("dev-0", 20, 1280, 10)},
       Req(1, 0, 20, 10),
       {},
       false,
       true,
       {"dev-0"},
       ""},
      {"mutex rejects a used device",
       {Dev("dev-0", 1, 128, 0, true, 2)},
       Req(1, 64, 50),
       {},
       true,
       false,
       {},
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"partial allocation of three",
       {Dev("dev-0", 0, 1280, 0), Dev("dev-1", 0, 1280, 0)},
       Req(3, 512, 20),
       {},
       false,
       false,
       {},
       "2/2 AllocatedCardsInsufficientRequest"},
      {"not healthy",
       {Dev("dev-0", 0, 1280, 0, false)},
       Req(1, 512, 50),
       {},
       false,
       false,
       {},
       "1/1 CardNotHealth"},
      {"use dcutype mismatch",
       {Dev("dev-0", 0, 1280, 0)},
       Req(1, 512, 50),
       {{"hygon.com/use-dcutype", "Z100"}},
       false,
       false,
       {},
       "1/1 CardTypeMismatch"},
      {"nouse dcutype match",
       {Dev("dev-0", 0, 1280, 0)},
       Req(1, 512, 50),
       {{"hygon.com/nouse-dcutype", "dcu"}},
       false,
       false,
       {},
       "1/1 CardTypeMismatch"},
  };
  ExpectFits(dev, cases, vendor_test::ReasonCheck::kAlways);
}

TEST(HygonFit, ChosenEntryCarriesMemoryAndCores) {
  HygonDevice dev{HygonConfig{}};
  DeviceUsage d = Dev("dev-0", 0, 1280, 0);
  FitResult r = dev.Fit({&d}, Req(1, 0, 120, 10), FitContext{});
  ASSERT_TRUE(r.fit);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0], (protocol::ContainerDevice{"dev-0", "DCU", 128, 100}));
}

// Test_PatchAnnotations, through the scheduler's decision: the seed's key is written, with the
// allocated key, both as "uuid,DCU,mem,cores:".
TEST(HygonSchedule, WritesTheSeedsKey) {
  Registry registry;
  registry.Register(std::make_unique<HygonDevice>(HygonConfig{}));
  auto node = NodeUsageFromAnnotations(
      registry, "node1", {{"hami.io/node-dcu-register", "dcu-0,4,16384,100,DCU-Z100,0,true:"}});
  ASSERT_TRUE(node) << node.error();
  StringMap annos =
      vendor_test::ScheduleAnnotations(registry, *node,
                                       vendor_test::Pod({Ctr({{"hygon.com/dcunum", "1"},
                                                              {"hygon.com/dcumem", "2000"},
                                                              {"hygon.com/dcucores", "30"}})}));
  vendor_test::ExpectAllocateKeys(annos, "hami.io/hcu-devices-to-allocate",
                                  "hami.io/dcu-devices-allocated", "dcu-0,DCU,2000,30:;");
  EXPECT_EQ(annos.count("hami.io/dcu-devices-to-allocate"), 0u);
}

// The scheduler's way in: the section in device-config.yaml makes the backend active.
TEST(HygonRegistry, ActiveWhenTheSectionIsPresent) {
  vendor_test::ExpectActiveWithSection(
      "hygon:\n  resourceCountName: hygon.com/dcunum\n  resourceMemoryName: "
      "hygon.com/dcumem\n  resourceCoreName: hygon.com/dcucores\n  memoryFactor: 1\n",
      {"DCU"});
}

}  // namespace
}  // namespace hami::device::hygon
