// MetaX GPU and sGPU: vectors from HAMi v2.10 pkg/device/metax/device_test.go,
// sdevice_test.go and protocol_test.go (test names in the comments), plus the edges our version
// owns (errors instead of silently dropped requests, deterministic tie-breaks).
#include "device/vendors/metax/metax.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>
#include "support/vendor_test_util.h"

namespace hami::device::metax {
namespace {

using vendor_test::Ids;
using vendor_test::Ptrs;

// The upstream vectors' container is "c".
ContainerView Ctr(StringMap limits, StringMap requests = {}) {
  return vendor_test::NamedCtr("c", std::move(limits), std::move(requests));
}

// ---- config ----

TEST(MetaxConfig, ChartDefaultsAndErrors) {
  auto c = ParseMetaxConfig(YAML::Load(R"(
resourceCountName: "metax-tech.com/gpu"
resourceVCountName: "metax-tech.com/sgpu"
resourceVMemoryName: "metax-tech.com/vmemory"
resourceVCoreName: "metax-tech.com/vcore"
sgpuTopologyAware: false
)"));
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(*c, MetaxConfig{});
  auto renamed =
      ParseMetaxConfig(YAML::Load("resourceVCountName: x/sgpu\nsgpuTopologyAware: true"));
  ASSERT_TRUE(renamed);
  EXPECT_EQ(renamed->resource_vcount_name, "x/sgpu");
  EXPECT_TRUE(renamed->topology_aware);
  EXPECT_EQ(SgpuVendor(*renamed).count_resource, "x/sgpu");
  auto bad = ParseMetaxConfig(YAML::Load("sgpuTopologyAware: maybe"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "metax.sgpuTopologyAware: want a boolean, got \"maybe\"");
  EXPECT_FALSE(ParseMetaxConfig(YAML::Load("resourceCountName: [1]")));
}

TEST(MetaxConfig, KeysComeFromTheVendorTable) {
  EXPECT_EQ(GpuVendor().to_allocate_key, "hami.io/metax-gpu-devices-to-allocate");
  EXPECT_EQ(SgpuVendor().register_key, "metax-tech.com/node-gpu-devices");
  EXPECT_EQ(SgpuVendor().extra_pod_keys.at(0), kPodAllocatedKey);
  EXPECT_EQ(SgpuVendor().extra_pod_keys.at(2), kQosPolicyKey);
  EXPECT_EQ(SgpuVendor().extra_pod_keys.at(3), kAppClassKey);
  EXPECT_EQ(SgpuVendor().extra_pod_keys.at(4), kTopologyAwareKey);
  EXPECT_EQ(GpuVendor().extra_node_keys,
            (std::vector<std::string>{std::string(kLossesKey), std::string(kScoresKey)}));
}

// ---- Metax-GPU ----

TEST(MetaxGpu, NodeDevices) {  // TestGetNodeDevices
  auto devs = GpuNodeDevices("test", 1);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0], (DeviceUsage{.id = "test-metax-0",
                                  .index = 0,
                                  .type = "Metax-GPU",
                                  .vendor = "Metax-GPU",
                                  .health = true,
                                  .count = 1,
                                  .totalmem = 65536,
                                  .totalcore = 100}));
  EXPECT_EQ(GpuNodeDevices("n", 3)[2].id, "n-metax-2");
  EXPECT_TRUE(GpuNodeDevices("n", 0).empty());
}

TEST(MetaxGpu, Request) {  // Test_GenerateResourceRequests
  MetaxConfig c;
  EXPECT_EQ(
      *GpuRequest(c, Ctr({{"metax-tech.com/gpu", "1"}}, {{"metax-tech.com/gpu", "1"}})),
      (DeviceRequest{
          .nums = 1, .type = "Metax-GPU", .memreq = 0, .mem_percentage = 100, .coresreq = 100}));
  EXPECT_EQ(*GpuRequest(c, Ctr({})), DeviceRequest{});
  EXPECT_EQ(GpuRequest(c, Ctr({}, {{"metax-tech.com/gpu", "2"}}))->nums, 2);
  auto bad = GpuRequest(c, Ctr({{"metax-tech.com/gpu", "1.5"}}));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("container \"c\": ", 0), 0u) << bad.error();
}

TEST(MetaxGpu, TopologyValue) {  // TestParseMetaxAnnos
  const std::string annos = R"({"1":0,"2":110,"3":270,"4":540,"5":580,"6":730,"7":930,"8":1240})";
  const double want[] = {0, 110, 270, 540, 580, 730, 930, 1240};
  for (int i = 1; i <= 8; ++i) EXPECT_EQ(TopologyValue(annos, i), want[i - 1]) << i;
  EXPECT_EQ(TopologyValue(annos, 9), 0);
  EXPECT_EQ(TopologyValue("{", 1), 0);
  EXPECT_EQ(TopologyValue(R"({"x":1,"1":5})", 1), 0);  // Go cannot decode the map at all
}

TEST(MetaxGpu, ScoreNode) {  // Test_ScoreNode
  protocol::PodDevices two = {{{"test-0", "Metax-GPU", 1000, 1}, {"test-1", "Metax-GPU", 1000, 1}}};
  protocol::PodDevices one = {{{"test-0", "Metax-GPU", 1000, 1}}};
  EXPECT_EQ(
      GpuScoreNode({{std::string(kLossesKey), R"({"1":100,"2":200})"}}, two, NodePolicy::kBinpack),
      1800);
  EXPECT_EQ(
      GpuScoreNode({{std::string(kScoresKey), R"({"1":100,"2":200})"}}, one, NodePolicy::kSpread),
      1900);
  EXPECT_EQ(GpuScoreNode({{std::string(kScoresKey), R"({"1":100})"}}, one, NodePolicy::kBinpack),
            0);
}

DeviceUsage Gpu(std::string id, int32_t used = 0, int32_t usedmem = 0, int32_t usedcores = 0) {
  return DeviceUsage{.id = std::move(id),
                     .type = "Metax-GPU",
                     .vendor = "Metax-GPU",
                     .health = true,
                     .count = 100,
                     .used = used,
                     .totalmem = 128,
                     .usedmem = usedmem,
                     .totalcore = 100,
                     .usedcores = usedcores};
}

DeviceRequest GpuReq(int32_t nums, int32_t mem, int32_t cores, int32_t pct = 0) {
  return DeviceRequest{
      .nums = nums, .type = "Metax-GPU", .memreq = mem, .mem_percentage = pct, .coresreq = cores};
}

TEST(MetaxGpu, Fit) {  // TestMetaxDevices_Fit
  auto fit = [](std::vector<DeviceUsage> devs, DeviceRequest req, bool mutex = false) {
    return GpuFit(Ptrs(devs), req, nullptr, mutex);
  };
  FitResult ok = fit({Gpu("dev-0"), Gpu("dev-1")}, GpuReq(1, 64, 50));
  EXPECT_TRUE(ok.fit);
  EXPECT_EQ(Ids(ok), (std::vector<std::string>{"dev-1"}));
  EXPECT_EQ(fit({Gpu("dev-0")}, GpuReq(1, 512, 50)).Reason(), "1/1 CardInsufficientMemory");
  EXPECT_EQ(fit({Gpu("dev-0", 0, 0, 100)}, GpuReq(1, 64, 50)).Reason(), "1/1 CardInsufficientCore");
  DeviceRequest other = GpuReq(1, 64, 50);
  other.type = "NVIDIA";
  EXPECT_EQ(fit({Gpu("dev-0")}, other).Reason(), "1/1 CardTypeMismatch");
  DeviceUsage full = Gpu("dev-0", 1);
  full.count = 1;
  EXPECT_EQ(fit({full}, GpuReq(1, 64, 50)).Reason(), "1/1 CardTimeSlicingExhausted");
  FitResult clamped = fit({Gpu("dev-0")}, GpuReq(1, 64, 120));
  EXPECT_TRUE(clamped.fit);
  EXPECT_EQ(clamped.devices[0].usedcores, 100);
  EXPECT_EQ(fit({Gpu("dev-0", 1)}, GpuReq(1, 64, 100)).Reason(),
            "1/1 ExclusiveDeviceAllocateConflict");
  EXPECT_EQ(fit({Gpu("dev-0", 1, 0, 100)}, GpuReq(1, 64, 0)).Reason(),
            "1/1 CardComputeUnitsExhausted");
  EXPECT_EQ(fit({Gpu("dev-0"), Gpu("dev-1")}, GpuReq(3, 64, 20)).Reason(),
            "2/2 AllocatedCardsInsufficientRequest");
  FitResult pct = fit({Gpu("dev-0")}, GpuReq(1, 0, 0, 50));
  EXPECT_EQ(pct.devices[0].usedmem, 64);
  EXPECT_EQ(fit({Gpu("dev-0", 1)}, GpuReq(1, 64, 50), true).Reason(),
            "1/1 ExclusiveDeviceAllocateConflict");
  DeviceUsage sick = Gpu("dev-0");
  sick.health = false;
  EXPECT_EQ(fit({sick}, GpuReq(1, 64, 50)).Reason(), "1/1 CardNotHealth");
  // The webhook-normalised whole-device request on a fresh node.
  auto fresh = GpuNodeDevices("n", 2);
  EXPECT_EQ(
      Ids(GpuFit(Ptrs(fresh), *GpuRequest({}, Ctr({{"metax-tech.com/gpu", "2"}})), nullptr, false)),
      (std::vector<std::string>{"n-metax-1", "n-metax-0"}));
}

TEST(MetaxGpu, CustomFilterRule) {  // Test_CustomFilterRule
  std::vector<DeviceUsage> devs = {Gpu("dev-0"), Gpu("dev-1")};
  protocol::PodDevices same = {{{"dev-1", "Metax-GPU", 0, 0}}};
  protocol::PodDevices other = {{{"dev-9", "Metax-GPU", 0, 0}}};
  FitResult kept = GpuFit(Ptrs(devs), GpuReq(1, 0, 0, 100), &same, false);
  EXPECT_EQ(Ids(kept), (std::vector<std::string>{"dev-1"}));
  FitResult refused = GpuFit(Ptrs(devs), GpuReq(1, 0, 0, 100), &other, false);
  EXPECT_EQ(refused.Reason(), "2/2 CardNotFoundCustomFilterRule");
}

// ---- Metax-SGPU registration ----

TEST(MetaxSgpu, Decode) {  // TestGetMetaxSDevices
  auto devs = DecodeSDevices(
      R"([{"uuid": "GPU-123", "model": "sgpu", "totalDevCount": 16, "totalCompute": 100, )"
      R"("bdf": "0000:44:00.0", "totalVRam" : 32768, "numa": 1, "healthy": true, )"
      R"("qosPolicy": "fixed-share"}])");
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 1u);
  EXPECT_EQ((*devs)[0], (SDeviceInfo{.uuid = "GPU-123",
                                     .bdf = "0000:44:00.0",
                                     .model = "sgpu",
                                     .total_dev_count = 16,
                                     .total_compute = 100,
                                     .total_vram = 32768,
                                     .numa = 1,
                                     .healthy = true,
                                     .qos_policy = "fixed-share"}));
  EXPECT_FALSE(DecodeSDevices(""));            // "test Unmarshal fail"
  EXPECT_TRUE(DecodeSDevices("[]")->empty());  // "test devices len 0": no devices here
  EXPECT_TRUE(DecodeSDevices("null")->empty());
  // Go's case-insensitive keys, unknown keys and nulls.
  auto folded = DecodeSDevices(R"([{"UUID":"a","TotalVRam":5,"extra":[1],"model":null}])");
  ASSERT_TRUE(folded) << folded.error();
  EXPECT_EQ((*folded)[0].uuid, "a");
  EXPECT_EQ((*folded)[0].total_vram, 5);
}

