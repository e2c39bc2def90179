// The Kunlunxin Device classes built from the `kunlun` section: NodeView registration, the
// webhook's edits, Fit through the Device API and the allocation/registration encodings.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/config.h"
#include "device/device.h"
#include "device/vendors/kunlun/kunlun.h"
#include "support/vendor_test_util.h"

namespace hami::device::kunlun {
namespace {

using vendor_test::FakeEdit;
using vendor_test::Ptrs;

Registry ChartRegistry(const std::string& section = "kunlun: {}\n") {
  return vendor_test::ChartRegistry(section);
}

TEST(KunlunDevice, SectionRegistersBoth) {
  Registry reg = ChartRegistry();
  ASSERT_TRUE(reg.Find("kunlun"));
  ASSERT_TRUE(reg.Find("XPU"));
  EXPECT_EQ(reg.Find("kunlun")->Info().count_resource, "kunlunxin.com/xpu");
  EXPECT_EQ(reg.Find("XPU")->Info().count_resource, "kunlunxin.com/vxpu");
  EXPECT_EQ(reg.Find("XPU")->Info().memory_resource, "kunlunxin.com/vxpu-memory");
  Registry renamed =
      ChartRegistry("kunlun:\n  resourceCountName: \"\"\n  resourceVCountName: x/v\n");
  EXPECT_EQ(renamed.Find("kunlun")->Info().count_resource, "kunlunxin.com/xpu");
  EXPECT_EQ(renamed.Find("XPU")->Info().count_resource, "x/v");
  auto bad = LoadDeviceConfig("nvidia: {}\nkunlun:\n  resourceVMemoryName: {a: 1}\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("kunlun.resourceVMemoryName"), std::string::npos) << bad.error();
}

TEST(KunlunDevice, WholeDevicesEndToEnd) {
  Registry reg = ChartRegistry();
  const Device& xpu = *reg.Find("kunlun");
  NodeView node{.name = "n", .capacity = {{"kunlunxin.com/xpu", "8"}}};
  auto devs = xpu.NodeDevices(node);
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 8u);
  EXPECT_EQ(xpu.CheckHealth(node, Health{false, false}), (Health{true, true}));
  EXPECT_TRUE(xpu.NodeDevices(NodeView{.name = "n"})->empty());
  FakeEdit yes(nlohmann::json::parse(R"({"resources":{"limits":{"kunlunxin.com/xpu":"2"}}})"));
  EXPECT_TRUE(xpu.MutateAdmission(yes).value());
  EXPECT_TRUE(yes.Sets().empty());

  (*devs)[5].used = 1;
  auto req =
      xpu.NormalizeRequest(ContainerView{.name = "c", .limits = {{"kunlunxin.com/xpu", "2"}}});
  ASSERT_TRUE(req);
  PodView pod;
  FitResult r = xpu.Fit(Ptrs(*devs), *req, FitContext{.pod = &pod});
  ASSERT_TRUE(r.fit) << r.Reason();
  StringMap annos = xpu.AllocationAnnotations(pod, {r.devices});
  EXPECT_EQ(annos, (StringMap{{"hami.io/kunlun-allocated",
                               "n-kunlun-4,kunlun,98304,100:n-kunlun-6,kunlun,98304,100:;"},
                              {"BAIDU_COM_DEVICE_IDX", "4,6"}}));
  // No to-allocate key: the simulated plugin has nothing to consume; the usage index reads the
  // allocated key.
  auto pending = xpu.PodToAllocate(annos);
  ASSERT_TRUE(pending);
  EXPECT_FALSE(pending->has_value());
  auto back = xpu.PodAllocated(annos);
  ASSERT_TRUE(back && *back);
  EXPECT_EQ((*back)->at(0), r.devices);
  EXPECT_EQ(xpu.EncodeNodeRegistration({protocol::DeviceInfo{}, protocol::DeviceInfo{}}).capacity,
            (StringMap{{"kunlunxin.com/xpu", "2"}}));
}

TEST(KunlunDevice, VirtualEndToEnd) {
  Registry reg = ChartRegistry();
  const Device& vxpu = *reg.Find("XPU");
  std::vector<protocol::DeviceInfo> infos;
  for (uint64_t i = 0; i < 8; ++i) {
    infos.push_back(protocol::DeviceInfo{.id = "xpu-" + std::to_string(i),
                                         .index = i,
                                         .count = 4,
                                         .devmem = 98304,
                                         .devcore = 100,
                                         .type = "P800",
                                         .health = true});
  }
  NodeRegistration published = vxpu.EncodeNodeRegistration(infos);
  EXPECT_EQ(published.capacity.at("kunlunxin.com/vxpu"), "32");
  auto devs = vxpu.NodeDevices(NodeView{.name = "n", .annotations = published.annotations});
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 8u);

  FakeEdit edit(nlohmann::json::parse(
      R"({"resources":{"limits":{"kunlunxin.com/vxpu":"1","kunlunxin.com/vxpu-memory":"30000"}}})"));
  EXPECT_TRUE(vxpu.MutateAdmission(edit).value());
  EXPECT_EQ(edit.Sets(), (std::map<std::string, nlohmann::json>{
                             {"/resources/limits/kunlunxin.com/vxpu-memory", "49152"},
                             {"/resources/requests/kunlunxin.com/vxpu-memory", "49152"}}));
  FakeEdit none(nlohmann::json::parse(R"({"resources":{"requests":{"kunlunxin.com/vxpu":"1"}}})"));
  EXPECT_FALSE(vxpu.MutateAdmission(none).value());

  auto req = vxpu.NormalizeRequest(ContainerView{
      .name = "c",
      .limits = {{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", "49152"}}});
  ASSERT_TRUE(req);
  PodView pod;
  FitResult r = vxpu.Fit(Ptrs(*devs), *req, FitContext{.pod = &pod});
  ASSERT_TRUE(r.fit) << r.Reason();
  EXPECT_EQ(r.devices[0], (protocol::ContainerDevice{
                              .uuid = "xpu-0", .type = "XPU", .usedmem = 49152, .usedcores = 50}));
  StringMap annos = vxpu.AllocationAnnotations(pod, {r.devices});
  EXPECT_EQ(annos, (StringMap{{"hami.io/xpu-devices-to-allocate", "xpu-0,XPU,49152,50:;"},
                              {"hami.io/xpu-devices-allocated", "xpu-0,XPU,49152,50:;"}}));
}

}  // namespace
}  // namespace hami::device::kunlun
