// The in-memory store: resourceVersion, conflicts, identity fields, namespaces, the watch window.
#include "sim/apiserver/store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "k8s/object.h"

namespace hami::sim {
namespace {

using std::chrono::milliseconds;

const ResourceType& Pods() { return *FindResourceType("", "v1", "pods"); }
const ResourceType& Nodes() { return *FindResourceType("", "v1", "nodes"); }

Json Named(const std::string& name) { return Json{{"metadata", {{"name", name}}}}; }

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store_.Create(NamespaceType(), "", Named("default"))); }
  // Runs `write` on another thread while this one waits (20 s at most per wait) for pod events
  // after `cursor`; the first batch that has any, which must come long before the waits run out.
  std::vector<StoreEvent> AwaitPodEvents(int64_t cursor, const std::function<void()>& write) {
    std::thread writer(write);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<StoreEvent> got;
    while (got.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      auto batch = store_.WaitEvents(Pods(), "", cursor, milliseconds(20000));
      EXPECT_TRUE(batch);
      if (!batch) break;
      got = batch->events;
      cursor = batch->cursor;
    }
    writer.join();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
    return got;
  }

  FakeClock clock_;
  Store store_{clock_, 4};
};

TEST_F(StoreTest, ResourceVersionIsClusterWideAndMonotonic) {
  auto a = store_.Create(Pods(), "default", Named("a"));
  auto n = store_.Create(Nodes(), "", Named("n"));
  auto b = store_.Create(Pods(), "default", Named("b"));
  ASSERT_TRUE(a && n && b);
  EXPECT_LT((*a)->rv, (*n)->rv);
  EXPECT_LT((*n)->rv, (*b)->rv);
  EXPECT_EQ(store_.resource_version(), (*b)->rv);
  EXPECT_EQ(k8s::ResourceVersion((*b)->json), std::to_string((*b)->rv));
  EXPECT_EQ((*a)->json["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
  EXPECT_EQ((*a)->raw, (*a)->json.dump());
}

TEST_F(StoreTest, UpdateKeepsIdentityAndSkipsNoops) {
  auto a = store_.Create(Pods(), "default", Named("a"));
  ASSERT_TRUE(a);
  std::string uid = k8s::Uid((*a)->json);
  auto same = store_.Update(Pods(), "default", "a", [](const Json& cur) { return cur; });
  ASSERT_TRUE(same);
  EXPECT_EQ((*same)->rv, (*a)->rv);  // nothing changed: no new version
  auto changed = store_.Update(Pods(), "default", "a", [](const Json& cur) -> k8s::ApiResult<Json> {
    Json next = cur;
    next["metadata"]["uid"] = "forged";
    next["metadata"]["labels"] = {{"x", "1"}};
    return next;
  });
  ASSERT_TRUE(changed);
  EXPECT_GT((*changed)->rv, (*a)->rv);
  EXPECT_EQ(k8s::Uid((*changed)->json), uid);
  auto stale = store_.Update(Pods(), "default", "a", [&](const Json&) -> k8s::ApiResult<Json> {
    return (*a)->json;  // carries the old resourceVersion
  });
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, 409);
  auto renamed = store_.Update(Pods(), "default", "a", [](const Json& cur) -> k8s::ApiResult<Json> {
    Json next = cur;
    next["metadata"]["name"] = "b";
    return next;
  });
  ASSERT_FALSE(renamed);
  EXPECT_EQ(renamed.error().code, 400);
}

TEST_F(StoreTest, CreateValidatesNameAndNamespace) {
  Json gen = {{"metadata", {{"generateName", "job-"}}}};
  auto g = store_.Create(Pods(), "default", gen);
  ASSERT_TRUE(g);
  EXPECT_EQ(k8s::Name((*g)->json).rfind("job-", 0), 0u);
  EXPECT_EQ(k8s::Name((*g)->json).size(), 9u);
  EXPECT_EQ(store_.Create(Pods(), "default", Json::object()).error().code, 422);
  EXPECT_EQ(store_.Create(Pods(), "default", Named("UPPER")).error().code, 422);
  EXPECT_EQ(store_.Create(Pods(), "missing", Named("a")).error().code, 404);
  Json other_ns = {{"metadata", {{"name", "a"}, {"namespace", "kube-system"}}}};
  EXPECT_EQ(store_.Create(Pods(), "default", other_ns).error().code, 400);
}

TEST_F(StoreTest, WatchWindowExpiresOldResourceVersions) {
  int64_t start = store_.resource_version();
  ASSERT_TRUE(store_.Create(Pods(), "default", Named("a")));
  auto batch = store_.WaitEvents(Pods(), "", start, milliseconds(0));
  ASSERT_TRUE(batch);
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(batch->events[0].type, EventType::kAdded);
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(store_.Create(Nodes(), "", Named("n" + std::to_string(i))));
  auto gone = store_.WaitEvents(Pods(), "", start, milliseconds(0));
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, 410);
  auto recent = store_.WaitEvents(Nodes(), "", store_.resource_version() - 2, milliseconds(0));
  ASSERT_TRUE(recent);
  EXPECT_EQ(recent->events.size(), 2u);
  EXPECT_EQ(recent->cursor, store_.resource_version());
}

