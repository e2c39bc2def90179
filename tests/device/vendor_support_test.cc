// vendor_support: the pieces the vendor backends share (resource-name keys, the limits check,
// capacity counts, the Fit scan).
#include "device/vendor_support.h"

#include <gtest/gtest.h>

#include <limits>

#include "protocol/reason.h"

namespace hami::device {
namespace {

TEST(ReadResourceNames, KeepsDefaultsReadsValuesAndNamesABadKey) {
  std::string count = "default/count", memory = "default/mem";
  YAML::Node section = YAML::Load("resourceCountName: x.com/n\nresourceMemoryName: ~\n");
  ASSERT_TRUE(ReadResourceNames(section, "sec",
                                {{"resourceCountName", &count}, {"resourceMemoryName", &memory}}));
  EXPECT_EQ(count, "x.com/n");
  EXPECT_EQ(memory, "default/mem");

  for (const char* bad : {"resourceCountName: '  '", "resourceCountName: [a]"}) {
    Status s = ReadResourceNames(YAML::Load(bad), "sec", {{"resourceCountName", &count}});
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error().rfind("sec.resourceCountName: want a resource name, got ", 0), 0u)
        << s.error();
  }
  EXPECT_EQ(count, "x.com/n");
}

TEST(LimitsContain, OnlyResourcesLimitsCounts) {
  using json = nlohmann::json;
  json ctr = {{"resources", {{"limits", {{"x.com/n", "1"}}}, {"requests", {{"x.com/m", "1"}}}}}};
  EXPECT_TRUE(LimitsContain(ctr, "x.com/n"));
  EXPECT_FALSE(LimitsContain(ctr, "x.com/m"));
  EXPECT_FALSE(LimitsContain(json{{"name", "c"}}, "x.com/n"));
  EXPECT_FALSE(LimitsContain(json{{"resources", {{"limits", json::array()}}}}, "x.com/n"));
}

TEST(CapacityCount, AbsentIsZeroAndABadValueNamesTheKey) {
  StringMap capacity = {{"x.com/n", "8"}, {"x.com/bad", "eight"}};
  auto n = CapacityCount(capacity, "x.com/n");
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(*n, 8);
  auto absent = CapacityCount(capacity, "x.com/m");
  ASSERT_TRUE(absent) << absent.error();
  EXPECT_EQ(*absent, 0);
  auto bad = CapacityCount(capacity, "x.com/bad");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("capacity x.com/bad: ", 0), 0u) << bad.error();
  EXPECT_NE(bad.error().find("eight"), std::string::npos) << bad.error();
}

TEST(CheckShare, ReasonsInOrderAndThePick) {
  DeviceUsage dev{.id = "d0", .count = 2, .totalmem = 1000, .totalcore = 100};
  DeviceRequest req{.nums = 1, .type = "X", .memreq = 0, .mem_percentage = 50, .coresreq = 30};
  FitContext ctx;
  protocol::ContainerDevice chosen;
  EXPECT_EQ(CheckShare(dev, req, ctx, &chosen), std::nullopt);
  EXPECT_EQ(chosen, (protocol::ContainerDevice{"d0", "X", 500, 30}));

  DeviceUsage full = dev;
  full.used = 2;
  full.usedmem = 1000;  // also out of memory: time slices come first
  EXPECT_EQ(CheckShare(full, req, ctx, &chosen), protocol::kCardTimeSlicingExhausted);
  DeviceUsage low = dev;
  low.usedmem = 600;
  low.usedcores = 100;  // also out of cores: memory comes first
  EXPECT_EQ(CheckShare(low, req, ctx, &chosen), protocol::kCardInsufficientMemory);
  low.usedmem = 0;
  EXPECT_EQ(CheckShare(low, req, ctx, &chosen), protocol::kCardInsufficientCore);
  req.coresreq = 0;
  EXPECT_EQ(CheckShare(low, req, ctx, &chosen), protocol::kCardComputeUnitsExhausted);
}

