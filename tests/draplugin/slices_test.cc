#include "draplugin/slices.h"

#include <gtest/gtest.h>

namespace hami::draplugin {
namespace {

GpuFacts A100(int minor, int64_t memory_mib = 81920) {
  GpuFacts g;
  g.gpu.uuid = "GPU-a100-" + std::to_string(minor);
  g.gpu.model = "NVIDIA A100-SXM4-80GB";
  g.gpu.memory_mib = memory_mib;
  g.attributes.minor = minor;
  g.attributes.brand = "Nvidia";
  g.attributes.architecture = "Ampere";
  g.attributes.cuda_compute_capability = "8.0.0";
  g.attributes.driver_version = "550.54.15";
  g.attributes.cuda_driver_version = "12.4.0";
  g.attributes.pcie_bus_id = "0000:07:00.0";
  return g;
}

TEST(FormatBinaryBytes, LargestExactSuffix) {
  EXPECT_EQ(FormatBinaryBytes(0), "0");
  EXPECT_EQ(FormatBinaryBytes(1023), "1023");
  EXPECT_EQ(FormatBinaryBytes(1048576), "1Mi");
  EXPECT_EQ(FormatBinaryBytes(3000LL << 20), "3000Mi");
  EXPECT_EQ(FormatBinaryBytes(81920LL << 20), "80Gi");
  EXPECT_EQ(FormatBinaryBytes(1536), "1536");  // 1.5Ki is not a whole number of Ki
}

// The device HAMi's k8s-dra-driver publishes for a GPU (hami_core.go GetDevice), field by field.
// The minor back from each name the plugin publishes (hami-sim's report maps a claim's device
// to its GPU this way); any other form is -1, never a wrong GPU.
TEST(DeviceNameMinor, ReadsBackEveryNameThePluginWrites) {
  EXPECT_EQ(DeviceNameMinor(GpuDeviceName(0)), 0);
  EXPECT_EQ(DeviceNameMinor(GpuDeviceName(13)), 13);
  EXPECT_EQ(DeviceNameMinor(CounterSetName(7)), 7);
  EXPECT_EQ(DeviceNameMinor(MigDeviceName(3, "1g.10gb", 0)), 3);
  for (const char* bad :
       {"", "hami-gpu-", "hami-gpu-x", "hami-gpu-3x", "gpu-3", "hami-gpu--1", "hami-gpu-+3",
        "hami-gpu- 3", "hami-gpu-99999999999999999999", "nvidia-gpu-0"}) {
    EXPECT_EQ(DeviceNameMinor(bad), -1) << bad;
  }
}

TEST(ShareableGpuDevice, MatchesHamisDriver) {
  Json d = ShareableGpuDevice(A100(3), 1.0);
  EXPECT_EQ(d["name"], "hami-gpu-3");
  const Json& a = d["attributes"];
  EXPECT_EQ(a["type"], Json({{"string", "hami-gpu"}}));
  EXPECT_EQ(a["uuid"], Json({{"string", "GPU-a100-3"}}));
  EXPECT_EQ(a["minor"], Json({{"int", 3}}));
  EXPECT_EQ(a["productName"], Json({{"string", "NVIDIA A100-SXM4-80GB"}}));
  EXPECT_EQ(a["brand"], Json({{"string", "Nvidia"}}));
  EXPECT_EQ(a["architecture"], Json({{"string", "Ampere"}}));
  EXPECT_EQ(a["cudaComputeCapability"], Json({{"version", "8.0.0"}}));
  EXPECT_EQ(a["driverVersion"], Json({{"version", "550.54.15"}}));
  EXPECT_EQ(a["cudaDriverVersion"], Json({{"version", "12.4.0"}}));
  EXPECT_EQ(a["pcieBusID"], Json({{"string", "0000:07:00.0"}}));
  EXPECT_EQ(d["capacity"]["cores"], Json::parse(R"({"value":"100","requestPolicy":{"default":"100",
      "validRange":{"min":"0","max":"100","step":"1"}}})"));
  EXPECT_EQ(d["capacity"]["memory"],
            Json::parse(R"({"value":"80Gi","requestPolicy":{"default":"80Gi",
      "validRange":{"min":"1Mi","max":"80Gi","step":"1Mi"}}})"));
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_FALSE(d.contains("taints"));
  // deviceMemoryScaling as the device plugin applies it; an unhealthy GPU is tainted.
  GpuFacts sick = A100(0);
  sick.gpu.healthy = false;
  Json scaled = ShareableGpuDevice(sick, 1.5);
  EXPECT_EQ(scaled["capacity"]["memory"]["value"], "120Gi");
  EXPECT_EQ(scaled["taints"],
            Json::parse(R"([{"key":"hami.io/unhealthy","effect":"NoSchedule"}])"));
}

