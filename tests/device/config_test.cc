#include "device/config.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

TEST(DeviceConfig, DefaultsAreTheChartDefaults) {
  DeviceConfig c = DefaultDeviceConfig();
  EXPECT_EQ(c.nvidia.resource_count_name, "nvidia.com/gpu");
  EXPECT_EQ(c.nvidia.resource_memory_name, "nvidia.com/gpumem");
  EXPECT_EQ(c.nvidia.resource_memory_percentage_name, "nvidia.com/gpumem-percentage");
  EXPECT_EQ(c.nvidia.resource_core_name, "nvidia.com/gpucores");
  EXPECT_EQ(c.nvidia.resource_priority_name, "nvidia.com/priority");
  EXPECT_EQ(c.nvidia.default_memory, 0);
  EXPECT_EQ(c.nvidia.default_cores, 0);
  EXPECT_EQ(c.nvidia.default_gpu_num, 1);
  EXPECT_EQ(c.nvidia.memory_factor, 1);
  EXPECT_EQ(c.nvidia.device_split_count, 10);
  EXPECT_EQ(c.nvidia.device_memory_scaling, 1.0);
  EXPECT_EQ(c.nvidia.device_core_scaling, 1.0);
  EXPECT_EQ(c.nvidia.gpu_core_policy, "default");
  EXPECT_EQ(c.nvidia.lib_cuda_log_level, "1");
  EXPECT_FALSE(c.nvidia.overwrite_env);
  EXPECT_FALSE(c.nvidia.enable_numa_topology);
  ASSERT_EQ(c.nvidia.mig_profile_allowlist.size(), 9u);
  EXPECT_EQ(c.nvidia.mig_profile_allowlist[1].profiles,
            (std::vector<std::string>{"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"}));
  EXPECT_EQ(c.scheduler.node_scheduler_policy, "binpack");
  EXPECT_EQ(c.scheduler.gpu_scheduler_policy, "spread");
  EXPECT_TRUE(c.has_nvidia);
  EXPECT_TRUE(ValidateDeviceConfig(c));
}

// The chart's rendered nvidia section loads to the defaults.
TEST(DeviceConfig, LoadsChartRendering) {
  auto c = LoadDeviceConfig(R"(
nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  preConfiguredDeviceMemory: 0
  memoryFactor: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  enableNumaTopology: false
  gpuCorePolicy: default
  libCudaLogLevel: 1
  runtimeClassName: ""
cambricon:
  resourceCountName: cambricon.com/vmlu
iluvatars:
- chipName: MR-V100
  commonWord: MR-V100
vnpus:
  hamiVnpuCore: false
  configs:
  - chipName: 910A
    commonWord: Ascend910A
)");
  ASSERT_TRUE(c) << c.error();
  DeviceConfig want = DefaultDeviceConfig();
  EXPECT_EQ(c->nvidia, want.nvidia);
  EXPECT_EQ(c->others.at("cambricon").values.at("resourceCountName"), "cambricon.com/vmlu");
  EXPECT_EQ(c->others.at("iluvatars[0]").values.at("commonWord"), "MR-V100");
  EXPECT_EQ(c->others.at("vnpus.configs[0]").values.at("commonWord"), "Ascend910A");
  EXPECT_EQ(c->others.at("vnpus").values.at("hamiVnpuCore"), "false");
}

TEST(DeviceConfig, OverridesAndUnknownKeys) {
  auto c = LoadDeviceConfig(R"(
nvidia:
  resourceCountName: example.com/vgpu
  defaultMemory: 2048
  defaultCores: 25
  memoryFactor: 1024
  deviceSplitCount: 4
  deviceMemoryScaling: 1.5
  overwriteEnv: yes
  gpuCorePolicy: force
  futureKey: whatever
  migProfileAllowlist:
  - models: [A30]
    profiles: [1g.6gb]
scheduler:
  nodeSchedulerPolicy: spread
  gpuSchedulerPolicy: binpack,numa
)");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->nvidia.resource_count_name, "example.com/vgpu");
  EXPECT_EQ(c->nvidia.default_memory, 2048);
  EXPECT_EQ(c->nvidia.default_cores, 25);
  EXPECT_EQ(c->nvidia.memory_factor, 1024);
  EXPECT_EQ(c->nvidia.device_split_count, 4);
  EXPECT_EQ(c->nvidia.device_memory_scaling, 1.5);
  EXPECT_TRUE(c->nvidia.overwrite_env);
  EXPECT_EQ(c->nvidia.gpu_core_policy, "force");
  ASSERT_EQ(c->nvidia.mig_profile_allowlist.size(), 1u);
  EXPECT_EQ(c->nvidia.mig_profile_allowlist[0].models, std::vector<std::string>{"A30"});
  EXPECT_EQ(c->scheduler.node_scheduler_policy, "spread");
  EXPECT_EQ(c->scheduler.gpu_scheduler_policy, "binpack,numa");
  // Keys not given keep the defaults.
  EXPECT_EQ(c->nvidia.resource_memory_name, "nvidia.com/gpumem");
}

