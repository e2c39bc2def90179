// Inventory-file and NVML discovery. NVML runs against the fake libnvidia-ml.so.1 built from
// fake_nvml.cc (path in HAMI_FAKE_NVML_PATH), with a fake sysfs tree for NUMA nodes.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "deviceplugin/inventory.h"
#include "deviceplugin/nvml.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("hami-dp-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(Inventory, ParsesTheSeedExample) {
  auto text = ReadFile("examples/inventory/two-v100.yaml");
  ASSERT_TRUE(text) << text.error();
  auto devices = ParseInventory(*text);
  ASSERT_TRUE(devices) << devices.error();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1], (GpuDevice{1, "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448",
                                      "Tesla V100-PCIE-32GB", 32768, 1, true}));
}

TEST(Inventory, DefaultsIndexNumaAndHealth) {
  auto devices = ParseInventory(
      "devices:\n- {uuid: GPU-a, model: A10, memory: 24576}\n"
      "- {uuid: GPU-b, model: A10, memory: 24576, health: false}\n");
  ASSERT_TRUE(devices) << devices.error();
  EXPECT_EQ((*devices)[0], (GpuDevice{0, "GPU-a", "A10", 24576, 0, true}));
  EXPECT_EQ((*devices)[1], (GpuDevice{1, "GPU-b", "A10", 24576, 0, false}));
  auto empty = ParseInventory("devices: []\n");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(Inventory, ErrorsNameEntryAndField) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{
           {"devices:\n- {uuid: a, model: m, memory: lots}", "devices[0].memory"},
           {"devices:\n- {uuid: a, model: m, memory: 0}", "devices[0].memory"},
           {"devices:\n- {model: m, memory: 1}", "devices[0].uuid: required"},
           {"devices:\n- {uuid: a, memory: 1}", "devices[0].model: required"},
           {"devices:\n- {uuid: a, model: m, memory: 1, numa: -1}", "devices[0].numa"},
           {"devices:\n- {uuid: a, model: m, memory: 1, health: maybe}", "devices[0].health"},
           {"devices:\n- {uuid: a, model: m, memory: 1, index: x}", "devices[0].index"},
           {"devices:\n- {uuid: a, model: m, memory: 1}\n- {uuid: a, model: m, memory: 1}",
            "devices[1].uuid: duplicate"},
           {"devices: 3", "devices: want a list"},
           {"[1, 2]", "inventory"},
           {"devices: [", "invalid YAML"},
           // Issue 19: each published something wrong, or nothing with exit status 0.
           {"devices:\n- {uuid: a, model: m, memory: 4294967296}",
            R"(devices[0].memory: want an integer from 1 to 2147483647 (MiB), got "4294967296")"},
           {"devices:\n- {uuid: a, model: m, memory: 2147483648}", "devices[0].memory"},
           {"devices:\n- {uuid: a, model: m, memory: 1, index: 99999999999}",
            R"(devices[0].index: want an integer from 0 to 2147483647, got "99999999999")"},
           {"device:\n- {uuid: a, model: m, memory: 1}",
            R"(inventory: unknown key "device" (the only key is `devices`))"},
           {"devices: []\nextra: 1", R"(inventory: unknown key "extra")"},
           {"devices:\n- {uuid: a, model: m, memroy: 1}", R"(devices[0]: unknown field "memroy")"},
           {"devices:\n- {uuid: a, model: m, memory: 1, index: 0}\n"
            "- {uuid: b, model: m, memory: 1, index: 0}",
            "devices[1].index: duplicate 0"},
           {"devices:\n- {uuid: a, model: m, memory: 1}\n- {uuid: b, model: m, memory: 1, index: "
            "0}",
            "devices[1].index: duplicate 0"},
           {"devices:\n- {uuid: 'GPU-a,NVIDIA,-99999,0', model: m, memory: 1}",
            R"(devices[0].uuid: must not contain ',', ':' or ';', got "GPU-a,NVIDIA,-99999,0")"},
           {"devices:\n- {uuid: 'GPU-a:0', model: m, memory: 1}", "devices[0].uuid: must not"},
           {"devices:\n- {uuid: 'GPU-a;', model: m, memory: 1}", "devices[0].uuid: must not"},
       }) {
    auto r = ParseInventory(c.yaml);
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_NE(r.error().find(c.want), std::string::npos) << r.error();
  }
}

TEST(Inventory, LimitsAreInclusive) {
  auto r = ParseInventory("devices:\n- {uuid: a, model: m, memory: 2147483647, index: 2147483647}");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ((*r)[0].memory_mib, 2147483647);
  EXPECT_EQ((*r)[0].index, 2147483647u);
}

