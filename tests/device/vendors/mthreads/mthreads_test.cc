// Moore Threads backend: vectors from HAMi v2.10.0 pkg/device/mthreads/device_test.go
// (Test_MutateAdmission, Test_GetNodeDevices, Test_PatchAnnotations, Test_checkType,
// Test_GenerateResourceRequests, Test_CustomFilterRule, TestDevices_Fit).
#include "device/vendors/mthreads/mthreads.h"

#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>
#include <chrono>

#include <nlohmann/json.hpp>
#include "support/vendor_test_util.h"

namespace hami::device::mthreads {
namespace {

DeviceUsage Dev(std::string id, int32_t used, int32_t totalmem, int32_t usedcores,
                bool health = true, int32_t count = 100) {
  return vendor_test::ShareDev("Mthreads", std::move(id), used, totalmem, usedcores, health, count);
}

DeviceRequest Req(int32_t nums, int32_t mem, int32_t cores, int32_t pct = 0,
                  std::string type = "Mthreads") {
  return vendor_test::ShareReq(std::move(type), nums, mem, cores, pct);
}

using vendor_test::Ctr;
using vendor_test::ExpectFits;
using vendor_test::FakeEdit;
using vendor_test::FitCase;

TEST(MthreadsInfo, KeysAndConfig) {
  MthreadsDevice dev{MthreadsConfig{}};
  EXPECT_EQ(dev.VendorKey(), "Mthreads");
  EXPECT_EQ(dev.Info().count_resource, "mthreads.com/vgpu");
  EXPECT_EQ(dev.Info().allocated_key, "hami.io/mthreads-vgpu-devices-allocated");
  EXPECT_EQ(dev.MemoryFactor(), 512);
  EXPECT_EQ(dev.CheckHealth(NodeView{}, Health{false, false}), (Health{true, true}));
  const VendorFactory* factory = FindVendorFactory("mthreads");
  ASSERT_NE(factory, nullptr);
  auto made = (*factory)(YAML::Load(R"(
resourceCountName: "mthreads.com/vgpu"
resourceMemoryName: "mthreads.com/sgpu-memory"
resourceCoreName: "mthreads.com/sgpu-core")"),
                         DeviceConfig{});
  ASSERT_TRUE(made) << made.error();
  ASSERT_EQ(made->size(), 1u);
  EXPECT_EQ((*made)[0]->Info().core_resource, "mthreads.com/sgpu-core");
  auto bad = ParseMthreadsConfig(YAML::Load("resourceCoreName: ''"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "mthreads.resourceCoreName: want a resource name, got \"\"");
}

TEST(MthreadsNodeDevices, FromCapacity) {
  MthreadsDevice dev{MthreadsConfig{}};
  auto r = dev.NodeDevices(
      NodeView{.name = "test",
               .capacity = {{"mthreads.com/sgpu-memory", "1"}, {"mthreads.com/sgpu-core", "1"}}});
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], (DeviceUsage{.id = "test-mthreads-0",
                                  .index = 0,
                                  .type = "Mthreads",
                                  .vendor = "Mthreads",
                                  .health = true,
                                  .count = 100,
                                  .totalmem = 8192,
                                  .totalcore = 16}));
  // Two cards of 48 GiB published by the simulated plugin read back as two cards of 48 GiB.
  std::vector<protocol::DeviceInfo> devs(2);
  for (auto& d : devs) d.count = 100, d.devmem = 49152;
  NodeRegistration reg = dev.EncodeNodeRegistration(devs);
  EXPECT_EQ(reg.capacity["mthreads.com/sgpu-core"], "32");
  EXPECT_EQ(reg.capacity["mthreads.com/sgpu-memory"], "192");
  EXPECT_EQ(reg.capacity["mthreads.com/vgpu"], "200");
  auto two = dev.NodeDevices(NodeView{.name = "n", .capacity = reg.capacity});
  ASSERT_TRUE(two) << two.error();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].id, "n-mthreads-1");
  EXPECT_EQ((*two)[1].totalmem, 49152);
  auto none = dev.NodeDevices(NodeView{.name = "n"});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto bad = dev.NodeDevices(NodeView{.name = "n", .capacity = {{"mthreads.com/sgpu-core", "-1"}}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("capacity mthreads.com/sgpu-core: ", 0), 0u) << bad.error();
}

