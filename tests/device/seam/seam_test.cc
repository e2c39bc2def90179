// The Device seam: self-registration of vendors (linked from the static library without any
// reference to a vendor symbol), config sections parsed by their factories, and the default
// methods of Device.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "device/device.h"
#include "protocol/pod_devices.h"

namespace hami::device {
namespace {

using nlohmann::json;

// A vendor defined by the test, with the default methods: the keys of the vendor table's AMD
// entry (JSON register annotation, to-allocate and allocated keys).
class TestDevice : public Device {
 public:
  explicit TestDevice(protocol::VendorInfo info) : info_(std::move(info)) {}
  const protocol::VendorInfo& Info() const override { return info_; }
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView&) const override {
    return std::vector<DeviceUsage>{};
  }
  Result<DeviceRequest> NormalizeRequest(const ContainerView&) const override {
    return DeviceRequest{};
  }
  FitResult Fit(const std::vector<const DeviceUsage*>&, const DeviceRequest&,
                const FitContext&) const override {
    return FitResult{};
  }

 private:
  protocol::VendorInfo info_;
};

// Section "zz-test": `fail: <message>` makes the factory fail with that message.
Result<std::vector<std::unique_ptr<Device>>> MakeTest(const YAML::Node& section,
                                                      const DeviceConfig&) {
  if (section.IsMap() && section["fail"]) {
    return Error{"zz-test.fail: " + section["fail"].Scalar()};
  }
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<TestDevice>(*protocol::FindVendor("AMD")));
  return out;
}
const bool kRegistered = RegisterVendorFactory("zz-test", MakeTest);

TEST(VendorRegistration, NvidiaRegistersItselfThroughTheStaticLibrary) {
  std::vector<std::string> sections = RegisteredVendorSections();
  EXPECT_NE(std::find(sections.begin(), sections.end(), "nvidia"), sections.end());
  EXPECT_TRUE(std::is_sorted(sections.begin(), sections.end()));
  EXPECT_NE(FindVendorFactory("nvidia"), nullptr);
  EXPECT_EQ(FindVendorFactory("no-such-vendor"), nullptr);
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  ASSERT_NE(registry.Find("NVIDIA"), nullptr);
  EXPECT_EQ(registry.Find("NVIDIA")->Info().count_resource, "nvidia.com/gpu");
}

TEST(VendorRegistration, ASecondRegistrationOfASectionIsRefused) {
  EXPECT_TRUE(kRegistered);
  EXPECT_FALSE(RegisterVendorFactory("zz-test", MakeTest));
}

TEST(VendorRegistration, AVendorIsActiveWhenItsSectionIsPresent) {
  auto only_nvidia = LoadDeviceConfig("nvidia:\n  deviceSplitCount: 4\n");
  ASSERT_TRUE(only_nvidia) << only_nvidia.error();
  Registry a = MakeRegistry(*only_nvidia);
  EXPECT_NE(a.Find("NVIDIA"), nullptr);
  EXPECT_EQ(a.Find("AMD"), nullptr);

  auto both = LoadDeviceConfig("nvidia: {}\nzz-test:\n  anything: 1\n");
  ASSERT_TRUE(both) << both.error();
  EXPECT_EQ(both->sections.count("zz-test"), 1u);
  Registry b = MakeRegistry(*both);
  EXPECT_NE(b.Find("NVIDIA"), nullptr);
  EXPECT_NE(b.Find("AMD"), nullptr);

  auto no_nvidia = LoadDeviceConfig("amd: {}\nzz-test: {}\n");
  ASSERT_TRUE(no_nvidia) << no_nvidia.error();
  EXPECT_EQ(no_nvidia->sections.count("nvidia"), 0u);
  Registry c = MakeRegistry(*no_nvidia);
  EXPECT_EQ(c.Find("NVIDIA"), nullptr);
  EXPECT_NE(c.Find("AMD"), nullptr);
}

