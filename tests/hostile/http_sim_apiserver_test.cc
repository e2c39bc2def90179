// Issue 19 against the real `hami-sim apiserver` binary over loopback (the sim API server the
// demo and CI rely on): 500 open watches hold no worker, so a list and /healthz answer within
// 1 s while every watch still gets its events; a 300 MB chunked body gets 413 and a gzip bomb
// 415 with the server's peak RSS (VmHWM) under 200 MiB; pipelined requests are answered in
// order; slowloris connections hold no worker. Every wait is a poll with a deadline; the only
// paced loop is the slowloris attacker's.
#include <sys/resource.h>

#include <chrono>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../net/http_test_client.h"
#include "hostile_helpers.h"
#include "scheduler_process.h"

namespace hami {
namespace {

using hostile::HealthzWithin1s;
using hostile::kMaxPeakKiB;
using hostile::PeakRssKiB;
using net::testing::RawClient;
using nlohmann::json;
using scheduler::testing::SchedulerProcess;

std::string Request(const std::string& method, const std::string& path,
                    const std::string& body = "") {
  std::string out = method + " " + path + " HTTP/1.1\r\nHost: s\r\n";
  if (!body.empty() || method == "POST") {
    out +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return out + "\r\n" + body;
}

std::string ConfigMap(const std::string& name) {
  return json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", name}}},
              {"data", {{"k", "v"}}}}
      .dump();
}

class SimApiServerHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 500 watches and the test's own connections: more descriptors than the usual 1024.
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
    }
    api_ = std::make_unique<SchedulerProcess>(
        HAMI_SIM_BIN, std::vector<std::string>{"apiserver", "--listen", "127.0.0.1:0"});
    ASSERT_TRUE(api_->started());
    port_ = WaitForPort();
    ASSERT_GT(port_, 0) << api_->log();
  }

  // The port from "apiserver: serving on http://127.0.0.1:N", or -1 after 20 s.
  int WaitForPort() {
    static const std::regex serving("serving on https?://[^ ]*:(\\d+)\\D");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::string log = api_->log();
      std::smatch m;
      if (std::regex_search(log, m, serving)) return std::stoi(m[1].str());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // poll interval only
    }
    return -1;
  }

  // One request on a new connection.
  std::optional<net::testing::Reply> Call(const std::string& method, const std::string& path,
                                          const std::string& body = "") {
    RawClient c(port_);
    if (!c.Send(Request(method, path, body))) return std::nullopt;
    return c.Read();
  }

  // A GET that must answer 200 within 1 s on a new connection.
  bool Within1s(const std::string& path) { return HealthzWithin1s(port_, path); }

  std::unique_ptr<SchedulerProcess> api_;
  int port_ = -1;
};

