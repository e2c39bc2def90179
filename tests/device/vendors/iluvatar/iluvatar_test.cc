// Iluvatar backends: vectors from HAMi v2.10.0 pkg/device/iluvatar/device_test.go
// (TestGetNodeDevices, TestPatchAnnotations, Test_MutateAdmission, Test_checkType,
// Test_GenerateResourceRequests, TestFit_MutexRejectsUsedDevice, Test_Fit), the chart's
// `iluvatars` list, and the keys built from the common word.
#include "device/vendors/iluvatar/iluvatar.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "device/schedule.h"
#include "support/vendor_test_util.h"

namespace hami::device::iluvatar {
namespace {

IluvatarConfig MrV100() { return IluvatarConfig{.common_word = "MR-V100", .chip_name = "MR-V100"}; }

DeviceUsage Dev(std::string id, int32_t used, int32_t totalmem, int32_t usedcores,
                bool health = true, int32_t count = 100) {
  return vendor_test::ShareDev("MR-V100", std::move(id), used, totalmem, usedcores, health, count);
}

DeviceRequest Req(int32_t nums, int32_t mem, int32_t cores, int32_t pct = 0,
                  std::string type = "MR-V100") {
  return vendor_test::ShareReq(std::move(type), nums, mem, cores, pct);
}

using vendor_test::Ctr;
using vendor_test::ExpectFits;
using vendor_test::FakeEdit;
using vendor_test::FitCase;

TEST(IluvatarInfo, KeysFromTheCommonWord) {
  IluvatarDevice dev{MrV100()};
  const protocol::VendorInfo& i = dev.Info();
  EXPECT_EQ(i.vendor_key, "MR-V100");
  EXPECT_EQ(i.count_resource, "iluvatar.ai/MR-V100-vgpu");
  EXPECT_EQ(i.memory_resource, "iluvatar.ai/MR-V100.vMem");
  EXPECT_EQ(i.core_resource, "iluvatar.ai/MR-V100.vCore");
  EXPECT_EQ(i.register_key, "hami.io/node-MR-V100-register");
  EXPECT_EQ(i.handshake_key, "hami.io/node-handshake-MR-V100");
  EXPECT_EQ(i.to_allocate_key, "hami.io/MR-V100-devices-to-allocate");
  EXPECT_EQ(i.allocated_key, "hami.io/MR-V100-devices-allocated");
  EXPECT_EQ(i.use_uuid_key, "hami.io/use-MR-V100-uuid");
  EXPECT_EQ(i.nouse_uuid_key, "hami.io/no-use-MR-V100-uuid");
  EXPECT_EQ(dev.MemoryFactor(), 256);
}

// The chart's list: four chips, each its own backend.
TEST(IluvatarConfig, ChartList) {
  const char* yaml = R"(
- chipName: MR-V100
  commonWord: MR-V100
  resourceCountName: iluvatar.ai/MR-V100-vgpu
  resourceMemoryName: iluvatar.ai/MR-V100.vMem
  resourceCoreName: iluvatar.ai/MR-V100.vCore
- {chipName: MR-V50, commonWord: MR-V50}
- {chipName: BI-V150, commonWord: BI-V150, resourceCountName: x.com/v150}
- {chipName: BI-V100, commonWord: BI-V100, unknownKey: 1}
)";
  const VendorFactory* factory = FindVendorFactory("iluvatars");
  ASSERT_NE(factory, nullptr);
  auto made = (*factory)(YAML::Load(yaml), DeviceConfig{});
  ASSERT_TRUE(made) << made.error();
  ASSERT_EQ(made->size(), 4u);
  EXPECT_EQ((*made)[0]->VendorKey(), "MR-V100");
  EXPECT_EQ((*made)[1]->Info().memory_resource, "iluvatar.ai/MR-V50.vMem");
  EXPECT_EQ((*made)[2]->Info().count_resource, "x.com/v150");
  EXPECT_EQ((*made)[3]->Info().register_key, "hami.io/node-BI-V100-register");
  // An empty section is the chart's four chips (DefaultDeviceConfig lists it so); [] is none.
  auto chart = (*factory)(YAML::Load("~"), DeviceConfig{});
  ASSERT_TRUE(chart) << chart.error();
  ASSERT_EQ(chart->size(), 4u);
  std::vector<std::string> keys;
  for (const auto& d : *chart) keys.push_back(d->VendorKey());
  EXPECT_EQ(keys, (std::vector<std::string>{"MR-V100", "MR-V50", "BI-V150", "BI-V100"}));
  EXPECT_EQ((*chart)[2]->Info().count_resource, "iluvatar.ai/BI-V150-vgpu");
  EXPECT_EQ((*chart)[2]->Info().memory_resource, "iluvatar.ai/BI-V150.vMem");
  EXPECT_EQ((*chart)[2]->Info().core_resource, "iluvatar.ai/BI-V150.vCore");
  auto empty = (*factory)(YAML::Load("[]"), DeviceConfig{});
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(IluvatarConfig, BadListsNameTheField) {
  struct Case {
    const char* yaml;
    const char* error;
  };
  std::vector<Case> cases = {
      {"{a: b}", "iluvatars: want a list, got \"<map>\""},
      {"[x]", "iluvatars[0]: want a map, got \"x\""},
      {"[{chipName: A}]", "iluvatars[0].commonWord: want a non-empty string, got \"<missing>\""},
      {"[{commonWord: A}, {commonWord: ''}]",
       "iluvatars[1].commonWord: want a non-empty string, got \"\""},
      {"[{commonWord: A, resourceCoreName: [1]}]",
       "iluvatars[0].resourceCoreName: want a non-empty string, got \"<sequence>\""},
      {"[{commonWord: A}, {commonWord: A}]",
       "iluvatars[1].commonWord: want a word not listed before, got \"A\""},
  };
  for (const auto& c : cases) {
    auto r = ParseIluvatarConfigs(YAML::Load(c.yaml));
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_EQ(r.error(), c.error) << c.yaml;
  }
}

NodeView Node(StringMap annotations) {
  return vendor_test::Node(std::move(annotations), "node-01");
}

TEST(IluvatarNodeDevices, Register) {
  IluvatarDevice dev{MrV100()};
  auto r = dev.NodeDevices(
      Node(StringMap{{"hami.io/node-MR-V100-register",
                      "GPU-bad51c5a-ed4c-591d-91bf-c04a12e19eae,10,8192,100,MR-V100,0,true:"}}));
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, "GPU-bad51c5a-ed4c-591d-91bf-c04a12e19eae");
  EXPECT_EQ((*r)[0].count, 10);
  EXPECT_EQ((*r)[0].totalmem, 8192);
  EXPECT_EQ((*r)[0].totalcore, 100);
  EXPECT_EQ((*r)[0].type, "MR-V100");
  EXPECT_EQ((*r)[0].vendor, "MR-V100");
  EXPECT_TRUE((*r)[0].health);
  for (StringMap none : {StringMap{}, StringMap{{"hami.io/node-MR-V100-register", ":"}},
                         StringMap{{"hami.io/node-BI-V100-register", "a,1,1,1,BI-V100,0,true:"}}}) {
    auto empty = dev.NodeDevices(Node(none));
    ASSERT_TRUE(empty);
    EXPECT_TRUE(empty->empty());
  }
  auto bad = dev.NodeDevices(Node(StringMap{{"hami.io/node-MR-V100-register", "x"}}));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("annotation hami.io/node-MR-V100-register: ", 0), 0u) << bad.error();
}

