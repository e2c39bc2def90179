// The client against the sim apiserver over HTTP on 127.0.0.1: every verb, the Status errors,
// selectors, pagination, watch semantics and conflict retry.
#include "k8s/client.h"

#include <gtest/gtest.h>

#include <thread>

#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/store.h"

namespace hami::k8s {
namespace {

using resources::kLeases;
using resources::kNodes;
using resources::kPods;

Json Pod(const std::string& name, StringMap labels = {}) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"labels", labels}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

ListOptions Opts(std::string labels, std::string fields = "", int64_t limit = 0) {
  ListOptions o;
  o.label_selector = std::move(labels);
  o.field_selector = std::move(fields);
  o.limit = limit;
  return o;
}

WatchOptions FromRv(std::string rv, std::string fields = "", int64_t timeout_seconds = 0) {
  WatchOptions o;
  o.resource_version = std::move(rv);
  o.field_selector = std::move(fields);
  o.timeout_seconds = timeout_seconds;
  return o;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  void Start(sim::ApiServerOptions options) {
    client_.reset();
    server_ = std::make_unique<sim::ApiServer>(options);
    ASSERT_TRUE(server_->Start());
    RestConfig cfg;
    cfg.server = server_->url();
    cfg.qps = 0;
    client_ = std::make_unique<Client>(cfg);
  }

  std::unique_ptr<sim::ApiServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, CreateGetUpdateDelete) {
  auto created = client_->Create(kPods, "default", Pod("p1"));
  ASSERT_TRUE(created) << created.error().ToString();
  EXPECT_EQ(Namespace(*created), "default");
  EXPECT_FALSE(Uid(*created).empty());
  EXPECT_EQ((*created)["status"]["phase"], "Pending");

  auto got = client_->Get(kPods, "default", "p1");
  ASSERT_TRUE(got);
  EXPECT_EQ(ResourceVersion(*got), ResourceVersion(*created));

  Json changed = *got;
  changed["metadata"]["labels"]["a"] = "b";
  auto updated = client_->Update(kPods, changed);
  ASSERT_TRUE(updated) << updated.error().ToString();
  EXPECT_GT(*ParseResourceVersion(ResourceVersion(*updated)),
            *ParseResourceVersion(ResourceVersion(*got)));

  ASSERT_TRUE(client_->Delete(kPods, "default", "p1"));
  auto gone = client_->Get(kPods, "default", "p1");
  ASSERT_FALSE(gone);
  EXPECT_TRUE(IsNotFound(gone.error()));
  EXPECT_EQ(gone.error().message, "pods \"p1\" not found");
}

TEST_F(ClientTest, StatusErrors) {
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  auto dup = client_->Create(kPods, "default", Pod("p1"));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, 409);
  EXPECT_TRUE(IsAlreadyExists(dup.error()));

  auto invalid = client_->Create(kPods, "default", Pod("Bad_Name"));
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.error().code, 422);
  EXPECT_EQ(invalid.error().reason, kReasonInvalid);

  auto no_ns = client_->Create(kPods, "nowhere", Pod("p1"));
  ASSERT_FALSE(no_ns);
  EXPECT_EQ(no_ns.error().code, 404);
  EXPECT_EQ(no_ns.error().message, "namespaces \"nowhere\" not found");

  auto missing = client_->Delete(kPods, "default", "nope");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(IsNotFound(missing.error()));
}

TEST_F(ClientTest, StaleResourceVersionConflicts) {
  auto created = client_->Create(kPods, "default", Pod("p1"));
  ASSERT_TRUE(created);
  Json first = *created;
  first["metadata"]["labels"]["x"] = "1";
  ASSERT_TRUE(client_->Update(kPods, first));
  Json stale = *created;
  stale["metadata"]["labels"]["x"] = "2";
  auto r = client_->Update(kPods, stale);
  ASSERT_FALSE(r);
  EXPECT_TRUE(IsConflict(r.error())) << r.error().ToString();

  auto del = client_->Delete(kPods, "default", "p1", ResourceVersion(*created));
  ASSERT_FALSE(del);
  EXPECT_TRUE(IsConflict(del.error()));
}

