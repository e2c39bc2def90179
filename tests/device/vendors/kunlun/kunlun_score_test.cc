// Kunlun's node score through the Device API and the scheduler: HAMi ScoreNode (calcscore over
// the node's used devices and the pod's picks; 0 when the node or a pick is not all kunlun).
// Vectors from HAMi v2.10 pkg/device/kunlun/device_test.go Test_ScoreNode.
#include <gtest/gtest.h>

#include "device/config.h"
#include "device/device.h"
#include "device/schedule.h"
#include "device/vendors/kunlun/kunlun.h"

namespace hami::device::kunlun {
namespace {

Registry Load() {
  auto config = LoadDeviceConfig("nvidia: {}\nkunlun: {}\n");
  EXPECT_TRUE(config) << config.error();
  return MakeRegistry(*config);
}

NodeUsage Node(const std::string& name, int cards, const std::vector<int>& used) {
  NodeUsage node{.name = name, .devices = XpuNodeDevices(name, cards)};
  for (int i : used) node.devices[i].used = 1;
  return node;
}

protocol::PodDevices Picks(const std::string& node, const std::vector<int>& indexes,
                           const std::string& type = "kunlun") {
  protocol::ContainerDevices ctr;
  for (int i : indexes) ctr.push_back({node + "-kunlun-" + std::to_string(i), type, 98304, 100});
  return {ctr};
}

double Score(const Device& dev, const NodeUsage& node, const protocol::PodDevices& picks) {
  return dev.ScoreNode(ScoreContext{.node = &node, .picks = &picks});
}

TEST(KunlunScore, HamiVectors) {
  Registry r = Load();
  const Device& xpu = *r.Find("kunlun");
  // Scenario 1: the left wing used, the pod takes all eight: 3000.
  NodeUsage left_used = Node("n", 8, {0, 1, 2, 3});
  EXPECT_EQ(Score(xpu, left_used, Picks("n", {0, 1, 2, 3, 4, 5, 6, 7})), 3000);
  // Scenario 2: no devices known on the node, one pick: 0.
  NodeUsage none{.name = "n"};
  EXPECT_EQ(Score(xpu, none, Picks("n", {0})), 0);
  // The picks' indexes are the rows' (CalcScore directly gives the same).
  NodeUsage empty = Node("n", 8, {});
  EXPECT_EQ(Score(xpu, empty, Picks("n", {4, 5, 6, 7})), CalcScore({}, {4, 5, 6, 7}));
  EXPECT_EQ(Score(xpu, left_used, Picks("n", {4, 5, 6, 7})), CalcScore({0, 1, 2, 3}, {4, 5, 6, 7}));
}

TEST(KunlunScore, ZeroWhenTheNodeOrAPickIsNotKunlun) {
  Registry r = Load();
  const Device& xpu = *r.Find("kunlun");
  NodeUsage mixed = Node("n", 8, {});
  mixed.devices.push_back(DeviceUsage{.id = "gpu-0", .type = "NVIDIA A100", .vendor = "NVIDIA"});
  EXPECT_EQ(Score(xpu, mixed, Picks("n", {0})), 0);
  NodeUsage plain = Node("n", 8, {});
  EXPECT_EQ(Score(xpu, plain, Picks("n", {0}, "XPU")), 0);
  EXPECT_EQ(Score(xpu, plain, Picks("n", {0, 1, 2, 3})), 2000);
}

// The scheduler adds it: each node's score is the default score plus CalcScore of its picks.
TEST(KunlunScore, ScheduleAddsTheScore) {
  Registry r = Load();
  std::vector<NodeUsage> nodes = {Node("a", 8, {}), Node("b", 8, {0, 1, 2, 3})};
  PodView pod{.name = "p", .namespace_name = "default"};
  ContainerView c{.name = "c"};
  c.limits["kunlunxin.com/xpu"] = "4";
  pod.containers.push_back(c);
  auto d = Schedule(r, pod, nodes, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  ASSERT_TRUE(d->nodes[0].fit && d->nodes[1].fit);
  ASSERT_NE(d->Chosen(), nullptr);
  for (size_t i = 0; i < 2; ++i) {
    NodeFit full = FitPodOnNode(r, pod, d->requests, nodes[i], PodPolicy{}, nullptr);
    ASSERT_TRUE(full.fit);
    std::vector<uint64_t> picked, used;
    for (const auto& p : full.devices.at("kunlun")[0]) {
      for (const auto& row : nodes[i].devices) {
        if (row.id == p.uuid) picked.push_back(row.index);
      }
    }
    for (const auto& row : nodes[i].devices) {
      if (row.used > 0) used.push_back(row.index);
    }
    EXPECT_DOUBLE_EQ(d->nodes[i].score, NodeScore(nodes[i].devices) + CalcScore(used, picked))
        << nodes[i].name;
    EXPECT_DOUBLE_EQ(full.score, d->nodes[i].score);
  }
  EXPECT_EQ(d->Chosen()->node, "b");  // binpack: the busier node, its free wing taken whole
}

}  // namespace
}  // namespace hami::device::kunlun