// Test_MutateAdmission, and what it edits.
TEST(IluvatarWebhook, MutateAdmission) {
  IluvatarDevice dev{MrV100()};
  FakeEdit two(nlohmann::json::parse(
      R"({"name":"main","resources":{"limits":{"iluvatar.ai/MR-V100-vgpu":"2","iluvatar.ai/MR-V100.vCore":"1"}}})"));
  ASSERT_EQ(dev.MutateAdmission(two).value(), true);
  auto sets = two.Of(FakeEdit::kSet), appends = two.Of(FakeEdit::kAppend);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].path,
            (std::vector<std::string>{"resources", "limits", "iluvatar.ai/MR-V100.vCore"}));
  EXPECT_EQ(sets[0].value, "200");
  ASSERT_EQ(appends.size(), 1u);
  EXPECT_EQ(appends[0].path, std::vector<std::string>{"env"});
  EXPECT_EQ(appends[0].value, (nlohmann::json{{"name", "SOL_CONTINER_NAME"}, {"value", "main"}}));

  // One card: no core edit; the env already there is kept as is; a number is read too.
  FakeEdit one(nlohmann::json::parse(
      R"({"name":"main","env":[{"name":"SOL_CONTINER_NAME","value":"x"}],"resources":{"limits":{"iluvatar.ai/MR-V100-vgpu":1}}})"));
  ASSERT_EQ(dev.MutateAdmission(one).value(), true);
  EXPECT_EQ(one.Count(FakeEdit::kSet), 0);
  EXPECT_EQ(one.Count(FakeEdit::kAppend), 0);

  // Requests alone, or another chip's resource: not this vendor's container, no edit.
  FakeEdit req(nlohmann::json::parse(
      R"({"name":"main","resources":{"requests":{"iluvatar.ai/MR-V100-vgpu":"2"}}})"));
  EXPECT_EQ(dev.MutateAdmission(req).value(), false);
  FakeEdit other(nlohmann::json::parse(
      R"({"name":"main","resources":{"limits":{"iluvatar.ai/BI-V100-vgpu":"2"}}})"));
  EXPECT_EQ(dev.MutateAdmission(other).value(), false);
  EXPECT_TRUE(req.Count(FakeEdit::kSet) == 0 && req.Count(FakeEdit::kAppend) == 0 &&
              other.Count(FakeEdit::kSet) == 0 && other.Count(FakeEdit::kAppend) == 0);

  FakeEdit bad(nlohmann::json::parse(
      R"({"name":"main","resources":{"limits":{"iluvatar.ai/MR-V100-vgpu":"two"}}})"));
  auto r = dev.MutateAdmission(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("iluvatar.ai/MR-V100-vgpu"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("\"two\""), std::string::npos) << r.error();
}