TEST_F(ClientTest, RetryOnConflictRereadsAndSucceeds) {
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  int calls = 0;
  auto r = RetryOnConflict<Json>(5, [&]() -> ApiResult<Json> {
    auto cur = client_->Get(kPods, "default", "p1");
    if (!cur) return cur;
    if (++calls == 1) {
      // Someone else writes between our read and our write.
      auto other = client_->Patch(kPods, "default", "p1", PatchType::kMerge,
                                  Json{{"metadata", {{"labels", {{"other", "1"}}}}}});
      EXPECT_TRUE(other);
    }
    (*cur)["metadata"]["labels"]["mine"] = "1";
    return client_->Update(kPods, *cur);
  });
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(Labels(*r), (StringMap{{"mine", "1"}, {"other", "1"}}));

  int attempts = 0;
  auto exhausted = RetryOnConflict<Json>(3, [&]() -> ApiResult<Json> {
    ++attempts;
    return ApiError{409, kReasonConflict, "always"};
  });
  EXPECT_FALSE(exhausted);
  EXPECT_EQ(attempts, 3);
}

TEST(RetryTransientTest, RetriesServerErrorsOnlyAndStopsAtTheLimit) {
  const std::chrono::milliseconds no_wait{0};
  int calls = 0;
  auto r = RetryTransient<Json>(4, no_wait, [&]() -> ApiResult<Json> {
    if (++calls < 3) return ApiError{500, kReasonInternalError, "injected failure"};
    return Json{{"ok", true}};
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(calls, 3);

  for (const ApiError& e : {ApiError{0, "Transport", "connection refused"},
                            ApiError{429, "TooManyRequests", "slow down"},
                            ApiError{503, "ServiceUnavailable", "down"}}) {
    calls = 0;
    auto failed = RetryTransient<Json>(4, no_wait, [&]() -> ApiResult<Json> {
      ++calls;
      return e;
    });
    EXPECT_FALSE(failed);
    EXPECT_EQ(calls, 4) << e.ToString();
  }
  for (const ApiError& e :
       {ApiError{404, kReasonNotFound, "gone"}, ApiError{409, kReasonConflict, "stale"},
        ApiError{422, "Invalid", "test failed"}}) {
    calls = 0;
    auto failed = RetryTransient<Json>(4, no_wait, [&]() -> ApiResult<Json> {
      ++calls;
      return e;
    });
    EXPECT_FALSE(failed);
    EXPECT_EQ(calls, 1) << e.ToString();
  }
}

// The default policy (Bind, Allocate, the node-lock release): 4 calls in all.
TEST(RetryTransientTest, DefaultPolicyCallsFourTimes) {
  int calls = 0;
  auto failed = RetryTransient<Json>([&]() -> ApiResult<Json> {
    ++calls;
    return ApiError{500, kReasonInternalError, "injected failure"};
  });
  EXPECT_FALSE(failed);
  EXPECT_EQ(calls, kDefaultRetryAttempts);
  EXPECT_EQ(calls, 4);
}

TEST_F(ClientTest, Patches) {
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  auto merged = client_->Patch(kPods, "default", "p1", PatchType::kMerge,
                               Json{{"metadata", {{"annotations", {{"hami.io/a", "1"}}}}}});
  ASSERT_TRUE(merged);
  EXPECT_EQ(Annotation(*merged, "hami.io/a"), "1");

  auto strategic = client_->Patch(
      kPods, "default", "p1", PatchType::kStrategicMerge,
      Json{{"spec",
            {{"containers", {{{"name", "c"}, {"env", {{{"name", "A"}, {"value", "1"}}}}}}}}}});
  ASSERT_TRUE(strategic);
  const Json& c = (*strategic)["spec"]["containers"][0];
  EXPECT_EQ(c["image"], "busybox");  // merged by name, not replaced
  EXPECT_EQ(c["env"][0]["value"], "1");

  auto json_patch = client_->Patch(
      kPods, "default", "p1", PatchType::kJsonPatch,
      Json::array({{{"op", "add"}, {"path", "/metadata/annotations/hami.io~1b"}, {"value", "2"}}}));
  ASSERT_TRUE(json_patch);
  EXPECT_EQ(Annotation(*json_patch, "hami.io/b"), "2");

  auto failing = client_->Patch(
      kPods, "default", "p1", PatchType::kJsonPatch,
      Json::array({{{"op", "test"}, {"path", "/metadata/name"}, {"value", "other"}}}));
  ASSERT_FALSE(failing);
  EXPECT_EQ(failing.error().code, 422);

  auto stale = client_->Patch(kPods, "default", "p1", PatchType::kMerge,
                              Json{{"metadata", {{"resourceVersion", "1"}}}});
  ASSERT_FALSE(stale);
  EXPECT_TRUE(IsConflict(stale.error()));
}

TEST_F(ClientTest, DryRunChangesNothing) {
  auto created = client_->Create(kPods, "default", Pod("p1"));
  ASSERT_TRUE(created);
  auto patched =
      client_->Request("PATCH", "/api/v1/namespaces/default/pods/p1?dryRun=All",
                       R"({"metadata":{"labels":{"dry":"1"}}})", "application/merge-patch+json");
  ASSERT_TRUE(patched) << patched.error().ToString();
  EXPECT_NE(patched->find("\"dry\""), std::string::npos);
  auto deleted = client_->Request("DELETE", "/api/v1/namespaces/default/pods/p1?dryRun=All");
  ASSERT_TRUE(deleted);
  auto pod = client_->Get(kPods, "default", "p1");
  ASSERT_TRUE(pod);
  EXPECT_EQ(ResourceVersion(*pod), ResourceVersion(*created));
}

TEST_F(ClientTest, StatusSubresourceSeparatesSpecAndStatus) {
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  auto st = client_->Patch(
      kPods, "default", "p1", PatchType::kMerge,
      Json{{"status", {{"phase", "Running"}}}, {"metadata", {{"labels", {{"ignored", "1"}}}}}},
      "status");
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_EQ((*st)["status"]["phase"], "Running");
  EXPECT_TRUE(Labels(*st).empty());
  // A main-resource write cannot change status.
  Json main = *st;
  main["status"]["phase"] = "Failed";
  auto upd = client_->Update(kPods, main);
  ASSERT_TRUE(upd);
  EXPECT_EQ((*upd)["status"]["phase"], "Running");
  Json status_write = *upd;
  status_write["status"]["phase"] = "Succeeded";
  auto via_status = client_->UpdateStatus(kPods, status_write);
  ASSERT_TRUE(via_status);
  EXPECT_EQ((*via_status)["status"]["phase"], "Succeeded");
}

TEST_F(ClientTest, BindingSetsNodeOnce) {
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  ASSERT_TRUE(client_->Bind("default", "p1", "node-a"));
  auto pod = client_->Get(kPods, "default", "p1");
  ASSERT_TRUE(pod);
  EXPECT_EQ(FieldString(*pod, "spec.nodeName"), "node-a");
  auto again = client_->Bind("default", "p1", "node-b");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, 409);
  auto missing = client_->Bind("default", "nope", "node-a");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, 404);
}

