// The sim API server's event loop answers short requests itself (a read or write of one object):
// with its only worker held by a pod create that waits in the admission webhook, a ConfigMap is
// still created, read, patched and deleted; the list, which goes to the worker, is answered once
// the webhook lets the pod go. With fault injection configured every request goes to a worker.
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "k8s/api_error.h"
#include "sim/apiserver/apiserver.h"
#include "support/wait_for.h"

namespace hami::sim {
namespace {

using nlohmann::json;

class ApiServerLoopTest : public ::testing::Test {
 protected:
  void Start(ApiServerOptions options) {
    options.threads = 1;
    server_ = std::make_unique<ApiServer>(std::move(options));
    auto started = server_->Start();
    ASSERT_TRUE(started) << started.error();
    // Pod creates wait in the webhook until the gate opens.
    server_->SetPodAdmission([this](const json& pod) -> k8s::ApiResult<json> {
      in_webhook_.Open();
      gate_.Wait();
      return pod;
    });
  }
  void TearDown() override {
    gate_.Open();
    if (pod_create_.valid()) pod_create_.wait();
    if (server_) server_->Stop();
  }
  // `bound`: how long a request may wait, a bound for the failure, not a timing.
  std::unique_ptr<httplib::Client> Http(std::chrono::seconds bound = std::chrono::seconds(5)) {
    auto http = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    http->set_read_timeout(bound);
    return http;
  }
  // A pod create that holds the only worker in the webhook.
  void HoldTheWorker() {
    pod_create_ = std::async(std::launch::async, [this] {
      json pod = {{"apiVersion", "v1"},
                  {"kind", "Pod"},
                  {"metadata", {{"name", "held"}, {"namespace", "default"}}},
                  {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "i"}}})}}}};
      auto r = Http()->Post("/api/v1/namespaces/default/pods", pod.dump(), "application/json");
      return r ? r->status : -1;
    });
    in_webhook_.Wait();
  }

  std::unique_ptr<ApiServer> server_;
  test_support::Gate gate_;
  test_support::Gate in_webhook_;
  std::future<int> pod_create_;
};

TEST_F(ApiServerLoopTest, OneObjectIsServedWhileTheOnlyWorkerWaits) {
  Start(ApiServerOptions{});
  HoldTheWorker();
  auto http = Http();
  const json cm = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", "cm"}}},
                   {"data", {{"k", "v"}}}};
  auto created = http->Post("/api/v1/namespaces/default/configmaps", cm.dump(), "application/json");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->status, 201) << created->body;
  auto got = http->Get("/api/v1/namespaces/default/configmaps/cm");
  ASSERT_TRUE(got);
  EXPECT_EQ(json::parse(got->body)["data"]["k"], "v");
  auto patched = http->Patch("/api/v1/namespaces/default/configmaps/cm", R"({"data":{"k":"w"}})",
                             "application/merge-patch+json");
  ASSERT_TRUE(patched);
  EXPECT_EQ(json::parse(patched->body)["data"]["k"], "w");
  auto ns = http->Get("/api/v1/namespaces/default");
  ASSERT_TRUE(ns);
  EXPECT_EQ(ns->status, 200);
  auto deleted = http->Delete("/api/v1/namespaces/default/configmaps/cm");
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200);
  EXPECT_EQ(pod_create_.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  // A list goes to the worker: answered once the webhook lets the pod go.
  auto list = std::async(std::launch::async, [this] {
    auto r = Http()->Get("/api/v1/namespaces/default/pods");
    return r ? json::parse(r->body)["items"].size() : size_t{999};
  });
  gate_.Open();
  EXPECT_EQ(pod_create_.get(), 201);
  EXPECT_EQ(list.get(), 1u);
}

TEST_F(ApiServerLoopTest, WithFaultInjectionEveryRequestGoesToAWorker) {
  ApiServerOptions options;
  options.fail_request = [](const std::string&, const std::string&) { return false; };
  Start(std::move(options));
  HoldTheWorker();
  auto got = Http(std::chrono::seconds(1))->Get("/api/v1/namespaces/default");
  EXPECT_FALSE(got);  // waits behind the held create: the client's bound passes
  gate_.Open();
  EXPECT_EQ(pod_create_.get(), 201);
  got = Http()->Get("/api/v1/namespaces/default");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
}

}  // namespace
}  // namespace hami::sim
