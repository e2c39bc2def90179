// Ascend: vectors from HAMi v2.10 pkg/device/ascend/device_test.go and
// device_910c_pairing_test.go (test names in the comments), plus the edges our version owns
// (errors instead of silently dropped requests, deterministic tie-breaks).
#include "device/vendors/ascend/ascend.h"

#include <gtest/gtest.h>
#include "support/vendor_test_util.h"

namespace hami::device::ascend {
namespace {

using vendor_test::Ids;

VnpuConfig Ascend910A() {
  VnpuConfig c;
  c.common_word = "Ascend910A";
  c.resource_name = "huawei.com/Ascend910A";
  c.resource_memory_name = "huawei.com/Ascend910A-memory";
  c.memory_allocatable = 32768;
  c.memory_capacity = 32768;
  c.templates = {
      {"vir02", 2184, 2, 0}, {"vir04", 4369, 4, 0}, {"vir08", 8738, 8, 0}, {"vir16", 17476, 16, 0}};
  return c;
}

VnpuConfig Ascend910B3(std::vector<Template> templates = {}) {
  VnpuConfig c;
  c.common_word = "Ascend910B3";
  c.resource_name = "huawei.com/Ascend910B3";
  c.resource_memory_name = "huawei.com/Ascend910B3-memory";
  c.resource_core_name = "huawei.com/Ascend910B3-core";
  c.memory_allocatable = 32768;
  c.memory_capacity = 32768;
  c.templates = std::move(templates);
  return c;
}

VnpuConfig Ascend910C(bool super_pod) {
  VnpuConfig c;
  c.common_word = "Ascend910C";
  c.resource_name = "huawei.com/Ascend910C";
  c.resource_memory_name = "huawei.com/Ascend910C-memory";
  c.memory_allocatable = 65536;
  c.memory_capacity = 65536;
  c.super_pod = super_pod;
  return c;
}

// The upstream vectors' container is "c".
ContainerView Ctr(StringMap limits, StringMap requests = {}) {
  return vendor_test::NamedCtr("c", std::move(limits), std::move(requests));
}

// ---- config ----

TEST(AscendConfig, ChartDefaults) {
  Vnpus v = DefaultVnpus();
  EXPECT_FALSE(v.hami_vnpu_core);
  ASSERT_EQ(v.configs.size(), 7u);
  std::vector<std::string> words;
  for (const auto& c : v.configs) words.push_back(c.common_word);
  EXPECT_EQ(words,
            (std::vector<std::string>{"Ascend910A", "Ascend910B2", "Ascend910B3", "Ascend910B4-1",
                                      "Ascend910B4", "Ascend310P", "Ascend910C"}));
  const VnpuConfig& p310 = v.configs[5];
  EXPECT_EQ(p310.chip_name, "310P3");
  EXPECT_EQ(p310.memory_allocatable, 21527);
  EXPECT_EQ(p310.memory_capacity, 24576);
  EXPECT_EQ(p310.resource_core_name, "huawei.com/Ascend310P-core");
  EXPECT_EQ(p310.templates.back(), (Template{"vir04", 12288, 4, 4}));
  EXPECT_TRUE(v.configs[6].super_pod);
  EXPECT_EQ(v.configs[6].memory_factor, 0);
  EXPECT_EQ(v.configs[0].templates[0], Ascend910A().templates[0]);
}

TEST(AscendConfig, ParsesAndSortsTemplates) {  // Test_InitDevices
  auto v = ParseVnpusText(R"(
hamiVnpuCore: true
configs:
- chipName: 910B
  commonWord: Ascend910B
  resourceName: huawei.com/Ascend910B
  resourceMemoryName: huawei.com/Ascend910B-memory
  memoryAllocatable: 65536
  memoryCapacity: 65536
  aiCore: 20
  templates:
  - {name: vir10_3c_32g, memory: 32768, aiCore: 10}
  - {name: vir05_1c_16g, memory: 16384, aiCore: 5}
  superPod: yes
)");
  ASSERT_TRUE(v) << v.error();
  EXPECT_TRUE(v->hami_vnpu_core);
  ASSERT_EQ(v->configs.size(), 1u);
  EXPECT_EQ(v->configs[0].templates[0].name, "vir05_1c_16g");
  EXPECT_EQ(v->configs[0].ai_core, 20);
  EXPECT_TRUE(v->configs[0].super_pod);
}

TEST(AscendConfig, ErrorsNameThePath) {
  auto bad = ParseVnpusText("configs:\n- commonWord: A\n  memoryCapacity: x\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "vnpus.configs[0].memoryCapacity: want an integer, got \"x\"");
  auto nameless = ParseVnpusText("configs:\n- chipName: 910A\n");
  ASSERT_FALSE(nameless);
  EXPECT_NE(nameless.error().find("vnpus.configs[0].commonWord"), std::string::npos);
  auto twice = ParseVnpusText("configs:\n- commonWord: A\n- commonWord: A\n");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error(), "vnpus.configs[1].commonWord: \"A\" is listed twice");
  auto tmpl = ParseVnpusText("configs:\n- commonWord: A\n  templates: [{memory: [1]}]\n");
  ASSERT_FALSE(tmpl);
  EXPECT_NE(tmpl.error().find("vnpus.configs[0].templates[0].memory"), std::string::npos);
  // An empty section, or one without configs, has the chart's families; an empty list has none.
  EXPECT_EQ(*ParseVnpusText(""), DefaultVnpus());
  EXPECT_EQ(ParseVnpusText("{}")->configs, DefaultVnpus().configs);
  EXPECT_TRUE(ParseVnpusText("hamiVnpuCore: true")->hami_vnpu_core);
  EXPECT_TRUE(ParseVnpusText("configs: []")->configs.empty());
}

TEST(AscendConfig, Info) {
  protocol::VendorInfo info = AscendInfo(Ascend910B3());
  EXPECT_EQ(info.vendor_key, "Ascend910B3");
  EXPECT_EQ(info.register_key, "hami.io/node-register-Ascend910B3");
  EXPECT_EQ(info.handshake_key, "hami.io/node-handshake-Ascend910B3");
  EXPECT_EQ(info.to_allocate_key, "hami.io/Ascend910B3-devices-to-allocate");
  EXPECT_EQ(info.core_resource, "huawei.com/Ascend910B3-core");
}

// ---- registration ----

TEST(AscendRegister, Decodes) {  // Test_GetNodeDevices
  auto devs = DecodeRegister(
      R"([{"ID":"GPU-0","Count":4,"Devmem":8738,"Devcore":8,"Type":"huawei.com/Ascend910",)"
      R"("Numa":0,"Health":true}])");
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 1u);
  EXPECT_EQ((*devs)[0].info.id, "GPU-0");
  EXPECT_EQ((*devs)[0].info.count, 4);
  EXPECT_EQ((*devs)[0].info.devmem, 8738);
  EXPECT_EQ((*devs)[0].info.devcore, 8);
  EXPECT_EQ((*devs)[0].info.type, "huawei.com/Ascend910");
  EXPECT_TRUE((*devs)[0].info.health);
  EXPECT_EQ((*devs)[0].network_id, std::nullopt);
  EXPECT_TRUE(DecodeRegister("[]")->empty());  // "no device"
  EXPECT_FALSE(DecodeRegister(""));            // "failed to unmarshal node devices"
  // Every device needs an id of its own (two without one would be one device, picked twice).
  vendor_test::ExpectRegisterErrors([](const std::string& v) { return DecodeRegister(v); },
                                    vendor_test::IdRuleCases(""));
}

