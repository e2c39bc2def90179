// hami-sim's monitor pieces (issue 13 item 3): the scenario's `usage:`, its pod annotation, the
// region file the sim kubelet writes (read back by the monitor's own reader), the simulated host
// GPU series, the metrics text parser the report scrapes with, and measured_memory_mib in the
// report.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "monitor/region_reader.h"
#include "sim/monitors.h"
#include "sim/report.h"
#include "sim/scenario.h"
#include "sim/usage.h"

namespace hami::sim {
namespace {

namespace fs = std::filesystem;

std::string Scenario(const std::string& container) {
  return "nodes:\n  - name: n\n    gpus: [{model: T4, memory: 15360}]\n"
         "workloads:\n  - name: w\n    containers:\n" +
         container;
}

TEST(SimUsage, ScenarioUsageParsesAndErrorsNameTheField) {
  auto s = ParseScenario(
      Scenario("      - name: main\n        resources: {nvidia.com/gpu: 1}\n"
               "        usage: {memory: 2000, utilization: 40}\n      - name: side\n"));
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_TRUE(s->workloads[0].containers[0].usage.has_value());
  EXPECT_EQ(*s->workloads[0].containers[0].usage, (SimUsage{2000, 40}));
  EXPECT_FALSE(s->workloads[0].containers[1].usage.has_value());

  auto bad = ParseScenario(Scenario("      - name: main\n        usage: {utilization: 140}\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("workloads[0].containers[0].usage.utilization"), std::string::npos)
      << bad.error();
  EXPECT_NE(bad.error().find("140"), std::string::npos) << bad.error();
  auto typo = ParseScenario(Scenario("      - name: main\n        usage: {mem: 1}\n"));
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().find("mem"), std::string::npos) << typo.error();
}

TEST(SimUsage, AnnotationRoundTripsAndRefusesJunk) {
  ContainerSpec a{"main", {}, SimUsage{2000, 40}};
  ContainerSpec b{"side", {}, std::nullopt};
  const std::string v = UsageAnnotation({a, b});
  EXPECT_EQ(v, R"({"main":{"memory":2000,"utilization":40}})");
  EXPECT_EQ(UsageAnnotation({b}), "");
  auto parsed = ParseUsageAnnotation(v);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->at("main"), (SimUsage{2000, 40}));
  for (const char* junk : {"[", "[]", R"({"m":1})", R"({"m":{"memory":-1}})",
                           R"({"m":{"utilization":101}})", R"({"m":{"cores":1}})"}) {
    auto r = ParseUsageAnnotation(junk);
    ASSERT_FALSE(r.ok()) << junk;
    EXPECT_NE(r.error().find("sim.hami.io/usage"), std::string::npos) << r.error();
  }
}

// The region the sim kubelet writes is a v1 region the monitor reads back exactly.
TEST(SimUsage, RegionFromAllocateEnvsReadsBackInTheMonitor) {
  char dir[] = "/tmp/hami-sim-usage-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::map<std::string, std::string> envs = {
      {"NVIDIA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0", "8000m"},
      {"CUDA_DEVICE_MEMORY_LIMIT_1", "8000m"},
      {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/1234.cache"}};
  UsageRegion region;
  region.usage = SimUsage{7000, 60};
  auto path = UsageRegionFor(envs, dir, "uid-1", "main", &region);
  ASSERT_TRUE(path.ok()) << path.error();
  EXPECT_EQ(*path, std::string(dir) + "/vgpu/containers/uid-1_main/1234.cache");
  fs::create_directories(fs::path(*path).parent_path());
  ASSERT_TRUE(WriteUsageRegion(*path, region).ok());
  auto read = monitor::ReadRegionFile(*path, [](int32_t) { return false; });
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_EQ(read->version, 1);
  ASSERT_EQ(read->devices.size(), 2u);
  for (size_t d = 0; d < 2; ++d) {
    EXPECT_EQ(read->devices[d].uuid, d == 0 ? "GPU-aaaa" : "GPU-bbbb");
    EXPECT_EQ(read->devices[d].limit, 8000ull << 20);
    EXPECT_EQ(read->devices[d].total, 7000ull << 20);  // hostpid 0: counted though no PID lives
    EXPECT_EQ(read->devices[d].sm_util, 60u);
  }
  EXPECT_FALSE(fs::exists(*path + ".sim-tmp"));

  auto bad = UsageRegionFor({{"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/x/1.cache"},
                             {"NVIDIA_VISIBLE_DEVICES", "/var/run/nvidia-container-devices"}},
                            dir, "u", "c", &region);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(),
            "NVIDIA_VISIBLE_DEVICES: want GPU uuids, got \"/var/run/nvidia-container-devices\"");
  auto limit = UsageRegionFor({{"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/x/1.cache"},
                               {"NVIDIA_VISIBLE_DEVICES", "GPU-a"},
                               {"CUDA_DEVICE_MEMORY_LIMIT_0", "lots"}},
                              dir, "u", "c", &region);
  ASSERT_FALSE(limit.ok());
  EXPECT_EQ(limit.error(), "CUDA_DEVICE_MEMORY_LIMIT_0: want MiB such as 2000m, got \"lots\"");
  auto missing = WriteUsageRegion(std::string(dir) + "/no/such/dir/x.cache", region);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("no/such/dir"), std::string::npos) << missing.error();
  fs::remove_all(dir);
}

TEST(SimUsage, SimulatedHostGpusSumTheRegionsOnEachGpu) {
  std::vector<deviceplugin::GpuDevice> gpus(2);
  gpus[0].index = 0;
  gpus[0].uuid = "GPU-0";
  gpus[0].model = "Tesla T4";
  gpus[1].index = 1;
  gpus[1].uuid = "GPU-1";
  gpus[1].model = "Tesla T4";
  std::vector<monitor::ContainerUsage> containers(2);
  for (int i = 0; i < 2; ++i) {
    monitor::DeviceUsage d;
    d.uuid = "GPU-0";
    d.total = 100u << 20;
    d.sm_util = 70;
    containers[i].region.devices.push_back(d);
  }
  auto host = SimulatedHostGpus(gpus, containers);
  ASSERT_EQ(host.size(), 2u);
  EXPECT_EQ(host[0].uuid, "GPU-0");
  EXPECT_EQ(host[0].name, "Tesla T4");
  EXPECT_EQ(host[0].memory_used_bytes, 200u << 20);
  EXPECT_EQ(host[0].gpu_utilization, 100u);  // 140% capped
  EXPECT_EQ(host[1].index, 1u);
  EXPECT_EQ(host[1].memory_used_bytes, 0u);
  EXPECT_EQ(host[1].gpu_utilization, 0u);
}

TEST(SimUsage, ParseMetricFamily) {
  const std::string text =
      "# HELP hami_vgpu_memory_used_bytes x\n"
      "hami_vgpu_memory_used_bytes{a=\"q\\\"x\\\\\",device_uuid=\"GPU-1\"} 1.048576e+06\n"
      "hami_vgpu_memory_used_bytes_total{a=\"b\"} 5\n"
      "hami_vgpu_memory_used_bytes 7\n";
  auto s = ParseMetricFamily(text, "hami_vgpu_memory_used_bytes");
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].labels.at("a"), "q\"x\\");
  EXPECT_EQ((*s)[0].labels.at("device_uuid"), "GPU-1");
  EXPECT_EQ((*s)[0].value, 1048576);
  EXPECT_TRUE((*s)[1].labels.empty());
  EXPECT_EQ((*s)[1].value, 7);
  auto bad = ParseMetricFamily("m{a=\"x} 1\n", "m");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "metrics line 1: bad labels: \"m{a=\\\"x} 1\"");
  auto value = ParseMetricFamily("m{a=\"x\"} lots\n", "m");
  ASSERT_FALSE(value.ok());
  EXPECT_NE(value.error().find("bad value"), std::string::npos);
}

