// The MetaX backends behind the Device API: both registered by the `metax` section; node rows
// from capacity and from the sGPU annotation, health, webhook edits, fit and annotations through
// the interface the scheduler uses.
#include "device/vendors/metax/metax_device.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/config.h"
#include "support/vendor_test_util.h"

namespace hami::device::metax {
namespace {

using nlohmann::json;

Registry Load() {
  auto config = LoadDeviceConfig(
      "metax:\n  resourceCountName: metax-tech.com/gpu\n  resourceVCountName: "
      "metax-tech.com/sgpu\n  resourceVMemoryName: metax-tech.com/vmemory\n  resourceVCoreName: "
      "metax-tech.com/vcore\n  sgpuTopologyAware: false\n");
  EXPECT_TRUE(config) << config.error();
  auto registry = BuildRegistry(*config);
  EXPECT_TRUE(registry) << registry.error();
  return std::move(*registry);
}

using vendor_test::FakeEdit;
using vendor_test::PodWith;

TEST(MetaxDevice, SectionRegistersBoth) {
  Registry r = Load();
  ASSERT_NE(r.Find("Metax-GPU"), nullptr);
  ASSERT_NE(r.Find("Metax-SGPU"), nullptr);
  EXPECT_EQ(r.Find("Metax-SGPU")->MemoryFactor(), 1024);
  EXPECT_EQ(r.Find("Metax-SGPU")->Info().memory_resource, "metax-tech.com/vmemory");
  auto bad = LoadDeviceConfig("metax:\n  sgpuTopologyAware: maybe\n");
  EXPECT_TRUE(!bad || !BuildRegistry(*bad));
}

TEST(MetaxDevice, GpuFromCapacity) {
  Registry r = Load();
  const Device* gpu = r.Find("Metax-GPU");
  NodeView node{.name = "n1"};
  EXPECT_TRUE(gpu->NodeDevices(node)->empty());
  EXPECT_FALSE(gpu->CheckHealth(node, {}).healthy);
  node.capacity["metax-tech.com/gpu"] = "2";
  auto rows = gpu->NodeDevices(node);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].id, "n1-metax-1");
  EXPECT_EQ(gpu->CheckHealth(node, {.healthy = false, .need_update = false}),
            (Health{.healthy = true, .need_update = true}));
  node.capacity["metax-tech.com/gpu"] = "x";
  EXPECT_FALSE(gpu->NodeDevices(node));
  // hami-sim's plugin publishes capacity only, one per device whatever its split count.
  NodeRegistration reg =
      gpu->EncodeNodeRegistration({{.id = "a", .count = 10}, {.id = "b", .count = 10}});
  EXPECT_TRUE(reg.annotations.empty());
  EXPECT_EQ(reg.capacity.at("metax-tech.com/gpu"), "2");
}

TEST(MetaxDevice, GpuAdmissionReadsLimitsOnly) {
  Registry r = Load();
  const Device* gpu = r.Find("Metax-GPU");
  FakeEdit asks = FakeEdit::ForPod(PodWith({{"metax-tech.com/gpu", "1"}}));
  EXPECT_TRUE(*gpu->MutateAdmission(asks));
  json requests_only = PodWith(json::object());
  requests_only["spec"]["containers"][0]["resources"]["requests"] = {{"metax-tech.com/gpu", "1"}};
  FakeEdit no = FakeEdit::ForPod(requests_only);
  EXPECT_FALSE(*gpu->MutateAdmission(no));
  EXPECT_EQ((asks.Count(FakeEdit::kSet) + asks.Count(FakeEdit::kAppend)) +
                (no.Count(FakeEdit::kSet) + no.Count(FakeEdit::kAppend)),
            0);
}

TEST(MetaxDevice, SgpuNodeAndAdmission) {
  Registry r = Load();
  const Device* sgpu = r.Find("Metax-SGPU");
  NodeRegistration reg = sgpu->EncodeNodeRegistration({{.id = "GPU-1",
                                                        .count = 16,
                                                        .devmem = 65536,
                                                        .devcore = 100,
                                                        .type = "C500",
                                                        .health = true}});
  EXPECT_EQ(reg.capacity.at("metax-tech.com/sgpu"), "16");
  NodeView node{.name = "n", .annotations = reg.annotations};
  auto rows = sgpu->NodeDevices(node);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].totalmem, 65536);
  EXPECT_EQ((*rows)[0].custom_info.at("Model"), "C500");
  EXPECT_TRUE(sgpu->CheckHealth(node, {}).healthy);
  node.annotations["metax-tech.com/node-gpu-devices"] = "[]";
  EXPECT_FALSE(sgpu->CheckHealth(node, {}).healthy);
  node.annotations["metax-tech.com/node-gpu-devices"] = "[1]";
  auto bad = sgpu->NodeDevices(node);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(),
            "annotation metax-tech.com/node-gpu-devices: device 0: want an object, got \"1\"");

  FakeEdit edit = FakeEdit::ForPod(PodWith({{"metax-tech.com/sgpu", "1"}}));
  EXPECT_TRUE(*sgpu->MutateAdmission(edit));
  EXPECT_EQ(edit.pod()["metadata"]["annotations"]["metax-tech.com/sgpu-qos-policy"], "best-effort");
  FakeEdit wrong = FakeEdit::ForPod(
      PodWith({{"metax-tech.com/sgpu", "1"}}, {{"metax-tech.com/sgpu-app-class", "x"}}));
  auto rejected = sgpu->MutateAdmission(wrong);
  ASSERT_FALSE(rejected);
  EXPECT_EQ(rejected.error(), "metax-tech.com/sgpu-app-class must be set one of [online, offline]");
}

TEST(MetaxDevice, SgpuFitAndAnnotations) {
  Registry r = Load();
  const Device* sgpu = r.Find("Metax-SGPU");
  auto rows = SgpuRows({{.uuid = "GPU-1",
                         .total_dev_count = 4,
                         .total_compute = 100,
                         .total_vram = 65536,
                         .healthy = true}});
  std::vector<const DeviceUsage*> cands = {&rows[0]};
  auto req = sgpu->NormalizeRequest(ContainerView{.name = "c",
                                                  .limits = {{"metax-tech.com/sgpu", "1"},
                                                             {"metax-tech.com/vmemory", "16"},
                                                             {"metax-tech.com/vcore", "30"}}});
  ASSERT_TRUE(req) << req.error();
  PodView pod;
  FitResult fit = sgpu->Fit(cands, *req, FitContext{.pod = &pod});
  ASSERT_TRUE(fit.fit) << fit.Reason();
  EXPECT_EQ(fit.devices[0], (protocol::ContainerDevice{"GPU-1", "Metax-SGPU", 16384, 30}));
  StringMap a = sgpu->AllocationAnnotations(pod, {fit.devices});
  EXPECT_EQ(a.at("metax-tech.com/gpu-devices-allocated"),
            R"([[{"uuid":"GPU-1","compute":30,"vRam":16384}]])");
  EXPECT_EQ(a.at("hami.io/metax-sgpu-devices-allocated"), "GPU-1,Metax-SGPU,16384,30:;");
}

}  // namespace
}  // namespace hami::device::metax