// Watchers wait per type: a pod watcher sees no node events, but its cursor still moves past
// them, and a pod written from another thread wakes it long before its wait runs out.
TEST_F(StoreTest, WaitEventsFiltersByTypeAndWakesOnItsType) {
  const int64_t start = store_.resource_version();
  ASSERT_TRUE(store_.Create(Nodes(), "", Named("n")));
  auto none = store_.WaitEvents(Pods(), "", start, milliseconds(0));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->events.empty());
  EXPECT_EQ(none->cursor, store_.resource_version());

  const std::vector<StoreEvent> got = AwaitPodEvents(store_.resource_version(), [&] {
    ASSERT_TRUE(store_.Create(Nodes(), "", Named("m")));
    ASSERT_TRUE(store_.Create(Pods(), "default", Named("p")));
  });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(k8s::Name(got[0].object->json), "p");
}

// Every kind of write wakes a waiting watcher (the write notifies after it lets the store go).
TEST_F(StoreTest, UpdatesAndDeletesWakeWaitingWatchers) {
  ASSERT_TRUE(store_.Create(Pods(), "default", Named("p")));
  const std::vector<std::function<void()>> writes = {
      [&] {
        ASSERT_TRUE(store_.Update(Pods(), "default", "p", [](const Json& cur) {
          Json next = cur;
          next["metadata"]["labels"] = {{"x", "1"}};
          return k8s::ApiResult<Json>(next);
        }));
      },
      [&] { ASSERT_TRUE(store_.Delete(Pods(), "default", "p", {})); }};
  const EventType want[] = {EventType::kModified, EventType::kDeleted};
  for (size_t i = 0; i < writes.size(); ++i) {
    SCOPED_TRACE(i);
    const std::vector<StoreEvent> got = AwaitPodEvents(store_.resource_version(), writes[i]);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].type, want[i]);
  }
}

TEST_F(StoreTest, DeletingANamespaceDeletesItsObjects) {
  ASSERT_TRUE(store_.Create(NamespaceType(), "", Named("t")));
  ASSERT_TRUE(store_.Create(Pods(), "t", Named("a")));
  ASSERT_TRUE(store_.Create(Pods(), "default", Named("a")));
  int64_t before = store_.resource_version();
  ASSERT_TRUE(store_.Delete(NamespaceType(), "", "t", {}));
  EXPECT_FALSE(store_.Get(Pods(), "t", "a"));
  EXPECT_TRUE(store_.Get(Pods(), "default", "a"));
  auto events = store_.WaitEvents(Pods(), "", before, milliseconds(0));
  ASSERT_TRUE(events);
  ASSERT_EQ(events->events.size(), 1u);
  EXPECT_EQ(events->events[0].type, EventType::kDeleted);
  DeletePreconditions wrong_uid{"nope", ""};
  EXPECT_EQ(store_.Delete(Pods(), "default", "a", wrong_uid).error().code, 409);
}

TEST_F(StoreTest, ListPagesWithContinueTokens) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(store_.Create(Pods(), "default", Named("p" + std::to_string(i))));
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    auto page = store_.List(Pods(), "default", {}, 2, token);
    ASSERT_TRUE(page);
    for (const auto& item : page->items) names.push_back(k8s::Name(item->json));
    token = page->continue_token;
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"}));
  EXPECT_EQ(store_.List(Pods(), "default", {}, 2, "zz!").error().code, 400);
}