TEST(AscendRegister, NetworkId) {
  auto devs = DecodeRegister(
      R"([{"id":"a","customInfo":{"NetworkID":1}},{"id":"b","CustomInfo":{"NetworkID":2.7}},)"
      R"({"id":"c","customInfo":{"NetworkID":"x"}},{"id":"d","customInfo":null}])");
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 4u);
  EXPECT_EQ((*devs)[0].network_id, 1);
  EXPECT_EQ((*devs)[1].network_id, 2);  // Go's int(float64) truncates
  EXPECT_EQ((*devs)[2].network_id, std::nullopt);
  EXPECT_EQ((*devs)[3].network_id, std::nullopt);
  auto bad = DecodeRegister(R"([{"id":"a","customInfo":[1]}])");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "device 0: field \"customInfo\": want an object, got \"[1]\"");
}

// ---- request normalisation ----

TEST(AscendRequest, Vectors) {  // Test_GenerateResourceRequests
  VnpuConfig c = Ascend910A();
  EXPECT_EQ(*NormalizeRequest(c, Ctr({}, {})), DeviceRequest{});
  EXPECT_EQ(*NormalizeRequest(
                c, Ctr({{"huawei.com/Ascend910A", "2"}, {"huawei.com/Ascend910A-memory", "8738"}},
                       {{"huawei.com/Ascend910A", "2"}, {"huawei.com/Ascend910A-memory", "8738"}})),
            (DeviceRequest{.nums = 2, .type = "Ascend910A", .memreq = 8738, .mem_percentage = 0}));
  EXPECT_EQ(*NormalizeRequest(c, Ctr({{"huawei.com/Ascend910A", "2"}})),
            (DeviceRequest{.nums = 2, .type = "Ascend910A", .memreq = 0, .mem_percentage = 100}));
  // Requests alone count too.
  EXPECT_EQ(NormalizeRequest(c, Ctr({}, {{"huawei.com/Ascend910A", "1"}}))->nums, 1);
  EXPECT_EQ(NormalizeRequest(c, Ctr({{"huawei.com/Ascend910A", "0"}}))->nums, 0);
}

