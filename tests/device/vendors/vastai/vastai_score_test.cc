// VastAI's node score (HAMi v2.10 pkg/device/vastai ScoreNode): per container, the share of its
// dies on its most used card, summed; 0 when a pick is not a die with a card.
#include <gtest/gtest.h>

#include "device/config.h"
#include "device/device.h"
#include "device/vendors/vastai/vastai.h"

namespace hami::device::vastai {
namespace {

DeviceUsage Die(const std::string& id, const std::string& card,
                const std::string& strategy = "die") {
  DeviceUsage d{.id = id, .type = "Vastai", .vendor = "Vastai", .health = true, .count = 1};
  if (!card.empty()) d.custom_info[std::string(kAicKey)] = card;
  if (!strategy.empty()) d.custom_info[std::string(kStrategyKey)] = strategy;
  return d;
}

protocol::ContainerDevices Picks(const std::vector<std::string>& ids) {
  protocol::ContainerDevices out;
  for (const auto& id : ids) out.push_back({id, "Vastai", 0, 0});
  return out;
}

TEST(VastaiScore, ShareOfTheFullestCard) {
  VastaiDevice dev{VastaiConfig{}};
  NodeUsage node{.name = "n",
                 .devices = {Die("d0", "c0"), Die("d1", "c0"), Die("d2", "c1"), Die("d3", "c1"),
                             Die("w0", "", ""), Die("x0", "c2", "card")}};
  auto score = [&](const protocol::PodDevices& picks) {
    return dev.ScoreNode(ScoreContext{.node = &node, .picks = &picks});
  };
  EXPECT_EQ(score({Picks({"d0", "d1"})}), 1);
  EXPECT_EQ(score({Picks({"d0", "d2"})}), 0.5);
  EXPECT_EQ(score({Picks({"d0"}), {}, Picks({"d2", "d3"})}), 2);
  EXPECT_EQ(score({{}}), 0);
  EXPECT_EQ(score({Picks({"d0", "w0"})}), 0);  // a device without custom info
  EXPECT_EQ(score({Picks({"x0"})}), 0);        // a strategy other than die
  EXPECT_EQ(score({Picks({"gone"})}), 0);      // a pick the node does not list
}

}  // namespace
}  // namespace hami::device::vastai
