// Issue 19 item 6 end to end: a node whose register annotation is malformed is seen on every
// registration pass; the scheduler's Events about it are folded as client-go's EventCorrelator
// folds them, into ONE Event whose count grows (a merge PATCH of count and lastTimestamp),
// against the sim API server. Before, each pass created another Event (one every 15 s).
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "k8s/client.h"
#include "k8s/object.h"
#include "test_env.h"

namespace hami {
namespace {

using nlohmann::json;
using scheduler::testing::Node;

class EventAggregationTest : public scheduler::testing::RegistrarTest {
 protected:
  // The InvalidRegisterAnnotation Events about `node`.
  std::vector<json> EventsAbout(const std::string& node) {
    std::vector<json> out;
    auto events = client_->List(k8s::resources::kEvents, "default", {});
    EXPECT_TRUE(events.ok());
    if (!events.ok()) return out;
    for (const json& e : events->items) {
      if (e["involvedObject"]["name"] == node && e["reason"] == "InvalidRegisterAnnotation") {
        out.push_back(e);
      }
    }
    return out;
  }
};

TEST_F(EventAggregationTest, ARepeatedBadAnnotationIsOneEventWhoseCountGrows) {
  ASSERT_TRUE(
      client_->Create(k8s::resources::kNodes, "", Node("node-bad", "GPU-x,not,a,row")).ok());
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("node-good")).ok());
  for (int pass = 1; pass <= 4; ++pass) {
    ASSERT_TRUE(registrar_->RunOnce().ok());
    std::vector<json> events = EventsAbout("node-bad");
    ASSERT_EQ(events.size(), 1u) << "pass " << pass << ": " << json(events).dump();
    EXPECT_EQ(events[0]["count"], pass) << events[0];
    EXPECT_EQ(events[0]["type"], "Warning");
    EXPECT_EQ(events[0]["source"]["component"], "hami-scheduler") << events[0];
  }
  EXPECT_TRUE(EventsAbout("node-good").empty());

  // Another malformed value is another message: a second Event, and the first stays as it was.
  json patch = {{"metadata", {{"annotations", {{"hami.io/node-nvidia-register", "[[[not json"}}}}}};
  ASSERT_TRUE(
      client_->Patch(k8s::resources::kNodes, "", "node-bad", k8s::PatchType::kMerge, patch).ok());
  ASSERT_TRUE(registrar_->RunOnce().ok());
  ASSERT_TRUE(registrar_->RunOnce().ok());
  std::vector<json> events = EventsAbout("node-bad");
  ASSERT_EQ(events.size(), 2u) << json(events).dump();
  std::vector<int> counts = {events[0]["count"].get<int>(), events[1]["count"].get<int>()};
  std::sort(counts.begin(), counts.end());
  EXPECT_EQ(counts, (std::vector<int>{2, 4}));
}

}  // namespace
}  // namespace hami