// After a Bind whose answer was lost, BoundTo says whether the Binding was written.
TEST_F(ClientTest, BoundToReadsWhereThePodIsBound) {
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  EXPECT_FALSE(client_->BoundTo("default", "p1", "node-a"));  // not bound yet
  ASSERT_TRUE(client_->Bind("default", "p1", "node-a"));
  const std::string uid = Uid(*client_->Get(kPods, "default", "p1"));
  EXPECT_TRUE(client_->BoundTo("default", "p1", "node-a"));
  EXPECT_TRUE(client_->BoundTo("default", "p1", "node-a", uid));
  EXPECT_FALSE(client_->BoundTo("default", "p1", "node-b"));
  EXPECT_FALSE(client_->BoundTo("default", "p1", "node-a", "another-uid"));
  EXPECT_FALSE(client_->BoundTo("default", "nope", "node-a"));
}

TEST_F(ClientTest, SelectorsAndPagination) {
  for (int i = 0; i < 25; ++i) {
    Json pod = Pod("p" + std::to_string(i), {{"tier", i % 2 ? "odd" : "even"}});
    ASSERT_TRUE(client_->Create(kPods, "default", pod));
  }
  ASSERT_TRUE(client_->Bind("default", "p3", "n1"));
  auto odd = client_->List(kPods, "default", Opts("tier=odd"));
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->items.size(), 12u);
  auto notin = client_->List(kPods, "", Opts("tier notin (odd),tier"));
  ASSERT_TRUE(notin);
  EXPECT_EQ(notin->items.size(), 13u);
  auto on_node = client_->List(kPods, "", Opts("", "spec.nodeName=n1"));
  ASSERT_TRUE(on_node);
  ASSERT_EQ(on_node->items.size(), 1u);
  EXPECT_EQ(Name(on_node->items[0]), "p3");
  auto unbound = client_->List(kPods, "default", Opts("", "spec.nodeName="));
  ASSERT_TRUE(unbound);
  EXPECT_EQ(unbound->items.size(), 24u);

  auto page = client_->List(kPods, "default", Opts("", "", 10));
  ASSERT_TRUE(page);
  EXPECT_EQ(page->items.size(), 10u);
  EXPECT_FALSE(page->continue_token.empty());
  auto all = client_->ListAll(kPods, "default", Opts("tier=even", "", 4));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->items.size(), 13u);

  auto bad = client_->List(kPods, "default", Opts("a in (b"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, 400);
}

