// The Ascend backends behind the Device API: registered by the `vnpus` section, node rows with
// mode and NetworkID, the webhook edits, Fit and the allocation annotations through the
// interface the scheduler uses.
#include "device/vendors/ascend/ascend_device.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/config.h"
#include "support/vendor_test_util.h"

namespace hami::device::ascend {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
vnpus:
  hamiVnpuCore: false
  configs:
  - chipName: 910B3
    commonWord: Ascend910B3
    resourceName: huawei.com/Ascend910B3
    resourceMemoryName: huawei.com/Ascend910B3-memory
    resourceCoreName: huawei.com/Ascend910B3-core
    memoryAllocatable: 65536
    memoryCapacity: 65536
    memoryFactor: 1
    aiCore: 20
    runtimeClassName: ascend
    templates:
    - {name: vir10_3c_32g, memory: 32768, aiCore: 10, aiCPU: 3}
    - {name: vir05_1c_16g, memory: 16384, aiCore: 5, aiCPU: 1}
  - chipName: 310P3
    commonWord: Ascend310P
    resourceName: huawei.com/Ascend310P
    resourceMemoryName: huawei.com/Ascend310P-memory
    memoryAllocatable: 21527
    memoryCapacity: 24576
)";

Registry Load(const std::string& text = kConfig) {
  auto config = LoadDeviceConfig(text);
  EXPECT_TRUE(config) << config.error();
  auto registry = BuildRegistry(*config);
  EXPECT_TRUE(registry) << registry.error();
  return std::move(*registry);
}

using vendor_test::FakeEdit;
using vendor_test::PodWith;

TEST(AscendDevice, RegistersEveryFamilyOfTheSection) {
  Registry r = Load();
  const Device* b3 = r.Find("Ascend910B3");
  ASSERT_NE(b3, nullptr);
  ASSERT_NE(r.Find("Ascend310P"), nullptr);
  EXPECT_EQ(r.Find("Ascend910A"), nullptr);  // not in this section
  EXPECT_EQ(b3->Info().register_key, "hami.io/node-register-Ascend910B3");
  EXPECT_EQ(b3->Info().memory_resource, "huawei.com/Ascend910B3-memory");
  EXPECT_EQ(b3->MemoryFactor(), 1);
  EXPECT_EQ(r.Find("Ascend310P")->MemoryFactor(), 1);  // 0 in the file: not scaled
  auto bad = LoadDeviceConfig("vnpus:\n  configs:\n  - commonWord: A\n    aiCore: x\n");
  EXPECT_TRUE(!bad || !BuildRegistry(*bad));  // rejected at load or at build
}

TEST(AscendDevice, NodeRowsCarryModeAndRing) {
  Registry r = Load();
  const Device* b3 = r.Find("Ascend910B3");
  NodeView node;
  EXPECT_TRUE(b3->NodeDevices(node)->empty());  // no register annotation
  node.annotations["hami.io/node-register-Ascend910B3"] =
      R"([{"id":"npu-0","count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3",)"
      R"("health":true,"customInfo":{"NetworkID":3}},{"id":"npu-1","index":1,"count":4,)"
      R"("devmem":65536,"devcore":20,"type":"Ascend910B3","health":true}])";
  auto rows = b3->NodeDevices(node);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].vendor, "Ascend910B3");
  EXPECT_EQ((*rows)[0].mode, "vnpu-template");
  EXPECT_EQ((*rows)[0].custom_info.at("NetworkID"), "3");
  EXPECT_TRUE((*rows)[1].custom_info.empty());
  EXPECT_EQ((*rows)[1].totalmem, 65536);
  node.annotations["hami-vnpu-core"] = "true";
  EXPECT_EQ((*b3->NodeDevices(node))[0].mode, "hami-core");
  node.annotations["hami.io/node-register-Ascend910B3"] = "{";
  auto bad = b3->NodeDevices(node);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("annotation hami.io/node-register-Ascend910B3: ", 0), 0u)
      << bad.error();
}