TEST_F(SimApiServerHostileTest, FiveHundredWatchesHoldNoWorker) {
  for (int i = 0; i < 3; ++i) {
    auto r = Call("POST", "/api/v1/nodes",
                  json{{"metadata", {{"name", "node-" + std::to_string(i)}}}}.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
  }
  std::vector<std::unique_ptr<RawClient>> watches;
  for (int i = 0; i < 500; ++i) {
    watches.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(watches.back()->connected()) << i;
    // Half watch pods in every namespace, half configmaps in default.
    std::string path = i % 2 == 0 ? "/api/v1/pods?watch=true&resourceVersion=1"
                                  : "/api/v1/namespaces/default/configmaps?watch=1";
    ASSERT_TRUE(watches.back()->Send(Request("GET", path)));
  }
  for (size_t i = 0; i < watches.size(); ++i) {
    auto head = watches[i]->ReadUntil("\r\n\r\n");
    ASSERT_TRUE(head) << i;
    ASSERT_NE(head->find("200 OK"), std::string::npos) << *head;
  }
  // Before: each watch held one of 256 threads, and this list hung.
  const auto start = std::chrono::steady_clock::now();
  RawClient list(port_);
  ASSERT_TRUE(list.Send(Request("GET", "/api/v1/nodes")));
  auto nodes = list.Read(std::chrono::seconds(1));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(nodes) << "GET /api/v1/nodes did not answer within 1 s";
  EXPECT_EQ(nodes->status, 200);
  EXPECT_EQ(json::parse(nodes->body)["items"].size(), 3u);
  RecordProperty(
      "list_us_with_500_watches",
      static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
  EXPECT_TRUE(Within1s("/healthz"));
  EXPECT_TRUE(Within1s("/api/v1/namespaces/default/configmaps"));
  // Every watch still gets its event.
  auto cm = Call("POST", "/api/v1/namespaces/default/configmaps", ConfigMap("seen-by-all"));
  ASSERT_TRUE(cm);
  ASSERT_EQ(cm->status, 201) << cm->body;
  auto pod = Call("POST", "/api/v1/namespaces/default/pods",
                  json{{"metadata", {{"name", "p"}}},
                       {"spec", {{"containers", {{{"name", "c"}, {"image", "i"}}}}}}}
                      .dump());
  ASSERT_TRUE(pod);
  ASSERT_EQ(pod->status, 201) << pod->body;
  for (size_t i = 0; i < watches.size(); ++i) {
    std::string want = i % 2 == 0 ? "\"name\":\"p\"" : "\"name\":\"seen-by-all\"";
    auto got = watches[i]->ReadUntil(want, std::chrono::seconds(10));
    ASSERT_TRUE(got) << "watch " << i << " missed its event";
    EXPECT_NE(got->find("\"type\":\"ADDED\""), std::string::npos) << *got;
  }
  EXPECT_TRUE(Within1s("/healthz"));
}

TEST_F(SimApiServerHostileTest, ChunkedBodyPastTheCapGets413WithBoundedMemory) {
  RawClient c(port_);
  ASSERT_TRUE(
      c.Send("POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: s\r\n"
             "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "100000\r\n" + std::string(1 << 20, '[') + "\r\n";
  size_t sent = 0;
  std::optional<net::testing::Reply> reply;
  for (int i = 0; i < 300 && !reply; ++i) {  // 300 MiB if nobody stops it
    if (!c.Send(chunk)) break;               // the server closed after its reply
    sent += 1;
    reply = c.Read(std::chrono::milliseconds(1));
  }
  if (!reply) reply = c.Read();
  ASSERT_TRUE(reply) << "sent " << sent << " MiB";
  EXPECT_EQ(reply->status, 413) << reply->body;
  EXPECT_LT(sent, 100u) << "MiB sent before the server stopped reading";
  EXPECT_TRUE(Within1s("/healthz"));
  size_t peak = PeakRssKiB(api_->pid());
  RecordProperty("peak_rss_kib", static_cast<int>(peak));
  EXPECT_GT(peak, 0u);
  EXPECT_LT(peak, kMaxPeakKiB) << peak << " KiB";
}

// A body declared gzip (a 474 KB bomb would inflate to 500 MB) is refused with 415 and never
// inflated; a declared length past the cap gets 413 before any of it is read.
TEST_F(SimApiServerHostileTest, GzipBombGets415AndALargeLengthGets413) {
  RawClient c(port_);
  std::string body(474 << 10, '\0');
  ASSERT_TRUE(
      c.Send("POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: s\r\n"
             "Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n"));
  c.Send(body);  // may fail once the server has answered and closed
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  RawClient big(port_);
  ASSERT_TRUE(
      big.Send("PATCH /api/v1/nodes/x HTTP/1.1\r\nContent-Type: application/merge-patch+json\r\n"
               "Content-Length: 300000000\r\n\r\n"));
  r = big.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  // Under the cap (3 MiB) a body is read and served.
  auto ok =
      Call("POST", "/api/v1/namespaces/default/configmaps",
           json{{"metadata", {{"name", "two-mib"}}}, {"data", {{"k", std::string(2 << 20, 'x')}}}}
               .dump());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 201) << ok->body.substr(0, 200);
  EXPECT_TRUE(Within1s("/healthz"));
  size_t peak = PeakRssKiB(api_->pid());
  EXPECT_GT(peak, 0u);
  EXPECT_LT(peak, kMaxPeakKiB) << peak << " KiB";
}

TEST_F(SimApiServerHostileTest, PipelinedRequestsAreAllAnsweredInOrder) {
  for (int i = 0; i < 20; ++i) {
    auto r =
        Call("POST", "/api/v1/namespaces/default/configmaps", ConfigMap("cm-" + std::to_string(i)));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201);
  }
  std::string all;
  for (int i = 0; i < 20; ++i) {
    all += Request("GET", "/api/v1/namespaces/default/configmaps/cm-" + std::to_string(i));
    all += Request("GET", "/healthz");
  }
  all += Request("GET", "/api/v1/namespaces/default/configmaps/missing");
  RawClient c(port_);
  ASSERT_TRUE(c.Send(all));
  for (int i = 0; i < 20; ++i) {
    auto r = c.Read();
    ASSERT_TRUE(r) << i;
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body)["metadata"]["name"], "cm-" + std::to_string(i));
    auto h = c.Read();
    ASSERT_TRUE(h) << i;
    EXPECT_EQ(h->body, "ok");
  }
  auto missing = c.Read();
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

// More slow connections than the server has workers (16), each sending one header byte per
// second: lists and /healthz still answer within 1 s.
TEST_F(SimApiServerHostileTest, SlowlorisHoldsNoWorker) {
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 70; ++i) slow.push_back(std::make_unique<RawClient>(port_));
  const std::string head = "GET /api/v1/nodes HTTP/1.1\r\nHost: slow\r\nX-Padding: ";
  auto next = std::chrono::steady_clock::now();
  for (size_t round = 0; round < 3; ++round) {
    for (auto& c : slow) ASSERT_TRUE(c->Send(head.substr(round, 1)));
    EXPECT_TRUE(Within1s("/healthz")) << "round " << round;
    EXPECT_TRUE(Within1s("/api/v1/nodes")) << "round " << round;
    next += std::chrono::seconds(1);
    std::this_thread::sleep_until(next);  // the attacker's pace: one byte per second
  }
}

}  // namespace
}  // namespace hami
