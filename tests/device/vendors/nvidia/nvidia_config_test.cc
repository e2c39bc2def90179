// The `nvidia` section of device-config.yaml, parsed by the NVIDIA backend (nvidia_config.h):
// the chart's defaults, overrides, and every bad value named by its YAML path.
#include "device/vendors/nvidia/nvidia_config.h"

#include <yaml-cpp/yaml.h>

#include <gtest/gtest.h>

#include "device/config.h"
#include "device/device.h"
#include "support/config_errors.h"

namespace hami::device::nvidia {
namespace {

TEST(NvidiaConfig, DefaultsAreTheChartDefaults) {
  const NvidiaConfig c;
  EXPECT_EQ(c.resource_count_name, "nvidia.com/gpu");
  EXPECT_EQ(c.resource_memory_name, "nvidia.com/gpumem");
  EXPECT_EQ(c.resource_memory_percentage_name, "nvidia.com/gpumem-percentage");
  EXPECT_EQ(c.resource_core_name, "nvidia.com/gpucores");
  EXPECT_EQ(c.resource_priority_name, "nvidia.com/priority");
  EXPECT_EQ(c.default_memory, 0);
  EXPECT_EQ(c.default_cores, 0);
  EXPECT_EQ(c.default_gpu_num, 1);
  EXPECT_EQ(c.memory_factor, 1);
  EXPECT_EQ(c.device_split_count, 10);
  EXPECT_EQ(c.device_memory_scaling, 1.0);
  EXPECT_EQ(c.device_core_scaling, 1.0);
  EXPECT_EQ(c.gpu_core_policy, "default");
  EXPECT_EQ(c.lib_cuda_log_level, "1");
  EXPECT_FALSE(c.overwrite_env);
  EXPECT_FALSE(c.enable_numa_topology);
  ASSERT_EQ(c.mig_profile_allowlist.size(), 9u);
  EXPECT_EQ(c.mig_profile_allowlist[1].profiles,
            (std::vector<std::string>{"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"}));
  // An empty section, and the default configuration, read as these defaults.
  EXPECT_EQ(*ParseNvidiaConfig(YAML::Node()), c);
  EXPECT_EQ(NvidiaSectionOrDefaults(DefaultDeviceConfig()), c);
  EXPECT_TRUE(HasNvidiaSection(DefaultDeviceConfig()));
}

// The chart's rendered nvidia section loads to the defaults.
TEST(NvidiaConfig, LoadsChartRendering) {
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
)");
  ASSERT_TRUE(c) << c.error();
  auto nv = NvidiaConfigOf(*c);
  ASSERT_TRUE(nv) << nv.error();
  EXPECT_EQ(*nv, NvidiaConfig{});
}

TEST(NvidiaConfig, OverridesAndUnknownKeys) {
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
)");
  ASSERT_TRUE(c) << c.error();
  const NvidiaConfig nv = NvidiaSectionOrDefaults(*c);
  EXPECT_EQ(nv.resource_count_name, "example.com/vgpu");
  EXPECT_EQ(nv.default_memory, 2048);
  EXPECT_EQ(nv.default_cores, 25);
  EXPECT_EQ(nv.memory_factor, 1024);
  EXPECT_EQ(nv.device_split_count, 4);
  EXPECT_EQ(nv.device_memory_scaling, 1.5);
  EXPECT_TRUE(nv.overwrite_env);
  EXPECT_EQ(nv.gpu_core_policy, "force");
  ASSERT_EQ(nv.mig_profile_allowlist.size(), 1u);
  EXPECT_EQ(nv.mig_profile_allowlist[0].models, std::vector<std::string>{"A30"});
  // Keys not given keep the defaults.
  EXPECT_EQ(nv.resource_memory_name, "nvidia.com/gpumem");
  // The backend the factory makes carries them.
  Registry registry = MakeRegistry(*c);
  ASSERT_NE(registry.Find("NVIDIA"), nullptr);
  EXPECT_EQ(registry.Find("NVIDIA")->Info().count_resource, "example.com/vgpu");
  EXPECT_EQ(registry.Find("NVIDIA")->MemoryFactor(), 1024);
}

// Every bad value is rejected, by LoadDeviceConfig through the factory, with the YAML path of the
// field and the value.
TEST(NvidiaConfig, RejectsBadValuesNamingThePath) {
  testing::ExpectConfigErrors({
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
      {"nvidia:\n  migProfileAllowlist:\n  - models: [A30]\n    profiles: [1g.6gb, 2x.1gb]\n",
       R"(nvidia.migProfileAllowlist[0].profiles[1]: want a MIG profile like 1g.5gb, got "2x.1gb")"},
      {"nvidia:\n  migProfileAllowlist: 3\n",
       R"(nvidia.migProfileAllowlist: want a list, got "3")"},
      {"nvidia:\n  migProfileAllowlist: [3]\n",
       R"(nvidia.migProfileAllowlist[0]: want a map, got "3")"},
      {"nvidia: 3\n", R"(nvidia: want a map, got "3")"},
  });
}

// HAMi's ValidateMigProfileAllowlist runs on the parsed list: an entry naming no model or no
// profile is refused, the message naming the entry's field.
TEST(NvidiaConfig, MigAllowlistEntriesNeedAModelAndAProfile) {
  const testing::ConfigErrorCase cases[] = {
      {"nvidia:\n  migProfileAllowlist:\n  - models: [A30]\n    profiles: [1g.6gb]\n"
       "  - profiles: [1g.5gb]\n",
       "nvidia.migProfileAllowlist[1].models: want at least one model"},
      {"nvidia:\n  migProfileAllowlist:\n  - models: [A100]\n    profiles: []\n",
       "nvidia.migProfileAllowlist[0].profiles: want at least one profile"},
  };
  for (const auto& c : cases) {
    testing::ExpectConfigErrors({c});
    auto parsed = ParseNvidiaConfig(YAML::Load(c.yaml)["nvidia"]);
    ASSERT_FALSE(parsed) << c.yaml;
    EXPECT_EQ(parsed.error(), c.want) << c.yaml;
  }
  // An empty list is allowed (no GPU may be split).
  auto none = LoadDeviceConfig("nvidia:\n  migProfileAllowlist: []\n");
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(NvidiaSectionOrDefaults(*none).mig_profile_allowlist.empty());
}

TEST(NvidiaConfig, AbsentSectionReadsAsTheDefaults) {
  auto c = LoadDeviceConfig("amd: {}\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(HasNvidiaSection(*c));
  EXPECT_EQ(*NvidiaConfigOf(*c), NvidiaConfig{});
  DeviceConfig broken;
  broken.sections["nvidia"] = "{ unclosed";
  auto r = NvidiaConfigOf(broken);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("device config: nvidia: "), std::string::npos) << r.error();
  EXPECT_EQ(NvidiaSectionOrDefaults(broken), NvidiaConfig{});
}

}  // namespace
}  // namespace hami::device::nvidia
