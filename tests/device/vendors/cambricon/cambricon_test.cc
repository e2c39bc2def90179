// Cambricon MLU backend: vectors from HAMi v2.10.0 pkg/device/cambricon/device_test.go
// (Test_GetNodeDevices, Test_MutateAdmission, Test_checkType, Test_GenerateResourceRequests,
// Test_PatchAnnotations, TestDevices_Fit, TestDevices_Fit_ResourceQuotaWholeCardRequest).
#include "device/vendors/cambricon/cambricon.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include "support/vendor_test_util.h"

namespace hami::device::cambricon {
namespace {

DeviceUsage Dev(std::string id, int32_t used, int32_t totalmem, int32_t usedcores,
                bool health = true, int32_t count = 100) {
  return vendor_test::ShareDev("MLU", std::move(id), used, totalmem, usedcores, health, count);
}

DeviceRequest Req(int32_t nums, int32_t mem, int32_t cores, int32_t pct = 0,
                  std::string type = "MLU") {
  return vendor_test::ShareReq(std::move(type), nums, mem, cores, pct);
}

using vendor_test::Ctr;
using vendor_test::ExpectFits;
using vendor_test::FakeEdit;
using vendor_test::FitCase;

// The upstream tests configure the count resource as cambricon.com/mlu.
CambriconConfig TestConfig() { return CambriconConfig{.resource_count_name = "cambricon.com/mlu"}; }

TEST(CambriconInfo, KeysAndChartDefaults) {
  CambriconDevice dev{CambriconConfig{}};
  EXPECT_EQ(dev.VendorKey(), "MLU");
  EXPECT_EQ(dev.Info().count_resource, "cambricon.com/vmlu");
  EXPECT_EQ(dev.Info().memory_resource, "cambricon.com/mlu.smlu.vmemory");
  EXPECT_EQ(dev.Info().core_resource, "cambricon.com/mlu.smlu.vcore");
  EXPECT_EQ(dev.Info().to_allocate_key, "hami.io/cambricon-mlu-devices-to-allocate");
  EXPECT_EQ(dev.Info().allocated_key, "hami.io/cambricon-mlu-devices-allocated");
  EXPECT_EQ(dev.MemoryFactor(), 256);
  EXPECT_EQ(dev.CheckHealth(NodeView{}, Health{false, false}), (Health{true, true}));
}

TEST(CambriconConfig, Section) {
  auto def = ParseCambriconConfig(YAML::Load("~"));
  ASSERT_TRUE(def) << def.error();
  EXPECT_EQ(*def, CambriconConfig{});
  auto c = ParseCambriconConfig(YAML::Load("resourceCountName: cambricon.com/mlu\nother: 1"));
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(*c, TestConfig());
  auto bad = ParseCambriconConfig(YAML::Load("resourceMemoryName: [a]"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "cambricon.resourceMemoryName: want a resource name, got \"<sequence>\"");
  const VendorFactory* factory = FindVendorFactory("cambricon");
  ASSERT_NE(factory, nullptr);
  auto made = (*factory)(YAML::Load("resourceCountName: cambricon.com/vmlu"), DeviceConfig{});
  ASSERT_TRUE(made) << made.error();
  ASSERT_EQ(made->size(), 1u);
  EXPECT_EQ((*made)[0]->VendorKey(), "MLU");
}

TEST(CambriconNodeDevices, FromCapacity) {
  CambriconDevice dev{TestConfig()};
  NodeView node{
      .name = "test",
      .capacity = {{"cambricon.com/mlu.smlu.vcore", "1"}, {"cambricon.com/mlu.smlu.vmemory", "1"}}};
  auto r = dev.NodeDevices(node);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], (DeviceUsage{.id = "test-cambricon-mlu-0",
                                  .index = 0,
                                  .type = "MLU",
                                  .vendor = "MLU",
                                  .health = true,
                                  .count = 100,
                                  .totalmem = 25600,
                                  .totalcore = 100}));

  // Four cards of 16 GiB: vcore 400, vmemory 4 x 64 units of 256 MiB.
  node.capacity = {{"cambricon.com/mlu.smlu.vcore", "400"},
                   {"cambricon.com/mlu.smlu.vmemory", "256"}};
  auto four = dev.NodeDevices(node);
  ASSERT_TRUE(four) << four.error();
  ASSERT_EQ(four->size(), 4u);
  EXPECT_EQ((*four)[3].id, "test-cambricon-mlu-3");
  EXPECT_EQ((*four)[3].index, 3u);
  EXPECT_EQ((*four)[3].totalmem, 16384);