TEST(MetaxSgpu, DecodeErrorsNameTheField) {
  auto err = [](std::string_view v) {
    auto r = DecodeSDevices(v);
    return r ? std::string() : r.error();
  };
  EXPECT_EQ(err(R"([{"uuid":"a"},{"uuid":"b","totalVRam":"x"}])"),
            "device 1: field \"totalVRam\": want an int32, got \"\\\"x\\\"\"");
  EXPECT_EQ(err(R"([{"uuid":"a","totalCompute":2147483648}])"),
            "device 0: field \"totalCompute\": want an int32, got \"2147483648\"");
  EXPECT_EQ(err(R"([{"uuid":"a","totalDevCount":-1}])"),
            "device 0: field \"totalDevCount\": must not be negative, got -1");
  EXPECT_EQ(err(R"([{"uuid":"a"},{"uuid":"a"}])"), "device 1: uuid \"a\" is listed twice");
  EXPECT_EQ(err(R"([null])"), "device 0: want an object, got \"null\"");
  EXPECT_EQ(err(R"({"uuid":"a"})"), "want a JSON list, got \"{\\\"uuid\\\":\\\"a\\\"}\"");
  EXPECT_EQ(err(R"([{"healthy":"yes"}])"),
            "device 0: field \"healthy\": want a boolean, got \"\\\"yes\\\"\"");
  // Every device needs a uuid of its own (two without one would be one device, picked twice).
  vendor_test::ExpectRegisterErrors(
      [](const std::string& v) { return DecodeSDevices(v); },
      {
          {"missing uuid", R"([{"uuid":"a"},{"totalDevCount":1}])",
           "device 1: field \"uuid\": missing"},
          {"null uuid", R"([{"UUID":null}])", "device 0: field \"uuid\": missing"},
          {"empty uuid", R"([{"uuid":""}])",
           "device 0: field \"uuid\": must not be empty, got \"\""},
          {"duplicate uuid", R"([{"uuid":"a"},{"Uuid":"a"}])",
           "device 1: uuid \"a\" is listed twice"},
      });
}

TEST(MetaxSgpu, EncodeRoundTripsAndRows) {
  std::vector<SDeviceInfo> devs = {{.uuid = "GPU-1",
                                    .model = "C500",
                                    .total_dev_count = 16,
                                    .total_compute = 100,
                                    .total_vram = 65536,
                                    .healthy = true,
                                    .qos_policy = "best-effort",
                                    .link_zone = 2},
                                   {.uuid = "GPU-2"}};
  std::string text = EncodeSDevices(devs);
  EXPECT_EQ(text, R"([{"uuid":"GPU-1","model":"C500","totalDevCount":16,"totalCompute":100,)"
                  R"("totalVRam":65536,"healthy":true,"qosPolicy":"best-effort","linkZone":2},)"
                  R"({"uuid":"GPU-2"}])");
  EXPECT_EQ(*DecodeSDevices(text), devs);
  EXPECT_EQ(EncodeSDevices({}), "[]");
  auto rows = SgpuRows(devs);  // protocol_test.go TestConvertMetaxSDeviceToHAMIDevice
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, "GPU-1");
  EXPECT_EQ(rows[0].count, 16);
  EXPECT_EQ(rows[0].totalmem, 65536);
  EXPECT_EQ(rows[0].totalcore, 100);
  EXPECT_EQ(rows[0].vendor, "Metax-SGPU");
  EXPECT_EQ(rows[0].custom_info.at("QosPolicy"), "best-effort");
  EXPECT_EQ(rows[0].custom_info.at("LinkZone"), "2");
  EXPECT_EQ(rows[0].custom_info.at("Model"), "C500");
  EXPECT_EQ(rows[1].index, 1u);
  EXPECT_FALSE(rows[1].health);
}

// ---- Metax-SGPU request and webhook ----

TEST(MetaxSgpu, Request) {  // TestGenerateResourceRequests
  MetaxConfig c;
  auto req = [&](StringMap limits) { return SgpuRequest(c, Ctr(std::move(limits))); };
  auto want = [](int32_t nums, int32_t mem, int32_t cores) {
    return DeviceRequest{.nums = nums,
                         .type = "Metax-SGPU",
                         .memreq = mem,
                         .mem_percentage = mem == 0 ? 100 : 0,
                         .coresreq = cores};
  };
  const std::string n = "metax-tech.com/sgpu", core = "metax-tech.com/vcore",
                    mem = "metax-tech.com/vmemory";
  EXPECT_EQ(*req({{n, "1"}}), want(1, 0, 100));
  EXPECT_EQ(*req({{n, "2"}}), want(2, 0, 100));
  EXPECT_EQ(*req({{n, "1"}, {core, "30"}}), want(1, 0, 30));
  EXPECT_EQ(*req({{n, "1"}, {mem, "16"}}), want(1, 16 * 1024, 100));
  EXPECT_EQ(*req({{n, "1"}, {core, "60"}, {mem, "16"}}), want(1, 16 * 1024, 60));
  EXPECT_EQ(*req({{n, "1"}, {core, "60"}, {mem, "1024Mi"}}), want(1, 1024, 60));
  EXPECT_EQ(*req({{n, "1"}, {core, "60"}, {mem, "16Gi"}}), want(1, 16 * 1024, 60));
  // Out of range: HAMi drops the container; we name it.
  EXPECT_FALSE(req({{n, "1"}, {mem, "2100001"}}));
  EXPECT_FALSE(req({{n, "2200000000"}}));
  EXPECT_FALSE(req({{n, "1"}, {core, "2200000000"}}));
  EXPECT_FALSE(req({{n, "1"}, {core, "-1"}}));
  auto neg = req({{n, "1"}, {mem, "-1"}});
  ASSERT_FALSE(neg);
  EXPECT_EQ(neg.error(),
            "container \"c\": resource metax-tech.com/vmemory value \"-1\": must not be negative");
  // Requests alone do not count (HAMi reads limits only).
  EXPECT_EQ(*SgpuRequest(c, Ctr({}, {{n, "1"}})), DeviceRequest{});
  EXPECT_EQ(*req({{n, "0"}}), DeviceRequest{});
}