const ResourceType& ConfigMaps() { return *FindResourceType("", "v1", "configmaps"); }
const ResourceType& Events() { return *FindResourceType("", "v1", "events"); }

Json Annotated(const std::string& name, size_t value_bytes) {
  Json obj = Named(name);
  obj["metadata"]["annotations"] = {{"k", std::string(value_bytes, 'x')}};
  return obj;
}

// kube-apiserver's limit: keys and values of metadata.annotations together at most 256 KiB.
TEST_F(StoreTest, AnnotationsOver256KiBAreRefused) {
  ASSERT_TRUE(store_.Create(ConfigMaps(), "default", Annotated("fits", kMaxAnnotationBytes - 1)));
  auto big = store_.Create(ConfigMaps(), "default", Annotated("big", kMaxAnnotationBytes));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, 422);
  EXPECT_EQ(big.error().message,
            "ConfigMap \"big\" is invalid: metadata.annotations: Too long: must have at most "
            "262144 bytes");
  // Growing an object by updates (a PATCH is one) stops at the limit; the object is unchanged.
  ASSERT_TRUE(store_.Create(ConfigMaps(), "default", Annotated("grows", 0)));
  int64_t rv = 0;
  int stored = 0;
  for (int i = 0; i < 30; ++i) {
    auto r = store_.Update(
        ConfigMaps(), "default", "grows", [&](const Json& cur) -> k8s::ApiResult<Json> {
          Json next = cur;
          next["metadata"]["annotations"]["k" + std::to_string(i)] = std::string(10 << 10, 'y');
          return next;
        });
    if (!r) {
      EXPECT_EQ(r.error().code, 422) << r.error().message;
      continue;
    }
    rv = (*r)->rv;
    ++stored;
  }
  EXPECT_EQ(stored, 25);  // 25 x (10 KiB + 2 or 3 bytes of key) fit in 256 KiB, 26 do not
  auto cur = store_.Get(ConfigMaps(), "default", "grows");
  ASSERT_TRUE(cur);
  EXPECT_EQ((*cur)->rv, rv);
}

// Events live an hour after their last write, on the store's clock.
TEST(StoreEvents, ExpireAnHourAfterTheirLastWrite) {
  FakeClock clock;
  Store store(clock);
  ASSERT_TRUE(store.Create(NamespaceType(), "", Named("default")));
  ASSERT_TRUE(store.Create(Events(), "default", Named("e1")));
  ASSERT_TRUE(store.Create(Events(), "default", Named("e2")));
  int64_t since = store.resource_version();
  clock.Advance(std::chrono::minutes(59));
  ASSERT_TRUE(store.Update(Events(), "default", "e2", [](const Json& cur) -> k8s::ApiResult<Json> {
    Json next = cur;
    next["count"] = 2;
    return next;
  }));
  clock.Advance(std::chrono::minutes(1));
  EXPECT_EQ(store.Get(Events(), "default", "e1").error().code, 404);  // 60 min after its write
  ASSERT_TRUE(store.Get(Events(), "default", "e2"));                  // 1 min after its update
  auto list = store.List(Events(), "", {}, 0, "");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(k8s::Name(list->items[0]->json), "e2");
  // The next write removes it for good, and watchers see it go.
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("any")));
  auto batch = store.WaitEvents(Events(), "", since, milliseconds(0));
  ASSERT_TRUE(batch);
  ASSERT_EQ(batch->events.size(), 2u);
  EXPECT_EQ(batch->events[0].type, EventType::kModified);
  EXPECT_EQ(batch->events[1].type, EventType::kDeleted);
  EXPECT_EQ(k8s::Name(batch->events[1].object->json), "e1");
  clock.Advance(std::chrono::minutes(59));
  EXPECT_EQ(store.Get(Events(), "default", "e2").error().code, 404);
  ASSERT_TRUE(store.Create(Events(), "default", Named("e2")));  // a new one, same name: lives
  ASSERT_TRUE(store.Get(Events(), "default", "e2"));
  // Other kinds never expire.
  clock.Advance(std::chrono::hours(24));
  EXPECT_TRUE(store.Get(ConfigMaps(), "default", "any"));
}

}  // namespace
}  // namespace hami::sim