  for (StringMap none : {StringMap{}, StringMap{{"cambricon.com/mlu.smlu.vcore", "0"}}}) {
    auto empty = dev.NodeDevices(NodeView{.name = "n", .capacity = none});
    ASSERT_TRUE(empty);
    EXPECT_TRUE(empty->empty());
  }
  auto bad =
      dev.NodeDevices(NodeView{.name = "n", .capacity = {{"cambricon.com/mlu.smlu.vcore", "x"}}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("capacity cambricon.com/mlu.smlu.vcore: ", 0), 0u) << bad.error();
}

// hami-sim's plugin publishes what NodeDevices reads back.
TEST(CambriconNodeDevices, RegistrationRoundTrip) {
  CambriconDevice dev{CambriconConfig{}};
  std::vector<protocol::DeviceInfo> devs(2);
  for (auto& d : devs) d.count = 100, d.devmem = 16384, d.devcore = 100;
  NodeRegistration reg = dev.EncodeNodeRegistration(devs);
  EXPECT_TRUE(reg.annotations.empty());
  EXPECT_EQ(reg.capacity["cambricon.com/vmlu"], "200");
  EXPECT_EQ(reg.capacity["cambricon.com/mlu.smlu.vcore"], "200");
  EXPECT_EQ(reg.capacity["cambricon.com/mlu.smlu.vmemory"], "128");
  auto back = dev.NodeDevices(NodeView{.name = "n", .capacity = reg.capacity});
  ASSERT_TRUE(back) << back.error();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].totalmem, 16384);
}

TEST(CambriconWebhook, MutateAdmission) {
  CambriconDevice dev{TestConfig()};
  FakeEdit yes(nlohmann::json::parse(R"({"resources":{"limits":{"cambricon.com/mlu":"1"}}})"));
  EXPECT_EQ(dev.MutateAdmission(yes).value(), true);
  FakeEdit req(nlohmann::json::parse(R"({"resources":{"requests":{"cambricon.com/mlu":"1"}}})"));
  EXPECT_EQ(dev.MutateAdmission(req).value(), false);
  FakeEdit none(nlohmann::json::parse(R"({"name":"c"})"));
  EXPECT_EQ(dev.MutateAdmission(none).value(), false);
  EXPECT_EQ(yes.Count() + req.Count() + none.Count(), 0);
}