TEST(AscendRequest, CoreMode) {  // Test_GenerateResourceRequests_VNPUCoreMode
  auto r = NormalizeRequest(Ascend910B3(), Ctr({{"huawei.com/Ascend910B3", "1"},
                                                {"huawei.com/Ascend910B3-core", "10"},
                                                {"huawei.com/Ascend910B3-memory", "15360"}}));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(
      *r,
      (DeviceRequest{
          .nums = 1, .type = "Ascend910B3", .memreq = 15360, .mem_percentage = 0, .coresreq = 10}));
}

TEST(AscendRequest, MemoryFactor) {  // Test_GenerateResourceRequestsFactor
  ContainerView ctr =
      Ctr({{"huawei.com/Ascend910A", "1"}, {"huawei.com/Ascend910A-memory", "128"}});
  for (auto [factor, want] : {std::pair{10, 1280}, {100, 12800}, {0, 128}, {1, 128}}) {
    VnpuConfig c = Ascend910A();
    c.memory_factor = factor;
    EXPECT_EQ(NormalizeRequest(c, ctr)->memreq, want) << factor;
  }
}

TEST(AscendRequest, OutOfRangeIsAnError) {
  // Test_GenerateResourceRequests_OutOfRangeValues and _MemoryFactorOverflow: HAMi drops these
  // containers from scheduling; we name them.
  VnpuConfig c = Ascend910B3();
  c.memory_allocatable = c.memory_capacity = 65536;
  const std::string n = "huawei.com/Ascend910B3", mem = n + "-memory", core = n + "-core";
  auto err = [&](const VnpuConfig& cfg, StringMap limits) {
    auto r = NormalizeRequest(cfg, Ctr(std::move(limits)));
    return r ? std::string() : r.error();
  };
  EXPECT_EQ(err(c, {{n, "1"}, {core, "10"}, {mem, "16Gi"}}),
            "container \"c\": resource huawei.com/Ascend910B3-memory value \"16Gi\": exceeds "
            "2147483647; Ascend memory is counted in MiB, not bytes (ask 16384 for 16 GiB)");
  EXPECT_NE(err(c, {{n, "1"}, {mem, "16Gi"}}), "");
  EXPECT_EQ(err(c, {{n, "1"}, {mem, "-1m"}}),
            "container \"c\": resource huawei.com/Ascend910B3-memory value \"-1m\": must not be "
            "negative");
  EXPECT_NE(err(c, {{n, "1"}, {mem, "-100"}}).find("must not be negative"), std::string::npos);
  EXPECT_NE(err(c, {{n, "2200000000"}}), "");
  EXPECT_NE(err(c, {{n, "1"}, {core, "-1"}}), "");
  EXPECT_NE(err(c, {{n, "1"}, {core, "2200000000"}}), "");
  EXPECT_NE(err(c, {{n, "1"}, {mem, "1.5"}}).find("whole number of MiB"), std::string::npos);
  VnpuConfig scaled = c;
  scaled.memory_factor = 10;
  EXPECT_EQ(err(scaled, {{n, "1"}, {core, "10"}, {mem, "300000000"}}),
            "container \"c\": resource huawei.com/Ascend910B3-memory value \"300000000\": times "
            "memoryFactor 10 exceeds 2147483647 MiB");
}

// ---- webhook ----

TEST(AscendAdmission, Vectors) {  // Test_MutateAdmission
  VnpuConfig c = Ascend910A();
  const std::string n = "huawei.com/Ascend910A", mem = n + "-memory";
  Admission none = MutateAdmission(c, Ctr({}), {}, false);
  EXPECT_FALSE(none.asks);
  EXPECT_EQ(none, Admission{});

  Admission ok = MutateAdmission(c, Ctr({{n, "2"}, {mem, "8738"}}), {}, false);
  EXPECT_TRUE(ok.asks);
  // Two devices with a template slice: "vNPU not supported for multiple devices".
  EXPECT_EQ(ok.error, "vNPU not supported for multiple devices");

  Admission invalid = MutateAdmission(c, Ctr({{n, "2"}, {mem, "40000"}}), {}, false);
  EXPECT_FALSE(invalid.asks);
  EXPECT_EQ(invalid.error, "huawei.com/Ascend910A-memory 40000 is invalid");

  // Beyond the largest template but within capacity: the whole device.
  Admission whole =
      MutateAdmission(c, Ctr({{n, "1"}, {mem, "20000"}}, {{mem, "20000"}}), {}, false);
  EXPECT_TRUE(whole.asks);
  EXPECT_EQ(whole.error, std::nullopt);
  EXPECT_EQ(whole.limits, (std::map<std::string, std::string>{{mem, "32768"}}));
  EXPECT_EQ(whole.requests, (std::map<std::string, std::string>{{mem, "32768"}}));

  Admission two_whole = MutateAdmission(c, Ctr({{n, "2"}}), {}, false);
  EXPECT_EQ(two_whole.error, std::nullopt);
  EXPECT_EQ(two_whole.limits.at(mem), "32768");
}