TEST(VendorRegistration, AFactoryErrorIsTheConfigError) {
  auto bad = LoadDeviceConfig("nvidia: {}\nzz-test:\n  fail: \"want x, got y\"\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "zz-test.fail: want x, got y");

  DeviceConfig config = *LoadDeviceConfig("nvidia: {}\n");
  config.sections["zz-test"] = "fail: broken";
  auto built = BuildRegistry(config);
  ASSERT_FALSE(built);
  EXPECT_EQ(built.error(), "zz-test.fail: broken");
  Registry kept = MakeRegistry(config);  // the failing section is left out, the others stay
  EXPECT_NE(kept.Find("NVIDIA"), nullptr);
  EXPECT_EQ(kept.Find("AMD"), nullptr);

  config.sections["zz-test"] = "{ unclosed";
  auto syntax = BuildRegistry(config);
  ASSERT_FALSE(syntax);
  EXPECT_NE(syntax.error().find("device config: zz-test: "), std::string::npos) << syntax.error();
}

TEST(NodeViewFromNode, ReadsNameAnnotationsLabelsCapacityAllocatable) {
  json node = json::parse(R"({"metadata":{"name":"n1","annotations":{"a":"1","skip":2},
      "labels":{"l":"x"}},"status":{"capacity":{"amd.com/gpu":"4","cpu":8,"bad":[1]},
      "allocatable":{"amd.com/gpu":"3"}}})");
  NodeView v = NodeViewFromNode(node);
  EXPECT_EQ(v.name, "n1");
  EXPECT_EQ(v.annotations, (StringMap{{"a", "1"}}));
  EXPECT_EQ(v.labels, (StringMap{{"l", "x"}}));
  EXPECT_EQ(v.capacity, (StringMap{{"amd.com/gpu", "4"}, {"cpu", "8"}}));
  EXPECT_EQ(v.allocatable, (StringMap{{"amd.com/gpu", "3"}}));
  EXPECT_EQ(NodeViewFromNode(json::array()), NodeView{});
}

// The webhook's AdmissionEdit, reduced to what the default MutateAdmission reads.
class FakeEdit : public AdmissionEdit {
 public:
  explicit FakeEdit(json pod) : pod_(std::move(pod)) {}
  const json& Pod() const override { return pod_; }
  const json& Container() const override { return pod_["spec"]["containers"][0]; }
  bool IsInitContainer() const override { return false; }
  void Set(const std::vector<std::string>&, const json&) override { ++edits; }
  void Append(const std::vector<std::string>&, const json&) override { ++edits; }
  void SetPod(const std::vector<std::string>&, const json&) override { ++edits; }
  int edits = 0;

 private:
  json pod_;
};