TEST_F(ClientTest, MalformedBodiesGet400AndServerKeepsServing) {
  const char* bodies[] = {"",
                          "{",
                          "[1,2]",
                          "\"str\"",
                          R"({"metadata":"x"})",
                          R"({"metadata":{"name":7}})",
                          R"({"metadata":{"labels":{"a":1}}})",
                          R"({"kind":"Node","metadata":{"name":"x"}})",
                          "\xff\xfe",
                          R"({"metadata":{"name":"x"},"spec":"x"})",
                          R"({"metadata":{"name":"x"},"spec":{"containers":{}}})",
                          R"({"metadata":{"name":"x"},"spec":{"containers":[1]}})",
                          R"({"metadata":{"name":"x"},"spec":{"nodeName":5}})"};
  for (const char* body : bodies) {
    auto r = client_->Request("POST", "/api/v1/namespaces/default/pods", body);
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().code, 400) << body << " -> " << r.error().ToString();
    auto p = client_->Request("PATCH", "/api/v1/namespaces/default/pods/x", body,
                              "application/merge-patch+json");
    EXPECT_FALSE(p);
  }
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  auto patch = client_->Request("PATCH", "/api/v1/namespaces/default/pods/p1", "{",
                                "application/merge-patch+json");
  ASSERT_FALSE(patch);
  EXPECT_EQ(patch.error().code, 400);
  auto wrong_shape =
      client_->Request("PATCH", "/api/v1/namespaces/default/pods/p1",
                       R"({"metadata":{"labels":{"a":{"b":1}}}})", "application/merge-patch+json");
  ASSERT_FALSE(wrong_shape);
  EXPECT_EQ(wrong_shape.error().code, 422);
  auto apply = client_->Request("PATCH", "/api/v1/namespaces/default/pods/p1", "{}",
                                "application/apply-patch+yaml");
  ASSERT_FALSE(apply);
  EXPECT_EQ(apply.error().code, 415);
  EXPECT_TRUE(client_->Get(kPods, "default", "p1"));
}

TEST_F(ClientTest, OtherKindsAndEvents) {
  Json lease = {{"metadata", {{"name", "hami-scheduler"}}},
                {"spec", {{"holderIdentity", "a"}, {"leaseDurationSeconds", 15}}}};
  auto l = client_->Create(kLeases, "kube-system", lease);
  ASSERT_TRUE(l) << l.error().ToString();
  EXPECT_EQ((*l)["apiVersion"], "coordination.k8s.io/v1");
  Json node = {{"metadata", {{"name", "n1"}, {"labels", {{"gpu", "on"}}}}},
               {"status", {{"capacity", {{"nvidia.com/gpu", "4"}}}}}};
  auto n = client_->Create(kNodes, "", node);
  ASSERT_TRUE(n);
  EXPECT_EQ((*n)["status"]["capacity"]["nvidia.com/gpu"], "4");
  auto ev = client_->RecordEvent(*n, "Normal", "Registered", "4 GPUs", "hami-device-plugin");
  ASSERT_TRUE(ev) << ev.error().ToString();
  auto events = client_->List(resources::kEvents, "default", {});
  ASSERT_TRUE(events);
  ASSERT_EQ(events->items.size(), 1u);
  EXPECT_EQ(events->items[0]["reason"], "Registered");
  for (const Resource* r :
       {&resources::kConfigMaps, &resources::kSecrets, &resources::kResourceQuotas,
        &resources::kServices, &resources::kEventsV1}) {
    auto created = client_->Create(*r, "default", Json{{"metadata", {{"name", "x"}}}});
    EXPECT_TRUE(created) << r->plural;
  }
  // Deleting a namespace deletes what is in it.
  ASSERT_TRUE(client_->Create(resources::kNamespaces, "", Json{{"metadata", {{"name", "t"}}}}));
  ASSERT_TRUE(client_->Create(kPods, "t", Pod("p")));
  ASSERT_TRUE(client_->Delete(resources::kNamespaces, "", "t"));
  EXPECT_TRUE(IsNotFound(client_->Get(kPods, "t", "p").error()));
}

