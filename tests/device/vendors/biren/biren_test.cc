// Biren backend: vectors from HAMi v2.10.0 pkg/device/biren/device_test.go
// (Test_MutateAdmission, Test_GetNodeDevices, Test_checkType, Test_PatchAnnotations,
// Test_GenerateResourceRequests, TestDevices_Fit).
#include "device/vendors/biren/biren.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "device/schedule.h"
#include "support/vendor_test_util.h"

namespace hami::device::biren {
namespace {

DeviceUsage Dev(std::string id, int32_t used, bool health = true, int32_t count = 1) {
  return DeviceUsage{.id = std::move(id),
                     .type = "Biren",
                     .vendor = "Biren",
                     .health = health,
                     .count = count,
                     .used = used,
                     .totalmem = 32768,
                     .totalcore = 100};
}

DeviceRequest Req(int32_t nums, std::string type = "Biren") {
  return vendor_test::WholeReq(std::move(type), nums);
}

using vendor_test::Ctr;
using vendor_test::ExpectFits;
using vendor_test::FakeEdit;
using vendor_test::FitCase;
using vendor_test::Node;

TEST(BirenInfo, KeysAndConfig) {
  BirenDevice dev{BirenConfig{}};
  EXPECT_EQ(dev.VendorKey(), "Biren");
  EXPECT_EQ(dev.Info().count_resource, "birentech.com/gpu");
  EXPECT_EQ(dev.Info().register_key, "hami.io/node-biren-register");
  EXPECT_EQ(dev.Info().handshake_key, "hami.io/node-handshake-biren");
  EXPECT_EQ(dev.Info().to_allocate_key, "hami.io/Biren-devices-to-allocate");
  EXPECT_EQ(dev.Info().allocated_key, "hami.io/Biren-devices-allocated");
  const VendorFactory* factory = FindVendorFactory("biren");
  ASSERT_NE(factory, nullptr);
  auto made = (*factory)(YAML::Load("resourceCountName: \"x.com/gpu\""), DeviceConfig{});
  ASSERT_TRUE(made) << made.error();
  EXPECT_EQ((*made)[0]->Info().count_resource, "x.com/gpu");
  auto bad = ParseBirenConfig(YAML::Load("resourceCountName: {a: 1}"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "biren.resourceCountName: want a resource name, got \"<map>\"");
}

TEST(BirenNodeDevices, Register) {
  BirenDevice dev{BirenConfig{}};
  auto none = dev.NodeDevices(Node({}));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto one = dev.NodeDevices(Node(StringMap{
      {"hami.io/node-biren-register",
       R"([{"id":"7-0","count":1,"devmem":32768,"type":"Biren","health":true,"devicepairscore":{}}])"}}));
  ASSERT_TRUE(one) << one.error();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0], (DeviceUsage{.id = "7-0",
                                    .type = "Biren",
                                    .vendor = "Biren",
                                    .health = true,
                                    .count = 1,
                                    .totalmem = 32768,
                                    .totalcore = 100}));
  auto empty = dev.NodeDevices(Node(StringMap{{"hami.io/node-biren-register", "[]"}}));
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  for (const char* value : {":", "", "{}", R"([{"id":"a","count":"x"}])"}) {
    auto bad = dev.NodeDevices(Node(StringMap{{"hami.io/node-biren-register", value}}));
    ASSERT_FALSE(bad) << value;
    EXPECT_EQ(bad.error().rfind("annotation hami.io/node-biren-register: ", 0), 0u) << bad.error();
  }
  // Every device needs an id of its own (two without one would be one device, picked twice).
  vendor_test::ExpectRegisterErrors(
      [&](const std::string& v) {
        return dev.NodeDevices(vendor_test::Node({{"hami.io/node-biren-register", v}}));
      },
      vendor_test::IdRuleCases("annotation hami.io/node-biren-register: "));
}

TEST(BirenWebhook, MutateAdmission) {
  BirenDevice dev{BirenConfig{}};
  FakeEdit limits(R"({"resources":{"limits":{"birentech.com/gpu":"1"}}})");
  EXPECT_EQ(dev.MutateAdmission(limits).value(), true);
  FakeEdit requests(R"({"resources":{"requests":{"birentech.com/gpu":"1"}}})");
  EXPECT_EQ(dev.MutateAdmission(requests).value(), false);
  EXPECT_EQ(limits.Count() + requests.Count(), 0);
}

TEST(BirenRequest, GenerateResourceRequests) {
  BirenDevice dev{BirenConfig{}};
  EXPECT_EQ(dev.NormalizeRequest(Ctr({})).value(), DeviceRequest{});
  const StringMap one = {{"birentech.com/gpu", "1"}};
  EXPECT_EQ(dev.NormalizeRequest(Ctr(one, one)).value(), Req(1));
  EXPECT_EQ(dev.NormalizeRequest(Ctr(one)).value(), Req(1));
  EXPECT_EQ(dev.NormalizeRequest(Ctr({}, one)).value(), Req(1));
  auto bad = dev.NormalizeRequest(Ctr({{"birentech.com/gpu", "1.5"}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("birentech.com/gpu"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("1.5"), std::string::npos) << bad.error();
}

TEST(BirenFit, UpstreamVectors) {
  BirenDevice dev{BirenConfig{}};
  const std::string use = "birentech.com/use-gpuuuid", nouse = "birentech.com/nouse-gpuuuid";
  std::vector<FitCase> cases = {
      {"fit success", {Dev("dev-0", 0), Dev("dev-1", 0)}, Req(1), {}, false, true, {"dev-1"}, ""},
      {"type mismatch",
       {Dev("dev-0", 0)},
       Req(1, "OtherType"),
       {},
       false,
       false,
       {},
       "1/1 CardTypeMismatch"},
      {"use uuid mismatch",
       {Dev("dev-1", 0)},
       Req(1),
       {{use, "dev-0"}},
       false,
       false,
       {},
       "1/1 CardUuidMismatch"},
      {"nouse uuid match",
       {Dev("dev-0", 0)},
       Req(1),
       {{nouse, "dev-0"}},
       false,
       false,
       {},
       "1/1 CardUuidMismatch"},
      {"card overused",
       {Dev("dev-0", 1)},
       Req(1),
       {},
       false,
       false,
       {},
       "1/1 CardTimeSlicingExhausted"},
      {"allocated cards insufficient",
       {Dev("dev-0", 0)},
       Req(2),
       {},
       false,
       false,
       {},
       "1/1 AllocatedCardsInsufficientRequest"},
      {"mutex rejects a used device",
       {Dev("dev-0", 1, true, 2)},
       Req(1),
       {},
       true,
       false,
       {},
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"partial allocation of three",
       {Dev("dev-0", 0), Dev("dev-1", 0)},
       Req(3),
       {},
       false,
       false,
       {},
       "2/2 AllocatedCardsInsufficientRequest"},
      {"not healthy", {Dev("dev-0", 0, false)}, Req(1), {}, false, false, {}, "1/1 CardNotHealth"},
  };
  ExpectFits(dev, cases, vendor_test::ReasonCheck::kWhenUnfit);
}

// Test_PatchAnnotations through the scheduler: whole devices, no memory held.
TEST(BirenSchedule, Keys) {
  Registry registry;
  registry.Register(std::make_unique<BirenDevice>(BirenConfig{}));
  auto node = NodeUsageFromAnnotations(
      registry, "n1",
      {{"hami.io/node-biren-register",
        R"([{"id":"b-0","count":1,"devmem":32768,"type":"Biren","health":true},{"id":"b-1","index":1,"count":1,"devmem":32768,"type":"Biren","health":true}])"}});
  ASSERT_TRUE(node) << node.error();
  StringMap annos = vendor_test::ScheduleAnnotations(
      registry, *node, vendor_test::Pod({Ctr({{"birentech.com/gpu", "2"}})}));
  EXPECT_EQ(annos["hami.io/Biren-devices-to-allocate"], annos["hami.io/Biren-devices-allocated"]);
  EXPECT_NE(annos["hami.io/Biren-devices-allocated"].find("b-0,Biren,0,0:"), std::string::npos)
      << annos["hami.io/Biren-devices-allocated"];
  EXPECT_NE(annos["hami.io/Biren-devices-allocated"].find("b-1,Biren,0,0:"), std::string::npos);
}

// The scheduler's way in: the section in device-config.yaml makes the backend active.
TEST(BirenRegistry, ActiveWhenTheSectionIsPresent) {
  vendor_test::ExpectActiveWithSection("biren:\n  resourceCountName: birentech.com/gpu\n",
                                       {"Biren"});
}

}  // namespace
}  // namespace hami::device::biren