TEST(MthreadsWebhook, MutateAdmission) {
  MthreadsDevice dev{MthreadsConfig{}};
  struct Case {
    const char* name;
    const char* ctr;
    bool want;
    std::map<std::string, nlohmann::json> sets;
    std::map<std::string, nlohmann::json> pod_sets;
  };
  std::vector<Case> cases = {
      {"two cards in limits",
       R"({"resources":{"limits":{"mthreads.com/vgpu":"2","mthreads.com/sgpu-memory":"2","mthreads.com/sgpu-core":"1"}}})",
       true,
       {{"mthreads.com/sgpu-core", "32"}, {"mthreads.com/sgpu-memory", "192"}},
       {{"mthreads.com/request-gpu-num", "2"}}},
      {"two cards requested without limits",
       R"({"resources":{"requests":{"mthreads.com/vgpu":2}}})",
       true,
       {{"mthreads.com/sgpu-core", "32"}, {"mthreads.com/sgpu-memory", "192"}},
       {{"mthreads.com/request-gpu-num", "2"}}},
      {"one card requested without limits",
       R"({"resources":{"requests":{"mthreads.com/vgpu":"1"}}})",
       true,
       {{"mthreads.com/sgpu-core", "16"}, {"mthreads.com/sgpu-memory", "96"}},
       {}},
      {"no count", R"({"resources":{"limits":{"mthreads.com/sgpu-memory":"2"}}})", false, {}, {}},
      {"one card without a memory limit",
       R"({"resources":{"limits":{"mthreads.com/vgpu":"1","mthreads.com/sgpu-core":"1"}}})",
       true,
       {{"mthreads.com/sgpu-core", "16"}, {"mthreads.com/sgpu-memory", "96"}},
       {}},
      {"one card with a legal memory slice",
       R"({"resources":{"limits":{"mthreads.com/vgpu":"1","mthreads.com/sgpu-memory":"2"}}})",
       true,
       {},
       {}},
  };
  // The edits of a kind by the last key of their path.
  auto by_key = [](const FakeEdit& edit, FakeEdit::Kind kind) {
    std::map<std::string, nlohmann::json> out;
    for (const auto& e : edit.Of(kind)) out[e.path.back()] = e.value;
    return out;
  };
  for (const auto& c : cases) {
    FakeEdit edit(c.ctr);
    auto r = dev.MutateAdmission(edit);
    ASSERT_TRUE(r) << c.name << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.name;
    EXPECT_EQ(by_key(edit, FakeEdit::kSet), c.sets) << c.name;
    EXPECT_EQ(by_key(edit, FakeEdit::kSetPod), c.pod_sets) << c.name;
  }
  struct Bad {
    const char* ctr;
    const char* error;
  };
  std::vector<Bad> bad = {
      {R"({"resources":{"limits":{"mthreads.com/vgpu":"1","mthreads.com/sgpu-memory":"3"}}})",
       "sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96], got "
       "mthreads.com/sgpu-memory \"3\""},
      {R"({"resources":{"limits":{"mthreads.com/vgpu":"0"}}})",
       "mthreads.com/vgpu must be greater than 0, got \"0\""},
      {R"({"resources":{"limits":{"mthreads.com/vgpu":"-1"}}})",
       "mthreads.com/vgpu must be greater than 0, got \"-1\""},
      {R"({"resources":{"requests":{"mthreads.com/vgpu":0}}})",
       "mthreads.com/vgpu must be greater than 0, got \"0\""},
  };
  for (const auto& b : bad) {
    FakeEdit edit(b.ctr);
    auto r = dev.MutateAdmission(edit);
    ASSERT_FALSE(r) << b.ctr;
    EXPECT_EQ(r.error(), b.error);
  }
}

TEST(MthreadsRequest, GenerateResourceRequests) {
  MthreadsDevice dev{MthreadsConfig{}};
  const StringMap all = {{"mthreads.com/vgpu", "1"},
                         {"mthreads.com/sgpu-memory", "1000"},
                         {"mthreads.com/sgpu-core", "1"}};
  EXPECT_EQ(dev.NormalizeRequest(Ctr(all, all)).value(), Req(1, 512000, 1, 0));
  EXPECT_EQ(dev.NormalizeRequest(Ctr({}, {{"mthreads.com/sgpu-memory", "1000"}})).value(),
            DeviceRequest{});
  EXPECT_EQ(dev.NormalizeRequest(Ctr({}, {{"mthreads.com/vgpu", "1"}})).value(), Req(1, 0, 0, 100));
  EXPECT_EQ(dev.NormalizeRequest(Ctr({{"mthreads.com/vgpu", "0"}, {"mthreads.com/sgpu-core", "1"}}))
                .value(),
            DeviceRequest{});
  // What the webhook writes for two cards, per card.
  EXPECT_EQ(dev.NormalizeRequest(Ctr({{"mthreads.com/vgpu", "2"},
                                      {"mthreads.com/sgpu-memory", "192"},
                                      {"mthreads.com/sgpu-core", "32"}}))
                .value(),
            Req(2, 49152, 16, 0));
  struct Bad {
    const char* resource;
    const char* value;
  };
  for (Bad b : {Bad{"mthreads.com/vgpu", "-1"}, Bad{"mthreads.com/vgpu", "4294967296"},
                Bad{"mthreads.com/sgpu-memory", "16Gi"}, Bad{"mthreads.com/sgpu-memory", "16.0Gi"},
                Bad{"mthreads.com/sgpu-memory", "4194304"}}) {
    StringMap limits = {{"mthreads.com/vgpu", "1"}, {"mthreads.com/sgpu-core", "1"}};
    limits[b.resource] = b.value;
    auto r = dev.NormalizeRequest(Ctr(limits));
    ASSERT_FALSE(r) << b.value;
    EXPECT_NE(r.error().find(b.resource), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(b.value), std::string::npos) << r.error();
  }
}

