// Informers against the sim apiserver: sync, handlers, reconnect after a dropped stream, relist
// after 410, resync, a field-selected pod informer, and 20,000 pods.
#include "k8s/informer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/store.h"

namespace hami::k8s {
namespace {

using resources::kPods;
using std::chrono::milliseconds;

Json Pod(const std::string& name) {
  return Json{{"metadata", {{"name", name}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

// Polls `cond` until it holds or 30 s pass.
bool Eventually(const std::function<bool()>& cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return cond();
}

struct Recorder {
  std::mutex mu;
  std::vector<std::string> events;
  int resyncs = 0;
  InformerHandlers Handlers() {
    return InformerHandlers{[this](const ObjectRef& o) { Add("add " + Name(*o)); },
                            [this](const ObjectRef& a, const ObjectRef& b) {
                              std::lock_guard<std::mutex> lock(mu);
                              if (a == b) {
                                ++resyncs;
                              } else {
                                events.push_back("update " + Name(*b));
                              }
                            },
                            [this](const ObjectRef& o) { Add("delete " + Name(*o)); }};
  }
  void Add(std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(e));
  }
  std::vector<std::string> Snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  }
};

class InformerTest : public ::testing::Test {
 protected:
  void Start(sim::ApiServerOptions options = {}) {
    server_ = std::make_unique<sim::ApiServer>(options);
    ASSERT_TRUE(server_->Start());
    RestConfig cfg;
    cfg.server = server_->url();
    cfg.qps = 0;
    client_ = std::make_unique<Client>(cfg);
  }
  void CreatePod(const std::string& name, const std::string& node = "") {
    Json pod = Pod(name);
    if (!node.empty()) pod["spec"]["nodeName"] = node;
    auto r = server_->store().Create(*sim::FindResourceType("", "v1", "pods"), "default", pod);
    ASSERT_TRUE(r) << r.error().ToString();
  }

  std::unique_ptr<sim::ApiServer> server_;
  std::unique_ptr<Client> client_;
};

class InformerModes : public InformerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(InformerModes, SyncsAndDispatchesHandlers) {
  Start();
  CreatePod("a");
  CreatePod("b");
  Recorder rec;
  InformerOptions opts;
  opts.page_size = 1;  // the initial list pages
  opts.compact = GetParam();
  Informer inf(*client_, kPods, opts, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(10000)));
  EXPECT_EQ(inf.Size(), 2u);
  ASSERT_NE(inf.Get("default/a"), nullptr);
  EXPECT_EQ(inf.Get("default/zzz"), nullptr);

  CreatePod("c");
  ASSERT_TRUE(client_->Patch(kPods, "default", "a", PatchType::kMerge,
                             Json{{"metadata", {{"labels", {{"x", "1"}}}}}}));
  ASSERT_TRUE(client_->Delete(kPods, "default", "b"));
  ASSERT_TRUE(Eventually([&] { return rec.Snapshot().size() == 5; }));
  auto events = rec.Snapshot();
  std::sort(events.begin(), events.begin() + 2);
  EXPECT_EQ(events, (std::vector<std::string>{"add a", "add b", "add c", "update a", "delete b"}));
  EXPECT_EQ(inf.Size(), 2u);
  EXPECT_EQ(Labels(*inf.Get("default/a")), (StringMap{{"x", "1"}}));
  EXPECT_EQ(inf.relists(), 1);
}

INSTANTIATE_TEST_SUITE_P(ParsedAndCompact, InformerModes, ::testing::Bool());

TEST_F(InformerTest, ReconnectsAfterDroppedStreamWithoutRelisting) {
  sim::ApiServerOptions o;
  o.drop_watch_every = 2;
  Start(o);
  Recorder rec;
  InformerOptions opts;
  opts.backoff_initial = milliseconds(10);
  Informer inf(*client_, kPods, opts, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(10000)));
  for (int i = 0; i < 9; ++i) CreatePod("p" + std::to_string(i));
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 9; }));
  EXPECT_GE(inf.watch_restarts(), 4);
  EXPECT_EQ(inf.relists(), 1);
  EXPECT_EQ(rec.Snapshot().size(), 9u);  // each add exactly once
}

TEST_F(InformerTest, RelistsAfterGoneAndReportsTheDifference) {
  sim::ApiServerOptions o;
  o.drop_watch_every = 1;
  o.event_window = 3;
  Start(o);
  CreatePod("old");
  Recorder rec;
  InformerOptions opts;
  // The informer stays away this long; the test's writes below take microseconds.
  opts.backoff_initial = milliseconds(2000);
  Informer inf(*client_, kPods, opts, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(10000)));
  CreatePod("first");  // delivered, then the stream drops and the informer backs off
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 2; }));
  // While it is away, more changes than the window holds: its resourceVersion expires.
  ASSERT_TRUE(
      server_->store().Delete(*sim::FindResourceType("", "v1", "pods"), "default", "old", {}));
  for (int i = 0; i < 5; ++i) CreatePod("n" + std::to_string(i));
  ASSERT_TRUE(Eventually([&] { return inf.relists() >= 2 && inf.Size() == 6; }));
  auto events = rec.Snapshot();
  EXPECT_NE(std::find(events.begin(), events.end(), "delete old"), events.end());
  EXPECT_NE(std::find(events.begin(), events.end(), "add n4"), events.end());
  EXPECT_EQ(inf.Get("default/old"), nullptr);
}