TEST(Inventory, DiscoveryRereadsTheFile) {
  fs::path dir = TempDir("inv");
  fs::path file = dir / "inv.yaml";
  WriteText(file, "devices:\n- {uuid: GPU-a, model: A10, memory: 100}\n");
  InventoryDiscovery discovery(file.string());
  auto first = discovery.Discover();
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE((*first)[0].healthy);
  WriteText(file, "devices:\n- {uuid: GPU-a, model: A10, memory: 100, health: false}\n");
  auto second = discovery.Discover();
  ASSERT_TRUE(second) << second.error();
  EXPECT_FALSE((*second)[0].healthy);
  InventoryDiscovery missing((dir / "nope.yaml").string());
  auto r = missing.Discover();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("nope.yaml"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Nvml, SysfsBusId) {
  EXPECT_EQ(SysfsBusId("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(SysfsBusId("0000:AF:00.0"), "0000:af:00.0");
}

class NvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sysfs_ = TempDir("sysfs");
    WriteText(sysfs_ / "bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
    WriteText(sysfs_ / "bus/pci/devices/0000:af:00.0/numa_node", "-1\n");
    unsetenv("HAMI_FAKE_NVML_LOST");
    unsetenv("HAMI_FAKE_NVML_INIT_RC");
  }
  void TearDown() override {
    unsetenv("HAMI_FAKE_NVML_DEVICES");
    unsetenv("HAMI_FAKE_NVML_LOST");
    unsetenv("HAMI_FAKE_NVML_INIT_RC");
    fs::remove_all(sysfs_);
  }
  NvmlOptions Options() const { return {HAMI_FAKE_NVML_PATH, sysfs_.string()}; }
  fs::path sysfs_;
};

TEST_F(NvmlTest, DiscoversCountUuidNameMemoryAndNuma) {
  setenv("HAMI_FAKE_NVML_DEVICES",
         "GPU-a|Tesla V100-PCIE-32GB|32768|00000000:3B:00.0;"
         "GPU-b|NVIDIA A10|24576|00000000:AF:00.0;"
         "GPU-c|NVIDIA GH200|ns|00000000:01:00.0",
         1);
  NvmlDiscovery nvml(Options());
  auto devices = nvml.Discover();
  ASSERT_TRUE(devices) << devices.error();
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[0], (GpuDevice{0, "GPU-a", "Tesla V100-PCIE-32GB", 32768, 1, true}));
  EXPECT_EQ((*devices)[1], (GpuDevice{1, "GPU-b", "NVIDIA A10", 24576, 0, true}));  // numa -1
  EXPECT_EQ((*devices)[2], (GpuDevice{2, "GPU-c", "NVIDIA GH200", 0, 0, true}));    // no sysfs
}

// The DRA plugin's device attributes: each from its NVML call; a call NVML does not answer
// leaves that attribute empty, never the listing.
TEST_F(NvmlTest, AttributesForTheDraPlugin) {
  setenv(
      "HAMI_FAKE_NVML_DEVICES",
      "GPU-a|NVIDIA A100-SXM4-80GB|81920|00000000:3B:00.0;GPU-b|NVIDIA A10|24576|00000000:AF:00.0",
      1);
  setenv("HAMI_FAKE_NVML_ATTRIBUTES", "4|14|7|8.0;-|2|-|-", 1);
  setenv("HAMI_FAKE_NVML_DRIVER", "550.54|12040", 1);
  NvmlDiscovery nvml(Options());
  auto attrs = nvml.Attributes();
  unsetenv("HAMI_FAKE_NVML_ATTRIBUTES");
  unsetenv("HAMI_FAKE_NVML_DRIVER");
  ASSERT_TRUE(attrs) << attrs.error();
  ASSERT_EQ(attrs->size(), 2u);
  EXPECT_EQ((*attrs)[0],
            (GpuAttributes{4, "Nvidia", "Ampere", "8.0.0", "550.54.0", "12.4.0", "0000:3b:00.0"}));
  EXPECT_EQ((*attrs)[1],
            (GpuAttributes{-1, "Tesla", "", "", "550.54.0", "12.4.0", "0000:af:00.0"}));
}

TEST_F(NvmlTest, LostGpuIsUnhealthy) {
  setenv("HAMI_FAKE_NVML_DEVICES", "GPU-a|A10|100|0:0:0.0;GPU-b|A10|100|0:0:0.0", 1);
  setenv("HAMI_FAKE_NVML_LOST", "1", 1);
  NvmlDiscovery nvml(Options());
  auto devices = nvml.Discover();
  ASSERT_TRUE(devices) << devices.error();
  EXPECT_TRUE((*devices)[0].healthy);
  EXPECT_FALSE((*devices)[1].healthy);
}

TEST_F(NvmlTest, InitFailureAndMissingLibraryAreErrors) {
  setenv("HAMI_FAKE_NVML_INIT_RC", "9", 1);
  NvmlDiscovery nvml(Options());
  auto r = nvml.Discover();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("nvmlInit_v2 failed: NVML error 9"), std::string::npos) << r.error();

  NvmlDiscovery missing({"/nonexistent/libnvidia-ml.so.1", "/sys"});
  auto m = missing.Discover();
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().find("dlopen"), std::string::npos) << m.error();
}

}  // namespace
}  // namespace hami::deviceplugin
