// device-config.yaml as a whole: the sections belong to the registered vendors (each parses its
// own, tests/device/vendors/<vendor>/), this file knows only the scheduler section.
#include "device/config.h"

#include <gtest/gtest.h>

#include "device/device.h"
#include "support/config_errors.h"

namespace hami::device {
namespace {

TEST(DeviceConfig, DefaultsAreEveryRegisteredVendorWithItsDefaults) {
  DeviceConfig c = DefaultDeviceConfig();
  std::vector<std::string> sections;
  for (const auto& [name, text] : c.sections) {
    sections.push_back(name);
    EXPECT_EQ(text, "") << name;  // the factory takes the chart's values
  }
  EXPECT_EQ(sections, RegisteredVendorSections());
  EXPECT_GE(sections.size(), 13u);  // nvidia ... vnpus, one a vendor folder
  EXPECT_EQ(c.scheduler.node_scheduler_policy, "binpack");
  EXPECT_EQ(c.scheduler.gpu_scheduler_policy, "spread");
  EXPECT_TRUE(ValidateDeviceConfig(c));
  // Every vendor's backend is active, Iluvatar and Ascend once per chip of the chart.
  Registry registry = MakeRegistry(c);
  for (const char* key :
       {"NVIDIA", "MLU", "DCU", "Metax-GPU", "Mthreads", "GCU", "kunlun", "AWSNeuron", "AMD",
        "Vastai", "Biren", "MR-V100", "BI-V100", "Ascend910A", "Ascend310P"}) {
    EXPECT_NE(registry.Find(key), nullptr) << key;
  }
}

// Sections are kept as YAML text for their vendor; sections no vendor registered are kept and
// ignored; the scheduler section is read here.
TEST(DeviceConfig, SectionsAndTheSchedulerSection) {
  auto c = LoadDeviceConfig(R"(
nvidia:
  deviceSplitCount: 4
amd:
  resourceCountName: amd.com/gpu
futureVendor:
  anything: 1
emptyOne:
scheduler:
  nodeSchedulerPolicy: spread
  gpuSchedulerPolicy: binpack,numa
)");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->sections.size(), 3u);  // null sections are absent, scheduler is not a vendor's
  EXPECT_EQ(c->sections.at("nvidia"), "deviceSplitCount: 4");
  EXPECT_EQ(c->sections.count("futureVendor"), 1u);
  EXPECT_EQ(c->scheduler.node_scheduler_policy, "spread");
  EXPECT_EQ(c->scheduler.gpu_scheduler_policy, "binpack,numa");
  Registry registry = MakeRegistry(*c);
  EXPECT_EQ(registry.All().size(), 2u);  // NVIDIA and AMD; futureVendor ignored
}

TEST(DeviceConfig, OtherVendorsOnly) {
  auto c = LoadDeviceConfig("amd:\n  resourceCountName: amd.com/gpu\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->sections.count("nvidia"), 0u);
}

// Every bad value is rejected with the YAML path of the field and the value; a vendor's section
// errors come from its factory (tests/device/vendors/<vendor>/).
TEST(DeviceConfig, RejectsBadValuesNamingThePath) {
  testing::ExpectConfigErrors({
      {"nvidia: {}\nscheduler:\n  nodeSchedulerPolicy: random\n",
       R"(scheduler.nodeSchedulerPolicy: want binpack or spread, got "random")"},
      {"nvidia: {}\nscheduler: 3\n", R"(scheduler: want a map, got "3")"},
      {"nvidia: {}\nscheduler:\n  gpuSchedulerPolicy: [a]\n",
       R"(scheduler.gpuSchedulerPolicy: want a string, got "<sequence>")"},
      {"nvidia: {}\niluvatars: 3\n", R"(iluvatars: want a list, got "3")"},
      {"{}", "device config: all configurations are empty"},
      {"foo: 1\n", "device config: all configurations are empty"},
      {"nvidia:\nscheduler: {}\n", "device config: all configurations are empty"},
      {"- a\n", R"(device config: want a map at the top level, got "<sequence>")"},
      // A repeated section: the fuzzer found the loader checking the first and keeping the last.
      {"cambricon:\n  resourceCountName: a\nnvidia: {}\ncambricon: resourceCo\n",
       R"(device config: section "cambricon" given twice)"},
      {"nvidia: {}\nscheduler: {}\nscheduler: 3\n",
       R"(device config: section "scheduler" given twice)"},
  });
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

// The fuzzer's find: a key starting FE FF (a UTF-16 byte order mark) loaded, but the section
// written out and read again by its vendor was a string, not a map. Text that is not UTF-8 is
// refused with the offset of the first bad byte; whatever loads also validates.
TEST(DeviceConfig, TextThatIsNotUtf8IsRefusedWithItsOffset) {
  auto r = LoadDeviceConfig("nvidia:\n  \xfe\xff\xff\xf8urceName: nvidia.com/gpu\n");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), R"(device config: not UTF-8 text: byte 10 is "\xfe")");
  auto ok = LoadDeviceConfig("nvidia:\n  caf\xc3\xa9: 1\n  \xef\xbb\xbfkey: 2\n");
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_TRUE(ValidateDeviceConfig(*ok));
}

TEST(DeviceConfig, ValidateChecksChangedSectionsAndPolicies) {
  DeviceConfig c = DefaultDeviceConfig();
  c.sections["nvidia"] = "deviceSplitCount: 0";
  auto s = ValidateDeviceConfig(c);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), R"(nvidia.deviceSplitCount: want a positive integer, got "0")");
  c = DefaultDeviceConfig();
  c.scheduler.node_scheduler_policy = "random";
  s = ValidateDeviceConfig(c);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), R"(scheduler.nodeSchedulerPolicy: want binpack or spread, got "random")");
}

}  // namespace
}  // namespace hami::device
