// Repeated Events fold into one with a count (issue 19 item 6), as client-go's EventCorrelator
// does: the cache alone, then the client against the sim apiserver.
#include "k8s/event_correlator.h"

#include <gtest/gtest.h>

#include "k8s/client.h"
#include "k8s/object.h"
#include "sim/apiserver/apiserver.h"

namespace hami::k8s {
namespace {

TEST(EventCorrelator, RepeatsRaiseTheCount) {
  EventCorrelator c;
  EXPECT_FALSE(c.Observe("k"));
  c.Created("k", "default", "node-1.abc");
  auto r = c.Observe("k");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "node-1.abc");
  EXPECT_EQ(r->ns, "default");
  EXPECT_EQ(r->count, 2);
  EXPECT_EQ(c.Observe("k")->count, 3);
  c.Forget("k");
  EXPECT_FALSE(c.Observe("k"));
}

TEST(EventCorrelator, ForgetsTheLeastRecentlySeenPastCapacity) {
  EventCorrelator c(2);
  c.Created("a", "ns", "ea");
  c.Created("b", "ns", "eb");
  EXPECT_TRUE(c.Observe("a"));  // b is now the oldest
  c.Created("c", "ns", "ec");
  EXPECT_EQ(c.size(), 2u);
  EXPECT_TRUE(c.Observe("a"));
  EXPECT_FALSE(c.Observe("b"));
  EXPECT_TRUE(c.Observe("c"));
}

TEST(EventCorrelator, KeysDoNotRunTogether) {
  EXPECT_NE(EventKey("c", "Node", "", "ab", "", "Warning", "R", "m"),
            EventKey("c", "Node", "", "a", "b", "Warning", "R", "m"));
}

class RecordEventTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start());
    RestConfig cfg;
    cfg.server = api_.url();
    cfg.qps = 0;
    client_ = std::make_unique<Client>(cfg);
    Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
    auto created = client_->Create(resources::kNodes, "", node);
    ASSERT_TRUE(created);
    node_ = *created;
  }
  std::vector<Json> Events() {
    auto list = client_->List(resources::kEvents, "default", {});
    return list ? list->items : std::vector<Json>{};
  }

  sim::ApiServer api_{sim::ApiServerOptions{}};
  std::unique_ptr<Client> client_;
  Json node_;
};

// A node with a bad annotation used to get a new Event every registration pass (15 s).
TEST_F(RecordEventTest, ARepeatedEventIsOneEventWithACount) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client_->RecordEvent(node_, "Warning", "InvalidRegisterAnnotation", "bad", "hami"));
  }
  ASSERT_TRUE(client_->RecordEvent(node_, "Warning", "InvalidRegisterAnnotation", "other", "hami"));
  std::vector<Json> events = Events();
  ASSERT_EQ(events.size(), 2u);
  for (const Json& e : events) {
    EXPECT_EQ(e["count"], e["message"] == "bad" ? 3 : 1) << e;
    EXPECT_FALSE(e["lastTimestamp"].get<std::string>().empty());
  }
}

TEST_F(RecordEventTest, ADeletedEventIsCreatedAfresh) {
  auto first = client_->RecordEvent(node_, "Warning", "R", "m", "hami");
  ASSERT_TRUE(first);
  ASSERT_TRUE(client_->Delete(resources::kEvents, "default", Name(*first)));
  auto again = client_->RecordEvent(node_, "Warning", "R", "m", "hami");
  ASSERT_TRUE(again) << again.error().ToString();
  std::vector<Json> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 1);
}

}  // namespace
}  // namespace hami::k8s