TEST(AscendAdmission, TrimsToTemplateAndNilRequests) {  // Test_MutateAdmission_NilRequests
  VnpuConfig c = Ascend910A();
  const std::string n = "huawei.com/Ascend910A", mem = n + "-memory";
  Admission a = MutateAdmission(c, Ctr({{n, "1"}, {mem, "8738"}}), {}, false);
  EXPECT_EQ(a.requests.at(mem), "8738");
  Admission b = MutateAdmission(c, Ctr({{n, "1"}}), {}, false);
  EXPECT_EQ(b.requests.at(mem), "32768");
  Admission rounded = MutateAdmission(c, Ctr({{n, "1"}, {mem, "3000"}}), {}, false);
  EXPECT_EQ(rounded.limits.at(mem), "4369");  // up to vir04
}

TEST(AscendAdmission, SuperPod910C) {  // Test_MutateAdmission910C
  VnpuConfig c = Ascend910C(true);
  const std::string n = "huawei.com/Ascend910C";
  Admission one = MutateAdmission(c, Ctr({{n, "1"}}, {{n, "1"}}), {}, false);
  EXPECT_TRUE(one.asks);
  EXPECT_EQ(one.error, std::nullopt);
  EXPECT_EQ(one.limits.at(n), "2");
  EXPECT_EQ(one.requests.at(n), "2");
  Admission limits_only = MutateAdmission(c, Ctr({{n, "1"}}), {}, false);
  EXPECT_EQ(limits_only.limits.at(n), "2");
  EXPECT_EQ(limits_only.requests.count(n), 0u);
  Admission three = MutateAdmission(c, Ctr({{n, "3"}}, {{n, "3"}}), {}, false);
  EXPECT_FALSE(three.asks);
  EXPECT_EQ(three.error, "Ascend910C device request must be 1 or 2*n, got 3");
  Admission four = MutateAdmission(c, Ctr({{n, "4"}}, {{n, "4"}}), {}, false);
  EXPECT_TRUE(four.asks);
  EXPECT_EQ(four.error, std::nullopt);
  EXPECT_EQ(four.limits.count(n), 0u);  // unchanged
}

TEST(AscendAdmission, SplitCardIsNotPaired) {  // Test_MutateAdmission910C_VNPUSplit
  VnpuConfig c = Ascend910C(false);
  c.templates = {{"vir05_1c_16g", 16384, 5, 1}, {"vir10_3c_32g", 32768, 10, 3}};
  const std::string n = "huawei.com/Ascend910C", mem = n + "-memory";
  Admission a = MutateAdmission(c, Ctr({{n, "1"}, {mem, "16384"}}, {{n, "1"}}), {}, false);
  EXPECT_EQ(a.error, std::nullopt);
  EXPECT_EQ(a.limits.count(n), 0u);
  EXPECT_EQ(a.limits.at(mem), "16384");
  Admission odd = MutateAdmission(c, Ctr({{n, "3"}}, {{n, "3"}}), {}, false);
  EXPECT_EQ(odd.error, std::nullopt);
  EXPECT_TRUE(odd.asks);
}

TEST(AscendAdmission, SoftSplitKeepsMemory) {  // Test_MutateAdmission_VNPUCoreMode
  VnpuConfig c = Ascend910B3();
  const std::string n = "huawei.com/Ascend910B3", mem = n + "-memory", core = n + "-core";
  StringMap soft = {{"huawei.com/vnpu-mode", "hami-core"}};
  Admission a = MutateAdmission(c, Ctr({{n, "1"}, {mem, "15360"}, {core, "20"}}), soft, false);
  EXPECT_EQ(a.error, std::nullopt);
  EXPECT_EQ(a.limits.at(mem), "15360");
  EXPECT_EQ(a.limits.count(core), 0u);  // the core request stays as written
  Admission hard = MutateAdmission(c, Ctr({{n, "1"}, {mem, "15360"}}), {}, false);
  EXPECT_EQ(hard.limits.at(mem), "32768");  // no template: memoryAllocatable
}

TEST(AscendAdmission, HardSplitRejectsCore) {  // Test_MutateAdmission_HardSplitCoreRejected
  VnpuConfig c = Ascend910B3({{"vir08", 8738, 8, 0}, {"vir16", 17476, 16, 0}});
  const std::string n = "huawei.com/Ascend910B3", mem = n + "-memory", core = n + "-core";
  StringMap soft = {{"huawei.com/vnpu-mode", "hami-core"}};
  auto run = [&](std::string core_value, const StringMap& annos) {
    StringMap limits = {{n, "1"}, {mem, "8738"}};
    if (!core_value.empty()) limits[core] = core_value;
    return MutateAdmission(c, Ctr(limits, limits), annos, false).error;
  };
  EXPECT_EQ(run("10", {}),
            "huawei.com/Ascend910B3-core is only supported in hami-core (soft split) mode");
  EXPECT_NE(run("25", {}), std::nullopt);
  EXPECT_EQ(run("0", {}), std::nullopt);
  EXPECT_EQ(run("", {}), std::nullopt);
  EXPECT_EQ(run("10", soft), std::nullopt);
}

