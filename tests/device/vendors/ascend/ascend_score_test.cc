// Ascend's node score (HAMi ScoreNode: the share of each container's picks on its fullest HCCS
// ring, x10, for the 910 families) through the Device API and the scheduler, and the
// predicate-time HAMi's PatchAnnotations writes with the decision.
#include <gtest/gtest.h>

#include <chrono>

#include "device/config.h"
#include "device/device.h"
#include "device/schedule.h"
#include "device/vendors/ascend/ascend.h"

namespace hami::device::ascend {
namespace {

constexpr const char* kConfig = R"(
vnpus:
  configs:
  - chipName: 910B3
    commonWord: Ascend910B3
    resourceName: huawei.com/Ascend910B3
    resourceMemoryName: huawei.com/Ascend910B3-memory
    memoryAllocatable: 65536
    memoryCapacity: 65536
    aiCore: 20
  - chipName: 310P3
    commonWord: Ascend310P
    resourceName: huawei.com/Ascend310P
    resourceMemoryName: huawei.com/Ascend310P-memory
    memoryAllocatable: 21527
    memoryCapacity: 24576
)";

Registry Load() {
  auto config = LoadDeviceConfig(kConfig);
  EXPECT_TRUE(config) << config.error();
  auto registry = BuildRegistry(*config);
  EXPECT_TRUE(registry) << registry.error();
  return std::move(*registry);
}

// A node of four 910B3 devices "<node>-<i>" on the given HCCS rings (-1: no NetworkID).
NodeUsage Node(const Registry& r, const std::string& name, const std::vector<int>& rings,
               const std::string& word = "Ascend910B3") {
  std::string list = "[";
  for (size_t i = 0; i < rings.size(); ++i) {
    if (i > 0) list += ",";
    list += R"({"id":")" + name + "-" + std::to_string(i) + R"(","index":)" + std::to_string(i) +
            R"(,"count":4,"devmem":65536,"devcore":20,"type":")" + word + R"(","health":true)";
    if (rings[i] >= 0) list += R"(,"customInfo":{"NetworkID":)" + std::to_string(rings[i]) + "}";
    list += "}";
  }
  NodeView view{.name = name};
  view.annotations["hami.io/node-register-" + word] = list + "]";
  auto row = NodeUsageFromView(r, view);
  EXPECT_TRUE(row) << row.error();
  return *row;
}

double Score(const Device& dev, const NodeUsage& node, const protocol::PodDevices& picks) {
  return dev.ScoreNode(ScoreContext{.node = &node, .picks = &picks});
}

protocol::ContainerDevice Pick(const std::string& uuid, const std::string& word = "Ascend910B3") {
  return {uuid, word, 65536, 0};
}

TEST(AscendScore, RingShareTimesTen) {
  Registry r = Load();
  const Device& b3 = *r.Find("Ascend910B3");
  NodeUsage node = Node(r, "n", {1, 1, 2, 3});
  EXPECT_EQ(Score(b3, node, {{Pick("n-0"), Pick("n-1")}}), 10);  // both on ring 1
  EXPECT_EQ(Score(b3, node, {{Pick("n-0"), Pick("n-2")}}), 5);   // 1 of 2
  // Three on rings 1, 1, 2: 2/3 (float32) x 10.
  EXPECT_FLOAT_EQ(static_cast<float>(Score(b3, node, {{Pick("n-0"), Pick("n-1"), Pick("n-2")}})),
                  static_cast<float>(2.0f / 3.0f * 10.0f));
  // Per container, summed; containers without picks are skipped.
  EXPECT_EQ(Score(b3, node, {{Pick("n-0")}, {}, {Pick("n-2"), Pick("n-3")}}), 15);
  // A pick on a device without a NetworkID: the node scores 0.
  NodeUsage partial = Node(r, "m", {1, -1, 1, 1});
  EXPECT_EQ(Score(b3, partial, {{Pick("m-0"), Pick("m-1")}}), 0);
  EXPECT_EQ(Score(b3, partial, {{Pick("m-0"), Pick("m-2")}}), 10);
  // Not a 910 family: 0.
  const Device& p310 = *r.Find("Ascend310P");
  NodeUsage small = Node(r, "s", {1, 1}, "Ascend310P");
  EXPECT_EQ(Score(p310, small, {{Pick("s-0", "Ascend310P"), Pick("s-1", "Ascend310P")}}), 0);
}

// Two empty nodes: binpack takes the one whose ring holds the whole request (score 10 against
// 5), though the other's name sorts first.
TEST(AscendScore, ScheduleChoosesTheNodeWhoseRingHoldsThePod) {
  Registry r = Load();
  std::vector<NodeUsage> nodes = {Node(r, "a", {1, 2, 3, 4}), Node(r, "b", {1, 1, 2, 2})};
  PodView pod{.name = "p", .namespace_name = "default"};
  ContainerView c{.name = "c"};
  c.limits["huawei.com/Ascend910B3"] = "2";
  pod.containers.push_back(c);
  auto d = Schedule(r, pod, nodes, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr);
  EXPECT_EQ(d->Chosen()->node, "b");
  EXPECT_DOUBLE_EQ(d->nodes[0].score, 5);
  EXPECT_DOUBLE_EQ(d->nodes[1].score, 10);
  // The decision's annotations carry predicate-time (Unix seconds) from the caller's clock.
  const SystemTime now{std::chrono::seconds(1700000123) + std::chrono::milliseconds(999)};
  auto annos = AllocationAnnotations(r, pod, *d, now);
  EXPECT_EQ(annos.at(std::string(kPredicateTimeKey)), "1700000123");
  EXPECT_EQ(annos.at("hami.io/vgpu-node"), "b");
  EXPECT_EQ(AllocationAnnotations(r, pod, *d).count(std::string(kPredicateTimeKey)), 0u);
}

}  // namespace
}  // namespace hami::device::ascend
