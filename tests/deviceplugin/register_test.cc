// Node registration: the seed's two-V100 annotation byte for byte, the field rules, and the
// 30 s publish loop driven by a fake clock.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/plugin_config.h"
#include "deviceplugin/register.h"

namespace hami::deviceplugin {
namespace {

// Seed 000, "NVIDIA Device Inventory".
constexpr const char* kSeedRegister =
    R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,)"
    R"("devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core",)"
    R"("health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,)"
    R"("devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,)"
    R"("mode":"hami-core","health":true}])";

TEST(Register, SeedInventoryYieldsTheSeedAnnotation) {
  InventoryDiscovery discovery("examples/inventory/two-v100.yaml");
  auto devices = discovery.Discover();
  ASSERT_TRUE(devices) << devices.error();
  EXPECT_EQ(protocol::EncodeNodeRegister(BuildDeviceInfos(*devices, PluginConfig{})),
            kSeedRegister);
}

TEST(Register, TypePrefix) {
  EXPECT_EQ(RegisterType("Tesla V100-PCIE-32GB"), "NVIDIA-Tesla V100-PCIE-32GB");
  EXPECT_EQ(RegisterType("NVIDIA A10"), "NVIDIA A10");
  EXPECT_EQ(RegisterType("NVIDIA-H100"), "NVIDIA-H100");
  EXPECT_EQ(RegisterType("Nvidia X"), "NVIDIA-Nvidia X");
}

TEST(Register, ScalingSplitModeHealthAndPreconfiguredMemory) {
  PluginConfig c;
  c.device_split_count = 4;
  c.device_memory_scaling = 1.5;
  c.device_core_scaling = 2;
  c.operating_mode = "mps";
  c.pre_configured_device_memory = 1000;
  std::vector<GpuDevice> devices = {{0, "GPU-a", "A10", 24576, 0, false},
                                    {3, "GPU-b", "NVIDIA GH200", 0, 2, true}};
  auto infos = BuildDeviceInfos(devices, c);
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0], (protocol::DeviceInfo{.id = "GPU-a",
                                            .index = 0,
                                            .count = 4,
                                            .devmem = 36864,
                                            .devcore = 200,
                                            .type = "NVIDIA-A10",
                                            .numa = 0,
                                            .mode = "mps",
                                            .health = false}));
  EXPECT_EQ(infos[1].devmem, 1500);
  EXPECT_EQ(infos[1].index, 3u);
  EXPECT_EQ(infos[1].numa, 2);
  c.pre_configured_device_memory = 0;
  EXPECT_EQ(BuildDeviceInfos(devices, c).size(), 1u);  // no memory known: skipped
}

// A scaled size past int32 used to wrap (4294967296 MiB was published as -2147483648).
TEST(Register, ScaledMemorySaturatesAtInt32) {
  PluginConfig c;
  c.device_memory_scaling = 2;
  std::vector<GpuDevice> devices = {{0, "GPU-a", "A10", 2147483647, 0, true},
                                    {1, "GPU-b", "A10", 1073741824, 0, true}};
  auto infos = BuildDeviceInfos(devices, c);
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].devmem, 2147483647);
  EXPECT_EQ(infos[1].devmem, 2147483647);
}

TEST(Register, FilterDevicesByUuidAndIndex) {
  PluginConfig c;
  c.filter_uuids = {"GPU-b"};
  c.filter_indices = {2};
  std::vector<GpuDevice> devices = {{0, "GPU-a", "A10", 1, 0, true},
                                    {1, "GPU-b", "A10", 1, 0, true},
                                    {2, "GPU-c", "A10", 1, 0, true}};
  auto kept = FilterDevices(devices, c);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].uuid, "GPU-a");
}

class FakeDiscovery : public Discovery {
 public:
  Result<std::vector<GpuDevice>> Discover() override {
    ++calls;
    if (fail) return Error{"boom"};
    return devices;
  }
  std::string Name() const override { return "fake"; }
  std::vector<GpuDevice> devices = {{0, "GPU-a", "A10", 24576, 0, true}};
  bool fail = false;
  int calls = 0;
};

struct Writes {
  std::vector<std::pair<std::string, std::string>> list;
  bool fail = false;
  AnnotateNodeFn Fn() {
    return [this](std::string_view k, std::string_view v) -> Status {
      if (fail) return Error{"patch refused"};
      list.emplace_back(k, v);
      return OkStatus();
    };
  }
};

