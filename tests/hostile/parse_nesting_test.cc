// Issue 19 item 1 against the real hami-scheduler: 100,000 levels of `[` in a node's register
// annotation or in a /filter, /bind or /webhook body used to kill it (exit 139). Now the bad node
// is skipped with an Event while pods go to the other nodes, a bad body gets 400 (the webhook: a
// 200 AdmissionReview carrying 400), and the process keeps serving. The sim API server (the code
// of `hami-sim apiserver`) answers a deep POST with 400. hamictl: tests/cli/hamictl_test.sh.
#include <sys/resource.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "binary_fixture.h"
#include "common/json.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "scheduler_process.h"
#include "test_env.h"

namespace hami {
namespace {

using nlohmann::json;
using scheduler::testing::GpuPod;
using scheduler::testing::Node;
using scheduler::testing::SchedulerProcess;

std::string Deep() { return std::string(100000, '[') + std::string(100000, ']'); }

class ParseNestingTest : public scheduler::testing::SchedulerBinaryTest {
 protected:
  httplib::Result Post(const std::string& path, const std::string& body) {
    return http_->Post(path.c_str(), body, "application/json");
  }

  // A /filter body nested 100,000 levels deep is answered 400 naming the limit, and the
  // scheduler goes on serving.
  void ExpectDeepFilterRefused() {
    auto filter = Post("/filter", R"({"Pod":{},"NodeNames":)" + Deep() + "}");
    ASSERT_TRUE(filter) << sched_->log();
    EXPECT_EQ(filter->status, 400);
    EXPECT_NE(filter->body.find("nested deeper than 10000 levels"), std::string::npos)
        << filter->body.substr(0, 300);
    ExpectAlive();
  }

  // The scheduler still answers: the process did not die on what came before.
  void ExpectAlive() {
    auto res = http_->Get("/healthz");
    ASSERT_TRUE(res) << "scheduler is gone:\n" << sched_->log();
    EXPECT_EQ(res->status, 200);
  }
};

TEST_F(ParseNestingTest, DeepRegisterAnnotationSkipsTheNodeWithAnEvent) {
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("node-bad", Deep())).ok());
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("node-good")).ok());
  StartScheduler();
  ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", GpuPod("p", 3000)).ok());
  json pod = *client_->Get(k8s::resources::kPods, "default", "p");

  auto res = Post("/filter", json{{"Pod", pod}, {"NodeNames", {"node-bad", "node-good"}}}.dump());
  ASSERT_TRUE(res) << sched_->log();
  ASSERT_EQ(res->status, 200);
  json reply = json::parse(res->body);
  EXPECT_EQ(reply["NodeNames"], json::array({"node-good"})) << reply;
  EXPECT_TRUE(reply["FailedNodes"].contains("node-bad")) << reply;

  auto events = client_->List(k8s::resources::kEvents, "default", {});
  ASSERT_TRUE(events.ok());
  bool found = false;
  for (const json& e : events->items) {
    found |= e["involvedObject"]["name"] == "node-bad" &&
             e["reason"] == "InvalidRegisterAnnotation" &&
             e["message"].get<std::string>().find("nested deeper than 10000 levels") !=
                 std::string::npos;
  }
  EXPECT_TRUE(found) << events->items.size() << " events";
  ExpectAlive();
}

TEST_F(ParseNestingTest, DeepRequestBodiesAreRefused) {
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("node-1")).ok());
  StartScheduler();

  ExpectDeepFilterRefused();

  auto bind = Post("/bind", R"({"PodName":)" + Deep() + R"(,"Node":"node-1"})");
  ASSERT_TRUE(bind) << sched_->log();
  EXPECT_EQ(bind->status, 400);
  EXPECT_NE(bind->body.find("nested deeper than 10000 levels"), std::string::npos)
      << bind->body.substr(0, 300);
  ExpectAlive();

  auto webhook =
      Post("/webhook", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",)"
                       R"("request":{"uid":"u-1","object":{"spec":{"containers":[{"name":"c",)"
                       R"("resources":{"limits":{"nvidia.com/gpu":)" +
                           Deep() + "}}}]}}}}");
  ASSERT_TRUE(webhook) << sched_->log();
  EXPECT_EQ(webhook->status, 200);
  json review = json::parse(webhook->body, nullptr, false);
  EXPECT_EQ(review["response"]["allowed"], false) << webhook->body;
  EXPECT_EQ(review["response"]["status"]["code"], 400) << webhook->body;
  ExpectAlive();
}

