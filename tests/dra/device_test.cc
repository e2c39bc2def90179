// DeviceFromSlice: a ResourceSlice device entry as CEL sees it (src/dra/cel.h).
#include <gtest/gtest.h>

#include "dra/cel.h"

namespace hami::dra {
namespace {

using nlohmann::json;

TEST(DeviceFromSliceTest, BareNamesAreInTheDriversDomainAndQualifiedOnesInTheirs) {
  const json device = json::parse(R"({
    "name": "hami-gpu-0", "allowMultipleAllocations": true,
    "attributes": {"type": {"string": "hami-gpu"}, "minor": {"int": 0},
                   "driverVersion": {"version": "550.54.15"},
                   "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
                   "healthy": {"bool": true}},
    "capacity": {"memory": {"value": "80Gi"}, "cores": {"value": "100"}}})");
  const CelDevice d = DeviceFromSlice(device, "hami-core-gpu.project-hami.io");
  EXPECT_EQ(d.driver, "hami-core-gpu.project-hami.io");
  EXPECT_TRUE(d.allow_multiple_allocations);
  const auto& own = d.attributes.at("hami-core-gpu.project-hami.io");
  EXPECT_EQ(std::get<std::string>(own.at("type")), "hami-gpu");
  EXPECT_EQ(std::get<int64_t>(own.at("minor")), 0);
  EXPECT_EQ(std::get<Semver>(own.at("driverVersion")).text, "550.54.15");
  EXPECT_TRUE(std::get<bool>(own.at("healthy")));
  EXPECT_EQ(std::get<std::string>(d.attributes.at("resource.kubernetes.io").at("pcieRoot")),
            "pci0000:00");
  const auto& caps = d.capacity.at("hami-core-gpu.project-hami.io");
  EXPECT_EQ(protocol::CompareQuantities(caps.at("memory"), *protocol::ParseQuantity("85899345920")),
            0);
  EXPECT_EQ(protocol::CompareQuantities(caps.at("cores"), *protocol::ParseQuantity("100")), 0);
}

TEST(DeviceFromSliceTest, MalformedEntriesAreLeftOutNotGuessed) {
  const json device = json::parse(R"({
    "attributes": {"a": {"int": "7"}, "b": {"string": "x", "int": 1}, "c": "plain",
                   "d": {"float": 1.5}, "ok": {"string": "y"}},
    "capacity": {"m": {"value": "lots"}, "n": {"value": 5}, "k": {"value": "1Ki"}},
    "allowMultipleAllocations": "yes"})");
  const CelDevice d = DeviceFromSlice(device, "drv");
  EXPECT_FALSE(d.allow_multiple_allocations);
  ASSERT_EQ(d.attributes.size(), 1u);
  EXPECT_EQ(d.attributes.at("drv").size(), 1u);
  EXPECT_EQ(std::get<std::string>(d.attributes.at("drv").at("ok")), "y");
  ASSERT_EQ(d.capacity.at("drv").size(), 1u);
  EXPECT_TRUE(d.capacity.at("drv").contains("k"));
  EXPECT_TRUE(DeviceFromSlice(json("not an object"), "drv").attributes.empty());
}

}  // namespace
}  // namespace hami::dra