TEST(ScanCandidates, LastToFirstTalliesReasonsAndPartialPicks) {
  std::vector<DeviceUsage> devs(4);
  for (size_t i = 0; i < devs.size(); ++i) devs[i].id = "d" + std::to_string(i);
  std::vector<const DeviceUsage*> candidates;
  for (const auto& d : devs) candidates.push_back(&d);
  DeviceCheck check = [](const DeviceUsage& dev, const protocol::ContainerDevices& /*picked*/,
                         protocol::ContainerDevice* chosen) -> std::optional<std::string_view> {
    if (dev.id == "d1") return protocol::kCardNotHealth;
    chosen->uuid = dev.id;
    return std::nullopt;
  };

  FitResult two;
  ScanCandidates(candidates, 2, check, &two);
  EXPECT_TRUE(two.fit);
  ASSERT_EQ(two.devices.size(), 2u);
  EXPECT_EQ(two.devices[0].uuid, "d3");
  EXPECT_EQ(two.devices[1].uuid, "d2");
  EXPECT_TRUE(two.reasons.empty());

  FitResult four;
  ScanCandidates(candidates, 4, check, &four);
  EXPECT_FALSE(four.fit);
  EXPECT_TRUE(four.devices.empty());
  EXPECT_EQ(four.reasons[std::string(protocol::kCardNotHealth)], 1);
  EXPECT_EQ(four.reasons[std::string(protocol::kAllocatedCardsInsufficientRequest)], 3);
}

// The section shape cambricon, hygon, mthreads and amd share.
TEST(VendorSupport, ReadVendorSection) {
  std::string count = "c", memory = "m", core = "k";
  EXPECT_TRUE(ReadVendorSection(YAML::Node(), "amd", &count, &memory, &core));
  EXPECT_TRUE(ReadVendorSection(YAML::Load("~"), "amd", &count, &memory, &core));
  EXPECT_EQ(count + memory + core, "cmk");  // null: the defaults stay
  auto list = ReadVendorSection(YAML::Load("[1]"), "amd", &count, &memory, &core);
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error(), R"(amd: want a map, got "<sequence>")");
  ASSERT_TRUE(ReadVendorSection(YAML::Load("{resourceCountName: x/a, resourceCoreName: x/c}"),
                                "amd", &count, &memory, &core));
  EXPECT_EQ(count, "x/a");
  EXPECT_EQ(memory, "m");
  EXPECT_EQ(core, "x/c");
  auto bad =
      ReadVendorSection(YAML::Load("{resourceMemoryName: ' '}"), "hygon", &count, &memory, &core);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), R"(hygon.resourceMemoryName: want a resource name, got " ")");
}

// Two capacity counts become one row per card: ids with the infix, the memory shared evenly, a
// last card for the core units left over; no core units, no cards; a bad count names the resource.
TEST(CapacityCardRows, OneRowPerCardFromTheCounts) {
  const std::string cores = "x.com/cores", memory = "x.com/mem";
  const CapacityCards cards{.core_resource = cores,
                            .memory_resource = memory,
                            .cores_per_card = 16,
                            .memory_factor = 512,
                            .id_infix = "x-gpu",
                            .vendor = "X"};
  auto rows =
      CapacityCardRows(NodeView{.name = "n1", .capacity = {{cores, "40"}, {memory, "30"}}}, cards);
  ASSERT_TRUE(rows) << rows.error();
  ASSERT_EQ(rows->size(), 3u);  // 16 + 16 + 8 core units
  for (size_t i = 0; i < rows->size(); ++i) {
    EXPECT_EQ((*rows)[i], (DeviceUsage{.id = "n1-x-gpu-" + std::to_string(i),
                                       .index = i,
                                       .type = "X",
                                       .vendor = "X",
                                       .health = true,
                                       .count = 100,
                                       .totalmem = 30 * 512 * 16 / 40,
                                       .totalcore = 16}))
        << i;
  }
  auto capped = CapacityCardRows(
      NodeView{.name = "n1", .capacity = {{cores, "1"}, {memory, "2000000000"}}}, cards);
  ASSERT_TRUE(capped) << capped.error();
  ASSERT_EQ(capped->size(), 1u);
  EXPECT_EQ((*capped)[0].totalmem, std::numeric_limits<int32_t>::max());

  auto none = CapacityCardRows(NodeView{.name = "n1", .capacity = {{memory, "30"}}}, cards);
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->empty());
  auto bad_cores = CapacityCardRows(NodeView{.name = "n1", .capacity = {{cores, "x"}}}, cards);
  ASSERT_FALSE(bad_cores);
  EXPECT_EQ(bad_cores.error().rfind("capacity x.com/cores: ", 0), 0u) << bad_cores.error();
  auto bad_memory =
      CapacityCardRows(NodeView{.name = "n1", .capacity = {{cores, "16"}, {memory, "-1"}}}, cards);
  ASSERT_FALSE(bad_memory);
  EXPECT_EQ(bad_memory.error().rfind("capacity x.com/mem: ", 0), 0u) << bad_memory.error();
}

}  // namespace
}  // namespace hami::device