TEST(MetaxSgpu, Admission) {  // TestMutateAdmission
  MetaxConfig c;
  const StringMap sgpu = {{"metax-tech.com/sgpu", "1"}};
  const std::string qos(kQosPolicyKey), app(kAppClassKey);
  EXPECT_EQ(SgpuMutate(c, Ctr({}), {{qos, "best-effort"}}), SgpuAdmission{});
  SgpuAdmission bad_qos = SgpuMutate(c, Ctr(sgpu), {{qos, "best-effortx"}});
  EXPECT_TRUE(bad_qos.asks);
  EXPECT_EQ(bad_qos.error,
            "metax-tech.com/sgpu-qos-policy must be set one of [best-effort, fixed-share, "
            "burst-share]");
  SgpuAdmission none = SgpuMutate(c, Ctr(sgpu), {});
  EXPECT_EQ(none, (SgpuAdmission{.asks = true, .set_qos_policy = "best-effort"}));
  EXPECT_EQ(SgpuMutate(c, Ctr(sgpu), {{qos, "burst-share"}}), SgpuAdmission{.asks = true});
  EXPECT_EQ(SgpuMutate(c, Ctr({{"metax-tech.com/sgpu", "2"}}), {{app, "online"}}).error,
            "app-class pod must request single device");
  EXPECT_EQ(SgpuMutate(c, Ctr(sgpu), {{app, "oNLine"}}).error,
            "metax-tech.com/sgpu-app-class must be set one of [online, offline]");
  EXPECT_EQ(SgpuMutate(c, Ctr(sgpu), {{app, "offline"}, {qos, "best-effortx"}}).error,
            bad_qos.error);
  EXPECT_EQ(SgpuMutate(c, Ctr(sgpu), {{app, "online"}, {qos, "best-effortx"}}),
            SgpuAdmission{.asks = true});
  EXPECT_EQ(SgpuMutate(c, Ctr(sgpu), {{app, "offline"}}).set_qos_policy, "best-effort");
}

// ---- Metax-SGPU fit ----

DeviceUsage Sgpu(std::string id, int32_t used = 0, std::string qos = "", int32_t zone = 0) {
  DeviceUsage d{.id = std::move(id),
                .type = "Metax-SGPU",
                .vendor = "Metax-SGPU",
                .health = true,
                .count = 100,
                .used = used,
                .totalmem = 128,
                .totalcore = 100};
  d.custom_info["QosPolicy"] = std::move(qos);
  d.custom_info["LinkZone"] = std::to_string(zone);
  return d;
}

