// The device plugin in `operatingmode: mig` (docs/MIG.md): profile discovery from NVML's GPU
// instance profiles and the allowlist, and the register JSON with `migProfiles`, byte for byte
// (docs/MIG.md#the-wire-compatible-with-hami-v210).
#include <gtest/gtest.h>

#include "deviceplugin/mig_profiles.h"
#include "deviceplugin/plugin_config.h"
#include "deviceplugin/register.h"
#include "protocol/node_register.h"

namespace hami::deviceplugin {
namespace {

TEST(MigProfiles, GpuInstanceProfileIdBySlices) {
  EXPECT_EQ(GpuInstanceProfileId("1g.5gb"), 0);
  EXPECT_EQ(GpuInstanceProfileId("2g.10gb"), 1);
  EXPECT_EQ(GpuInstanceProfileId("3g.20gb"), 2);
  EXPECT_EQ(GpuInstanceProfileId("4g.20gb"), 3);
  EXPECT_EQ(GpuInstanceProfileId("7g.40gb"), 4);
  EXPECT_EQ(GpuInstanceProfileId("8g.192gb"), 5);
  EXPECT_EQ(GpuInstanceProfileId("6g.90gb"), 6);
  EXPECT_EQ(GpuInstanceProfileId("5g.1gb"), -1);
  EXPECT_EQ(GpuInstanceProfileId("1g"), 0);  // the slice part alone, as HAMi's lookup
  EXPECT_EQ(GpuInstanceProfileId(""), -1);
}

TEST(MigProfiles, SimulatedA100Geometry) {
  auto gi = SimulatedGpuInstanceProfiles("NVIDIA A100-SXM4-40GB", 40960);
  ASSERT_EQ(gi.size(), 5u);
  EXPECT_EQ(gi[0],
            (GpuInstanceProfile{
                0, 1, 7, 14, 4864, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}}));
  EXPECT_EQ(gi[2].placements, (std::vector<protocol::MigPlacement>{{0, 4}, {4, 4}}));
  EXPECT_EQ(gi[4].memory_mib, 38912);
  auto a30 = SimulatedGpuInstanceProfiles("NVIDIA A30", 24576);
  ASSERT_EQ(a30.size(), 3u);
  EXPECT_EQ(a30[0].instance_count, 4u);
  EXPECT_EQ(a30[2].profile_id, 3u);
  auto h100 = SimulatedGpuInstanceProfiles("NVIDIA H100 80GB HBM3", 81920);
  EXPECT_EQ(h100[4].multiprocessors, 132u);
}

TEST(MigProfiles, AllowlistPicksNamesAndNvmlCapacity) {
  auto gi = SimulatedGpuInstanceProfiles("NVIDIA A100-SXM4-40GB", 40960);
  auto profiles =
      MigProfilesFor(device::nvidia::DefaultMigProfileAllowlist(), "NVIDIA A100-SXM4-40GB", gi);
  ASSERT_EQ(profiles.size(), 4u);  // 1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb (4g is not allowlisted)
  EXPECT_EQ(profiles[0].profile.name, "1g.5gb");
  EXPECT_EQ(profiles[0].profile.core, 15);  // ceil(14 x 100 / 98)
  EXPECT_EQ(profiles[1].profile.core, 29);
  EXPECT_EQ(profiles[2].profile.core, 43);
  EXPECT_EQ(profiles[3].profile.core, 100);
  EXPECT_EQ(profiles[3].instance_count, 1u);
  // First matching entry only; names the GPU does not offer are left out; no entry, nothing.
  std::vector<device::nvidia::MigAllowlistEntry> allow = {{{"A100"}, {"1g.5gb", "5g.30gb"}},
                                                          {{"A100"}, {"7g.40gb"}}};
  profiles = MigProfilesFor(allow, "NVIDIA A100-SXM4-40GB", gi);
  ASSERT_EQ(profiles.size(), 1u);
  EXPECT_EQ(profiles[0].profile.name, "1g.5gb");
  EXPECT_TRUE(MigProfilesFor(allow, "Tesla V100", gi).empty());
  EXPECT_TRUE(MigProfilesFor(allow, "NVIDIA a100", gi).empty());  // case-sensitive
}

TEST(MigRegister, RegisterJsonIsByteExact) {
  PluginConfig c;
  c.operating_mode = "mig";
  c.device_memory_scaling = 2;  // ignored in MIG mode
  c.device_core_scaling = 3;    // ignored in MIG mode
  GpuDevice gpu{0, "GPU-a", "NVIDIA A100-SXM4-40GB", 40960, 0, true};
  std::vector<device::nvidia::MigAllowlistEntry> allow = {
      {{"A100-SXM4-40GB"}, {"1g.5gb", "3g.20gb"}}};
  gpu.mig_profiles =
      MigProfilesFor(allow, gpu.model, SimulatedGpuInstanceProfiles(gpu.model, gpu.memory_mib));
  GpuDevice plain{1, "GPU-b", "Tesla V100-PCIE-32GB", 32768, 0, true};  // no profiles: skipped
  EXPECT_EQ(
      protocol::EncodeNodeRegister(BuildDeviceInfos({gpu, plain}, c)),
      R"([{"id":"GPU-a","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA A100-SXM4-40GB",)"
      R"("mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,)"
      R"("placements":[{"start":0,"size":1},{"start":1,"size":1},{"start":2,"size":1},)"
      R"({"start":3,"size":1},{"start":4,"size":1},{"start":5,"size":1},{"start":6,"size":1}]},)"
      R"({"name":"3g.20gb","memoryMB":19456,"core":43,"sliceCount":3,"placements":[)"
      R"({"start":0,"size":4},{"start":4,"size":4}]}],"health":true}])");
  // The same GPUs in hami-core mode register as before, without profiles.
  c.operating_mode = "hami-core";
  auto infos = BuildDeviceInfos({gpu, plain}, c);
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_TRUE(infos[0].mig_profiles.empty());
  EXPECT_EQ(infos[0].count, 10);
}

TEST(MigRegister, NodeConfigSelectsMigAndYamlCarriesTheAllowlist) {
  auto c = ApplyNodeConfigJson(R"({"nodeconfig":[{"name":"n1","operatingmode":"mig"}]})", "n1",
                               PluginConfig{});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->operating_mode, "mig");
  auto bad = ApplyNodeConfigJson(R"({"nodeconfig":[{"name":"n1","operatingmode":"mug"}]})", "n1",
                                 PluginConfig{});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "operatingmode: want \"hami-core\", \"mps\" or \"mig\", got \"mug\"");
  auto y = ApplyDeviceConfigYaml(
      "nvidia:\n  migProfileAllowlist:\n    - {models: [X1], profiles: [1g.1gb]}\n",
      PluginConfig{});
  ASSERT_TRUE(y) << y.error();
  EXPECT_EQ(y->mig_profile_allowlist,
            (std::vector<device::nvidia::MigAllowlistEntry>{{{"X1"}, {"1g.1gb"}}}));
}

}  // namespace
}  // namespace hami::deviceplugin
