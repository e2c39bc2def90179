// The §8.1 metrics as exact lines: per-device, per-pod (collapsed, container_index 0), quota used
// and limit, build info, and the legacy names with --legacy-metrics only.
#include "scheduler/metrics.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hami::scheduler {
namespace {

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device::NodeUsage node;
    node.name = "node-1";
    device::DeviceUsage d;
    d.id = "GPU-a";
    d.type = "NVIDIA-Tesla V100";
    d.vendor = "NVIDIA";
    d.health = true;
    d.count = 10;
    d.totalmem = 32768;
    d.totalcore = 100;
    node.devices.push_back(d);
    index_.SetNode(node);
    index_.UpsertPod(device::PodAllocation{
        .key = "default/p1",
        .namespace_name = "default",
        .node = "node-1",
        .deltas = {device::DeviceDelta{
            .uuid = "GPU-a", .vendor = "NVIDIA", .usedmem = 3000, .usedcores = 30, .slots = 1}}});
    input_.index = &index_;
    input_.pod_keys = {"default/p1", "default/gone"};
    input_.quotas = {{"default", "nvidia.com/gpumem", 3000, 10000, true},
                     {"default", "nvidia.com/gpucores", 30, 0, false}};
    build_ = BuildInfo{"v1", "abc", "today", "gcc 12", "linux/amd64"};
    input_.build = &build_;
  }
  bool Has(const std::string& text, const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
  }

  device::UsageIndex index_;
  MetricsInput input_;
  BuildInfo build_;
};

// A GPU in MIG mode: one line per instance the device plugin created (runtime identity
// known); a reservation not yet realised has none.
TEST(MetricsMig, InstanceInfo) {
  device::UsageIndex index;
  device::DeviceUsage d{.id = "GPU-m",
                        .index = 1,
                        .type = "NVIDIA A100-SXM4-40GB",
                        .vendor = "NVIDIA",
                        .health = true,
                        .mode = "mig",
                        .count = 7,
                        .totalmem = 40960,
                        .totalcore = 100};
  index.SetNode(device::NodeUsage{.name = "node-1", .devices = {d}});
  index.UpsertPod(device::PodAllocation{
      .key = "default/p1",
      .namespace_name = "default",
      .node = "node-1",
      .deltas = {device::DeviceDelta{
          .uuid = "GPU-m", .vendor = "NVIDIA", .usedmem = 9856, .usedcores = 29, .slots = 2}},
      .mig = {{"GPU-m", {"2g.10gb", {0, 2}, protocol::MigRuntimeIdentity{"MIG-x", 5, 0}}},
              {"GPU-m", {"1g.5gb", {6, 1}, std::nullopt}}},
      .mig_unreserved = {{"GPU-m", 0}}});
  MetricsInput input;
  input.index = &index;
  std::string text = RenderMetrics(input);
  const std::string line =
      R"(hami_node_gpu_mig_instance_info{node="node-1",device_uuid="GPU-m",device_index="1",mig_uuid="MIG-x",profile="2g.10gb",gpu_instance_id="5",compute_instance_id="0",placement_start="0",placement_size="2",zone="vGPU"} 1)";
  EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("profile=\"1g.5gb\""), std::string::npos);
  EXPECT_EQ(text.find("nodeGPUMigInstance"), std::string::npos);
  input.legacy = true;
  text = RenderMetrics(input);
  EXPECT_NE(
      text.find(
          R"(nodeGPUMigInstance{nodeid="node-1",deviceuuid="GPU-m",deviceidx="1",migname="2g.10gb-5",zone="vGPU"} 1)"),
      std::string::npos);
}