// Test_PatchAnnotations, plus the node and time the scheduler put on the pod.
TEST(MthreadsAllocate, PatchAnnotations) {
  MthreadsDevice dev{MthreadsConfig{}};
  protocol::ContainerDevice d{"test1", "Mthreads", 1000, 1};
  StringMap plain = dev.AllocationAnnotations(PodView{}, {{d}});
  EXPECT_EQ(plain,
            (StringMap{{"hami.io/mthreads-vgpu-devices-allocated", "test1,Mthreads,1000,1:;"},
                       {"mthreads.com/gpu-index", "0"},
                       {"mthreads.com/predicate-node", ""}}));
  PodView pod;
  pod.annotations = {{"hami.io/vgpu-node", "node-a"}, {"hami.io/vgpu-time", "1700000000"}};
  protocol::ContainerDevice a{"node-a-mthreads-1", "Mthreads", 1000, 1};
  protocol::ContainerDevice b{"node-a-mthreads-3", "Mthreads", 1000, 1};
  StringMap placed = dev.AllocationAnnotations(pod, {{}, {a, b}});
  EXPECT_EQ(placed["mthreads.com/gpu-index"], "1,3");
  EXPECT_EQ(placed["mthreads.com/predicate-node"], "node-a");
  EXPECT_EQ(placed["mthreads.com/predicate-time"], "1700000000000000000");
  EXPECT_EQ(placed.count("hami.io/mthreads-vgpu-devices-to-allocate"), 0u);
  EXPECT_TRUE(dev.AllocationAnnotations(pod, {{}}).empty());
  // Without hami.io/vgpu-node (the scheduler's decision is written in the same patch), the node
  // comes from the device ids this backend gives.
  StringMap from_id = dev.AllocationAnnotations(PodView{}, {{a, b}});
  EXPECT_EQ(from_id["mthreads.com/predicate-node"], "node-a");
  EXPECT_EQ(from_id.count("mthreads.com/predicate-time"), 0u);
  protocol::ContainerDevice odd{"x-mthreads-y", "Mthreads", 1, 1};
  EXPECT_EQ(dev.AllocationAnnotations(PodView{}, {{odd}})["mthreads.com/predicate-node"], "");
  // With the decision (HAMi PatchAnnotations at filter time): the chosen node and the filter's
  // clock reading in Unix nanoseconds win over the pod's earlier annotations.
  const SystemTime now{std::chrono::seconds(1800000000) + std::chrono::nanoseconds(5)};
  StringMap decided = dev.AllocationAnnotations(
      AllocationContext{.pod = &pod, .node = "node-b", .now = now}, {{}, {a, b}});
  EXPECT_EQ(decided["mthreads.com/predicate-node"], "node-b");
  EXPECT_EQ(decided["mthreads.com/predicate-time"], "1800000000000000005");
  // The simulated plugin serves the allocated key.
  auto served = dev.PodToAllocate(placed);
  ASSERT_TRUE(served) << served.error();
  ASSERT_TRUE(served->has_value());
  EXPECT_EQ((**served)[1].size(), 2u);
}

TEST(MthreadsFit, UpstreamVectors) {
  MthreadsDevice dev{MthreadsConfig{}};
  const std::string use = "mthreads.ai/use-gpuuuid", nouse = "mthreads.ai/nouse-gpuuuid";
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
  };
  ExpectFits(dev, cases, vendor_test::ReasonCheck::kWhenUnfit);
}

// Test_CustomFilterRule: a pod's later container may only use the device its earlier
// containers got.
TEST(MthreadsFit, CustomFilterRule) {
  MthreadsDevice dev{MthreadsConfig{}};
  DeviceUsage d = Dev("test123", 0, 1280, 0);
  PodView pod;
  protocol::PodDevices same = {{{"test123", "Mthreads", 10, 1}}};
  FitResult ok = dev.Fit({&d}, Req(1, 10, 1), FitContext{.pod = &pod, .earlier = &same});
  EXPECT_TRUE(ok.fit) << ok.Reason();
  protocol::PodDevices other = {{{"test456", "Mthreads", 10, 1}}};
  FitResult no = dev.Fit({&d}, Req(1, 10, 1), FitContext{.pod = &pod, .earlier = &other});
  EXPECT_FALSE(no.fit);
  EXPECT_EQ(no.Reason(), "1/1 CardNotFoundCustomFilterRule");
}

// The scheduler's way in: the section in device-config.yaml makes the backend active.
TEST(MthreadsRegistry, ActiveWhenTheSectionIsPresent) {
  vendor_test::ExpectActiveWithSection("mthreads:\n  resourceCountName: mthreads.com/vgpu\n",
                                       {"Mthreads"});
}

}  // namespace
}  // namespace hami::device::mthreads
