// The Enflame Device classes: built from the `enflame` section as the scheduler builds them,
// over NodeView (capacity, the DRS annotation), the webhook's AdmissionEdit, Fit with the
// profiles the rows carry, and the allocation/registration encodings.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/config.h"
#include "device/device.h"
#include "device/vendors/enflame/enflame.h"
#include "support/vendor_test_util.h"

namespace hami::device::enflame {
namespace {

using vendor_test::FakeEdit;
using vendor_test::Ptrs;

Registry ChartRegistry(const std::string& section = "enflame: {}\n") {
  return vendor_test::ChartRegistry(section);
}

constexpr const char* kDrsAnno =
    R"({"devices":[{"index":"0","minor":"5","capacity":6},{"index":"1","capacity":6}],)"
    R"("profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}})";

TEST(EnflameDevice, SectionRegistersBoth) {
  Registry reg = ChartRegistry();
  ASSERT_TRUE(reg.Find("GCU"));
  ASSERT_TRUE(reg.Find("Enflame"));
  EXPECT_EQ(reg.Find("GCU")->Info().count_resource, "enflame.com/gcu");
  EXPECT_EQ(reg.Find("Enflame")->Info().count_resource, "enflame.com/drs-gcu");
  EXPECT_EQ(reg.Find("Enflame")->Info().memory_resource, "enflame.com/gcu-memory");
  EXPECT_EQ(reg.Find("Enflame")->Info().core_resource, "enflame.com/gcu-core");
  // Without the section, no Enflame backend.
  auto none = LoadDeviceConfig("nvidia: {}\n");
  ASSERT_TRUE(none);
  EXPECT_FALSE(MakeRegistry(*none).Find("GCU"));
  // The chart's template with empty values keeps the defaults; renames are honoured.
  Registry renamed = ChartRegistry(
      "enflame:\n  resourceNameGCU: \"x.com/gcu\"\n  resourceNameDRSGCU: \"\"\n"
      "  resourceNameGCUMemory: \"x.com/mem\"\n");
  EXPECT_EQ(renamed.Find("GCU")->Info().count_resource, "x.com/gcu");
  EXPECT_EQ(renamed.Find("Enflame")->Info().count_resource, "enflame.com/drs-gcu");
  EXPECT_EQ(renamed.Find("Enflame")->Info().memory_resource, "x.com/mem");
}

