// Issue 30 items 7 and 8 against the real hami-scheduler: 1,030 connections that send nothing
// used to fill the 1,024 slots of --http_bind (and the metrics port's 256) for 90 s, so /healthz
// and /readyz were refused and the kubelet restarted the pod. Now a new connection takes the
// place of the oldest silent one. And pending bodies share one budget (--max-pending-body-bytes).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "../net/http_test_client.h"
#include "binary_fixture.h"
#include "hostile_helpers.h"
#include "scheduler_process.h"

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

}  // namespace
}  // namespace hami