TEST(BuildSlices, OnePoolNamedAfterTheNodeInSlicesOf128) {
  std::vector<GpuFacts> gpus;
  for (int i = 0; i < 130; ++i) gpus.push_back(A100(i));
  auto slices = BuildSlices(gpus, {"node-a", 1.0}, 7);
  ASSERT_TRUE(slices) << slices.error();
  ASSERT_EQ(slices->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Json& s = (*slices)[i];
    EXPECT_EQ(s["apiVersion"], "resource.k8s.io/v1");
    EXPECT_EQ(s["kind"], "ResourceSlice");
    EXPECT_EQ(s["metadata"]["name"], "node-a-hami-core-gpu-" + std::to_string(i));
    EXPECT_EQ(s["spec"]["driver"], "hami-core-gpu.project-hami.io");
    EXPECT_EQ(s["spec"]["nodeName"], "node-a");
    EXPECT_EQ(s["spec"]["pool"],
              Json::parse(R"({"name":"node-a","generation":7,"resourceSliceCount":2})"));
  }
  EXPECT_EQ((*slices)[0]["spec"]["devices"].size(), 128u);
  EXPECT_EQ((*slices)[1]["spec"]["devices"].size(), 2u);
  EXPECT_EQ((*slices)[1]["spec"]["devices"][1]["name"], "hami-gpu-129");
  auto none = BuildSlices({}, {"node-a", 1.0}, 1);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto twice = BuildSlices({A100(1), A100(1)}, {"node-a", 1.0}, 1);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error(), R"(ResourceSlice: two GPUs with minor 1 ("GPU-a100-1"))");
}

// A GPU in MIG mode publishes its placements, each consuming memory-slice counters of the GPU's
// counter set (in a slice of its own), and no shareable device: a claim cannot get a MIG
// instance and a share of the same GPU.
TEST(BuildSlices, MigPlacementsDrawOnTheGpusCounterSet) {
  GpuFacts mig = A100(1);
  protocol::MigProfile p1{"1g.10gb", 9728, 14, 1, {{0, 1}, {1, 1}}};
  protocol::MigProfile p3{"3g.40gb", 39936, 42, 3, {{0, 4}, {4, 4}}};
  mig.gpu.mig_profiles = {{p1, 7}, {p3, 2}};
  auto slices = BuildSlices({A100(0), mig}, {"n", 1.0}, 1);
  ASSERT_TRUE(slices) << slices.error();
  ASSERT_EQ(slices->size(), 2u);
  const Json& devices = (*slices)[1]["spec"]["devices"];
  ASSERT_EQ(devices.size(), 5u);  // hami-gpu-0, then 4 placements of GPU 1
  EXPECT_EQ(devices[0]["name"], "hami-gpu-0");
  EXPECT_EQ(devices[1]["name"], "hami-gpu-1-mig-1g-10gb-0");
  EXPECT_EQ(devices[4]["name"], "hami-gpu-1-mig-3g-40gb-4");
  EXPECT_EQ(devices[4]["attributes"]["type"], Json({{"string", "hami-mig"}}));
  EXPECT_EQ(devices[4]["attributes"]["profile"], Json({{"string", "3g.40gb"}}));
  EXPECT_EQ(devices[4]["capacity"]["memory"]["value"], "39Gi");
  EXPECT_FALSE(devices[4].contains("allowMultipleAllocations"));
  EXPECT_EQ(devices[4]["consumesCounters"],
            Json::parse(R"([{"counterSet":"hami-gpu-1-counters","counters":{
      "memory-slice-4":{"value":"1"},"memory-slice-5":{"value":"1"},
      "memory-slice-6":{"value":"1"},"memory-slice-7":{"value":"1"}}}])"));
  const Json& counters = (*slices)[0]["spec"];  // written first: the devices refer to it
  EXPECT_FALSE(counters.contains("devices"));
  ASSERT_EQ(counters["sharedCounters"].size(), 1u);
  EXPECT_EQ(counters["sharedCounters"][0]["name"], "hami-gpu-1-counters");
  EXPECT_EQ(counters["sharedCounters"][0]["counters"].size(), 8u);
}