TEST(IluvatarRequest, GenerateResourceRequests) {
  IluvatarDevice dev{MrV100()};
  const StringMap all = {{"iluvatar.ai/MR-V100-vgpu", "1"},
                         {"iluvatar.ai/MR-V100.vMem", "1000"},
                         {"iluvatar.ai/MR-V100.vCore", "100"}};
  EXPECT_EQ(dev.NormalizeRequest(Ctr(all, all)).value(), Req(1, 256000, 100, 0));
  EXPECT_EQ(dev.NormalizeRequest(Ctr({})).value(), DeviceRequest{});
  EXPECT_EQ(dev.NormalizeRequest(
                   Ctr({{"iluvatar.ai/MR-V100-vgpu", "1"}}, {{"iluvatar.ai/MR-V100-vgpu", "1"}}))
                .value(),
            Req(1, 0, 0, 100));
  for (const char* mem : {"16Gi", "16.0Gi", "8388608"}) {
    auto r = dev.NormalizeRequest(
        Ctr({{"iluvatar.ai/MR-V100-vgpu", "1"}, {"iluvatar.ai/MR-V100.vMem", mem}}));
    ASSERT_FALSE(r) << mem;
    EXPECT_NE(r.error().find("iluvatar.ai/MR-V100.vMem"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(mem), std::string::npos) << r.error();
  }
}

TEST(IluvatarFit, UpstreamVectors) {
  IluvatarDevice dev{MrV100()};
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
      {"core not enough (memory first)",
       {Dev("dev-0", 0, 128, 100)},
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
      {"mutex rejects a used device",
       {Dev("dev-0", 1, 128, 0, true, 2)},
       Req(1, 64, 50),
       {},
       true,
       false,
       {},
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"not healthy",
       {Dev("dev-0", 0, 128, 0, false)},
       Req(1, 64, 50),
       {},
       false,
       false,
       {},
       "1/1 CardNotHealth"},
      {"use uuid",
       {Dev("dev-0", 0, 128, 0), Dev("dev-1", 0, 128, 0)},
       Req(1, 64, 50),
       {{"hami.io/use-MR-V100-uuid", "dev-0"}},
       false,
       true,
       {"dev-0"},
       "1/2 CardUuidMismatch"},
      {"no-use uuid",
       {Dev("dev-0", 0, 128, 0)},
       Req(1, 64, 50),
       {{"hami.io/no-use-MR-V100-uuid", "dev-0"}},
       false,
       false,
       {},
       "1/1 CardUuidMismatch"},
      {"card overused",
       {Dev("dev-0", 100, 128, 0)},
       Req(1, 64, 50),
       {},
       false,
       false,
       {},
       "1/1 CardTimeSlicingExhausted"},
      {"compute units exhausted",
       {Dev("dev-0", 1, 128, 100)},
       Req(1, 64, 0),
       {},
       false,
       false,
       {},
       "1/1 CardComputeUnitsExhausted"},
      {"partial",
       {Dev("dev-0", 0, 128, 0)},
       Req(2, 64, 50),
       {},
       false,
       false,
       {},
       "1/1 AllocatedCardsInsufficientRequest"},
  };
  ExpectFits(dev, cases, vendor_test::ReasonCheck::kWhenUnfit);
}

// TestPatchAnnotations through the scheduler: two chips on one node; each pod lands on its own
// chip's devices and gets its chip's keys.
TEST(IluvatarSchedule, EachChipItsOwnKeys) {
  Registry registry;
  registry.Register(std::make_unique<IluvatarDevice>(MrV100()));
  registry.Register(std::make_unique<IluvatarDevice>(IluvatarConfig{.common_word = "BI-V150"}));
  auto node = NodeUsageFromAnnotations(
      registry, "n1",
      {{"hami.io/node-MR-V100-register", "k8s-gpu-iluvatar-0,10,8192,100,MR-V100,0,true:"},
       {"hami.io/node-BI-V150-register", "k8s-gpu-iluvatar-1,10,32768,100,BI-V150,0,true:"}});
  ASSERT_TRUE(node) << node.error();
  ASSERT_EQ(node->devices.size(), 2u);
  StringMap annos = vendor_test::ScheduleAnnotations(
      registry, *node,
      vendor_test::Pod(
          {Ctr({{"iluvatar.ai/BI-V150-vgpu", "1"}, {"iluvatar.ai/BI-V150.vMem", "4"}})}));
  vendor_test::ExpectAllocateKeys(annos, "hami.io/BI-V150-devices-to-allocate",
                                  "hami.io/BI-V150-devices-allocated",
                                  "k8s-gpu-iluvatar-1,BI-V150,1024,0:;");
  EXPECT_EQ(annos.count("hami.io/MR-V100-devices-to-allocate"), 0u);
}

// The scheduler's way in: the section in device-config.yaml makes the backend active.
TEST(IluvatarRegistry, ActiveWhenTheSectionIsPresent) {
  vendor_test::ExpectActiveWithSection(
      "iluvatars:\n  - {chipName: MR-V100, commonWord: MR-V100}\n  - {chipName: "
      "BI-V150, commonWord: BI-V150}\n",
      {"MR-V100", "BI-V150"});
}

}  // namespace
}  // namespace hami::device::iluvatar