// Depth 10,000 itself is accepted, so everything that then copies, prints or stores such a value
// (the decoders' messages, the sim store, the scheduler's informers) must live with it.
// Raises the soft stack limit for the processes started meanwhile: glibc sizes a new process's
// thread stacks from it. 10,000 levels of JSON take about 2 MiB of stack in the Release binaries
// but about 16 MiB under ASan (docs/INPUT_LIMITS.md); the scheduler binary started below runs its
// loop on a std::thread, so under ASan it needs more than the usual 8 MiB.
class StackLimit {
 public:
  explicit StackLimit(rlim_t bytes) {
    ok_ = getrlimit(RLIMIT_STACK, &saved_) == 0;
    if (!ok_) return;
    rlimit raised = saved_;
    if (raised.rlim_cur != RLIM_INFINITY && raised.rlim_cur < bytes &&
        (raised.rlim_max == RLIM_INFINITY || raised.rlim_max >= bytes)) {
      raised.rlim_cur = bytes;
      setrlimit(RLIMIT_STACK, &raised);
    }
  }
  ~StackLimit() {
    if (ok_) setrlimit(RLIMIT_STACK, &saved_);
  }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

TEST_F(ParseNestingTest, NestingAtTheLimitIsServed) {
  auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  // The register annotation is itself the list: 10,000 levels in all.
  ASSERT_TRUE(
      client_->Create(k8s::resources::kNodes, "", Node("node-bad", nested(kMaxJsonDepth))).ok());
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("node-good")).ok());
  // A pod whose spec holds 9,998 levels (the pod object and spec are the other two).
  json deep_pod = GpuPod("deep", 1000);
  deep_pod["spec"]["x"] = "DEEP";
  std::string body = deep_pod.dump();
  body.replace(body.find("\"DEEP\""), 6, nested(kMaxJsonDepth - 2));
  httplib::Client api(api_->url());
  auto created = api.Post("/api/v1/namespaces/default/pods", body, "application/json");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->status, 201) << created->body.substr(0, 300);
  {
    StackLimit stack(64 << 20);
    StartScheduler();
  }
  ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", GpuPod("p", 3000)).ok());
  json pod = *client_->Get(k8s::resources::kPods, "default", "p");
  auto res = Post("/filter", json{{"Pod", pod}, {"NodeNames", {"node-bad", "node-good"}}}.dump());
  ASSERT_TRUE(res) << sched_->log();
  EXPECT_EQ(json::parse(res->body)["NodeNames"], json::array({"node-good"})) << res->body;
  // 9,999 levels under the body object: read, then refused for its shape.
  auto filter = Post("/filter", R"({"Pod":{},"NodeNames":)" + nested(kMaxJsonDepth - 1) + "}");
  ASSERT_TRUE(filter) << sched_->log();
  ExpectAlive();
}

// --async-decision-write: the event loop parses /filter bodies itself. A body nested past the
// limit is refused there as on a worker, one at the limit is read (under the 64 MiB stack the
// test above gives the process), and the loop goes on serving filters.
TEST_F(ParseNestingTest, DeepFilterBodiesOnTheEventLoop) {
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("node-1")).ok());
  {
    StackLimit stack(64 << 20);
    StartScheduler({"--async-decision-write"});
  }
  ExpectDeepFilterRefused();
  const std::string at_limit =
      std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']');
  ASSERT_TRUE(Post("/filter", R"({"Pod":{},"NodeNames":)" + at_limit + "}")) << sched_->log();
  ExpectAlive();
  ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", GpuPod("p", 3000)).ok());
  json pod = *client_->Get(k8s::resources::kPods, "default", "p");
  auto res = Post("/filter", json{{"Pod", pod}, {"NodeNames", {"node-1"}}}.dump());
  ASSERT_TRUE(res) << sched_->log();
  EXPECT_EQ(json::parse(res->body)["NodeNames"], json::array({"node-1"})) << res->body;
}