TEST(EnflameDevice, BadSectionNamesTheKey) {
  auto bad = LoadDeviceConfig("nvidia: {}\nenflame:\n  resourceNameGCU: [1]\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("enflame.resourceNameGCU"), std::string::npos) << bad.error();
  auto list = LoadDeviceConfig("nvidia: {}\nenflame: [1]\n");
  ASSERT_FALSE(list);
  EXPECT_NE(list.error().find("enflame"), std::string::npos) << list.error();
}

TEST(EnflameDevice, GcuFromCapacity) {
  Registry reg = ChartRegistry();
  const Device& gcu = *reg.Find("GCU");
  NodeView node{.name = "testnode", .capacity = {{"enflame.com/gcu", "2"}}};
  auto devs = gcu.NodeDevices(node);
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[1].id, "testnode-GCU-1");
  EXPECT_EQ(gcu.CheckHealth(node, Health{}), (Health{true, true}));
  EXPECT_EQ(gcu.CheckHealth(NodeView{.name = "n"}, Health{}), (Health{false, true}));
  EXPECT_TRUE(gcu.NodeDevices(NodeView{.name = "n"})->empty());
  auto bad = gcu.NodeDevices(NodeView{.name = "n", .capacity = {{"enflame.com/gcu", "x"}}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("enflame.com/gcu"), std::string::npos) << bad.error();

  FakeEdit yes(nlohmann::json::parse(R"({"resources":{"limits":{"enflame.com/gcu":"1"}}})"));
  EXPECT_EQ(gcu.MutateAdmission(yes).value(), true);
  FakeEdit req(nlohmann::json::parse(R"({"resources":{"requests":{"enflame.com/gcu":"1"}}})"));
  EXPECT_EQ(gcu.MutateAdmission(req).value(), false);

  // Fit, allocation keys and the simulated registration round trip.
  FitResult r = gcu.Fit(
      Ptrs(*devs),
      *gcu.NormalizeRequest(ContainerView{.name = "c", .limits = {{"enflame.com/gcu", "2"}}}),
      FitContext{});
  ASSERT_TRUE(r.fit);
  StringMap annos = gcu.AllocationAnnotations(PodView{}, {r.devices});
  EXPECT_EQ(annos["hami.io/enflame-gcu-devices-to-allocate"],
            "testnode-GCU-1,GCU,100,100:testnode-GCU-0,GCU,100,100:;");
  EXPECT_EQ(annos["hami.io/enflame-gcu-devices-allocated"],
            annos["hami.io/enflame-gcu-devices-to-allocate"]);
  NodeRegistration reg2 = gcu.EncodeNodeRegistration(
      {protocol::DeviceInfo{.id = "a"}, protocol::DeviceInfo{.id = "b"}});
  EXPECT_EQ(reg2.capacity, (StringMap{{"enflame.com/gcu", "2"}}));
}

TEST(EnflameDevice, DrsFromAnnotationAndFit) {
  Registry reg = ChartRegistry();
  const Device& drs = *reg.Find("Enflame");
  NodeView node{.name = "node-a", .annotations = {{"enflame.com/gcu-drs-capacity", kDrsAnno}}};
  auto devs = drs.NodeDevices(node);
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[0].custom_info.at("minor"), "5");
  EXPECT_EQ((*devs)[1].custom_info.at("minor"), "1");
  EXPECT_EQ((*devs)[0].custom_info.at("maxSlice"), "6");
  EXPECT_EQ(drs.CheckHealth(node, Health{false, false}), (Health{true, true}));
  EXPECT_TRUE(drs.NodeDevices(NodeView{.name = "n"})->empty());
  auto bad = drs.NodeDevices(
      NodeView{.name = "n", .annotations = {{"enflame.com/gcu-drs-capacity", "{}"}}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("enflame.com/gcu-drs-capacity"), std::string::npos);

  auto req = drs.NormalizeRequest(
      ContainerView{.name = "c", .limits = {{"enflame.com/gcu-memory", "20480"}}});
  ASSERT_TRUE(req);
  PodView pod;
  FitResult r = drs.Fit(Ptrs(*devs), *req, FitContext{.pod = &pod});
  ASSERT_TRUE(r.fit) << r.Reason();
  EXPECT_EQ(
      r.devices[0],
      (protocol::ContainerDevice{
          .uuid = "node-a-enflame-drs-1", .type = "Enflame", .usedmem = 20480, .usedcores = 50}));
  auto too_big =
      drs.NormalizeRequest(ContainerView{.name = "c", .limits = {{"enflame.com/drs-gcu", "4"}}});
  EXPECT_EQ(drs.Fit(Ptrs(*devs), *too_big, FitContext{.pod = &pod}).Reason(), "1/2 ModeNotFit");

  pod.containers = {ContainerView{.name = "main"}};
  StringMap annos = drs.AllocationAnnotations(pod, {r.devices});
  EXPECT_EQ(annos["hami.io/enflame-vgpu-devices-allocated"],
            "node-a-enflame-drs-1,Enflame,20480,50:;");
  EXPECT_EQ(annos["enflame.com/gcu-assigned"], "false");
  EXPECT_EQ(annos["enflame.com/gcu-assigned-index"], "1");
  EXPECT_EQ(annos["assigned-containers"], R"({"main":{"allocated":false,"request":1}})");
  EXPECT_EQ(annos.count("hami.io/enflame-gcu-devices-to-allocate"), 0u);
  // No to-allocate key: the simulated plugin has nothing to consume; the usage index reads the
  // allocated key.
  auto pending = drs.PodToAllocate(annos);
  ASSERT_TRUE(pending);
  EXPECT_FALSE(pending->has_value());
  auto back = drs.PodAllocated(annos);
  ASSERT_TRUE(back && *back);
  EXPECT_EQ((*back)->at(0), r.devices);
}

TEST(EnflameDevice, DrsWebhookEdits) {
  Registry reg = ChartRegistry();
  const Device& drs = *reg.Find("Enflame");
  FakeEdit direct(
      nlohmann::json::parse(R"({"resources":{"requests":{"enflame.com/drs-gcu":"3"}}})"));
  EXPECT_EQ(drs.MutateAdmission(direct).value(), true);
  EXPECT_EQ(
      direct.Sets(),
      (std::map<std::string, nlohmann::json>{{"/resources/limits/enflame.com/drs-gcu", "3"}}));
  FakeEdit spec(nlohmann::json::parse(
      R"({"resources":{"limits":{"enflame.com/gcu-memory":"20480","enflame.com/gcu-core":50}}})"));
  EXPECT_EQ(drs.MutateAdmission(spec).value(), true);
  EXPECT_EQ(spec.Sets(), (std::map<std::string, nlohmann::json>{
                             {"/resources/requests/enflame.com/gcu-core", "50"},
                             {"/resources/requests/enflame.com/gcu-memory", "20480"}}));
  FakeEdit zero(nlohmann::json::parse(R"({"resources":{"limits":{"enflame.com/drs-gcu":"0"}}})"));
  auto err = drs.MutateAdmission(zero);
  ASSERT_FALSE(err);
  EXPECT_NE(err.error().find("enflame.com/drs-gcu must be greater than 0"), std::string::npos);
  EXPECT_TRUE(zero.Sets().empty());
  FakeEdit none(nlohmann::json::parse(R"({"name":"c"})"));
  EXPECT_EQ(drs.MutateAdmission(none).value(), false);
}

TEST(EnflameDevice, DrsRegistrationRoundTrip) {
  Registry reg = ChartRegistry();
  const Device& drs = *reg.Find("Enflame");
  NodeRegistration out = drs.EncodeNodeRegistration(
      {protocol::DeviceInfo{.id = "a", .index = 0, .count = 4, .devmem = 32768},
       protocol::DeviceInfo{.id = "b", .index = 1, .count = 4, .devmem = 32768}});
  EXPECT_EQ(out.capacity, (StringMap{{"enflame.com/drs-gcu", "2"}}));
  auto devs = drs.NodeDevices(NodeView{.name = "sim", .annotations = out.annotations});
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[0].count, 4);
  EXPECT_EQ((*devs)[0].totalmem, 32768);
  EXPECT_EQ((*devs)[0].custom_info.at("profiles"), R"({"1g.8gb":"0","2g.16gb":"1","4g.32gb":"2"})");
}

}  // namespace
}  // namespace hami::device::enflame
