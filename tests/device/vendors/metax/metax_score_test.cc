// MetaX's node scores through the Device API and the scheduler (HAMi ScoreNode: the GPU's
// topology annotations, the sGPU's MetaLink score), the predicate time written with the decision,
// and the custom filter rule with no quota configured. Vectors from HAMi v2.10
// pkg/device/metax/{device_test,sdevice_test}.go (Test_ScoreNode, TestScoreExclusiveDevices,
// TestScoreNodePolicyIndependence).
#include <gtest/gtest.h>

#include <chrono>

#include "device/config.h"
#include "device/device.h"
#include "device/schedule.h"
#include "device/vendors/metax/metax.h"
#include "protocol/reason.h"

namespace hami::device::metax {
namespace {

Registry Load(bool topology_aware = false) {
  auto config = LoadDeviceConfig(std::string("metax:\n  sgpuTopologyAware: ") +
                                 (topology_aware ? "true" : "false") + "\n");
  EXPECT_TRUE(config) << config.error();
  auto registry = BuildRegistry(*config);
  EXPECT_TRUE(registry) << registry.error();
  return std::move(*registry);
}

NodeUsage GpuNode(const Registry& r, const std::string& name, int count, StringMap annotations) {
  NodeView view{.name = name, .annotations = std::move(annotations)};
  view.capacity["metax-tech.com/gpu"] = std::to_string(count);
  auto row = NodeUsageFromView(r, view);
  EXPECT_TRUE(row) << row.error();
  return *row;
}

PodView GpuPod(int containers, int per_container = 1) {
  PodView pod{.name = "p", .namespace_name = "default"};
  for (int i = 0; i < containers; ++i) {
    ContainerView c{.name = "c" + std::to_string(i)};
    c.limits["metax-tech.com/gpu"] = std::to_string(per_container);
    pod.containers.push_back(c);
  }
  return pod;
}

double Score(const Device& dev, const NodeUsage& node, const protocol::PodDevices& picks,
             NodePolicy policy, const PodView* pod = nullptr) {
  return dev.ScoreNode(ScoreContext{.node = &node, .picks = &picks, .policy = policy, .pod = pod});
}

// HAMi Test_ScoreNode: binpack reads losses[n], spread scores[n], n = devices the pod takes.
TEST(MetaxScore, GpuScoreFromTheNodesTopologyAnnotations) {
  Registry r = Load();
  const Device& gpu = *r.Find("Metax-GPU");
  NodeUsage losses = GpuNode(r, "n", 2, {{std::string(kLossesKey), R"({"1":100,"2":200})"}});
  ASSERT_EQ(losses.devices.size(), 2u);
  EXPECT_EQ(losses.devices[0].custom_info.at(std::string(kLossesKey)), R"({"1":100,"2":200})");
  protocol::ContainerDevice a{"n-metax-0", "Metax-GPU", 1000, 1};
  protocol::ContainerDevice b{"n-metax-1", "Metax-GPU", 1000, 1};
  EXPECT_EQ(Score(gpu, losses, {{a, b}}, NodePolicy::kBinpack), 1800);
  EXPECT_EQ(Score(gpu, losses, {{a}}, NodePolicy::kBinpack), 1900);
  EXPECT_EQ(Score(gpu, losses, {{a}}, NodePolicy::kSpread), 0);  // no scores annotation
  NodeUsage scores = GpuNode(r, "n", 2, {{std::string(kScoresKey), R"({"1":100,"2":200})"}});
  EXPECT_EQ(Score(gpu, scores, {{a}}, NodePolicy::kSpread), 1900);
  EXPECT_EQ(Score(gpu, scores, {{a}}, NodePolicy::kBinpack), 0);
  // Containers' picks add up; an unreadable annotation reads 0 (2000 - 0).
  EXPECT_EQ(Score(gpu, losses, {{a}, {b}}, NodePolicy::kBinpack), 1800);
  NodeUsage bad = GpuNode(r, "n", 1, {{std::string(kLossesKey), "{"}});
  EXPECT_EQ(Score(gpu, bad, {{a}}, NodePolicy::kBinpack), 2000);
}

// The scheduler adds the score: binpack prefers the node whose topology loses least, although
// both nodes are empty and the other's name sorts first.
TEST(MetaxScore, ScheduleChoosesTheNodeWithTheLowerTopologyLoss) {
  Registry r = Load();
  std::vector<NodeUsage> nodes = {GpuNode(r, "a", 2, {{std::string(kLossesKey), R"({"1":300})"}}),
                                  GpuNode(r, "b", 2, {{std::string(kLossesKey), R"({"1":100})"}})};
  auto d = Schedule(r, GpuPod(1), nodes, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr);
  EXPECT_EQ(d->Chosen()->node, "b");
  EXPECT_DOUBLE_EQ(d->nodes[0].score, 1700);
  EXPECT_DOUBLE_EQ(d->nodes[1].score, 1900);
  // Spread prefers the lowest total: 2000 - scores[1].
  std::vector<NodeUsage> spread = {GpuNode(r, "a", 2, {{std::string(kScoresKey), R"({"1":300})"}}),
                                   GpuNode(r, "b", 2, {{std::string(kScoresKey), R"({"1":100})"}})};
  ScheduleOptions options{.node_policy = NodePolicy::kSpread};
  auto s = Schedule(r, GpuPod(1), spread, {}, options);
  ASSERT_TRUE(s && s->Chosen());
  EXPECT_EQ(s->Chosen()->node, "a");
}

// HAMi customFilterRule holds with no quota configured: a second container may only use the
// device the first one holds (a whole device, so it is taken).
TEST(MetaxScore, CustomFilterRuleWithoutQuota) {
  Registry r = Load();
  std::vector<NodeUsage> nodes = {GpuNode(r, "n", 2, {})};
  auto d = Schedule(r, GpuPod(2), nodes, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->Chosen(), nullptr);
  const std::string& reason = d->nodes[0].reason;
  EXPECT_NE(reason.find(std::string(kCardNotFoundCustomFilterRule)), std::string::npos) << reason;
  // One container fits.
  auto one = Schedule(r, GpuPod(1), nodes, {}, ScheduleOptions{});
  ASSERT_TRUE(one && one->Chosen());
}

// sGPU rows for the exclusive score: uuid, link zone, used.
NodeUsage SgpuNode(const std::vector<std::tuple<std::string, int, int>>& devices) {
  NodeUsage node{.name = "n"};
  for (const auto& [uuid, zone, used] : devices) {
    DeviceUsage d{.id = uuid, .type = "Metax-SGPU", .vendor = "Metax-SGPU", .health = true};
    d.count = 10;
    d.used = used;
    d.custom_info[std::string(kInfoLinkZone)] = std::to_string(zone);
    node.devices.push_back(d);
  }
  return node;
}

// HAMi TestScoreExclusiveDevices / TestScoreNodePolicyIndependence: the MetaLink score is
// policy-neutral, weighted 10000 under binpack and -10000 under spread.
TEST(MetaxScore, SgpuTopologyScoreIsPolicyNeutral) {
  Registry aware = Load(/*topology_aware=*/true);
  const Device& sgpu = *aware.Find("Metax-SGPU");
  NodeUsage node = SgpuNode({{"g0", 1, 0}, {"g1", 1, 0}, {"g2", 2, 0}, {"g3", 2, 0}});
  protocol::PodDevices same_zone = {
      {{"g0", "Metax-SGPU", 1000, 100}, {"g1", "Metax-SGPU", 1000, 100}}};
  // 10 x 10 (one link kept) - 0 lost = 100.
  EXPECT_EQ(SgpuExclusiveScore(same_zone, node.devices), 100);
  EXPECT_EQ(Score(sgpu, node, same_zone, NodePolicy::kBinpack), 1000000);
  EXPECT_EQ(Score(sgpu, node, same_zone, NodePolicy::kSpread), -1000000);
  // Across zones: no link kept, both zones broken: 0 - 20.
  protocol::PodDevices split = {{{"g0", "Metax-SGPU", 1000, 100}, {"g2", "Metax-SGPU", 1000, 100}}};
  EXPECT_EQ(Score(sgpu, node, split, NodePolicy::kBinpack), -200000);
  // Shares (cores < 100) are not scored; an online pod scores its devices' pods' app classes
  // instead (none here: 0; metax_app_class_test.cc).
  protocol::PodDevices share = {{{"g0", "Metax-SGPU", 1000, 50}}};
  EXPECT_EQ(Score(sgpu, node, share, NodePolicy::kBinpack), 0);
  PodView online{.annotations = {{std::string(kAppClassKey), "online"}}};
  EXPECT_EQ(Score(sgpu, node, same_zone, NodePolicy::kBinpack, &online), 0);
  // The pod's annotation overrides the section (Go ParseBool); the section's false means 0.
  PodView off{.annotations = {{std::string(kTopologyAwareKey), "F"}}};
  EXPECT_EQ(Score(sgpu, node, same_zone, NodePolicy::kBinpack, &off), 0);
  Registry unaware = Load(false);
  const Device& plain = *unaware.Find("Metax-SGPU");
  EXPECT_EQ(Score(plain, node, same_zone, NodePolicy::kBinpack), 0);
  PodView on{.annotations = {{std::string(kTopologyAwareKey), "true"}}};
  EXPECT_EQ(Score(plain, node, same_zone, NodePolicy::kBinpack, &on), 1000000);
}

// HAMi writes metax-tech.com/predicate-time (Unix nanoseconds) with the decision.
TEST(MetaxScore, SgpuPredicateTimeFromTheDecisionsClock) {
  Registry r = Load();
  const Device& sgpu = *r.Find("Metax-SGPU");
  PodView pod;
  protocol::PodDevices picks = {{{"g0", "Metax-SGPU", 1024, 50}}};
  const SystemTime now{std::chrono::seconds(1700000000) + std::chrono::nanoseconds(123)};
  StringMap a = sgpu.AllocationAnnotations(AllocationContext{.pod = &pod, .now = now}, picks);
  EXPECT_EQ(a.at(std::string(kPredicateTimeKey)), "1700000000000000123");
  EXPECT_EQ(a.at(std::string(kPodAllocatedKey)), R"([[{"uuid":"g0","compute":50,"vRam":1024}]])");
  StringMap no_time = sgpu.AllocationAnnotations(pod, picks);
  EXPECT_EQ(no_time.count(std::string(kPredicateTimeKey)), 0u);
  EXPECT_TRUE(sgpu.AllocationAnnotations(AllocationContext{.now = now}, {}).empty());
}

}  // namespace
}  // namespace hami::device::metax