TEST_F(ParseNestingTest, SimApiServerRefusesADeepPost) {
  httplib::Client api(api_->url());
  json pod = GpuPod("deep", 1000);
  pod["spec"]["x"] = "DEEP";
  std::string body = pod.dump();
  body.replace(body.find("\"DEEP\""), 6, Deep());
  auto res = api.Post("/api/v1/namespaces/default/pods", body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("nested deeper than 10000 levels"), std::string::npos)
      << res->body.substr(0, 300);
  auto after = api.Get("/api/v1/namespaces/default/pods");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

// Bodies under 64 KiB are parsed on the sim API server's event loop itself (no fault injection
// here): one nested 30,000 levels is refused naming the limit, one at 9,999 levels is parsed on
// the loop's stack, and the server goes on answering.
TEST_F(ParseNestingTest, SimApiServerRefusesADeepPatchOnItsEventLoop) {
  httplib::Client api(api_->url());
  ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", GpuPod("p", 1000)).ok());
  const std::string path = "/api/v1/namespaces/default/pods/p";
  auto patch = [&](int levels) {
    const std::string body = R"({"metadata":{"labels":{"x":)" + std::string(levels, '[') +
                             std::string(levels, ']') + "}}}";
    EXPECT_LT(body.size(), 64u << 10);
    return api.Patch(path.c_str(), body, "application/merge-patch+json");
  };
  auto deep = patch(30000);
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->status, 400);
  EXPECT_NE(deep->body.find("nested deeper than 10000 levels"), std::string::npos)
      << deep->body.substr(0, 300);
  auto at_limit = patch(kMaxJsonDepth - 4);  // the body's own 3 levels around it
  ASSERT_TRUE(at_limit);
  EXPECT_EQ(at_limit->status, 422);  // parsed, then refused as a label that is not a string
  EXPECT_NE(at_limit->body.find(R"(metadata.labels[\"x\"] must be a string)"), std::string::npos)
      << at_limit->body.substr(0, 300);
  auto after = api.Get(path.c_str());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

// An API server (or whatever answers in its place) can send deep JSON too: the client's reads of
// responses and of watch lines refuse it with an error instead of building the value.
TEST(ParseNestingClientTest, DeepApiResponsesAreErrors) {
  httplib::Server api;
  api.Get("/api/v1/pods", [](const httplib::Request& req, httplib::Response& res) {
    if (req.has_param("watch")) {
      res.set_content(R"({"type":"ADDED","object":)" + Deep() + "}\n", "application/json");
    } else {
      res.set_content(R"({"kind":"PodList","items":)" + Deep() + "}", "application/json");
    }
  });
  int port = api.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { api.listen_after_bind(); });
  k8s::RestConfig cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port);
  cfg.qps = 0;
  auto client_ptr = std::make_unique<k8s::Client>(cfg);
  k8s::Client& client = *client_ptr;
  auto list = client.List(k8s::resources::kPods, "", {});
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.error().message.find("nested deeper than 10002 levels"), std::string::npos)
      << list.error().message.substr(0, 200);
  int events = 0;
  k8s::WatchOptions options;
  options.timeout_seconds = 1;
  auto watched = client.Watch(k8s::resources::kPods, "", options, [&](const k8s::WatchEvent&) {
    ++events;
    return true;
  });
  EXPECT_FALSE(watched.ok());
  EXPECT_EQ(events, 0);
  client_ptr.reset();  // closes its kept-alive connections, which the server would wait out
  api.stop();
  serving.join();
}

}  // namespace
}  // namespace hami