TEST(AscendDevice, AdmissionEdits) {
  Registry r = Load();
  const Device* b3 = r.Find("Ascend910B3");
  FakeEdit edit = FakeEdit::ForPod(
      PodWith({{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", 9000}}));
  auto asks = b3->MutateAdmission(edit);
  ASSERT_TRUE(asks) << asks.error();
  EXPECT_TRUE(*asks);
  const json& res = edit.pod()["spec"]["containers"][0]["resources"];
  EXPECT_EQ(res["limits"]["huawei.com/Ascend910B3-memory"], "16384");  // vir05_1c_16g
  EXPECT_EQ(res["requests"]["huawei.com/Ascend910B3-memory"], "16384");
  EXPECT_EQ(edit.pod()["spec"]["runtimeClassName"], "ascend");

  FakeEdit other = FakeEdit::ForPod(PodWith({{"nvidia.com/gpu", "1"}}));
  EXPECT_FALSE(*b3->MutateAdmission(other));
  EXPECT_FALSE(other.pod()["spec"].contains("runtimeClassName"));

  FakeEdit core = FakeEdit::ForPod(
      PodWith({{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-core", "5"}}));
  auto rejected = b3->MutateAdmission(core);
  ASSERT_FALSE(rejected);
  EXPECT_EQ(rejected.error(),
            "huawei.com/Ascend910B3-core is only supported in hami-core (soft split) mode");

  FakeEdit soft = FakeEdit::ForPod(PodWith({{"huawei.com/Ascend910B3", "1"},
                                            {"huawei.com/Ascend910B3-core", "5"},
                                            {"huawei.com/Ascend910B3-memory", "9000"}},
                                           {{"huawei.com/vnpu-mode", "hami-core"}}));
  ASSERT_TRUE(b3->MutateAdmission(soft));
  EXPECT_EQ(
      soft.pod()["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910B3-memory"],
      "9000");
}

TEST(AscendDevice, FitReadsModeAndRingFromRows) {
  Registry r = Load();
  const Device* b3 = r.Find("Ascend910B3");
  auto row = [](std::string id, std::string mode, std::optional<int64_t> ring) {
    DeviceUsage d{.id = std::move(id),
                  .vendor = "Ascend910B3",
                  .health = true,
                  .mode = std::move(mode),
                  .count = 4,
                  .totalmem = 65536,
                  .totalcore = 20};
    if (ring) d.custom_info["NetworkID"] = std::to_string(*ring);
    return d;
  };
  std::vector<DeviceUsage> rows = {row("a", "vnpu-template", 1), row("b", "vnpu-template", 2),
                                   row("c", "vnpu-template", 1)};
  std::vector<const DeviceUsage*> cands = {&rows[0], &rows[1], &rows[2]};
  DeviceRequest req{.nums = 2, .type = "Ascend910B3", .memreq = 16384, .mem_percentage = 0};
  PodView pod;
  FitResult fit = b3->Fit(cands, req, FitContext{.pod = &pod});
  ASSERT_TRUE(fit.fit) << fit.Reason();
  ASSERT_EQ(fit.devices.size(), 2u);
  EXPECT_EQ(fit.devices[0].uuid, "c");  // ring 1 holds two
  EXPECT_EQ(fit.devices[1].uuid, "a");

  pod.annotations["huawei.com/vnpu-mode"] = "hami-core";
  EXPECT_EQ(b3->Fit(cands, req, FitContext{.pod = &pod}).Reason(), "1/3 ModeNotFit");
  for (auto& d : rows) d.mode = "hami-core";
  EXPECT_TRUE(b3->Fit(cands, req, FitContext{.pod = &pod}).fit);

  GpuPolicy mutex;
  mutex.mutex = true;
  rows[0].used = rows[1].used = rows[2].used = 1;
  EXPECT_EQ(b3->Fit(cands, req, FitContext{.pod = &pod, .policy = mutex}).Reason(),
            "3/3 ExclusiveDeviceAllocateConflict");
}

TEST(AscendDevice, AllocationAnnotations) {
  Registry r = Load();
  const Device* b3 = r.Find("Ascend910B3");
  PodView pod;
  StringMap a = b3->AllocationAnnotations(pod, {{{"npu-0", "Ascend910B3", 16384, 0}}});
  EXPECT_EQ(a.at("hami.io/Ascend910B3-devices-to-allocate"), "npu-0,Ascend910B3,16384,0:;");
  EXPECT_EQ(a.at("hami.io/Ascend910B3-devices-allocated"), "npu-0,Ascend910B3,16384,0:;");
  EXPECT_EQ(a.at("huawei.com/Ascend910B3"),
            R"([{"UUID":"npu-0","temp":"vir05_1c_16g","memory":16384}])");
  // The allocation reads back through the generic decoder.
  auto back = b3->PodAllocated(a);
  ASSERT_TRUE(back) << back.error();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((**back)[0][0].uuid, "npu-0");
}

TEST(AscendDevice, SimulatedPluginRegistersJson) {
  Registry r = Load();
  const Device* p = r.Find("Ascend310P");
  NodeRegistration reg = p->EncodeNodeRegistration({{.id = "npu-0",
                                                     .count = 7,
                                                     .devmem = 21527,
                                                     .devcore = 8,
                                                     .type = "Ascend310P",
                                                     .health = true}});
  ASSERT_EQ(reg.annotations.count("hami.io/node-register-Ascend310P"), 1u);
  NodeView node{.annotations = reg.annotations};
  auto rows = p->NodeDevices(node);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].count, 7);
  EXPECT_EQ(reg.capacity.at("huawei.com/Ascend310P"), "7");
}

}  // namespace
}  // namespace hami::device::ascend
