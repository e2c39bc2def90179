// The /metrics text byte for byte: HAMi v2.10's names, help texts, label names (sorted, with
// zone="vGPU"), value formatting, and the legacy names with --legacy-metrics.
#include "monitor/metrics.h"

#include <chrono>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace hami::monitor {
namespace {

TEST(FormatGoFloat, MatchesGoStrconvShortest) {
  EXPECT_EQ(FormatGoFloat(0), "0");
  EXPECT_EQ(FormatGoFloat(40), "40");
  EXPECT_EQ(FormatGoFloat(999999), "999999");
  EXPECT_EQ(FormatGoFloat(1e6), "1e+06");
  EXPECT_EQ(FormatGoFloat(1048576), "1.048576e+06");
  EXPECT_EQ(FormatGoFloat(3145728000), "3.145728e+09");
  EXPECT_EQ(FormatGoFloat(12345678), "1.2345678e+07");
  EXPECT_EQ(FormatGoFloat(0.5), "0.5");
  EXPECT_EQ(FormatGoFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatGoFloat(1.5e-05), "1.5e-05");
  EXPECT_EQ(FormatGoFloat(1e21), "1e+21");
}

ContainerUsage Sample() {
  ContainerUsage c{"team-a", "train", "main", {}};
  c.region.version = 1;
  DeviceUsage d;
  d.uuid = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
  d.limit = 3145728000;
  d.context = 100;
  d.module = 20;
  d.buffer = 1048576;
  d.total = 1048696;
  d.sm_util = 40;
  c.region.devices.push_back(d);
  c.region.device_index.push_back(0);
  c.region.last_kernel_time = 1787306390;
  return c;
}

const SystemTime kNow{std::chrono::seconds(1787306400)};

TEST(RenderMetrics, HamiNamesAndLabels) {
  const std::string l =
      R"({container="main",device_uuid="GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec",namespace="team-a",pod="train",vdevice_index="0",zone="vGPU"})";
  const std::string want =
      "# HELP hami_container_device_memory_bytes Container device memory usage in bytes\n"
      "# TYPE hami_container_device_memory_bytes gauge\n"
      "hami_container_device_memory_bytes" +
      l +
      " 1.048696e+06\n"
      "# HELP hami_container_device_utilization_ratio Container device SM utilization ratio\n"
      "# TYPE hami_container_device_utilization_ratio gauge\n"
      "hami_container_device_utilization_ratio" +
      l +
      " 40\n"
      "# HELP hami_container_last_kernel_elapsed_seconds Seconds since last kernel execution in "
      "container\n"
      "# TYPE hami_container_last_kernel_elapsed_seconds gauge\n"
      "hami_container_last_kernel_elapsed_seconds" +
      l +
      " 10\n"
      "# HELP hami_vgpu_memory_buffer_bytes Container device memory buffer size in bytes\n"
      "# TYPE hami_vgpu_memory_buffer_bytes gauge\n"
      "hami_vgpu_memory_buffer_bytes" +
      l +
      " 1.048576e+06\n"
      "# HELP hami_vgpu_memory_context_bytes Container device memory context size in bytes\n"
      "# TYPE hami_vgpu_memory_context_bytes gauge\n"
      "hami_vgpu_memory_context_bytes" +
      l +
      " 100\n"
      "# HELP hami_vgpu_memory_limit_bytes vGPU device memory limit in bytes\n"
      "# TYPE hami_vgpu_memory_limit_bytes gauge\n"
      "hami_vgpu_memory_limit_bytes" +
      l +
      " 3.145728e+09\n"
      "# HELP hami_vgpu_memory_module_bytes Container device memory module size in bytes\n"
      "# TYPE hami_vgpu_memory_module_bytes gauge\n"
      "hami_vgpu_memory_module_bytes" +
      l +
      " 20\n"
      "# HELP hami_vgpu_memory_used_bytes vGPU device memory usage in bytes\n"
      "# TYPE hami_vgpu_memory_used_bytes gauge\n"
      "hami_vgpu_memory_used_bytes" +
      l + " 1.048696e+06\n";
  EXPECT_EQ(RenderMetrics({Sample()}, false, kNow), want);
}

TEST(RenderMetrics, LegacyNamesAndLabels) {
  const std::string text = RenderMetrics({Sample()}, true, kNow);
  const std::string l =
      R"(ctrname="main",deviceuuid="GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec",podname="train",podnamespace="team-a",vdeviceid="0",zone="vGPU")";
  const std::string want =
      "# HELP Device_last_kernel_of_container Container device last kernel description\n"
      "# TYPE Device_last_kernel_of_container gauge\n"
      "Device_last_kernel_of_container{" +
      l +
      "} 10\n"
      "# HELP Device_memory_desc_of_container Container device memory description\n"
      "# TYPE Device_memory_desc_of_container gauge\n"
      R"(Device_memory_desc_of_container{context="100",ctrname="main",data="1048576",deviceuuid="GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec",module="20",offset="0",podname="train",podnamespace="team-a",vdeviceid="0",zone="vGPU"} 1.048696e+06)"
      "\n"
      "# HELP Device_utilization_desc_of_container Container device utilization description\n"
      "# TYPE Device_utilization_desc_of_container gauge\n"
      "Device_utilization_desc_of_container{" +
      l + "} 40\n";
  // The legacy families sort before the hami_ ones (upper case first, as in Go).
  ASSERT_EQ(text.substr(0, want.size()), want);
  const std::string tail =
      "# HELP vGPU_device_memory_limit_in_bytes vGPU device limit\n"
      "# TYPE vGPU_device_memory_limit_in_bytes gauge\n"
      "vGPU_device_memory_limit_in_bytes{" +
      l +
      "} 3.145728e+09\n"
      "# HELP vGPU_device_memory_usage_in_bytes vGPU device usage\n"
      "# TYPE vGPU_device_memory_usage_in_bytes gauge\n"
      "vGPU_device_memory_usage_in_bytes{" +
      l + "} 1.048696e+06\n";
  ASSERT_GE(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
  // And the current names are all still there.
  EXPECT_NE(text.find("\nhami_vgpu_memory_used_bytes{container=\"main\""), std::string::npos);
  EXPECT_EQ(RenderMetrics({Sample()}, false, kNow).find("vGPU_device"), std::string::npos);
}

TEST(RenderMetrics, NoKernelYetNoElapsedSeries) {
  ContainerUsage c = Sample();
  c.region.last_kernel_time = 0;
  const std::string text = RenderMetrics({c}, true, kNow);
  EXPECT_EQ(text.find("last_kernel"), std::string::npos);
  // A kernel "in the future" (clock skew) reads 0, not a negative age.
  c.region.last_kernel_time = 1787306500;
  EXPECT_NE(RenderMetrics({c}, false, kNow)
                .find("hami_container_last_kernel_elapsed_seconds{container=\"main\",device_uuid="
                      "\"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec\",namespace=\"team-a\",pod="
                      "\"train\",vdevice_index=\"0\",zone=\"vGPU\"} 0\n"),
            std::string::npos);
  // Written by the container: the extremes give no series and no overflow (UBSan builds).
  for (int64_t t : {std::numeric_limits<int64_t>::min(), int64_t{-1}}) {
    c.region.last_kernel_time = t;
    EXPECT_EQ(RenderMetrics({c}, true, kNow).find("last_kernel"), std::string::npos);
  }
  c.region.last_kernel_time = std::numeric_limits<int64_t>::max();
  EXPECT_NE(RenderMetrics({c}, false, kNow).find("hami_container_last_kernel_elapsed_seconds"),
            std::string::npos);
}

TEST(RenderMetrics, SeriesSortedByLabelValuesAndEscaped) {
  ContainerUsage a = Sample();
  ContainerUsage b = Sample();
  b.container = "a\"b\\c";
  b.region.devices[0].total = 7;
  const std::string text = RenderMetrics({a, b}, false, kNow);
  const std::string first = R"(hami_vgpu_memory_used_bytes{container="a\"b\\c",)";
  const std::string second = R"(hami_vgpu_memory_used_bytes{container="main",)";
  ASSERT_NE(text.find(first), std::string::npos) << text;
  EXPECT_LT(text.find(first), text.find(second));
  EXPECT_EQ(RenderMetrics(std::vector<ContainerUsage>{}, true, kNow), "");
  EXPECT_EQ(RenderMetrics(MetricsInput{"node-a", {}, {}}, true, kNow), "");
}

deviceplugin::GpuSample HostGpu() {
  deviceplugin::GpuSample g;
  g.index = 1;
  g.uuid = "GPU-1";
  g.name = "Tesla T4";
  g.has_memory = true;
  g.memory_used_bytes = 2147483648;
  g.has_utilization = true;
  g.gpu_utilization = 37;
  g.memory_utilization = 12;
  return g;
}

// HAMi's host series: labels node, device_index, device_uuid, device_type ("NVIDIA-" + NVML's
// name); since v2.11 the memory controller's carries node too.
TEST(RenderMetrics, HostGpuSeries) {
  const std::string l =
      R"({device_index="1",device_type="NVIDIA-Tesla T4",device_uuid="GPU-1",node="node-a",zone="vGPU"})";
  const std::string want =
      "# HELP hami_host_gpu_memory_controller_utilization_ratio GPU memory controller utilization "
      "ratio (0-100)\n"
      "# TYPE hami_host_gpu_memory_controller_utilization_ratio gauge\n"
      "hami_host_gpu_memory_controller_utilization_ratio" +
      l +
      " 12\n"
      "# HELP hami_host_gpu_memory_used_bytes GPU device memory usage in bytes\n"
      "# TYPE hami_host_gpu_memory_used_bytes gauge\n"
      "hami_host_gpu_memory_used_bytes" +
      l +
      " 2.147483648e+09\n"
      "# HELP hami_host_gpu_utilization_ratio GPU core utilization ratio (0-100)\n"
      "# TYPE hami_host_gpu_utilization_ratio gauge\n"
      "hami_host_gpu_utilization_ratio" +
      l + " 37\n";
  EXPECT_EQ(RenderMetrics(MetricsInput{"node-a", {HostGpu()}, {}}, false, kNow), want);

  const std::string legacy = RenderMetrics(MetricsInput{"node-a", {HostGpu()}, {}}, true, kNow);
  const std::string old =
      R"({deviceidx="1",devicetype="NVIDIA-Tesla T4",deviceuuid="GPU-1",nodeid="node-a",zone="vGPU"})";
  EXPECT_NE(legacy.find("# HELP HostCoreUtilization GPU core utilization\n"
                        "# TYPE HostCoreUtilization gauge\n"
                        "HostCoreUtilization" +
                        old + " 37\n"),
            std::string::npos)
      << legacy;
  EXPECT_NE(legacy.find("# HELP HostGPUMemoryUsage GPU device memory usage\n"
                        "# TYPE HostGPUMemoryUsage gauge\n"
                        "HostGPUMemoryUsage" +
                        old + " 2.147483648e+09\n"),
            std::string::npos)
      << legacy;
}

// HAMi v2.11's temperature, power and ECC series, each present only where NVML answered.
TEST(RenderMetrics, HostSensorSeries) {
  deviceplugin::GpuSample g = HostGpu();
  g.has_temperature = true;
  g.temperature_celsius = 61;
  g.has_power = true;
  g.power_milliwatts = 70500;
  g.has_ecc_corrected = true;
  g.ecc_corrected = 3;
  g.has_ecc_uncorrected = true;
  g.ecc_uncorrected = 1;
  const std::string l =
      R"({device_index="1",device_type="NVIDIA-Tesla T4",device_uuid="GPU-1",node="node-a",zone="vGPU"})";
  const std::string text = RenderMetrics(MetricsInput{"node-a", {g}, {}}, false, kNow);
  EXPECT_NE(text.find("# TYPE hami_host_gpu_temperature_celsius gauge\n"
                      "hami_host_gpu_temperature_celsius" +
                      l + " 61\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hami_host_gpu_power_usage_watts" + l + " 70.5\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# HELP hami_host_gpu_power_usage_watts GPU power draw in watts\n"),
            std::string::npos);
  // HAMi's type is gauge (GaugeValue), labelled by error_type.
  const std::string ecc = R"({device_index="1",device_type="NVIDIA-Tesla T4",device_uuid="GPU-1",)";
  EXPECT_NE(text.find("# HELP hami_host_gpu_ecc_errors_total Lifetime aggregate ECC errors\n"
                      "# TYPE hami_host_gpu_ecc_errors_total gauge\n"
                      "hami_host_gpu_ecc_errors_total" +
                      ecc + R"(error_type="corrected",node="node-a",zone="vGPU"} 3)" +
                      "\nhami_host_gpu_ecc_errors_total" + ecc +
                      R"(error_type="uncorrected",node="node-a",zone="vGPU"} 1)" + "\n"),
            std::string::npos)
      << text;
  g.has_power = false;
  EXPECT_EQ(RenderMetrics(MetricsInput{"node-a", {g}, {}}, false, kNow).find("power"),
            std::string::npos);
}

// A GPU without memory info (unified memory) or without utilisation rates has only the series
// it can fill.
TEST(RenderMetrics, HostGpuWithoutMemoryOrUtilisation) {
  deviceplugin::GpuSample no_memory = HostGpu();
  no_memory.has_memory = false;
  std::string text = RenderMetrics(MetricsInput{"n", {no_memory}, {}}, true, kNow);
  EXPECT_EQ(text.find("hami_host_gpu_memory_used_bytes"), std::string::npos) << text;
  EXPECT_EQ(text.find("HostGPUMemoryUsage"), std::string::npos) << text;
  EXPECT_NE(text.find("hami_host_gpu_utilization_ratio{"), std::string::npos) << text;
  deviceplugin::GpuSample no_util = HostGpu();
  no_util.has_utilization = false;
  text = RenderMetrics(MetricsInput{"n", {no_util}, {}}, true, kNow);
  EXPECT_EQ(text.find("utilization_ratio"), std::string::npos) << text;
  EXPECT_EQ(text.find("HostCoreUtilization"), std::string::npos) << text;
  EXPECT_NE(text.find("hami_host_gpu_memory_used_bytes{"), std::string::npos) << text;
}

// Issue 20's cross-check: used - limit, only while the live slots use more than the limit.
TEST(RenderMetrics, ExceededBytesOnlyOverTheLimit) {
  ContainerUsage c = Sample();
  std::string text = RenderMetrics(std::vector<ContainerUsage>{c}, false, kNow);
  EXPECT_EQ(text.find("hami_vgpu_memory_exceeded_bytes"), std::string::npos) << text;
  c.region.devices[0].limit = 1048576;  // total is 1048696
  text = RenderMetrics(std::vector<ContainerUsage>{c}, false, kNow);
  EXPECT_NE(text.find("# HELP hami_vgpu_memory_exceeded_bytes vGPU device memory used beyond the "
                      "limit in bytes\n# TYPE hami_vgpu_memory_exceeded_bytes gauge\n"
                      "hami_vgpu_memory_exceeded_bytes{container=\"main\",device_uuid=\"GPU-"
                      "00552014-5c87-89ac-b1a6-7b53aa24b0ec\",namespace=\"team-a\",pod=\"train\","
                      "vdevice_index=\"0\",zone=\"vGPU\"} 120\n"),
            std::string::npos)
      << text;
  c.region.devices[0].limit = 0;  // no limit: never over
  text = RenderMetrics(std::vector<ContainerUsage>{c}, false, kNow);
  EXPECT_EQ(text.find("hami_vgpu_memory_exceeded_bytes"), std::string::npos) << text;
}

}  // namespace
}  // namespace hami::monitor