TEST(AscendAdmission, EnvAndRuntimeClass) {
  VnpuConfig c = Ascend910A();
  c.overwrite_env = true;
  c.runtime_class_name = "ascend";
  Admission none = MutateAdmission(c, Ctr({}), {}, false);
  EXPECT_EQ(none.env,
            (std::vector<std::pair<std::string, std::string>>{{"ASCEND_VISIBLE_DEVICES", ""}}));
  Admission asks = MutateAdmission(c, Ctr({{"huawei.com/Ascend910A", "1"}}), {}, false);
  EXPECT_TRUE(asks.env.empty());
  EXPECT_EQ(asks.runtime_class, "ascend");
  EXPECT_EQ(MutateAdmission(c, Ctr({{"huawei.com/Ascend910A", "1"}}), {}, true).runtime_class, "");
}

// ---- fit ----

DeviceUsage Dev(std::string id, uint64_t index = 0) {
  return DeviceUsage{.id = std::move(id),
                     .index = index,
                     .health = true,
                     .count = 100,
                     .totalmem = 128,
                     .totalcore = 100};
}

struct FitCase {
  std::vector<DeviceUsage> devices;
  std::vector<std::optional<int64_t>> networks{};  // per device; empty = none
  DeviceRequest request{};
  StringMap pod{};
  StringMap node{};
  bool mutex = false;
};

FitResult RunFit(const VnpuConfig& config, FitCase tc) {
  std::vector<Candidate> cands;
  for (size_t i = 0; i < tc.devices.size(); ++i) {
    cands.push_back({&tc.devices[i], i < tc.networks.size() ? tc.networks[i] : std::nullopt});
  }
  if (tc.request.type.empty()) tc.request.type = config.common_word;
  FitInput in{.pod_annotations = &tc.pod, .node_annotations = &tc.node, .mutex = tc.mutex};
  return Fit(config, cands, tc.request, in);
}

DeviceRequest Req(int32_t nums, int32_t mem, int32_t cores, int32_t pct = 0) {
  return DeviceRequest{.nums = nums, .memreq = mem, .mem_percentage = pct, .coresreq = cores};
}

// TestDevices_Fit, run (as upstream) for every family of the chart.
TEST(AscendFit, Vectors) {
  for (const VnpuConfig& config : DefaultVnpus().configs) {
    if (config.common_word == kAscend910C) continue;  // pairs; see Fit910C
    SCOPED_TRACE(config.common_word);
    auto fit = [&](FitCase tc) { return RunFit(config, std::move(tc)); };
    FitResult ok = fit({{Dev("dev-0"), Dev("dev-1")}, {}, Req(1, 64, 50)});
    EXPECT_TRUE(ok.fit);
    EXPECT_EQ(Ids(ok), (std::vector<std::string>{"dev-1"}));
    EXPECT_EQ(ok.devices[0].usedmem, 64);
    EXPECT_EQ(ok.devices[0].usedcores, 50);
    EXPECT_EQ(ok.devices[0].type, config.common_word);

    EXPECT_EQ(fit({{Dev("dev-0")}, {}, Req(1, 512, 50)}).Reason(), "1/1 CardInsufficientMemory");
    DeviceUsage busy = Dev("dev-0");
    busy.totalmem = 1024;
    busy.usedcores = 100;
    EXPECT_EQ(fit({{busy}, {}, Req(1, 512, 50)}).Reason(), "1/1 CardInsufficientCore");
    DeviceRequest other = Req(1, 512, 50);
    other.type = "OtherType";
    EXPECT_EQ(fit({{Dev("dev-0")}, {}, other}).Reason(), "1/1 CardTypeMismatch");

    DeviceUsage big = Dev("dev-1");
    big.totalmem = 1280;
    StringMap use = {{"hami.io/use-" + config.common_word + "-uuid", "dev-0"}};
    EXPECT_EQ(fit({{big}, {}, Req(2, 512, 50), use}).Reason(), "1/1 CardUuidMismatch");
    DeviceUsage big0 = big;
    big0.id = "dev-0";
    StringMap nouse = {{"hami.io/no-use-" + config.common_word + "-uuid", "dev-0"}};
    EXPECT_EQ(fit({{big0}, {}, Req(2, 512, 50), nouse}).Reason(), "1/1 CardUuidMismatch");

    DeviceUsage full = big;
    full.count = 1;
    full.used = 1;
    EXPECT_EQ(fit({{full}, {}, Req(1, 512, 50)}).Reason(), "1/1 CardTimeSlicingExhausted");

    FitResult clamped = fit({{big}, {}, Req(1, 512, 120)});  // core limit can't exceed 100
    EXPECT_TRUE(clamped.fit);
    EXPECT_EQ(clamped.devices[0].usedcores, 100);

    DeviceUsage shared = big;
    shared.used = 1;
    EXPECT_EQ(fit({{shared}, {}, Req(1, 512, 100)}).Reason(),
              "1/1 ExclusiveDeviceAllocateConflict");
    DeviceUsage exhausted = big;
    exhausted.used = 1;
    exhausted.usedcores = 100;
    EXPECT_EQ(fit({{exhausted}, {}, Req(1, 512, 0)}).Reason(), "1/1 CardComputeUnitsExhausted");
    EXPECT_EQ(fit({{big, big0}, {}, Req(3, 512, 20)}).Reason(),
              "2/2 AllocatedCardsInsufficientRequest");

    FitResult pct = fit({{big}, {}, Req(1, 0, 0, 50)});  // memory percentage
    EXPECT_TRUE(pct.fit);
    EXPECT_EQ(pct.devices[0].usedmem, 640);

    DeviceUsage used = Dev("dev-0");
    used.used = 1;
    EXPECT_EQ(fit({{used}, {}, Req(1, 64, 50), {}, {}, true}).Reason(),
              "1/1 ExclusiveDeviceAllocateConflict");
    DeviceUsage sick = big;
    sick.health = false;
    EXPECT_EQ(fit({{sick}, {}, Req(1, 512, 50)}).Reason(), "1/1 CardNotHealth");
  }
}

