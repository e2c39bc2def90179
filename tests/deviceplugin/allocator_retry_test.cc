// Allocate's reads retry transient API errors as its writes do: FindPendingPod against a scripted
// API server that answers the first request for each path with a 500 (then the object), and a
// 404, which is not transient, fails at once.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "deviceplugin/allocator.h"
#include "k8s/client.h"
#include "k8s/object.h"

namespace hami::deviceplugin {
namespace {

using k8s::Json;

constexpr const char* kNode = "node-1";
constexpr const char* kNodePath = "/api/v1/nodes/node-1";
constexpr const char* kPodPath = "/api/v1/namespaces/default/pods/demo";
constexpr const char* kPodsPath = "/api/v1/pods";

Json StatusBody(int code, const std::string& reason) {
  return {{"kind", "Status"},      {"apiVersion", "v1"}, {"status", "Failure"},
          {"message", "scripted"}, {"reason", reason},   {"code", code}};
}

// GET answers by path (the query is ignored): 500 the first time a path is asked for when
// `flaky`, then the object stored under it, or 404 when there is none.
class ScriptedApi {
 public:
  ScriptedApi(std::map<std::string, Json> objects, bool flaky)
      : objects_(std::move(objects)), flaky_(flaky) {
    http_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      const int hit = ++hits_[req.path];
      auto it = objects_.find(req.path);
      if (flaky_ && hit == 1) {
        res.status = 500;
        res.set_content(StatusBody(500, "InternalError").dump(), "application/json");
      } else if (it == objects_.end()) {
        res.status = 404;
        res.set_content(StatusBody(404, "NotFound").dump(), "application/json");
      } else {
        res.set_content(it->second.dump(), "application/json");
      }
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    k8s::RestConfig cfg;
    cfg.server = "http://127.0.0.1:" + std::to_string(port_);
    cfg.qps = 0;
    client_ = std::make_unique<k8s::Client>(cfg);
  }
  ~ScriptedApi() {
    client_.reset();  // closes its kept-alive connections, so stop() does not wait them out
    http_.stop();
    thread_.join();
  }

  k8s::Client& client() { return *client_; }
  int hits(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_[path];
  }

 private:
  httplib::Server http_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, Json> objects_;
  std::map<std::string, int> hits_;
  const bool flaky_;
  std::unique_ptr<k8s::Client> client_;
};

Json NodeWithLock(const std::string& lock) {
  Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}};
  if (!lock.empty()) node["metadata"]["annotations"]["hami.io/mutex.lock"] = lock;
  return node;
}

// A pod the scheduler has bound to kNode and whose devices are being allocated.
Json BindingPod() {
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", "demo"}, {"namespace", "default"}};
  pod["metadata"]["annotations"] = {{"hami.io/bind-time", "1787306400"},
                                    {"hami.io/bind-phase", "allocating"},
                                    {"hami.io/vgpu-node", kNode}};
  pod["spec"] = {{"nodeName", kNode}, {"containers", Json::array({{{"name", "c"}}})}};
  pod["status"]["phase"] = "Pending";
  return pod;
}

TEST(FindPendingPodRetryTest, LockOwnerReadsRetryA500) {
  ScriptedApi api(
      {{kNodePath, NodeWithLock("2026-08-21T10:00:05Z,default,demo")}, {kPodPath, BindingPod()}},
      /*flaky=*/true);
  std::string seen;
  auto found = FindPendingPod(api.client(), kNode, &seen);
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(k8s::Name(*found), "demo");
  EXPECT_EQ(seen, "2026-08-21T10:00:05Z,default,demo");
  EXPECT_EQ(api.hits(kNodePath), 2);
  EXPECT_EQ(api.hits(kPodPath), 2);
}

TEST(FindPendingPodRetryTest, PodListRetriesA500) {
  Json list = {{"apiVersion", "v1"},
               {"kind", "PodList"},
               {"metadata", {{"resourceVersion", "7"}}},
               {"items", Json::array({BindingPod()})}};
  ScriptedApi api({{kNodePath, NodeWithLock("")}, {kPodsPath, list}}, /*flaky=*/true);
  auto found = FindPendingPod(api.client(), kNode);
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(k8s::Name(*found), "demo");
  EXPECT_EQ(api.hits(kNodePath), 2);
  EXPECT_EQ(api.hits(kPodsPath), 2);
}

TEST(FindPendingPodRetryTest, NotFoundIsNotRetried) {
  ScriptedApi api({{kNodePath, NodeWithLock("2026-08-21T10:00:05Z,default,demo")}},
                  /*flaky=*/false);
  auto found = FindPendingPod(api.client(), kNode);
  ASSERT_FALSE(found);
  EXPECT_NE(found.error().find("get lock owner pod default/demo"), std::string::npos)
      << found.error();
  EXPECT_EQ(api.hits(kNodePath), 1);
  EXPECT_EQ(api.hits(kPodPath), 1);
}

}  // namespace
}  // namespace hami::deviceplugin
