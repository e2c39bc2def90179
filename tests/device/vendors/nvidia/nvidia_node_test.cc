// The NVIDIA backend's node side of the seam (register.cc): CheckHealth around the handshake
// verdict (HAMi's ReportedGPUNum / ReportedRegisterAnnos rules, remembered per node until
// ForgetNode) and the pair scores of hami.io/node-nvidia-score.
#include <gtest/gtest.h>

#include "device/vendors/nvidia/nvidia.h"

namespace hami::device::nvidia {
namespace {

struct HealthCase {
  const char* name;
  NodeSeen seen;
  int64_t allocatable;
  const char* register_value;
  Health handshake;
  Health want;
};

TEST(NvidiaHealth, TheCountAndRegisterRules) {
  const Health pending{true, false};   // a Requesting value is pending
  const Health requested{true, true};  // the pass wrote Requesting_<now>
  const Health expired{false, false};  // expired Requesting, nothing allocatable
  const std::vector<HealthCase> cases = {
      {"allocatable 0, never seen, handshake pending", {0, ""}, 0, "R", pending, {true, false}},
      {"count unchanged, register changed", {2, "R1"}, 2, "R2", pending, {true, true}},
      {"unchanged", {2, "R"}, 2, "R", pending, {true, false}},
      {"unchanged, handshake written", {2, "R"}, 2, "R", requested, {true, true}},
      {"count dropped to 0", {2, "R"}, 0, "R", pending, {false, false}},
      {"count changed", {2, "R"}, 4, "R", pending, {true, true}},
      {"first count seen", {0, ""}, 2, "R", pending, {true, true}},
      {"0 and 0 follows an expired handshake", {0, "R"}, 0, "R", expired, {false, false}},
      {"register changed keeps the handshake's health", {2, "R1"}, 2, "R2", expired, {false, true}},
  };
  for (const HealthCase& c : cases) {
    NodeSeen seen = c.seen;
    EXPECT_EQ(CheckNvidiaHealth(seen, c.allocatable, c.register_value, c.handshake), c.want)
        << c.name;
    EXPECT_EQ(seen, (NodeSeen{c.allocatable, c.register_value})) << c.name;
  }
}

NodeView Node(const char* name, const char* allocatable, const char* reg) {
  NodeView n{.name = name};
  if (allocatable) n.allocatable["nvidia.com/gpu"] = allocatable;
  if (reg) n.annotations["hami.io/node-nvidia-register"] = reg;
  return n;
}

// The backend remembers each node's last count and register string, separately per node, and
// forgets a node on ForgetNode.
TEST(NvidiaHealth, TheDeviceRemembersEachNodeUntilForgotten) {
  const NvidiaDevice dev{NvidiaConfig{}};
  const Health pending{true, false};
  EXPECT_EQ(dev.CheckHealth(Node("a", "2", "R"), pending), (Health{true, true}));  // first seen
  EXPECT_EQ(dev.CheckHealth(Node("a", "2", "R"), pending), pending);               // unchanged
  EXPECT_EQ(dev.CheckHealth(Node("b", "2", "R"), pending), (Health{true, true}));  // other node
  EXPECT_EQ(dev.CheckHealth(Node("a", "2", "R2"), pending), (Health{true, true}));
  EXPECT_EQ(dev.CheckHealth(Node("a", "0", "R2"), pending), (Health{false, false}));  // left
  // Not a whole number, or absent: 0.
  EXPECT_EQ(dev.CheckHealth(Node("b", "x", "R"), pending), (Health{false, false}));
  EXPECT_EQ(dev.CheckHealth(Node("b", nullptr, nullptr), pending), pending);
  dev.ForgetNode("a");
  dev.ForgetNode("never-seen");
  EXPECT_EQ(dev.CheckHealth(Node("a", "0", "R2"), pending), pending);  // new again: 0 and 0
  // The configured count resource is the one read.
  NvidiaConfig renamed;
  renamed.resource_count_name = "example.com/vgpu";
  const NvidiaDevice other{renamed};
  NodeView n = Node("a", nullptr, "R");
  n.allocatable["example.com/vgpu"] = "4";
  EXPECT_EQ(other.CheckHealth(n, pending), (Health{true, true}));
}

TEST(NvidiaPairScores, ReadFromTheScoreAnnotation) {
  const NvidiaDevice dev{NvidiaConfig{}};
  auto none = dev.NodePairScores(NodeView{.name = "n"});
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->empty());
  NodeView n{.name = "n"};
  n.annotations["hami.io/node-nvidia-score"] =
      R"([{"uuid":"GPU-a","score":{"GPU-b":50}},{"uuid":"GPU-b","score":{"GPU-a":50}}])";
  auto scores = dev.NodePairScores(n);
  ASSERT_TRUE(scores) << scores.error();
  ASSERT_EQ(scores->size(), 2u);
  EXPECT_EQ((*scores)[0].uuid, "GPU-a");
  n.annotations["hami.io/node-nvidia-score"] = "[{\"uuid\":1}]";
  auto bad = dev.NodePairScores(n);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("annotation hami.io/node-nvidia-score: ", 0), 0u) << bad.error();
}

}  // namespace
}  // namespace hami::device::nvidia