TEST(Publisher, PatchesOnlyWhenChangedAndOnlyEvery30Seconds) {
  FakeClock clock;
  FakeDiscovery discovery;
  Writes writes;
  RegisterPublisher pub(&discovery, PluginConfig{}, writes.Fn(), clock);

  auto first = pub.Tick();
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE(*first);
  ASSERT_EQ(writes.list.size(), 1u);
  EXPECT_EQ(writes.list[0].first, "hami.io/node-nvidia-register");
  EXPECT_EQ(writes.list[0].second, pub.last_value());

  clock.Advance(std::chrono::seconds(29));
  EXPECT_FALSE(*pub.Tick());
  EXPECT_EQ(discovery.calls, 1);  // not due yet
  clock.Advance(std::chrono::seconds(1));
  EXPECT_FALSE(*pub.Tick());  // due, unchanged: no patch
  EXPECT_EQ(discovery.calls, 2);
  EXPECT_EQ(writes.list.size(), 1u);

  const uint64_t gen = pub.generation();
  discovery.devices[0].healthy = false;
  clock.Advance(std::chrono::seconds(30));
  EXPECT_TRUE(*pub.Tick());
  ASSERT_EQ(writes.list.size(), 2u);
  EXPECT_EQ(writes.list[1].second.find("health"), std::string::npos);
  EXPECT_GT(pub.generation(), gen);
  for (const auto& [key, value] : writes.list) EXPECT_EQ(key, "hami.io/node-nvidia-register");
}

TEST(Publisher, RetriesFiveSecondsAfterAnError) {
  FakeClock clock;
  FakeDiscovery discovery;
  Writes writes;
  writes.fail = true;
  RegisterPublisher pub(&discovery, PluginConfig{}, writes.Fn(), clock);
  auto r = pub.Tick();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("patch refused"), std::string::npos);
  writes.fail = false;
  clock.Advance(std::chrono::seconds(4));
  EXPECT_FALSE(*pub.Tick());
  EXPECT_TRUE(writes.list.empty());
  clock.Advance(std::chrono::seconds(1));
  EXPECT_TRUE(*pub.Tick());
  EXPECT_EQ(writes.list.size(), 1u);

  discovery.fail = true;
  clock.Advance(std::chrono::seconds(30));
  auto d = pub.Tick();
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().find("fake: boom"), std::string::npos);
  EXPECT_EQ(pub.devices().size(), 1u);  // last good discovery kept
}

TEST(PluginConfig, YamlNvidiaSection) {
  auto c = ApplyDeviceConfigYaml(
      "nvidia:\n  resourceCountName: nvidia.com/vgpu\n  deviceSplitCount: 5\n"
      "  deviceMemoryScaling: 2\n  deviceCoreScaling: 0.5\n  libCudaLogLevel: \"4\"\n"
      "  disableCoreLimit: true\n  enableNumaTopology: true\n  other: x\n",
      PluginConfig{});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->resource_name, "nvidia.com/vgpu");
  EXPECT_EQ(c->device_split_count, 5);
  EXPECT_EQ(c->device_memory_scaling, 2);
  EXPECT_EQ(c->device_core_scaling, 0.5);
  EXPECT_EQ(c->lib_cuda_log_level, "4");
  EXPECT_TRUE(c->disable_core_limit);
  EXPECT_TRUE(c->enable_numa_topology);
  auto bad = ApplyDeviceConfigYaml("nvidia:\n  deviceSplitCount: x\n", PluginConfig{});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("nvidia.deviceSplitCount"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("\"x\""), std::string::npos) << bad.error();
  auto zero = ApplyDeviceConfigYaml("nvidia:\n  deviceSplitCount: 0\n", PluginConfig{});
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().find("deviceSplitCount"), std::string::npos);
  // No nvidia section: the base is kept.
  PluginConfig base;
  base.device_split_count = 3;
  auto other = ApplyDeviceConfigYaml("hygon:\n  resourceCountName: hygon.com/dcunum\n", base);
  ASSERT_TRUE(other) << other.error();
  EXPECT_EQ(other->device_split_count, 3);
}

TEST(PluginConfig, NodeJsonOverridesOnlyThisNode) {
  const char* json = R"({"nodeconfig":[
      {"name":"other","devicesplitcount":3},
      {"name":"node-1","operatingmode":"mps","devicesplitcount":7,"devicememoryscaling":1.5,
       "libcudaloglevel":"0","enablegetpreferredallocation":true,
       "filterdevices":{"uuid":["GPU-x"],"index":[2]}}]})";
  auto c = ApplyNodeConfigJson(json, "node-1", PluginConfig{});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->operating_mode, "mps");
  EXPECT_EQ(c->device_split_count, 7);
  EXPECT_EQ(c->device_memory_scaling, 1.5);
  EXPECT_EQ(c->lib_cuda_log_level, "0");
  EXPECT_TRUE(c->enable_preferred_allocation);
  EXPECT_EQ(c->filter_uuids, std::vector<std::string>{"GPU-x"});
  EXPECT_EQ(c->filter_indices, std::vector<uint64_t>{2});
  auto none = ApplyNodeConfigJson(json, "node-9", PluginConfig{});
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, PluginConfig{});
  EXPECT_FALSE(ApplyNodeConfigJson("{", "n", PluginConfig{}));
  auto bad = ApplyNodeConfigJson(R"({"nodeconfig":[{"name":"n","devicesplitcount":"x"}]})", "n",
                                 PluginConfig{});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("nodeconfig.devicesplitcount"), std::string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin
