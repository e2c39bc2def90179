// MPS mode (docs/MIG.md "MPS"): the env and mounts a container gets on top of the HAMi-core
// answer, pinned exactly; hami-core mode gets none of them.
#include <gtest/gtest.h>

#include "deviceplugin/allocate.h"
#include "deviceplugin/mps.h"

namespace hami::deviceplugin {
namespace {

AllocateEnv MpsEnv() {
  AllocateEnv env;
  env.config.operating_mode = "mps";
  env.mps_root = "/run/mps";
  return env;
}

TEST(Mps, EnvAndMountsOfAContainer) {
  auto a = BuildContainerAllocation({{"GPU-a", "NVIDIA", 3000, 30}, {"GPU-b", "NVIDIA", 2000, 30}},
                                    {"c"}, "uid-1", "id", MpsEnv());
  EXPECT_EQ(a.envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/tmp/nvidia-mps");
  EXPECT_EQ(a.envs.at("CUDA_MPS_LOG_DIRECTORY"), "/tmp/nvidia-mps-log");
  EXPECT_EQ(a.envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "30");
  EXPECT_EQ(a.envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=3000M,1=2000M");
  // The HAMi-core env stays (same path as hami-core in HAMi v2.10).
  EXPECT_EQ(a.envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(a.envs.at("CUDA_DEVICE_SM_LIMIT"), "30");
  // The first GPU's daemon, read-write.
  std::vector<MountSpec> mps;
  for (const auto& m : a.mounts) {
    if (m.container_path.rfind("/tmp/nvidia-mps", 0) == 0) mps.push_back(m);
  }
  EXPECT_EQ(mps, (std::vector<MountSpec>{{"/tmp/nvidia-mps", "/run/mps/GPU-a/pipe", false},
                                         {"/tmp/nvidia-mps-log", "/run/mps/GPU-a/log", false}}));
  // MPS variables are not limits libvgpu reads: the limits file does not carry them.
  ASSERT_FALSE(a.files.empty());
  EXPECT_EQ(a.files[0].content.find("CUDA_MPS"), std::string::npos);
}

TEST(Mps, WholeOrUnlimitedSharesSetNoPercentage) {
  for (int32_t cores : {0, 100}) {
    auto a =
        BuildContainerAllocation({{"GPU-a", "NVIDIA", 0, cores}}, {"c"}, "uid-1", "id", MpsEnv());
    EXPECT_EQ(a.envs.count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), 0u) << cores;
    EXPECT_EQ(a.envs.count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), 0u) << cores;  // no memory limit
    EXPECT_EQ(a.envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/tmp/nvidia-mps");
  }
  // Only the devices with a limit are listed, by their ordinal in the container.
  ContainerAllocation out;
  AddMpsSettings({{"GPU-a", "NVIDIA", 0, 10}, {"GPU-b", "NVIDIA", 512, 10}}, "/r", &out);
  EXPECT_EQ(out.envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "1=512M");
  ContainerAllocation none;
  AddMpsSettings({}, "/r", &none);
  EXPECT_EQ(none, ContainerAllocation{});
}

TEST(Mps, HamiCoreModeHasNoMpsSettings) {
  AllocateEnv env = MpsEnv();
  env.config.operating_mode = "hami-core";
  auto a = BuildContainerAllocation({{"GPU-a", "NVIDIA", 3000, 30}}, {"c"}, "uid-1", "id", env);
  for (const auto& [name, value] : a.envs) EXPECT_EQ(name.find("CUDA_MPS"), std::string::npos);
  for (const auto& m : a.mounts) EXPECT_EQ(m.container_path.find("nvidia-mps"), std::string::npos);
  EXPECT_EQ(MpsPipeHostDir("/run/mps", "GPU-x"), "/run/mps/GPU-x/pipe");
  EXPECT_EQ(MpsLogHostDir("/run/mps", "GPU-x"), "/run/mps/GPU-x/log");
}

}  // namespace
}  // namespace hami::deviceplugin