TEST(DeviceConfig, OtherVendorsOnly) {
  auto c = LoadDeviceConfig("amd:\n  resourceCountName: amd.com/gpu\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->has_nvidia);
}

// Every bad value is rejected with the YAML path of the field and the value.
TEST(DeviceConfig, RejectsBadValuesNamingThePath) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  const Case cases[] = {
      {"nvidia:\n  deviceSplitCount: x\n",
       R"(nvidia.deviceSplitCount: want a positive integer, got "x")"},
      {"nvidia:\n  deviceSplitCount: 0\n",
       R"(nvidia.deviceSplitCount: want a positive integer, got "0")"},
      {"nvidia:\n  memoryFactor: -1\n",
       R"(nvidia.memoryFactor: want a positive integer, got "-1")"},
      {"nvidia:\n  defaultCores: 101\n",
       R"(nvidia.defaultCores: want an integer 0..100, got "101")"},
      {"nvidia:\n  defaultMemory: 1.5\n",
       R"(nvidia.defaultMemory: want a non-negative integer, got "1.5")"},
      {"nvidia:\n  deviceMemoryScaling: 0\n",
       R"(nvidia.deviceMemoryScaling: want a positive number, got "0")"},
      {"nvidia:\n  deviceCoreScaling: abc\n",
       R"(nvidia.deviceCoreScaling: want a positive number, got "abc")"},
      {"nvidia:\n  overwriteEnv: maybe\n", R"(nvidia.overwriteEnv: want a boolean, got "maybe")"},
      {"nvidia:\n  gpuCorePolicy: sometimes\n",
       R"(nvidia.gpuCorePolicy: want one of default, force, disable, got "sometimes")"},
      {"nvidia:\n  resourceCountName: [a]\n",
       R"(nvidia.resourceCountName: want a string, got "<sequence>")"},
      {"nvidia:\n  migProfileAllowlist:\n  - models: [A30]\n    profiles: [big]\n",
       R"(nvidia.migProfileAllowlist[0].profiles[0]: want a MIG profile like 1g.5gb, got "big")"},
      {"nvidia:\n  migProfileAllowlist: 3\n",
       R"(nvidia.migProfileAllowlist: want a list, got "3")"},
      {"nvidia: 3\n", R"(nvidia: want a map, got "3")"},
      {"nvidia: {}\nscheduler:\n  nodeSchedulerPolicy: random\n",
       R"(scheduler.nodeSchedulerPolicy: want binpack or spread, got "random")"},
      {"nvidia: {}\niluvatars: 3\n", R"(iluvatars: want a list, got "3")"},
      {"{}", "device config: all configurations are empty"},
      {"foo: 1\n", "device config: all configurations are empty"},
      {"- a\n", R"(device config: want a map at the top level, got "<sequence>")"},
  };
  for (const auto& c : cases) {
    auto r = LoadDeviceConfig(c.yaml);
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_EQ(r.error(), c.want) << c.yaml;
  }
}

TEST(DeviceConfig, UnknownGpuPolicyIsRejected) {
  auto r = LoadDeviceConfig("nvidia: {}\nscheduler:\n  gpuSchedulerPolicy: binpack,fastest\n");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("scheduler.gpuSchedulerPolicy"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("\"fastest\""), std::string::npos) << r.error();
}

TEST(DeviceConfig, SyntaxErrorIsAValueNotAnException) {
  auto r = LoadDeviceConfig("nvidia: [unclosed\n");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("invalid YAML"), std::string::npos) << r.error();
}

TEST(DeviceConfig, ValidateChecksOverriddenFields) {
  DeviceConfig c = DefaultDeviceConfig();
  c.nvidia.device_split_count = 0;
  auto s = ValidateDeviceConfig(c);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), R"(nvidia.deviceSplitCount: want a positive integer, got "0")");
}

}  // namespace
}  // namespace hami::device