TEST(CambriconRequest, GenerateResourceRequests) {
  CambriconDevice dev{TestConfig()};
  const StringMap all = {{"cambricon.com/mlu", "1"},
                         {"cambricon.com/mlu.smlu.vmemory", "1000"},
                         {"cambricon.com/mlu.smlu.vcore", "2"}};
  struct Case {
    const char* name;
    ContainerView ctr;
    DeviceRequest want;
  };
  std::vector<Case> cases = {
      {"nothing set", Ctr({}), DeviceRequest{}},
      {"all three", Ctr(all, all), Req(1, 256000, 2, 0)},
      {"no cores", Ctr({{"cambricon.com/mlu", "1"}, {"cambricon.com/mlu.smlu.vmemory", "1k"}}),
       Req(1, 256000, 100, 0)},
      {"no memory", Ctr({{"cambricon.com/mlu", "1"}, {"cambricon.com/mlu.smlu.vcore", "2"}}),
       Req(1, 0, 2, 100)},
  };
  for (const auto& c : cases) {
    auto r = dev.NormalizeRequest(c.ctr);
    ASSERT_TRUE(r) << c.name << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.name;
  }
  // HAMi rejects these (drops the request); we report them.
  for (const char* mem : {"16Gi", "16.0Gi", "8388608", "-1"}) {
    auto r = dev.NormalizeRequest(
        Ctr({{"cambricon.com/mlu", "1"}, {"cambricon.com/mlu.smlu.vmemory", mem}}));
    ASSERT_FALSE(r) << mem;
    EXPECT_NE(r.error().find("cambricon.com/mlu.smlu.vmemory"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(mem), std::string::npos) << r.error();
  }
}

// Test_PatchAnnotations.
TEST(CambriconAllocate, PatchAnnotations) {
  CambriconDevice dev{TestConfig()};
  protocol::ContainerDevice d{"device-0", "MLU", 256000, 1};
  StringMap one = dev.AllocationAnnotations(PodView{}, {{d}});
  EXPECT_EQ(one,
            (StringMap{{"CAMBRICON_DSMLU_ASSIGNED", "false"},
                       {"CAMBRICON_DSMLU_PROFILE", "0_1_1000"},
                       {"hami.io/cambricon-mlu-devices-to-allocate", "device-0,MLU,256000,1:;"},
                       {"hami.io/cambricon-mlu-devices-allocated", "device-0,MLU,256000,1:;"}}));
  StringMap leading = dev.AllocationAnnotations(PodView{}, {{}, {d}});
  EXPECT_EQ(leading["CAMBRICON_DSMLU_PROFILE"], "0_1_1000");
  EXPECT_EQ(leading["hami.io/cambricon-mlu-devices-to-allocate"], ";device-0,MLU,256000,1:;");
  // The index comes from the id the backend gave the device.
  protocol::ContainerDevice third{"node-a-cambricon-mlu-2", "MLU", 512, 30};
  EXPECT_EQ(dev.AllocationAnnotations(PodView{}, {{third}})["CAMBRICON_DSMLU_PROFILE"], "2_30_2");
  StringMap none = dev.AllocationAnnotations(PodView{}, {{}});
  EXPECT_EQ(none.count("CAMBRICON_DSMLU_PROFILE"), 0u);
}

TEST(CambriconAllocate, DsmluProfileCodec) {
  auto p = DecodeDsmluProfile("2_30_16");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(*p, (DsmluProfile{2, 30, 16}));
  EXPECT_EQ(EncodeDsmluProfile(*p), "2_30_16");
  for (const char* bad :
       {"", "1_2", "1_2_3_4", "a_1_1", "-1_2_3", "1__3", "0_2147483648_1", " 1_2_3"}) {
    auto r = DecodeDsmluProfile(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error(),
              std::string("CAMBRICON_DSMLU_PROFILE: want <index>_<cores>_<memory units>, "
                          "got \"") +
                  bad + "\"");
  }
}

TEST(CambriconFit, UpstreamVectors) {
  CambriconDevice dev{TestConfig()};
  const std::string use = "cambricon.com/use-gpuuuid", nouse = "cambricon.com/nouse-gpuuuid";
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
      // HAMi's MLU fit does not read use/nouse-mlutype.
      {"mlutype annotations ignored",
       {Dev("dev-0", 0, 1280, 0)},
       Req(1, 512, 50),
       {{"cambricon.com/use-mlutype", "370"}},
       false,
       true,
       {"dev-0"},
       ""},
  };
  ExpectFits(dev, cases, vendor_test::ReasonCheck::kAlways);
}

// TestDevices_Fit_ResourceQuotaWholeCardRequest: an implicit whole card (100 % of 40960 MiB)
// against limits.vmemory 50 (x 256 = 12800 MiB) is ResourceQuotaNotFit.
TEST(CambriconFit, QuotaWholeCardRequest) {
  CambriconDevice dev{TestConfig()};
  NamespaceQuota quota = {
      {"cambricon.com/mlu.smlu.vmemory", QuotaEntry{.used = 0, .limit = 50, .limit_set = true}}};
  DeviceUsage d = Dev("dev-0", 0, 40960, 0);
  PodView pod;
  FitResult r = dev.Fit({&d}, Req(1, 0, 10, 100), FitContext{.pod = &pod, .quota = &quota});
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/1 ResourceQuotaNotFit");
  // 50 units of 256 MiB fit exactly.
  FitResult ok = dev.Fit({&d}, Req(1, 12800, 10), FitContext{.pod = &pod, .quota = &quota});
  EXPECT_TRUE(ok.fit) << ok.Reason();
}

// The scheduler's way in: the section in device-config.yaml makes the backend active.
TEST(CambriconRegistry, ActiveWhenTheSectionIsPresent) {
  vendor_test::ExpectActiveWithSection(
      "cambricon:\n  resourceCountName: cambricon.com/vmlu\n  resourceMemoryName: "
      "cambricon.com/mlu.smlu.vmemory\n  resourceCoreName: cambricon.com/mlu.smlu.vcore\n",
      {"MLU"});
}

}  // namespace
}  // namespace hami::device::cambricon