DeviceRequest SReq(int32_t nums, int32_t mem, int32_t cores, int32_t pct = 0) {
  return DeviceRequest{
      .nums = nums, .type = "Metax-SGPU", .memreq = mem, .mem_percentage = pct, .coresreq = cores};
}

TEST(MetaxSgpu, Fit) {  // TestMetaxSDevices_Fit
  auto fit = [](std::vector<DeviceUsage> devs, DeviceRequest req, StringMap annos = {},
                bool mutex = false) { return SgpuFit(Ptrs(devs), req, annos, mutex); };
  FitResult ok = fit({Sgpu("dev-0"), Sgpu("dev-1")}, SReq(1, 64, 50));
  EXPECT_TRUE(ok.fit);
  EXPECT_EQ(Ids(ok), (std::vector<std::string>{"dev-1"}));
  EXPECT_EQ(ok.devices[0].type, "Metax-SGPU");
  EXPECT_EQ(ok.devices[0].usedcores, 50);
  EXPECT_EQ(fit({Sgpu("dev-0")}, SReq(1, 512, 50)).Reason(), "1/1 CardInsufficientMemory");
  DeviceUsage busy = Sgpu("dev-0");
  busy.usedcores = 100;
  EXPECT_EQ(fit({busy}, SReq(1, 64, 50)).Reason(), "1/1 CardInsufficientCore");
  DeviceRequest other = SReq(1, 64, 50);
  other.type = "Metax-GPU";
  EXPECT_EQ(fit({Sgpu("dev-0")}, other).Reason(), "1/1 CardTypeMismatch");
  // App classes: a used device runs ordinary pods, so online and offline pods stay off it.
  EXPECT_EQ(
      fit({Sgpu("dev-0", 1)}, SReq(1, 64, 50), {{std::string(kAppClassKey), "online"}}).Reason(),
      "1/1 CardAppClassMismatch");
  EXPECT_TRUE(fit({Sgpu("dev-0")}, SReq(1, 64, 50), {{std::string(kAppClassKey), "online"}}).fit);
  DeviceUsage sick = Sgpu("dev-0");
  sick.health = false;
  EXPECT_EQ(fit({sick}, SReq(1, 64, 50)).Reason(), "1/1 CardUnhealthy");
  DeviceUsage full = Sgpu("dev-0", 1);
  full.count = 1;
  EXPECT_EQ(fit({full}, SReq(1, 64, 50)).Reason(), "1/1 CardTimeSlicingExhausted");
  EXPECT_EQ(fit({Sgpu("dev-0", 1)}, SReq(1, 64, 100)).Reason(),
            "1/1 ExclusiveDeviceAllocateConflict");
  EXPECT_EQ(
      fit({Sgpu("dev-1")}, SReq(1, 64, 50), {{"metax-tech.com/use-gpuuuid", "dev-0"}}).Reason(),
      "1/1 CardUuidMismatch");
  EXPECT_EQ(
      fit({Sgpu("dev-0")}, SReq(1, 64, 50), {{"metax-tech.com/nouse-gpuuuid", "dev-0"}}).Reason(),
      "1/1 CardUuidMismatch");
  DeviceUsage exhausted = Sgpu("dev-0", 1);
  exhausted.usedcores = 100;
  EXPECT_EQ(fit({exhausted}, SReq(1, 64, 0)).Reason(), "1/1 CardComputeUnitsExhausted");
  EXPECT_EQ(fit({Sgpu("dev-0"), Sgpu("dev-1")}, SReq(3, 64, 20)).Reason(),
            "2/2 AllocatedCardsInsufficientRequest");
  EXPECT_EQ(fit({Sgpu("dev-0")}, SReq(1, 0, 0, 50)).devices[0].usedmem, 64);
  EXPECT_EQ(fit({Sgpu("dev-0", 1)}, SReq(1, 64, 50), {}, true).Reason(),
            "1/1 ExclusiveDeviceAllocateConflict");
  // Online pods hold no cores and skip the core checks.
  FitResult online = fit({busy}, SReq(1, 64, 50), {{std::string(kAppClassKey), "online"}});
  EXPECT_TRUE(online.fit);
  EXPECT_EQ(online.devices[0].usedcores, 0);
}