TEST(AscendFit, ByNetworkId) {               // "fit success. schedule by NetworkID"
  VnpuConfig c = DefaultVnpus().configs[1];  // 910B2
  FitResult r = RunFit(c, {{Dev("dev-0"), Dev("dev-1"), Dev("dev-2")}, {0, 1, 1}, Req(2, 64, 50)});
  EXPECT_TRUE(r.fit);
  EXPECT_EQ(Ids(r), (std::vector<std::string>{"dev-2", "dev-1"}));
  // One device with rings: the first passing one (scan from the end).
  FitResult one = RunFit(c, {{Dev("dev-0"), Dev("dev-1"), Dev("dev-2")}, {0, 1, 1}, Req(1, 64, 0)});
  EXPECT_EQ(Ids(one), (std::vector<std::string>{"dev-2"}));
  // Ties between rings go to the ring met first.
  FitResult tie =
      RunFit(c, {{Dev("a"), Dev("b"), Dev("c"), Dev("d")}, {5, 7, 5, 7}, Req(2, 64, 0)});
  EXPECT_EQ(Ids(tie), (std::vector<std::string>{"d", "b"}));
  // 310P has no HCCS rings: plain scan order.
  VnpuConfig p = DefaultVnpus().configs[5];
  FitResult plain =
      RunFit(p, {{Dev("dev-0"), Dev("dev-1"), Dev("dev-2")}, {0, 1, 1}, Req(2, 64, 0)});
  EXPECT_EQ(Ids(plain), (std::vector<std::string>{"dev-2", "dev-1"}));
  FitResult mixed = RunFit(c, {{Dev("dev-0"), Dev("dev-1"), Dev("dev-2")}, {0, 1}, Req(2, 64, 0)});
  EXPECT_EQ(Ids(mixed), (std::vector<std::string>{"dev-2", "dev-1"}));
  // Too few passing devices with rings: the shortfall reason.
  EXPECT_EQ(RunFit(c, {{Dev("dev-0")}, {0}, Req(2, 64, 0)}).Reason(),
            "1/1 AllocatedCardsInsufficientRequest");
}

TEST(AscendFit, SoftSplitNeedsNode) {  // the ModeNotFit cases of TestDevices_Fit
  VnpuConfig c = DefaultVnpus().configs[2];
  DeviceUsage d = Dev("dev-0");
  d.totalmem = 32768;
  StringMap soft = {{"huawei.com/vnpu-mode", "hami-core"}};
  StringMap node_soft = {{"hami-vnpu-core", "true"}};
  EXPECT_EQ(RunFit(c, {{d}, {}, Req(1, 15360, 20), soft}).Reason(), "1/1 ModeNotFit");
  EXPECT_TRUE(RunFit(c, {{d}, {}, Req(1, 8738, 0), {}, node_soft}).fit);
  EXPECT_EQ(RunFit(c, {{d}, {}, Req(1, 32768, 0), soft}).Reason(), "1/1 ModeNotFit");
  EXPECT_EQ(RunFit(c, {{d}, {}, Req(1, 0, 0, kPercentUnset), soft}).Reason(), "1/1 ModeNotFit");
  EXPECT_TRUE(RunFit(c, {{d}, {}, Req(1, 32768, 0), soft, node_soft}).fit);
  EXPECT_TRUE(RunFit(c, {{d}, {}, Req(1, 32768, 0), {}, node_soft}).fit);
  // The section's hamiVnpuCore is the default; the node annotation overrides it either way.
  std::vector<Candidate> cands = {{&d, std::nullopt}};
  DeviceRequest req = Req(1, 1024, 0);
  req.type = c.common_word;
  StringMap no = {{"hami-vnpu-core", "false"}};
  EXPECT_TRUE(Fit(c, cands, req, {.pod_annotations = &soft, .hami_vnpu_core = true}).fit);
  EXPECT_FALSE(Fit(c, cands, req,
                   {.pod_annotations = &soft, .node_annotations = &no, .hami_vnpu_core = true})
                   .fit);
  // Soft split counts a device as 100 cores whatever it registered.
  DeviceUsage few = d;
  few.totalcore = 20;
  EXPECT_TRUE(RunFit(c, {{few}, {}, Req(1, 1024, 50), soft, node_soft}).fit);
  EXPECT_EQ(RunFit(c, {{few}, {}, Req(1, 1024, 50), {}, node_soft}).Reason(),
            "1/1 CardInsufficientCore");
}