TEST_F(ClientTest, WatchDeliversEventsInOrderWithFilterTransitions) {
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  auto list = client_->List(kPods, "", {});
  ASSERT_TRUE(list);
  std::vector<std::string> seen;
  std::atomic<bool> cancel{false};
  std::thread watcher([&] {
    WatchOptions o = FromRv(list->resource_version, "spec.nodeName=n1");
    auto st = client_->Watch(
        kPods, "", o,
        [&](const WatchEvent& e) {
          if (e.type == "BOOKMARK") return true;
          seen.push_back(e.type + " " + Name(e.object));
          return seen.size() < 3;
        },
        &cancel);
    EXPECT_TRUE(st) << st.error().ToString();
  });
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p2")));  // not on n1: filtered out
  ASSERT_TRUE(client_->Bind("default", "p1", "n1"));          // enters the filter: ADDED
  ASSERT_TRUE(client_->Patch(kPods, "default", "p1", PatchType::kMerge,
                             Json{{"metadata", {{"labels", {{"a", "b"}}}}}}));
  ASSERT_TRUE(client_->Delete(kPods, "default", "p1"));
  watcher.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED p1", "MODIFIED p1", "DELETED p1"}));
}

TEST_F(ClientTest, WatchFromZeroSendsCurrentObjectsThenBookmarks) {
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("p1")));
  int added = 0;
  int bookmarks = 0;
  auto st = client_->Watch(kPods, "default", FromRv("0"), [&](const WatchEvent& e) {
    if (e.type == "ADDED") ++added;
    if (e.type == "BOOKMARK") {
      ++bookmarks;
      EXPECT_FALSE(ResourceVersion(e.object).empty());
    }
    return bookmarks == 0;
  });
  EXPECT_TRUE(st);
  EXPECT_EQ(added, 1);
  EXPECT_EQ(bookmarks, 1);
}

TEST_F(ClientTest, WatchFromTooOldResourceVersionIsGone) {
  sim::ApiServerOptions o;
  o.event_window = 5;
  Start(o);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(client_->Create(kPods, "default", Pod("p" + std::to_string(i))));
  auto st = client_->Watch(kPods, "", FromRv("2"), [](const WatchEvent&) { return true; });
  ASSERT_FALSE(st);
  EXPECT_TRUE(IsGone(st.error())) << st.error().ToString();
  EXPECT_EQ(st.error().code, 410);
}

TEST_F(ClientTest, WatchEndsAtTimeoutSecondsAndOnCancel) {
  std::atomic<bool> cancel{true};
  auto st = client_->Watch(
      kPods, "", FromRv("1"), [](const WatchEvent&) { return true; }, &cancel);
  EXPECT_TRUE(st);
  auto timed =
      client_->Watch(kPods, "", FromRv("1", "", 1), [](const WatchEvent&) { return true; });
  EXPECT_TRUE(timed);
}

TEST_F(ClientTest, InjectedFailuresAreRetryableStatuses) {
  sim::ApiServerOptions o;
  o.fail_rate = 1.0;
  Start(o);
  auto r = client_->Get(kPods, "default", "x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 500);
  EXPECT_EQ(r.error().reason, kReasonInternalError);
  EXPECT_TRUE(IsTransient(r.error()));
  auto version = client_->Request("GET", "/version");  // discovery is never failed
  EXPECT_TRUE(version);
}

TEST_F(ClientTest, TransportErrorsAreValues) {
  RestConfig cfg;
  cfg.server = "http://127.0.0.1:1";
  cfg.timeout = std::chrono::milliseconds(2000);
  Client dead(cfg);
  auto r = dead.Get(kPods, "default", "x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 0);
  EXPECT_TRUE(IsTransient(r.error()));
}

}  // namespace
}  // namespace hami::k8s
