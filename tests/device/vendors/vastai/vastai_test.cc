// VastAI backend: vectors from HAMi v2.10.0 pkg/device/vastai/device_test.go
// (Test_MutateAdmission, Test_GetNodeDevices, Test_checkType, Test_PatchAnnotations,
// Test_GenerateResourceRequests, TestDevices_Fit incl. the die-mode mutex cases,
// TestComputeBestCombination).
#include "device/vendors/vastai/vastai.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "device/schedule.h"
#include "support/vendor_test_util.h"

namespace hami::device::vastai {
namespace {

DeviceUsage Dev(std::string id, int32_t used, bool health = true, int32_t count = 1,
                std::string aic = "") {
  DeviceUsage d{.id = std::move(id),
                .type = "Vastai",
                .vendor = "Vastai",
                .health = health,
                .count = count,
                .used = used,
                .totalcore = 100};
  if (!aic.empty()) d.custom_info = {{"DeviceStrategy", "die"}, {"AIC", aic}};
  return d;
}

DeviceRequest Req(int32_t nums, std::string type = "Vastai") {
  return vendor_test::WholeReq(std::move(type), nums);
}

using vendor_test::Ctr;
using vendor_test::ExpectFits;
using vendor_test::FakeEdit;
using vendor_test::FitCase;
using vendor_test::Node;

TEST(VastaiInfo, KeysAndConfig) {
  VastaiDevice dev{VastaiConfig{}};
  EXPECT_EQ(dev.VendorKey(), "Vastai");
  EXPECT_EQ(dev.Info().count_resource, "vastaitech.com/va");
  EXPECT_EQ(dev.Info().register_key, "hami.io/node-va-register");
  EXPECT_EQ(dev.Info().handshake_key, "hami.io/node-handshake-va");
  EXPECT_EQ(dev.Info().to_allocate_key, "hami.io/Vastai-devices-to-allocate");
  EXPECT_EQ(dev.Info().allocated_key, "hami.io/Vastai-devices-allocated");
  const VendorFactory* factory = FindVendorFactory("vastai");
  ASSERT_NE(factory, nullptr);
  auto made = (*factory)(YAML::Load("resourceCountName: \"vastaitech.com/va\""), DeviceConfig{});
  ASSERT_TRUE(made) << made.error();
  EXPECT_EQ((*made)[0]->VendorKey(), "Vastai");
  auto bad = ParseVastaiConfig(YAML::Load("resourceCountName: ''"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "vastai.resourceCountName: want a resource name, got \"\"");
}

TEST(VastaiNodeDevices, Register) {
  VastaiDevice dev{VastaiConfig{}};
  auto none = dev.NodeDevices(Node({}));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto one = dev.NodeDevices(Node(StringMap{
      {"hami.io/node-va-register",
       R"([{"id":"7-0","count":1,"devmem":32768,"type":"Vastai","health":true,"devicepairscore":{}}])"}}));
  ASSERT_TRUE(one) << one.error();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0], (DeviceUsage{.id = "7-0",
                                    .type = "Vastai",
                                    .vendor = "Vastai",
                                    .health = true,
                                    .count = 1,
                                    .totalmem = 32768,
                                    .totalcore = 100}));
  // Die mode: custominfo (any key case) is kept; other value types are ignored.
  auto dies = dev.NodeDevices(Node(StringMap{
      {"hami.io/node-va-register",
       R"([{"id":"d0","count":1,"health":true,"custominfo":{"DeviceStrategy":"die","AIC":"1"}},)"
       R"({"id":"d1","count":1,"health":true,"customInfo":{"DeviceStrategy":"die","AIC":7}}])"}}));
  ASSERT_TRUE(dies) << dies.error();
  ASSERT_EQ(dies->size(), 2u);
  EXPECT_EQ((*dies)[0].custom_info, (std::map<std::string, std::string, std::less<>>{
                                        {"AIC", "1"}, {"DeviceStrategy", "die"}}));
  EXPECT_EQ((*dies)[1].custom_info,
            (std::map<std::string, std::string, std::less<>>{{"DeviceStrategy", "die"}}));
  // Two devices without an id would be one device picked twice (found by the fuzzer).
  for (const char* value : {":", "", "[{\"id\":1}]", "[{\"count\":1},{\"count\":1}]"}) {
    auto bad = dev.NodeDevices(Node(StringMap{{"hami.io/node-va-register", value}}));
    ASSERT_FALSE(bad) << value;
    EXPECT_EQ(bad.error().rfind("annotation hami.io/node-va-register: ", 0), 0u) << bad.error();
  }
  // Every device needs an id of its own (two without one would be one device, picked twice).
  vendor_test::ExpectRegisterErrors(
      [&](const std::string& v) {
        return dev.NodeDevices(vendor_test::Node({{"hami.io/node-va-register", v}}));
      },
      vendor_test::IdRuleCases("annotation hami.io/node-va-register: "));
}

TEST(VastaiWebhook, MutateAdmission) {
  VastaiDevice dev{VastaiConfig{}};
  FakeEdit limits(R"({"resources":{"limits":{"vastaitech.com/va":"1"}}})");
  EXPECT_EQ(dev.MutateAdmission(limits).value(), true);
  FakeEdit requests(R"({"resources":{"requests":{"vastaitech.com/va":"1"}}})");
  EXPECT_EQ(dev.MutateAdmission(requests).value(), false);
  EXPECT_EQ(limits.Count() + requests.Count(), 0);
}

TEST(VastaiRequest, GenerateResourceRequests) {
  VastaiDevice dev{VastaiConfig{}};
  EXPECT_EQ(dev.NormalizeRequest(Ctr({})).value(), DeviceRequest{});
  const StringMap one = {{"vastaitech.com/va", "1"}};
  EXPECT_EQ(dev.NormalizeRequest(Ctr(one, one)).value(), Req(1));
  EXPECT_EQ(dev.NormalizeRequest(Ctr(one)).value(), Req(1));
  EXPECT_EQ(dev.NormalizeRequest(Ctr({}, one)).value(), Req(1));
  auto bad = dev.NormalizeRequest(Ctr({{"vastaitech.com/va", "-2"}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("vastaitech.com/va"), std::string::npos) << bad.error();
}

TEST(VastaiFit, UpstreamVectors) {
  VastaiDevice dev{VastaiConfig{}};
  const std::string use = "vastaitech.com/use-gpuuuid", nouse = "vastaitech.com/nouse-gpuuuid";
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
      {"mutex die mode: an idle die on an occupied card is refused",
       {Dev("dev-0", 1, true, 2, "1"), Dev("dev-1", 0, true, 1, "1"),
        Dev("dev-2", 0, true, 1, "2")},
       Req(1),
       {},
       true,
       true,
       {"dev-2"},
       ""},
      {"mutex die mode: every die of the card occupied",
       {Dev("dev-0", 1, true, 2, "1"), Dev("dev-1", 0, true, 1, "1")},
       Req(1),
       {},
       true,
       false,
       {},
       "2/2 ExclusiveDeviceAllocateConflict"},
      {"partial allocation of three",
       {Dev("dev-0", 0), Dev("dev-1", 0)},
       Req(3),
       {},
       false,
       false,
       {},
       "2/2 AllocatedCardsInsufficientRequest"},
      {"not healthy", {Dev("dev-0", 0, false)}, Req(1), {}, false, false, {}, "1/1 CardNotHealth"},
      // Die mode without mutex: all passing dies collected, then the best card's dies.
      {"die mode picks the fullest card",
       {Dev("a1", 0, true, 1, "1"), Dev("b1", 0, true, 1, "2"), Dev("b2", 0, true, 1, "2"),
        Dev("a2", 0, true, 1, "1"), Dev("b3", 0, true, 1, "2")},
       Req(2),
       {},
       false,
       true,
       {"b3", "b2"},
       ""},
      {"die mode, one die: the first collected",
       {Dev("a1", 0, true, 1, "1"), Dev("b1", 0, true, 1, "2")},
       Req(1),
       {},
       false,
       true,
       {"b1"},
       ""},
  };
  ExpectFits(dev, cases, vendor_test::ReasonCheck::kWhenUnfit);
}

TEST(VastaiFit, ComputeBestCombination) {
  using Aics = std::vector<std::optional<std::string>>;
  // One card: the first two.
  EXPECT_EQ(BestDieCombination(Aics{"1", "1", "1"}, 2), (std::vector<size_t>{0, 1}));
  // aic1 x3, aic2 x2, aic3 x1: the fullest card first, then the next.
  Aics three = {"1", "1", "1", "2", "2", "3"};
  EXPECT_EQ(BestDieCombination(three, 3), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(BestDieCombination(three, 4), (std::vector<size_t>{0, 1, 2, 3}));
  // More than there are: all of them.
  EXPECT_EQ(BestDieCombination(Aics{"1", "1", "1"}, 5), (std::vector<size_t>{0, 1, 2}));
  // Dies without a card are left out; ties go to the card picked first.
  EXPECT_EQ(BestDieCombination(Aics{std::nullopt, "2", "1", "1", "2"}, 2),
            (std::vector<size_t>{1, 4}));
}

TEST(VastaiSchedule, Keys) {
  Registry registry;
  registry.Register(std::make_unique<VastaiDevice>(VastaiConfig{}));
  auto node = NodeUsageFromAnnotations(
      registry, "n1",
      {{"hami.io/node-va-register", R"([{"id":"va-0","count":1,"type":"Vastai","health":true}])"}});
  ASSERT_TRUE(node) << node.error();
  StringMap annos = vendor_test::ScheduleAnnotations(
      registry, *node, vendor_test::Pod({Ctr({{"vastaitech.com/va", "1"}})}));
  vendor_test::ExpectAllocateKeys(annos, "hami.io/Vastai-devices-to-allocate",
                                  "hami.io/Vastai-devices-allocated", "va-0,Vastai,0,0:;");
}

// The scheduler's way in: the section in device-config.yaml makes the backend active.
TEST(VastaiRegistry, ActiveWhenTheSectionIsPresent) {
  vendor_test::ExpectActiveWithSection("vastai:\n  resourceCountName: vastaitech.com/va\n",
                                       {"Vastai"});
}

}  // namespace
}  // namespace hami::device::vastai