TEST(AscendFit, Pairs910C) {  // TestDevices_Fit_910C, device_910c_pairing_test.go
  VnpuConfig c = DefaultVnpus().configs[6];
  ASSERT_EQ(c.common_word, "Ascend910C");
  FitResult modules =
      RunFit(c, {{Dev("dev-0", 0), Dev("dev-1", 1), Dev("dev-2", 2)}, {0, 0, 0}, Req(2, 128, 100)});
  EXPECT_TRUE(modules.fit);
  EXPECT_EQ(Ids(modules), (std::vector<std::string>{"dev-1", "dev-0"}));

  auto npu = [](std::string id, uint64_t index) {
    DeviceUsage d = Dev(std::move(id), index);
    d.count = 1;
    d.totalmem = 32000;
    return d;
  };
  // TestAscend910C_FitPartialAllocationBug: only one full module among 0,1,2,4,6.
  FitResult partial = RunFit(
      c, {{npu("dev-0", 0), npu("dev-1", 1), npu("dev-2", 2), npu("dev-4", 4), npu("dev-6", 6)},
          {0, 0, 0, 0, 0},
          Req(4, 0, 0, 100)});
  EXPECT_FALSE(partial.fit);
  EXPECT_EQ(partial.Reason(), "2/4 AllocatedCardsInsufficientRequest");
  // TestAscend910C_FitExactCountBypassBug: two halves of different modules.
  FitResult halves = RunFit(c, {{npu("dev-0", 0), npu("dev-2", 2)}, {0, 0}, Req(2, 0, 0, 100)});
  EXPECT_FALSE(halves.fit);
  EXPECT_EQ(halves.reasons.count("AllocatedCardsInsufficientRequest"), 1u);
  // TestAscend910C_FitFullPairSucceeds.
  EXPECT_TRUE(RunFit(c, {{npu("dev-0", 0), npu("dev-1", 1)}, {0, 0}, Req(2, 0, 0, 100)}).fit);
  // TestAscend910C_FitWithoutNetworkID_ValidatesPairing.
  FitResult unpaired = RunFit(c, {{npu("dev-0", 0), npu("dev-2", 2)}, {}, Req(2, 0, 0, 100)});
  EXPECT_FALSE(unpaired.fit);
  EXPECT_EQ(unpaired.Reason(), "2/2 AllocatedCardsInsufficientRequest");  // HAMi: "0/2 ..."
  EXPECT_TRUE(RunFit(c, {{npu("dev-0", 0), npu("dev-1", 1)}, {}, Req(2, 0, 0, 100)}).fit);
  // TestComputeBestCombination910C_NoFullPairsReturnsEmpty.
  EXPECT_FALSE(RunFit(c, {{npu("dev-0", 0), npu("dev-2", 2), npu("dev-4", 4), npu("dev-6", 6)},
                          {},
                          Req(4, 0, 0, 100)})
                   .fit);
  // Fullest modules first; among full ones, the one met first (from the end).
  FitResult two = RunFit(
      c,
      {{npu("a", 0), npu("b", 1), npu("c", 2), npu("d", 3), npu("e", 4)}, {}, Req(2, 0, 0, 100)});
  EXPECT_EQ(Ids(two), (std::vector<std::string>{"d", "c"}));
  // One NPU on 910C is not paired (the webhook rounds superPod requests up to 2).
  FitResult single = RunFit(c, {{npu("dev-0", 0), npu("dev-2", 2)}, {}, Req(1, 0, 0, 100)});
  EXPECT_EQ(Ids(single), (std::vector<std::string>{"dev-2"}));
}

TEST(AscendFit, ZeroRequestFits) { EXPECT_TRUE(RunFit(Ascend910A(), {{}, {}, Req(0, 0, 0)}).fit); }

// ---- score ----

TEST(AscendScore, NetworkLocality) {
  VnpuConfig b = DefaultVnpus().configs[1];
  std::map<std::string, int64_t> nets = {{"a", 0}, {"b", 0}, {"c", 1}};
  auto dev = [](std::string id) { return protocol::ContainerDevice{std::move(id), "x", 0, 0}; };
  EXPECT_DOUBLE_EQ(ScoreNode(b, {{dev("a"), dev("b")}}, nets), 10);
  EXPECT_DOUBLE_EQ(ScoreNode(b, {{dev("a"), dev("c")}}, nets), 5);
  EXPECT_DOUBLE_EQ(ScoreNode(b, {{dev("a"), dev("b")}, {}, {dev("c")}}, nets), 20);
  EXPECT_DOUBLE_EQ(ScoreNode(b, {{dev("a"), dev("zz")}}, nets), 0);  // a device without a ring
  EXPECT_DOUBLE_EQ(ScoreNode(DefaultVnpus().configs[5], {{dev("a")}}, nets), 0);  // 310P
}