TEST(ValidateSlice, TheApisLimitsNameTheField) {
  auto slices = BuildSlices({A100(0)}, {"n", 1.0}, 1);
  ASSERT_TRUE(slices);
  const Json good = (*slices)[0];
  auto expect = [&](Json s, const std::string& want, std::vector<std::string> sets = {}) {
    auto r = ValidateSlice(s, sets);
    ASSERT_FALSE(r) << want;
    EXPECT_EQ(r.error(), want);
  };
  Json many = good;
  for (int i = 1; i < 129; ++i) {
    Json d = good["spec"]["devices"][0];
    d["name"] = "hami-gpu-x" + std::to_string(i);
    many["spec"]["devices"].push_back(d);
  }
  expect(many, R"(ResourceSlice "n-hami-core-gpu-0": spec.devices: 129 devices, at most 128)");
  Json attrs = good;
  for (int i = 0; i < 30; ++i) {
    attrs["spec"]["devices"][0]["attributes"]["a" + std::to_string(i)] = {{"int", i}};
  }
  expect(
      attrs,
      R"(ResourceSlice "n-hami-core-gpu-0": spec.devices[0]: 42 attributes and capacities, at most 32)");
  Json policy = good;
  policy["spec"]["devices"][0].erase("allowMultipleAllocations");
  expect(
      policy,
      R"(ResourceSlice "n-hami-core-gpu-0": spec.devices[0].capacity.cores.requestPolicy: only with allowMultipleAllocations)");
  Json mixed = good;
  mixed["spec"]["sharedCounters"] = Json::parse(R"([{"name":"c","counters":{}}])");
  expect(
      mixed,
      R"(ResourceSlice "n-hami-core-gpu-0": spec.sharedCounters: only in a slice without devices)");
  Json consumes = good;
  consumes["spec"]["devices"][0]["consumesCounters"] =
      Json::parse(R"([{"counterSet":"nope","counters":{}}])");
  expect(
      consumes,
      R"(ResourceSlice "n-hami-core-gpu-0": spec.devices[0].consumesCounters[0].counterSet: no counter set "nope" in the pool)");
  Json three = good;
  three["spec"]["devices"][0]["consumesCounters"] = Json::parse(
      R"([{"counterSet":"c","counters":{}},{"counterSet":"c","counters":{}},{"counterSet":"c","counters":{}}])");
  expect(
      three,
      R"(ResourceSlice "n-hami-core-gpu-0": spec.devices[0].consumesCounters: 3 entries, at most 2)",
      {"c"});
  Json dup = good;
  dup["spec"]["devices"].push_back(good["spec"]["devices"][0]);
  expect(dup, R"(ResourceSlice "n-hami-core-gpu-0": spec.devices[1].name: duplicate "hami-gpu-0")");
  Json bad_name = good;
  bad_name["spec"]["devices"][0]["name"] = "GPU.0";
  expect(bad_name,
         R"(ResourceSlice "n-hami-core-gpu-0": spec.devices[0].name: not a DNS label: "GPU.0")");
  EXPECT_TRUE(ValidateSlice(good, {}));
}

TEST(PoolChanged, OnlyTheSpecLessItsGenerationCounts) {
  auto v1 = BuildSlices({A100(0), A100(1)}, {"n", 1.0}, 1);
  auto v2 = BuildSlices({A100(0), A100(1)}, {"n", 1.0}, 2);
  ASSERT_TRUE(v1 && v2);
  EXPECT_FALSE(PoolChanged(*v1, *v2));
  GpuFacts sick = A100(1);
  sick.gpu.healthy = false;
  auto v3 = BuildSlices({A100(0), sick}, {"n", 1.0}, 1);
  ASSERT_TRUE(v3);
  EXPECT_TRUE(PoolChanged(*v1, *v3));
  auto scaled = BuildSlices({A100(0), A100(1)}, {"n", 2.0}, 1);
  ASSERT_TRUE(scaled);
  EXPECT_TRUE(PoolChanged(*v1, *scaled));
  EXPECT_TRUE(PoolChanged(*v1, {}));
}

}  // namespace
}  // namespace hami::draplugin
