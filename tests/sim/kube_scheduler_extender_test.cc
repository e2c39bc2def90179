// The kube-scheduler loop's extender client (sim/kube_scheduler_extender.h) against a scripted
// HTTP server on loopback: what /filter and /bind send (docs/protocol.md#scheduler-extender), how
// replies are read (keys in any case, a non-string reason, no node), and each way a call fails
// (Error field, HTTP status, a body that is not a JSON object, no server).
// sim_test does not link cpp-httplib's pkg-config target: take its definitions so this header
// declares the classes the compiled library holds.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif

#include "sim/kube_scheduler_extender.h"

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/json.h"

namespace hami::sim {
namespace {

using nlohmann::json;

// Answers every POST with the scripted status and body, and keeps the last request.
class ScriptedServer {
 public:
  ScriptedServer() {
    http_.Post(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      last_path_ = req.path;
      last_body_ = req.body;
      last_type_ = req.get_header_value("Content-Type");
      res.status = status_;
      res.set_content(body_, "application/json");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    // Waits for the listener thread to start, not for a time to pass.
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~ScriptedServer() {
    http_.stop();
    thread_.join();
  }
  KubeSchedulerOptions options() const {
    KubeSchedulerOptions o;
    o.extender_url = "http://127.0.0.1:" + std::to_string(port_);
    o.http_timeout = std::chrono::milliseconds(5000);
    return o;
  }
  void Reply(int status, std::string body) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    body_ = std::move(body);
  }
  std::string last_path() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_path_;
  }
  json last_body() {
    std::lock_guard<std::mutex> lock(mu_);
    return ParseJsonOrNull(last_body_);
  }
  std::string last_type() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_type_;
  }

 private:
  httplib::Server http_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int status_ = 200;
  std::string body_ = "{}";
  std::string last_path_, last_body_, last_type_;
};

json Pod() {
  return json{{"metadata", {{"name", "p"}, {"namespace", "team"}, {"uid", "uid-1"}}},
              {"spec", {{"schedulerName", "hami-scheduler"}}}};
}

TEST(KubeSchedulerExtenderTest, FilterSendsPodAndNodeNamesAndReadsTheChosenNode) {
  ScriptedServer server;
  server.Reply(200, R"({"NodeNames":["n2","n3"],"FailedNodes":{"n1":"1/2 CardInsufficientMemory"},
                       "Error":""})");
  auto http = NewExtenderHttp(server.options(), /*keep_alive=*/true);
  const FilterReply r = ExtenderFilter(*http, Pod(), {"n1", "n2", "n3"});
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.chosen, "n2");  // the first of NodeNames
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(r.failed[0].first, "n1");
  EXPECT_EQ(r.failed[0].second, "1/2 CardInsufficientMemory");

  EXPECT_EQ(server.last_path(), "/filter");
  EXPECT_EQ(server.last_type(), "application/json");
  const json sent = server.last_body();
  EXPECT_EQ(sent["Pod"], Pod());
  EXPECT_TRUE(sent.contains("Nodes") && sent["Nodes"].is_null());  // nodeCacheCapable
  EXPECT_EQ(sent["NodeNames"], json::array({"n1", "n2", "n3"}));
}

TEST(KubeSchedulerExtenderTest, FilterReadsKeysInAnyCaseAndANonStringReason) {
  ScriptedServer server;
  server.Reply(200, R"({"nodenames":null,"failednodes":{"n1":{"why":1},"n2":"no GPU"}})");
  auto http = NewExtenderHttp(server.options(), /*keep_alive=*/false);
  const FilterReply r = ExtenderFilter(*http, Pod(), {"n1", "n2"});
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.chosen, "");  // no node fits
  ASSERT_EQ(r.failed.size(), 2u);
  EXPECT_EQ(r.failed[0], std::make_pair(std::string("n1"), std::string(R"({"why":1})")));
  EXPECT_EQ(r.failed[1], std::make_pair(std::string("n2"), std::string("no GPU")));
}

TEST(KubeSchedulerExtenderTest, FilterErrorsNameTheVerbAndTheFailure) {
  ScriptedServer server;
  auto http = NewExtenderHttp(server.options(), /*keep_alive=*/true);

  server.Reply(200, R"({"error":"patch pod annotations: conflict","NodeNames":["n1"]})");
  FilterReply r = ExtenderFilter(*http, Pod(), {"n1"});
  EXPECT_EQ(r.error, "patch pod annotations: conflict");  // the extender's own Error, as sent

  server.Reply(500, "{}");
  r = ExtenderFilter(*http, Pod(), {"n1"});
  EXPECT_EQ(r.error, "extender /filter: HTTP 500");
  EXPECT_EQ(r.chosen, "");

  server.Reply(200, "[1,2]");
  r = ExtenderFilter(*http, Pod(), {"n1"});
  EXPECT_EQ(r.error, "extender /filter: response is not a JSON object");

  server.Reply(200, "not json");
  r = ExtenderFilter(*http, Pod(), {"n1"});
  EXPECT_EQ(r.error, "extender /filter: response is not a JSON object");
}

TEST(KubeSchedulerExtenderTest, BindSendsTheBindingArgsAndReturnsTheError) {
  ScriptedServer server;
  auto http = NewExtenderHttp(server.options(), /*keep_alive=*/false);

  server.Reply(200, R"({"Error":""})");
  EXPECT_EQ(ExtenderBind(*http, Pod(), "n2"), "");
  EXPECT_EQ(server.last_path(), "/bind");
  EXPECT_EQ(
      server.last_body(),
      (json{{"PodName", "p"}, {"PodNamespace", "team"}, {"PodUID", "uid-1"}, {"Node", "n2"}}));

  server.Reply(200, R"({"Error":"node n2 has been locked within 5 minutes"})");
  EXPECT_EQ(ExtenderBind(*http, Pod(), "n2"), "node n2 has been locked within 5 minutes");

  server.Reply(503, "");
  EXPECT_EQ(ExtenderBind(*http, Pod(), "n2"), "extender /bind: HTTP 503");
}

TEST(KubeSchedulerExtenderTest, NoServerIsATransportErrorNamingTheVerb) {
  int port = 0;
  {
    ScriptedServer gone;  // a port that was just free, now closed again
    port = std::stoi(gone.options().extender_url.substr(sizeof("http://127.0.0.1:") - 1));
  }
  KubeSchedulerOptions o;
  o.extender_url = "http://127.0.0.1:" + std::to_string(port);
  auto http = NewExtenderHttp(o, /*keep_alive=*/false);
  const FilterReply r = ExtenderFilter(*http, Pod(), {"n1"});
  EXPECT_EQ(r.error.rfind("extender /filter: ", 0), 0u) << r.error;
  EXPECT_GT(r.error.size(), sizeof("extender /filter: ") - 1) << r.error;
  EXPECT_EQ(r.chosen, "");
  const std::string bind = ExtenderBind(*http, Pod(), "n1");
  EXPECT_EQ(bind.rfind("extender /bind: ", 0), 0u) << bind;
}

}  // namespace
}  // namespace hami::sim