TEST(DeviceDefaults, MutateAdmissionSaysWhetherTheCountResourceIsAsked) {
  TestDevice amd(*protocol::FindVendor("AMD"));
  for (const char* section : {"limits", "requests"}) {
    FakeEdit edit(
        json{{"spec", {{"containers", {{{"resources", {{section, {{"amd.com/gpu", "1"}}}}}}}}}}});
    auto r = amd.MutateAdmission(edit);
    ASSERT_TRUE(r);
    EXPECT_TRUE(*r) << section;
    EXPECT_EQ(edit.edits, 0);
  }
  FakeEdit other(
      json{{"spec", {{"containers", {{{"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}});
  EXPECT_FALSE(*amd.MutateAdmission(other));
  FakeEdit bare(json{{"spec", {{"containers", {json::object()}}}}});
  EXPECT_FALSE(*amd.MutateAdmission(bare));
}

TEST(DeviceDefaults, AllocationAnnotationsAndTheirDecoding) {
  TestDevice amd(*protocol::FindVendor("AMD"));
  protocol::PodDevices devices = {{}, {{"GPU-1", "AMD", 1024, 30}}};
  StringMap annos = amd.AllocationAnnotations(PodView{}, devices);
  const std::string value = ";GPU-1,AMD,1024,30:;";
  EXPECT_EQ(annos, (StringMap{{"hami.io/amd-devices-to-allocate", value},
                              {"hami.io/amd-devices-allocated", value}}));
  auto allocated = amd.PodAllocated(annos);
  ASSERT_TRUE(allocated) << allocated.error();
  ASSERT_TRUE(allocated->has_value());
  // The trailing ';' reads as one more, empty container (protocol::DecodePodDevices).
  const protocol::PodDevices decoded = {{}, devices[1], {}};
  EXPECT_EQ(**allocated, decoded);
  auto to_allocate = amd.PodToAllocate(annos);
  ASSERT_TRUE(to_allocate && to_allocate->has_value());
  EXPECT_EQ(**to_allocate, decoded);
  EXPECT_FALSE(amd.PodAllocated({})->has_value());
  EXPECT_FALSE(amd.PodToAllocate({})->has_value());
  auto bad = amd.PodAllocated({{"hami.io/amd-devices-allocated", "GPU-1,AMD,x,0:;"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("annotation hami.io/amd-devices-allocated: "), std::string::npos)
      << bad.error();
  // Usage: the §4.4 collapse.
  auto deltas = amd.UsageDeltas(devices, 0, false);
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0].usedmem, 1024);
  EXPECT_EQ(deltas[0].usedcores, 30);
}

TEST(DeviceDefaults, PodToAllocateFallsBackToTheOlderReadKeys) {
  TestDevice hygon(*protocol::FindVendor("DCU"));
  auto old = hygon.PodToAllocate({{"hami.io/dcu-devices-to-allocate", "D-1,DCU,10,10:;"}});
  ASSERT_TRUE(old && old->has_value());
  EXPECT_EQ((**old)[0][0].uuid, "D-1");
  auto both = hygon.PodToAllocate({{"hami.io/dcu-devices-to-allocate", "D-1,DCU,10,10:;"},
                                   {"hami.io/hcu-devices-to-allocate", "D-2,DCU,10,10:;"}});
  ASSERT_TRUE(both && both->has_value());
  EXPECT_EQ((**both)[0][0].uuid, "D-2");  // the seed's key first
}

TEST(DeviceDefaults, EncodeNodeRegistrationInTheVendorsFormat) {
  std::vector<protocol::DeviceInfo> devices = {
      {.id = "D-1", .count = 4, .devmem = 16384, .devcore = 100, .type = "DCU", .health = true},
      {.id = "D-2",
       .index = 1,
       .count = 4,
       .devmem = 16384,
       .devcore = 100,
       .type = "DCU",
       .health = true}};
  TestDevice hygon(*protocol::FindVendor("DCU"));  // legacy colon
  NodeRegistration h = hygon.EncodeNodeRegistration(devices);
  EXPECT_EQ(
      h.annotations,
      (StringMap{{"hami.io/node-dcu-register", protocol::EncodeNodeRegisterLegacy(devices)}}));
  EXPECT_EQ(h.capacity, (StringMap{{"hygon.com/dcunum", "8"}}));
  TestDevice amd(*protocol::FindVendor("AMD"));  // JSON
  NodeRegistration a = amd.EncodeNodeRegistration(devices);
  EXPECT_EQ(a.annotations,
            (StringMap{{"hami.io/node-amd-register", protocol::EncodeNodeRegister(devices)}}));
  TestDevice mlu(*protocol::FindVendor("MLU"));  // capacity only
  NodeRegistration m = mlu.EncodeNodeRegistration(devices);
  EXPECT_TRUE(m.annotations.empty());
  EXPECT_EQ(m.capacity, (StringMap{{"cambricon.com/vmlu", "8"}}));
  EXPECT_TRUE(mlu.AllocateAnnotations(PodView{}, {}).empty());
  EXPECT_EQ(mlu.CheckHealth(NodeView{}, Health{false, true}), (Health{false, true}));
}

// Adding a vendor touches only its folder (issue 15): outside src/device/vendors/<vendor>/ no
// source includes that vendor's headers. NVIDIA is the exception: hami-device-plugin is NVIDIA's
// plugin and hami-sim runs it. Runs from the source tree (ctest's working directory).
TEST(VendorSeam, NoSourceOutsideAVendorsFolderIncludesItsHeaders) {
  namespace fs = std::filesystem;
  ASSERT_TRUE(fs::is_directory("src/device/vendors")) << "run from the source tree";
  const std::regex include(R"re(#include\s+"device/vendors/([A-Za-z0-9_]+)/)re");
  std::vector<std::string> violations;
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator("src")) {
    const std::string path = entry.path().generic_string();
    if (!entry.is_regular_file() || (!path.ends_with(".cc") && !path.ends_with(".h"))) continue;
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string vendor = m[1].str();
      if (vendor == "nvidia" || path.starts_with("src/device/vendors/" + vendor + "/")) continue;
      violations.push_back(path + ": " + line);
    }
  }
  EXPECT_GT(files, 100u);
  EXPECT_TRUE(violations.empty()) << ::testing::PrintToString(violations);
}

}  // namespace
}  // namespace hami::device