TEST(MetaxSgpu, Qos) {  // TestCheckDeviceQos
  const std::string qos(kQosPolicyKey);
  auto fit = [&](DeviceUsage d, int32_t cores, std::string want) {
    std::vector<DeviceUsage> devs = {std::move(d)};
    return SgpuFit(Ptrs(devs), SReq(1, 64, cores), {{qos, want}}, false);
  };
  EXPECT_TRUE(fit(Sgpu("d", 0, "fixed-share"), 50, "best-effort").fit);  // unused: any qos
  EXPECT_EQ(fit(Sgpu("d", 1, "fixed-share"), 50, "best-effort").Reason(),
            "1/1 CardQosPolicyMismatch");
  EXPECT_TRUE(fit(Sgpu("d", 1, "fixed-share"), 50, "fixed-share").fit);
  EXPECT_TRUE(fit(Sgpu("d", 1, ""), 50, "best-effort").fit);  // no qos yet
  // A whole-device request is not checked (it fails later as exclusive on a used device).
  EXPECT_EQ(fit(Sgpu("d", 1, "fixed-share"), 100, "best-effort").Reason(),
            "1/1 ExclusiveDeviceAllocateConflict");
}

TEST(MetaxSgpu, PrioritizeExclusive) {  // TestPrioritizeExclusiveDevices
  auto run = [](std::vector<std::pair<std::string, int32_t>> devs, size_t nums) {
    std::vector<DeviceUsage> rows;
    for (auto& [id, zone] : devs) rows.push_back(Sgpu(id, 0, "", zone));
    std::vector<std::string> out;
    for (const DeviceUsage* d : PrioritizeExclusive(Ptrs(rows), nums)) out.push_back(d->id);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(run({{"GPU-1", 1}, {"GPU-2", 1}, {"GPU-5", 2}}, 1), V{"GPU-5"});
  EXPECT_EQ(run({{"GPU-1", 1}, {"GPU-2", 1}, {"GPU-5", 2}, {"GPU-6", 2}, {"GPU-7", 2}}, 2),
            (V{"GPU-1", "GPU-2"}));
  EXPECT_EQ(
      run({{"GPU-1", 1}, {"GPU-2", 1}, {"GPU-5", 2}, {"GPU-6", 2}, {"GPU-7", 2}, {"GPU-8", 2}}, 4),
      (V{"GPU-5", "GPU-6", "GPU-7", "GPU-8"}));
  EXPECT_EQ(run({{"GPU-1", 1}, {"GPU-2", 1}, {"GPU-5", 2}, {"GPU-6", 2}, {"GPU-7", 2}}, 4),
            (V{"GPU-1", "GPU-2", "GPU-5", "GPU-6"}));
  EXPECT_EQ(run({{"GPU-5", 0}, {"GPU-6", 0}, {"GPU-7", 0}}, 2), (V{"GPU-5", "GPU-6"}));
  EXPECT_EQ(run({{"GPU-3", 0}, {"GPU-4", 0}, {"GPU-7", 1}, {"GPU-8", 1}}, 2),
            (V{"GPU-7", "GPU-8"}));
  EXPECT_EQ(run({{"GPU-3", 0}, {"GPU-4", 0}, {"GPU-6", 1}, {"GPU-7", 1}, {"GPU-8", 1}}, 4),
            (V{"GPU-6", "GPU-7", "GPU-8", "GPU-3"}));
  // Through Fit: a whole-device request without an app class, candidates scanned from the end.
  std::vector<DeviceUsage> rows = {Sgpu("a", 0, "", 1), Sgpu("b", 0, "", 2), Sgpu("c", 0, "", 2),
                                   Sgpu("d", 0, "", 1), Sgpu("e", 0, "", 1)};
  EXPECT_EQ(Ids(SgpuFit(Ptrs(rows), SReq(2, 0, 100, 100), {}, false)), (V{"c", "b"}));
  EXPECT_EQ(Ids(SgpuFit(Ptrs(rows), SReq(2, 0, 50, 100), {}, false)), (V{"e", "d"}));
}

TEST(MetaxSgpu, ExclusiveScore) {  // TestScoreExclusiveDevices
  auto prev = [](std::vector<std::tuple<std::string, int32_t, int32_t>> devs) {
    std::vector<DeviceUsage> out;
    for (auto& [id, used, zone] : devs) out.push_back(Sgpu(id, used, "", zone));
    return out;
  };
  auto pod = [](std::vector<std::string> ids) {
    protocol::ContainerDevices c;
    for (auto& id : ids) c.push_back({id, "Metax-SGPU", 0, 100});
    return protocol::PodDevices{c};
  };
  EXPECT_EQ(SgpuExclusiveScore(
                pod({"GPU-4"}),
                prev({{"GPU-1", 1, 1}, {"GPU-2", 1, 1}, {"GPU-3", 1, 1}, {"GPU-4", 0, 1}})),
            0);
  EXPECT_EQ(SgpuExclusiveScore(
                pod({"GPU-4"}),
                prev({{"GPU-1", 0, 1}, {"GPU-2", 0, 1}, {"GPU-3", 0, 1}, {"GPU-4", 0, 1}})),
            -30);
  EXPECT_EQ(SgpuExclusiveScore(
                pod({"GPU-3", "GPU-4"}),
                prev({{"GPU-1", 0, 1}, {"GPU-2", 0, 1}, {"GPU-3", 0, 1}, {"GPU-4", 0, 1}})),
            60);
  EXPECT_EQ(SgpuExclusiveScore(pod({"GPU-4", "GPU-5"}), prev({{"GPU-1", 1, 1},
                                                              {"GPU-2", 1, 1},
                                                              {"GPU-3", 1, 1},
                                                              {"GPU-4", 0, 1},
                                                              {"GPU-5", 0, 2},
                                                              {"GPU-6", 1, 2},
                                                              {"GPU-7", 1, 2},
                                                              {"GPU-8", 1, 2}})),
            0);
  EXPECT_EQ(SgpuExclusiveScore(pod({"GPU-1", "GPU-2", "GPU-3", "GPU-4"}), prev({{"GPU-1", 0, 1},
                                                                                {"GPU-2", 0, 1},
                                                                                {"GPU-3", 0, 1},
                                                                                {"GPU-4", 0, 1},
                                                                                {"GPU-5", 0, 2}})),
            600);
  EXPECT_EQ(SgpuExclusiveScore(pod({"GPU-3", "GPU-4", "GPU-5", "GPU-6"}), prev({{"GPU-2", 0, 1},
                                                                                {"GPU-3", 0, 1},
                                                                                {"GPU-4", 0, 1},
                                                                                {"GPU-5", 0, 2},
                                                                                {"GPU-6", 0, 2}})),
            180);
  std::vector<std::tuple<std::string, int32_t, int32_t>> eight;
  std::vector<std::string> ids;
  for (int i = 1; i <= 8; ++i) {
    eight.emplace_back("GPU-" + std::to_string(i), 0, i <= 4 ? 1 : 2);
    ids.push_back("GPU-" + std::to_string(i));
  }
  EXPECT_EQ(SgpuExclusiveScore(pod(ids), prev(eight)), 1200);
}

TEST(MetaxSgpu, Annotations) {  // TestConvertHAMIPodDeviceToMetaxPodDevice + PatchAnnotations
  StringMap a =
      SgpuAnnotations({{{"GPU-1", "Metax-SGPU", 1024, 30}}, {}, {{"GPU-2", "Metax-SGPU", 0, 0}}});
  EXPECT_EQ(a.at("hami.io/metax-sgpu-devices-to-allocate"),
            "GPU-1,Metax-SGPU,1024,30:;;GPU-2,Metax-SGPU,0,0:;");
  EXPECT_EQ(a.at("hami.io/metax-sgpu-devices-allocated"),
            a.at("hami.io/metax-sgpu-devices-to-allocate"));
  EXPECT_EQ(a.at("metax-tech.com/gpu-devices-allocated"),
            R"([[{"uuid":"GPU-1","compute":30,"vRam":1024}],[],[{"uuid":"GPU-2"}]])");
  EXPECT_TRUE(SgpuAnnotations({}).empty());
}

}  // namespace
}  // namespace hami::device::metax