TEST_F(MetricsTest, CurrentNames) {
  std::string text = RenderMetrics(input_);
  const std::vector<std::string> want = {
      R"(hami_gpu_memory_limit_bytes{node="node-1",device_uuid="GPU-a",device_index="0",device_type="NVIDIA-Tesla V100",zone="vGPU"} 34359738368)",
      R"(hami_gpu_memory_allocated_bytes{node="node-1",device_uuid="GPU-a",device_index="0",device_cores="100",device_type="NVIDIA-Tesla V100",zone="vGPU"} 3145728000)",
      R"(hami_gpu_shared_count{node="node-1",device_uuid="GPU-a",device_index="0",device_type="NVIDIA-Tesla V100",zone="vGPU"} 1)",
      R"(hami_gpu_core_allocated_ratio{node="node-1",device_uuid="GPU-a",device_index="0",device_type="NVIDIA-Tesla V100",zone="vGPU"} 30)",
      R"(hami_vgpu_memory_allocated_bytes{namespace="default",node="node-1",pod="p1",container_index="0",device_uuid="GPU-a",zone="vGPU"} 3145728000)",
      R"(hami_vgpu_core_allocated_ratio{namespace="default",node="node-1",pod="p1",container_index="0",device_uuid="GPU-a",zone="vGPU"} 30)",
      R"(hami_resource_quota_used{namespace="default",quota_name="nvidia.com/gpumem",limit="10000",zone="vGPU"} 3000)",
      R"(hami_resource_quota_limit{namespace="default",quota_name="nvidia.com/gpumem",zone="vGPU"} 10000)",
      R"(hami_resource_quota_used{namespace="default",quota_name="nvidia.com/gpucores",limit="0",zone="vGPU"} 30)",
      R"(hami_build_info{version="v1",revision="abc",build_date="today",go_version="",compiler="gcc 12",platform="linux/amd64"} 1)",
  };
  for (const std::string& line : want) EXPECT_TRUE(Has(text, line)) << line << "\n" << text;
  // No limit metric for an unset limit, nothing for a pod the index does not hold, no legacy.
  EXPECT_EQ(text.find("quota_name=\"nvidia.com/gpucores\",zone"), std::string::npos);
  EXPECT_EQ(text.find("pod=\"gone\""), std::string::npos);
  EXPECT_EQ(text.find("vGPUMemoryAllocated"), std::string::npos);
  EXPECT_EQ(text.find("QuotaUsed"), std::string::npos);
  EXPECT_NE(text.find("# TYPE hami_build_info gauge\n"), std::string::npos);
}

TEST_F(MetricsTest, LegacyNamesOnlyWithTheFlag) {
  input_.legacy = true;
  std::string text = RenderMetrics(input_);
  const std::vector<std::string> want = {
      R"(GPUDeviceMemoryAllocated{nodeid="node-1",deviceuuid="GPU-a",deviceidx="0",devicetype="NVIDIA-Tesla V100",zone="vGPU"} 3145728000)",
      R"(nodeGPUOverview{nodeid="node-1",deviceuuid="GPU-a",deviceidx="0",devicecores="100",devicememorylimit="32768",devicetype="NVIDIA-Tesla V100",zone="vGPU"} 3145728000)",
      R"(nodeGPUMemoryPercentage{nodeid="node-1",deviceuuid="GPU-a",deviceidx="0",devicetype="NVIDIA-Tesla V100",zone="vGPU"} 0.091552734375)",
      R"(vGPUMemoryAllocated{podnamespace="default",nodename="node-1",podname="p1",containeridx="0",deviceuuid="GPU-a",zone="vGPU"} 3145728000)",
      R"(vGPUCoreAllocated{podnamespace="default",nodename="node-1",podname="p1",containeridx="0",deviceuuid="GPU-a",zone="vGPU"} 30)",
      R"(QuotaUsed{quotanamespace="default",quotaName="nvidia.com/gpumem",limit="10000",zone="vGPU"} 3000)",
  };
  for (const std::string& line : want) EXPECT_TRUE(Has(text, line)) << line << "\n" << text;
}

TEST(BuildInfoTest, NamesThisBuild) {
  BuildInfo b = ThisBuild();
  EXPECT_FALSE(b.version.empty());
  EXPECT_FALSE(b.compiler.empty());
  EXPECT_EQ(b.platform.rfind("linux/", 0), 0u);
}

}  // namespace
}  // namespace hami::scheduler
