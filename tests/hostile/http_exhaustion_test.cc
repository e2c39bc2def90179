// Issue 30 items 7 and 8 against the real hami-scheduler: 1,030 connections that send nothing
// used to fill the 1,024 slots of --http_bind (and the metrics port's 256) for 90 s, so /healthz
// and /readyz were refused and the kubelet restarted the pod. Now a new connection takes the
// place of the oldest silent one. And pending bodies share one budget (--max-pending-body-bytes).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "../net/http_test_client.h"
#include "binary_fixture.h"
#include "hostile_helpers.h"
#include "scheduler_process.h"
#include "sim/apiserver/certs.h"

namespace hami {
namespace {

using net::testing::RawClient;

class HttpExhaustionTest : public scheduler::testing::SchedulerBinaryTest {
 protected:
  void SetUp() override {
    SchedulerBinaryTest::SetUp();
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 4096);
      setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 2200) {
      GTEST_SKIP() << "needs 2,200 open files (RLIMIT_NOFILE " << rl.rlim_cur << ")";
    }
  }
  int Start(const std::vector<std::string>& extra = {}) {
    sched_ = std::make_unique<scheduler::testing::SchedulerProcess>(HAMI_SCHEDULER_BIN,
                                                                    SchedulerArgs(extra));
    return sched_->WaitForPort();
  }
  // The metrics listener's port from the start line; -1 when not there.
  int MetricsPort() const {
    static const std::regex metrics("metrics on port (\\d+)\\D");
    std::smatch m;
    const std::string log = sched_->log();
    return std::regex_search(log, m, metrics) ? std::stoi(m[1].str()) : -1;
  }
  // Opens `n` connections to `port` that send nothing.
  static std::vector<std::unique_ptr<RawClient>> Silent(int port, int n) {
    std::vector<std::unique_ptr<RawClient>> out;
    for (int i = 0; i < n; ++i) out.push_back(std::make_unique<RawClient>(port));
    return out;
  }
};

TEST_F(HttpExhaustionTest, ProbesAreAnsweredWith1030SilentConnectionsOpen) {
  const int port = Start();
  ASSERT_GT(port, 0) << sched_->log();
  // All from 127.0.0.1: the per-peer limit (512) is what they meet first; with it off, the cap.
  auto silent = Silent(port, 1030);
  EXPECT_TRUE(hostile::HealthzWithin1s(port)) << sched_->log();
  EXPECT_TRUE(hostile::HealthzWithin1s(port, "/healthz"));
  RawClient readyz(port);
  ASSERT_TRUE(readyz.Send("GET /readyz HTTP/1.1\r\nHost: s\r\n\r\n"));
  auto r = readyz.Read(std::chrono::seconds(1));
  ASSERT_TRUE(r) << "readyz got no answer";
  EXPECT_TRUE(r->status == 200 || r->status == 503) << r->status;
}

TEST_F(HttpExhaustionTest, WithoutThePerPeerLimitTheCapMakesRoomToo) {
  const int port = Start({"--max-connections-per-peer", "0"});
  ASSERT_GT(port, 0) << sched_->log();
  auto silent = Silent(port, 1030);
  EXPECT_TRUE(hostile::HealthzWithin1s(port)) << sched_->log();
}

TEST_F(HttpExhaustionTest, PendingBodiesPastTheBudgetGet503) {
  const int port = Start({"--max-pending-body-bytes", "1048576"});
  ASSERT_GT(port, 0) << sched_->log();
  const std::string head = "POST /filter HTTP/1.1\r\nHost: s\r\nContent-Length: 900000\r\n\r\n";
  std::vector<std::unique_ptr<RawClient>> clients;
  int refused = 0;
  for (int i = 0; i < 4 && refused == 0; ++i) {
    clients.push_back(std::make_unique<RawClient>(port));
    ASSERT_TRUE(clients.back()->Send(head + std::string(600000, ' ')));
    // The earlier ones keep waiting for the rest of their bodies; one past 1 MiB is refused.
    for (auto& c : clients) {
      if (auto r = c->Read(std::chrono::milliseconds(200)); r && r->status == 503) ++refused;
    }
  }
  EXPECT_EQ(refused, 1) << sched_->log();
  EXPECT_TRUE(hostile::HealthzWithin1s(port));
}

// The metrics listener (256 slots) and its probes: 300 silent connections used to refuse them.
TEST_F(HttpExhaustionTest, TheMetricsListenerAnswersWith300SilentConnectionsOpen) {
  ASSERT_GT(Start(), 0) << sched_->log();
  const int metrics = MetricsPort();
  ASSERT_GT(metrics, 0) << sched_->log();
  auto silent = Silent(metrics, 300);
  EXPECT_TRUE(hostile::HealthzWithin1s(metrics)) << sched_->log();
  EXPECT_TRUE(hostile::HealthzWithin1s(metrics, "/metrics"));
}

// With TLS a connection that never starts its handshake held a slot for 10 s: the probes over
// TLS are answered within 1 s with 1,030 of them open.
TEST_F(HttpExhaustionTest, ProbesOverTlsAreAnsweredWith1030SilentConnectionsOpen) {
  auto files = sim::GenerateTlsFiles(dir_ + "/tls");
  ASSERT_TRUE(files.ok()) << files.error();
  const int port = Start({"--cert_file", files->server_cert, "--key_file", files->server_key});
  ASSERT_GT(port, 0) << sched_->log();
  auto silent = Silent(port, 1030);
  for (const char* path : {"/healthz", "/healthz"}) {
    const auto start = std::chrono::steady_clock::now();
    httplib::SSLClient c("127.0.0.1", port);
    c.enable_server_certificate_verification(false);
    c.set_connection_timeout(std::chrono::seconds(1));
    c.set_read_timeout(std::chrono::seconds(1));
    auto res = c.Get(path);
    ASSERT_TRUE(res) << path << ": " << httplib::to_string(res.error()) << "\n" << sched_->log();
    EXPECT_EQ(res->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << path;
  }
  std::filesystem::remove_all(dir_ + "/tls");
}

}  // namespace
}  // namespace hami