TEST(SimUsage, ReportCarriesMeasuredMemory) {
  ReportInput in;
  ExpandedNode n;
  n.name = "n";
  deviceplugin::GpuDevice g;
  g.uuid = "GPU-0";
  g.model = "T4";
  g.memory_mib = 15360;
  n.gpus.push_back(g);
  g.uuid = "GPU-1";
  g.index = 1;
  n.gpus.push_back(g);
  in.nodes.push_back(n);
  Report without = BuildReport(in);
  EXPECT_FALSE(without.gpus[0].measured_memory_mib.has_value());
  EXPECT_FALSE(ReportToJson(without)["gpus"][0].contains("measured_memory_mib"));
  EXPECT_EQ(RenderText(without, false).find(" used / "), std::string::npos);
  in.measured = true;
  in.measured_memory_mib = {{"GPU-0", 2000}};
  Report with = BuildReport(in);
  EXPECT_EQ(with.gpus[0].measured_memory_mib, 2000);
  EXPECT_EQ(with.gpus[1].measured_memory_mib, 0);  // nothing measured on it
  const nlohmann::json j = ReportToJson(with);
  EXPECT_EQ(j["gpus"][0]["measured_memory_mib"], 2000);
  EXPECT_EQ(j["gpus"][0]["used_memory_mib"], 0);  // what the scheduler handed out
  EXPECT_NE(RenderText(with, false).find("2000 used / 0/15360 MiB"), std::string::npos)
      << RenderText(with, false);
}

}  // namespace
}  // namespace hami::sim