// ---- allocation annotations ----

TEST(AscendPatch, Vectors) {  // Test_PatchAnnotations, _VNPUCoreMode, _ZeroCore
  VnpuConfig c = Ascend910A();
  c.memory_capacity = 1024;
  StringMap a = PatchAnnotations(c, {}, {{{"device-0", "Ascend", 8738, 1}}});
  EXPECT_EQ(a, (StringMap{{"hami.io/Ascend910A-devices-to-allocate", "device-0,Ascend,8738,1:;"},
                          {"hami.io/Ascend910A-devices-allocated", "device-0,Ascend,8738,1:;"},
                          {"huawei.com/Ascend910A",
                           R"([{"UUID":"device-0","temp":"vir08","memory":8738,"core":1}])"}}));
  EXPECT_TRUE(PatchAnnotations(c, {}, {}).empty());

  VnpuConfig b = Ascend910B3();
  StringMap soft = PatchAnnotations(b, {{"huawei.com/vnpu-mode", "hami-core"}},
                                    {{{"ascend-uuid-1", "Ascend", 8192, 5}}});
  EXPECT_EQ(soft.at("huawei.com/Ascend910B3"),
            R"([{"UUID":"ascend-uuid-1","memory":8192,"core":5}])");

  c.memory_capacity = 32768;
  EXPECT_EQ(EncodeRuntimeInfo(c, false, {{{"device-zero-core", "Ascend", 8738, 0}}}),
            R"([{"UUID":"device-zero-core","temp":"vir08","memory":8738}])");
  // Past every template: no temp; several containers flatten into one list.
  EXPECT_EQ(EncodeRuntimeInfo(c, false, {{{"x", "A", 30000, 0}}, {}, {{"y", "A", 2000, 2}}}),
            R"([{"UUID":"x","memory":30000},{"UUID":"y","temp":"vir02","memory":2000,"core":2}])");
  EXPECT_EQ(EncodeRuntimeInfo(c, false, {{}}), "null");
  EXPECT_EQ(EncodeRuntimeInfo(c, true, {{{"<&>", "A", 0, 0}}}),
            R"([{"UUID":"\u003c\u0026\u003e"}])");
}

TEST(AscendPatch, RuntimeEntriesRoundTrip) {
  const std::string value =
      R"([{"UUID":"device-0","temp":"vir08","memory":8738,"core":1},{"UUID":"d1","memory":8192}])";
  auto entries = DecodeRuntimeEntries(value);
  ASSERT_TRUE(entries) << entries.error();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0], (RuntimeEntry{"device-0", "vir08", 8738, 1}));
  EXPECT_EQ((*entries)[1], (RuntimeEntry{"d1", "", 8192, 0}));
  EXPECT_EQ(EncodeRuntimeEntries(*entries), value);
  EXPECT_EQ(EncodeRuntimeEntries({}), "null");
  EXPECT_TRUE(DecodeRuntimeEntries("null")->empty());
  EXPECT_EQ((*DecodeRuntimeEntries(R"([{"uuid":"a","TEMP":"t","extra":1,"core":null}])"))[0],
            (RuntimeEntry{"a", "t", 0, 0}));
  auto err = [](std::string_view v) {
    auto r = DecodeRuntimeEntries(v);
    return r ? std::string() : r.error();
  };
  EXPECT_EQ(err(R"([{"memory":"x"}])"),
            "entry 0: field \"memory\": want an int64, got \"\\\"x\\\"\"");
  EXPECT_EQ(err(R"([{},{"core":2147483648}])"),
            "entry 1: field \"core\": want an int32, got \"2147483648\"");
  EXPECT_EQ(err(R"([{"UUID":1}])"), "entry 0: field \"UUID\": want a string, got \"1\"");
  EXPECT_EQ(err("{}"), "want a JSON list, got \"{}\"");
  EXPECT_EQ(err("[1]"), "entry 0: want an object, got \"1\"");
  EXPECT_FALSE(DecodeRuntimeEntries("nope"));
}

TEST(AscendTrim, Templates) {
  VnpuConfig c = Ascend910A();
  EXPECT_EQ(TrimMemory(c, 1), (std::pair<int64_t, std::string>{2184, "vir02"}));
  EXPECT_EQ(TrimMemory(c, 2184), (std::pair<int64_t, std::string>{2184, "vir02"}));
  EXPECT_EQ(TrimMemory(c, 2185), (std::pair<int64_t, std::string>{4369, "vir04"}));
  EXPECT_EQ(TrimMemory(c, 17477), (std::pair<int64_t, std::string>{32768, ""}));
  EXPECT_EQ(TrimMemory(c, 32769), (std::pair<int64_t, std::string>{0, ""}));
}

}  // namespace
}  // namespace hami::device::ascend