TEST_F(InformerTest, ResyncRedeliversCachedObjects) {
  sim::ApiServerOptions o;
  o.bookmark_interval = milliseconds(20);
  Start(o);
  CreatePod("a");
  Recorder rec;
  InformerOptions opts;
  opts.resync_period = milliseconds(30);
  Informer inf(*client_, kPods, opts, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(10000)));
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(rec.mu);
    return rec.resyncs >= 2;
  }));
}

TEST_F(InformerTest, FieldSelectedPodsOfOneNode) {
  Start();
  CreatePod("elsewhere", "n2");
  CreatePod("pending");
  Recorder rec;
  InformerOptions opts;
  opts.field_selector = "spec.nodeName=n1";
  Informer inf(*client_, kPods, opts, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(10000)));
  EXPECT_EQ(inf.Size(), 0u);
  ASSERT_TRUE(client_->Bind("default", "pending", "n1"));
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 1; }));
  EXPECT_NE(inf.Get("default/pending"), nullptr);
}

TEST_F(InformerTest, SyncsThroughInjectedFailures) {
  sim::ApiServerOptions o;
  o.fail_rate = 0.5;
  Start(o);
  for (int i = 0; i < 5; ++i) CreatePod("p" + std::to_string(i));
  InformerOptions opts;
  opts.backoff_initial = milliseconds(5);
  opts.backoff_max = milliseconds(50);
  Informer inf(*client_, kPods, opts, {});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(30000)));
  CreatePod("late");
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 6; }));
}

TEST_F(InformerTest, TransformShrinksCachedObjects) {
  Start();
  CreatePod("a");
  InformerOptions opts;
  opts.transform = [](Json obj) {
    obj.erase("spec");
    return obj;
  };
  Informer inf(*client_, kPods, opts, {});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(10000)));
  CreatePod("b");
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 2; }));
  for (const auto& obj : inf.List()) EXPECT_FALSE(obj->contains("spec"));
}

// The first list is transformed page by page: each page's objects are transformed (and frozen)
// before the next page is asked for, so a large list is never held parsed all at once.
TEST_F(InformerTest, TransformsEachPageBeforeTheNextIsListed) {
  std::mutex mu;
  std::vector<std::string> log;
  sim::ApiServerOptions options;
  options.fail_request = [&](const std::string& method, const std::string& path) {
    if (method == "GET" && path == "/api/v1/pods") {  // a page, or later the watch
      std::lock_guard<std::mutex> lock(mu);
      log.push_back("list");
    }
    return false;  // an observer only: nothing fails
  };
  Start(options);
  for (const char* name : {"a", "b", "c", "d", "e"}) CreatePod(name);
  InformerOptions opts;
  opts.page_size = 2;
  opts.compact = true;
  opts.transform = [&](Json obj) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(Name(obj));
    obj.erase("spec");
    return obj;
  };
  Recorder rec;
  Informer inf(*client_, kPods, opts, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(10000)));
  {
    std::lock_guard<std::mutex> lock(mu);
    // The watch (a GET of the same path) starts after the list: only the first 8 entries count.
    ASSERT_GE(log.size(), 8u);
    log.resize(8);
    EXPECT_EQ(log, (std::vector<std::string>{"list", "a", "b", "list", "c", "d", "list", "e"}));
  }
  // The handlers see the transformed objects, after the whole list is in the cache.
  auto events = rec.Snapshot();
  std::sort(events.begin(), events.end());
  EXPECT_EQ(events, (std::vector<std::string>{"add a", "add b", "add c", "add d", "add e"}));
  ASSERT_NE(inf.Get("default/e"), nullptr);
  EXPECT_FALSE(inf.Get("default/e")->contains("spec"));
  EXPECT_EQ(inf.relists(), 1);
}

TEST_F(InformerTest, TwentyThousandPodsSync) {
  Start();
  const int kPods = 20000;
  Json pod = Pod("x");
  pod["metadata"]["labels"] = {{"app", "bench"}, {"hami.io/vgpu", "true"}};
  pod["metadata"]["annotations"] = {{"hami.io/vgpu-devices-allocated",
                                     "GPU-0fc9b7e6-6b8c-4d5e-9a4f-1b2c3d4e5f60,NVIDIA,4000,30:;"}};
  const auto& type = *sim::FindResourceType("", "v1", "pods");
  for (int i = 0; i < kPods; ++i) {
    pod["metadata"]["name"] = "pod-" + std::to_string(i);
    ASSERT_TRUE(server_->store().Create(type, "default", pod));
  }
  InformerOptions opts;
  opts.compact = true;  // the large-cache mode: ~1.2x the JSON size (bench/k8s/README.md)
  Informer inf(*client_, resources::kPods, opts, {});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(milliseconds(120000)));
  EXPECT_EQ(inf.Size(), static_cast<size_t>(kPods));
  auto one = inf.Get("default/pod-19999");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(Annotation(*one, "hami.io/vgpu-devices-allocated"),
            "GPU-0fc9b7e6-6b8c-4d5e-9a4f-1b2c3d4e5f60,NVIDIA,4000,30:;");
}

}  // namespace
}  // namespace hami::k8s
