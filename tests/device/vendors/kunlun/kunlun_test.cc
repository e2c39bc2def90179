// Kunlunxin XPU (whole devices) and vXPU: vectors from HAMi v2.10 pkg/device/kunlun/
// topo_test.go, device_test.go and vdevice_test.go.
#include "device/vendors/kunlun/kunlun.h"

#include <gtest/gtest.h>
#include "support/vendor_test_util.h"

namespace hami::device::kunlun {
namespace {

using vendor_test::Ptrs;

// Eight healthy devices "xpu-<i>" with index i; `used` lists the busy ones.
std::vector<DeviceUsage> Eight(std::vector<int> used = {}, std::string type = "kunlun") {
  std::vector<DeviceUsage> out;
  for (int i = 0; i < 8; ++i) {
    DeviceUsage d{.id = "xpu-" + std::to_string(i),
                  .index = static_cast<uint64_t>(i),
                  .type = type,
                  .vendor = type,
                  .health = true,
                  .count = 100,
                  .totalmem = kMaxMemory,
                  .totalcore = 100};
    for (int u : used) {
      if (u == i) d.used = 1;
    }
    out.push_back(d);
  }
  return out;
}

bool Idle(const DeviceUsage& d) { return d.used == 0 && d.health; }

// The upstream vectors' container is "c".
ContainerView Ctr(StringMap limits, StringMap requests = {}) {
  return vendor_test::NamedCtr("c", std::move(limits), std::move(requests));
}

// ---- topology ----

TEST(KunlunTopology, GraphSelectWholeDevices) {  // Test_graphSelect
  struct Case {
    const char* name;
    std::vector<int> used;
    int32_t nums;
    std::vector<uint64_t> want;
  };
  const std::vector<Case> cases = {
      {"full allocate", {}, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"full allocate not success", {5}, 8, {}},
      {"allocate 2 cards", {5}, 2, {4, 6}},
      {"allocate 1 card", {5}, 1, {4}},
      {"allocate 1 card, two busy on the right", {6, 7}, 1, {4}},
      {"allocate 2 cards according to interconnect", {0, 1, 2, 4, 5, 6}, 2, {3, 7}},
      {"4 cards from 5 free by interconnect", {2, 3, 7}, 4, {0, 1, 4, 5}},
      {"4 cards from 6 free, 2 left unconnected", {3, 6}, 4, {0, 1, 4, 5}},
      {"4 cards from 6 free, 2 left connected", {2, 6}, 4, {0, 1, 4, 5}},
      // topo_test.go
      {"single device, all free", {}, 1, {0}},
      {"four from the left wing", {4, 5, 6, 7}, 4, {0, 1, 2, 3}},
      {"eight with one busy", {0}, 8, {}},
      {"a cross pair left alone", {1, 2, 3, 5, 6, 7}, 2, {0, 4}},
      {"a group of four left alone", {2, 3, 6, 7}, 4, {0, 1, 4, 5}},
      {"unsupported count 3", {}, 3, {}},
      {"unsupported count 0", {}, 0, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto devs = Eight(c.used);
    EXPECT_EQ(GraphSelect(Ptrs(devs), c.nums, Idle), c.want);
  }
}

TEST(KunlunTopology, GraphSelectVirtual) {  // Test_graphSelectVXPU
  struct Dev {
    int32_t used;
    int32_t usedmem;
  };
  struct Case {
    const char* name;
    std::vector<Dev> devs;
    int32_t nums;
    std::vector<uint64_t> want;
  };
  const Dev f{0, 0}, q1{1, 24576}, q2{2, 49152}, h1{1, 49152};
  const std::vector<Case> cases = {
      {"full allocate with unused devices", {f, f, f, f, f, f, f, f}, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"allocate with matching memory", {f, q1, f, q2, f, h1, f, f}, 4, {0, 1, 2, 3}},
      {"allocate with mixed memory", {f, q2, f, h1, f, q1, f, f}, 4, {4, 5, 6, 7}},
      {"no suitable devices due to memory mismatch", {h1, h1, h1, h1, h1, h1, h1, h1}, 2, {}},
      {"1 card with matching memory", {q1, q1, h1, f, f, q1, f, f}, 1, {0}},
      {"2 cards with different memory", {f, q2, q1, h1, f, f, q1, f}, 2, {0, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto devs = Eight();
    for (size_t i = 0; i < 8; ++i) {
      devs[i].used = c.devs[i].used;
      devs[i].usedmem = c.devs[i].usedmem;
    }
    DeviceRequest req{.nums = c.nums, .type = "XPU", .memreq = 24576};
    auto fit = [&](const DeviceUsage& d) { return FitVxpu(d, req); };
    EXPECT_EQ(GraphSelect(Ptrs(devs), c.nums, fit), c.want);
  }
}

TEST(KunlunTopology, ShortListsNeverReadPastTheEnd) {
  // HAMi indexes eight positions; a node with four devices must not crash or over-pick.
  auto devs = Eight();
  devs.resize(4);
  EXPECT_EQ(GraphSelect(Ptrs(devs), 1, Idle), (std::vector<uint64_t>{0}));
  EXPECT_EQ(GraphSelect(Ptrs(devs), 4, Idle), (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(GraphSelect(Ptrs(devs), 8, Idle).empty());
  EXPECT_TRUE(GraphSelect({}, 1, Idle).empty());
  // A group naming indexes the node lacks is no fit.
  PodView pod;
  FitContext ctx{.pod = &pod};
  auto two = Eight({});
  two = {two[0], two[4]};
  FitResult r = XpuFit(Ptrs(two), DeviceRequest{.nums = 4, .type = "kunlun"}, ctx);
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/2 NumaNotFit");
}

TEST(KunlunTopology, CalcScore) {  // TestCalcscore, TestCountbubble
  EXPECT_EQ(CalcScore({0}, {0, 1}), 3000);
  EXPECT_EQ(CalcScore({0}, {4}), 2000);
  EXPECT_EQ(CalcScore({0, 1}, {0}), 1000);
  EXPECT_EQ(CalcScore({0, 1, 2, 3}, {0}), 0);
  EXPECT_EQ(CalcScore({}, {}), 2000);                // 1 - 1
  EXPECT_EQ(CalcScore({0, 1, 2, 3}, {0, 4}), 1000);  // 4 - 1 = 3: the default
}

// ---- kunlun (whole devices) ----

TEST(KunlunXpu, NodeDevices) {
  auto devs = XpuNodeDevices("node1", 8);
  ASSERT_EQ(devs.size(), 8u);
  EXPECT_EQ(devs[0], (DeviceUsage{.id = "node1-kunlun-0",
                                  .index = 0,
                                  .type = "kunlun",
                                  .vendor = "kunlun",
                                  .health = true,
                                  .numa = 0,
                                  .count = 100,
                                  .totalmem = 98304,
                                  .totalcore = 100}));
  EXPECT_EQ(devs[3].numa, 0);
  EXPECT_EQ(devs[4].numa, 1);
  EXPECT_EQ(devs[7].id, "node1-kunlun-7");
  EXPECT_TRUE(XpuNodeDevices("node1", 0).empty());
}

TEST(KunlunXpu, RequestAndAdmission) {
  KunlunConfig cfg;
  EXPECT_TRUE(XpuMutateAdmission(cfg, Ctr({{"kunlunxin.com/xpu", "1"}})));
  EXPECT_FALSE(XpuMutateAdmission(cfg, Ctr({}, {{"kunlunxin.com/xpu", "1"}})));
  EXPECT_EQ(*XpuNormalizeRequest(cfg, Ctr({{"kunlunxin.com/xpu", "2"}})),
            (DeviceRequest{.nums = 2, .type = "kunlun", .memreq = 0, .mem_percentage = 100}));
  EXPECT_EQ(XpuNormalizeRequest(cfg, Ctr({}, {{"kunlunxin.com/xpu", "4"}}))->nums, 4);
  EXPECT_EQ(*XpuNormalizeRequest(cfg, Ctr({{"cpu", "4"}})), DeviceRequest{});
  auto bad = XpuNormalizeRequest(cfg, Ctr({{"kunlunxin.com/xpu", "half"}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("kunlunxin.com/xpu"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("\"half\""), std::string::npos) << bad.error();
}

TEST(KunlunXpu, Fit) {  // TestKunlunDevices_Fit_*
  PodView pod;
  FitContext ctx{.pod = &pod};
  DeviceRequest one{.nums = 1, .type = "kunlun", .mem_percentage = 100};

  auto busy = Eight({0, 1, 2, 3, 4, 5, 6, 7});
  FitResult r = XpuFit(Ptrs(busy), one, ctx);
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/8 NumaNotFit");

  auto free = Eight({5});
  r = XpuFit(Ptrs(free), DeviceRequest{.nums = 2, .type = "kunlun"}, ctx);
  ASSERT_TRUE(r.fit);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0],
            (protocol::ContainerDevice{
                .uuid = "xpu-4", .type = "kunlun", .usedmem = 98304, .usedcores = 100}));
  EXPECT_EQ(r.devices[1].uuid, "xpu-6");

  // use/nouse UUID lists of both families.
  pod.annotations = {{"baidu.com/use-gpuuuid", "xpu-5"}};
  r = XpuFit(Ptrs(Eight()), one, ctx);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0].uuid, "xpu-5");
  pod.annotations = {{"hami.io/use-xpu-uuid", "xpu-2"}};
  r = XpuFit(Ptrs(Eight()), one, ctx);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0].uuid, "xpu-2");
  pod.annotations = {
      {"baidu.com/nouse-gpuuuid", "xpu-0,xpu-1,xpu-2,xpu-3,xpu-4,xpu-5,xpu-6,xpu-7"}};
  r = XpuFit(Ptrs(Eight()), one, ctx);
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "8/8 CardUuidMismatch");
  pod.annotations = {{"baidu.com/use-gpuuuid", "xpu-9"}};
  r = XpuFit(Ptrs(Eight()), one, ctx);
  EXPECT_EQ(r.Reason(), "8/8 CardUuidMismatch");
}

TEST(KunlunXpu, Score) {  // Test_ScoreNode
  auto node = Eight({0, 1, 2, 3});
  node.resize(4);
  EXPECT_EQ(XpuScore(Ptrs(node), {0, 1, 2, 3, 4, 5, 6, 7}, true), 3000);  // Scenario 1: 0 - 1
  EXPECT_EQ(XpuScore({}, {0}, true), 0);                                  // Scenario 2: 3 - 1
  auto full = Eight({0, 1, 2, 3});
  EXPECT_EQ(XpuScore(Ptrs(full), {4, 5, 6, 7}, true), 2000);  // 1 - 1
  EXPECT_EQ(XpuScore(Ptrs(full), {4}, false), 0);             // a pick of another vendor
  auto other = Eight({}, "XPU");
  EXPECT_EQ(XpuScore(Ptrs(other), {4}, true), 0);  // a node device of another vendor
}

TEST(KunlunXpu, PatchAnnotations) {
  protocol::PodDevices pd = {
      {{.uuid = "n-kunlun-0", .type = "kunlun", .usedmem = 98304, .usedcores = 100},
       {.uuid = "n-kunlun-4", .type = "kunlun", .usedmem = 98304, .usedcores = 100}},
      {}};
  std::map<std::string, uint64_t> idx = {{"n-kunlun-0", 0}, {"n-kunlun-4", 4}};
  EXPECT_EQ(XpuPatchAnnotations(pd, idx),
            (StringMap{{"hami.io/kunlun-allocated",
                        "n-kunlun-0,kunlun,98304,100:n-kunlun-4,kunlun,98304,100:;;"},
                       {"BAIDU_COM_DEVICE_IDX", "0,4"}}));
  EXPECT_TRUE(XpuPatchAnnotations({{}, {}}, idx).empty());
}

// ---- XPU (virtual) ----

TEST(KunlunVxpu, TrimMemory) {  // Test_trimMemory
  EXPECT_EQ(TrimMemory(0), 24576);
  EXPECT_EQ(TrimMemory(24576), 24576);
  EXPECT_EQ(TrimMemory(24577), 49152);
  EXPECT_EQ(TrimMemory(49152), 49152);
  EXPECT_EQ(TrimMemory(49153), 98304);
  EXPECT_EQ(TrimMemory(200000), 98304);
}

TEST(KunlunVxpu, MutateAdmission) {  // Test_MutateAdmission
  KunlunConfig cfg;
  ContainerView none = Ctr({{"cpu", "1"}});
  EXPECT_FALSE(*VxpuMutateAdmission(cfg, &none));
  ContainerView count_only = Ctr({{"kunlunxin.com/vxpu", "1"}});
  EXPECT_TRUE(*VxpuMutateAdmission(cfg, &count_only));
  EXPECT_EQ(count_only, Ctr({{"kunlunxin.com/vxpu", "1"}}));
  ContainerView trimmed =
      Ctr({{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", "30000"}});
  EXPECT_TRUE(*VxpuMutateAdmission(cfg, &trimmed));
  EXPECT_EQ(trimmed.limits["kunlunxin.com/vxpu-memory"], "49152");
  EXPECT_EQ(trimmed.requests["kunlunxin.com/vxpu-memory"], "49152");
  ContainerView bad = Ctr({{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", "much"}});
  auto err = VxpuMutateAdmission(cfg, &bad);
  ASSERT_FALSE(err);
  EXPECT_NE(err.error().find("\"much\""), std::string::npos) << err.error();
  EXPECT_EQ(bad.limits["kunlunxin.com/vxpu-memory"], "much");  // untouched
}

TEST(KunlunVxpu, NormalizeRequest) {  // Test_KunlunVDevices_GenerateResourceRequests
  KunlunConfig cfg;
  EXPECT_EQ(*VxpuNormalizeRequest(cfg, Ctr({{"cpu", "1"}})), DeviceRequest{});
  EXPECT_EQ(
      *VxpuNormalizeRequest(cfg, Ctr({{"kunlunxin.com/vxpu", "1"}})),
      (DeviceRequest{
          .nums = 1, .type = "XPU", .memreq = 98304, .mem_percentage = 100, .coresreq = 100}));
  EXPECT_EQ(*VxpuNormalizeRequest(
                cfg, Ctr({{"kunlunxin.com/vxpu", "2"}}, {{"kunlunxin.com/vxpu-memory", "24576"}})),
            (DeviceRequest{
                .nums = 2, .type = "XPU", .memreq = 24576, .mem_percentage = 0, .coresreq = 25}));
  EXPECT_EQ(*VxpuNormalizeRequest(
                cfg, Ctr({{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", "30000"}})),
            (DeviceRequest{
                .nums = 1, .type = "XPU", .memreq = 49152, .mem_percentage = 0, .coresreq = 50}));
  auto bad = VxpuNormalizeRequest(cfg, Ctr({{"kunlunxin.com/vxpu", "-1"}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("kunlunxin.com/vxpu"), std::string::npos) << bad.error();
}

TEST(KunlunVxpu, NodeDevices) {  // Test_GetNodeDevices
  EXPECT_TRUE(VxpuNodeDevices("n", {})->empty());
  auto invalid = VxpuNodeDevices("n", {{"hami.io/node-register-xpu", "{"}});
  ASSERT_FALSE(invalid);
  EXPECT_NE(invalid.error().find("hami.io/node-register-xpu"), std::string::npos);
  auto empty = VxpuNodeDevices("n", {{"hami.io/node-register-xpu", "[]"}});
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("no device found on node"), std::string::npos) << empty.error();
  auto ok =
      VxpuNodeDevices("n", {{"hami.io/node-register-xpu",
                             R"([{"id":"xpu-0","index":0,"count":4,"devmem":98304,"devcore":100,)"
                             R"("type":"P800","numa":0,"health":true}])"}});
  ASSERT_TRUE(ok) << ok.error();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].id, "xpu-0");
  EXPECT_EQ((*ok)[0].vendor, "XPU");
  EXPECT_EQ((*ok)[0].count, 4);
  EXPECT_EQ((*ok)[0].totalmem, 98304);
  // Every device needs an id of its own (two without one would be one device, picked twice).
  vendor_test::ExpectRegisterErrors(
      [](const std::string& v) {
        return VxpuNodeDevices("n", {{"hami.io/node-register-xpu", v}});
      },
      vendor_test::IdRuleCases("node \"n\": annotation hami.io/node-register-xpu: "));
}

TEST(KunlunVxpu, FitVxpuDirect) {  // Test_FitVXPU_direct
  DeviceRequest req{.nums = 1, .type = "XPU", .memreq = 24576};
  EXPECT_FALSE(FitVxpu(DeviceUsage{.health = true, .totalmem = 98304, .usedmem = 90000},
                       DeviceRequest{.memreq = 20000}));
  EXPECT_TRUE(FitVxpu(DeviceUsage{.health = true, .totalmem = 98304}, req));
  EXPECT_TRUE(
      FitVxpu(DeviceUsage{.health = true, .used = 2, .totalmem = 98304, .usedmem = 49152}, req));
  EXPECT_FALSE(
      FitVxpu(DeviceUsage{.health = true, .used = 1, .totalmem = 98304, .usedmem = 49152}, req));
  EXPECT_FALSE(FitVxpu(DeviceUsage{.health = false, .totalmem = 98304}, req));
}

TEST(KunlunVxpu, Fit) {  // TestKunlunVDevices_Fit_*
  PodView pod;
  FitContext ctx{.pod = &pod};
  DeviceRequest req{.nums = 1, .type = "XPU", .memreq = 24576, .coresreq = 25};

  // Mutex: every device is shared -> each would fit but is held.
  auto shared = Eight();
  for (auto& d : shared) {
    d.used = 1;
    d.usedmem = 24576;
  }
  ctx.policy.mutex = true;
  FitResult r = VxpuFit(Ptrs(shared), req, ctx);
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "8/8 ExclusiveDeviceAllocateConflict");
  ctx.policy.mutex = false;
  r = VxpuFit(Ptrs(shared), req, ctx);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0], (protocol::ContainerDevice{
                              .uuid = "xpu-0", .type = "XPU", .usedmem = 24576, .usedcores = 25}));

  // Too little memory everywhere: NumaNotFit once.
  auto small = Eight();
  for (auto& d : small) d.totalmem = 1024;
  r = VxpuFit(Ptrs(small), DeviceRequest{.nums = 1, .type = "XPU", .memreq = 2048}, ctx);
  EXPECT_EQ(r.Reason(), "1/8 NumaNotFit");

  // UUID lists.
  DeviceRequest whole{.nums = 1, .type = "XPU", .memreq = kMaxMemory};
  pod.annotations = {{"hami.io/use-xpu-uuid", "xpu-3"}};
  r = VxpuFit(Ptrs(Eight()), whole, ctx);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0].uuid, "xpu-3");
  pod.annotations = {{"baidu.com/use-gpuuuid", "xpu-2"}};
  r = VxpuFit(Ptrs(Eight()), whole, ctx);
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0].uuid, "xpu-2");
  pod.annotations = {
      {"hami.io/no-use-xpu-uuid", "xpu-0,xpu-1,xpu-2,xpu-3,xpu-4,xpu-5,xpu-6,xpu-7"}};
  r = VxpuFit(Ptrs(Eight()), whole, ctx);
  EXPECT_EQ(r.Reason(), "8/8 CardUuidMismatch");
}

TEST(KunlunXpu, KeysAreTheVendorTables) {
  auto info = protocol::FindVendor(kXpuVendorKey);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->extra_pod_keys, std::vector<std::string>{std::string(kDeviceSelectionKey)});
  auto vxpu = protocol::FindVendor(kVxpuVendorKey);
  ASSERT_TRUE(vxpu);
  EXPECT_EQ(vxpu->handshake_key, "hami.io/node-handshake-xpu");
}

}  // namespace
}  // namespace hami::device::kunlun
