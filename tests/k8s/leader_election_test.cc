// Leader election between candidates sharing the sim apiserver, on a fake clock.
#include "k8s/leader_election.h"

#include <gtest/gtest.h>

#include <thread>

#include "sim/apiserver/apiserver.h"

namespace hami::k8s {
namespace {

using std::chrono::seconds;

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    RestConfig cfg;
    cfg.server = server_.url();
    cfg.qps = 0;
    client_ = std::make_unique<Client>(cfg);
  }
  LeaderElectionConfig Config(const std::string& id) {
    LeaderElectionConfig c;
    c.lease_name = "hami-scheduler";
    c.identity = id;
    c.lease_duration = seconds(15);
    return c;
  }
  bool Try(LeaderElector& e) {
    auto r = e.TryAcquireOrRenew();
    EXPECT_TRUE(r) << r.error().ToString();
    return r.ok() && *r;
  }

  sim::ApiServer server_{sim::ApiServerOptions{}};
  std::unique_ptr<Client> client_;
  FakeClock clock_;
};

TEST_F(LeaderElectionTest, OneLeaderUntilTheLeaseExpires) {
  LeaderElector a(*client_, Config("a"), clock_);
  LeaderElector b(*client_, Config("b"), clock_);
  EXPECT_TRUE(Try(a));   // creates the lease
  EXPECT_FALSE(Try(b));  // held, first seen now
  clock_.Advance(seconds(10));
  EXPECT_TRUE(Try(a));  // renews
  clock_.Advance(seconds(10));
  EXPECT_FALSE(Try(b));         // renewed 10 s ago as b observed it
  clock_.Advance(seconds(16));  // a stops renewing
  EXPECT_TRUE(Try(b));          // takes over
  EXPECT_FALSE(Try(a));         // a sees b's fresh renewal
  auto lease = client_->Get(resources::kLeases, "kube-system", "hami-scheduler");
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
  EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ((*lease)["spec"]["renewTime"].get<std::string>().size(), 27u);  // MicroTime
}

TEST_F(LeaderElectionTest, EachCandidateTimesTheHolderOnItsOwnObservation) {
  LeaderElector a(*client_, Config("a"), clock_);
  LeaderElector b(*client_, Config("b"), clock_);
  LeaderElector c(*client_, Config("c"), clock_);
  ASSERT_TRUE(Try(a));
  EXPECT_FALSE(Try(b));
  EXPECT_FALSE(Try(c));
  clock_.Advance(seconds(20));
  EXPECT_TRUE(Try(b));   // a's record unchanged for 20 s: b takes over
  EXPECT_FALSE(Try(c));  // c sees a new record (b's) and starts timing it now
  clock_.Advance(seconds(20));
  EXPECT_TRUE(Try(c));
  EXPECT_FALSE(Try(b));
}

TEST_F(LeaderElectionTest, ConcurrentCandidatesElectExactlyOne) {
  std::vector<std::unique_ptr<LeaderElector>> candidates;
  for (int i = 0; i < 6; ++i) {
    candidates.push_back(
        std::make_unique<LeaderElector>(*client_, Config("c" + std::to_string(i)), clock_));
  }
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (auto& c : candidates) {
    threads.emplace_back([&, e = c.get()] {
      auto r = e->TryAcquireOrRenew();
      EXPECT_TRUE(r) << r.error().ToString();
      if (r.ok() && *r) ++winners;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST_F(LeaderElectionTest, RunCallsBackAndStops) {
  LeaderElectionConfig cfg = Config("a");
  cfg.retry_period = seconds(1);
  LeaderElector a(*client_, cfg);
  std::atomic<int> started{0};
  std::atomic<int> stopped{0};
  std::thread runner([&] { a.Run([&] { ++started; }, [&] { ++stopped; }); });
  auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (!a.is_leader() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(a.is_leader());
  a.Stop();
  runner.join();
  EXPECT_EQ(started.load(), 1);
  EXPECT_EQ(stopped.load(), 1);
  EXPECT_FALSE(a.is_leader());
}

}  // namespace
}  // namespace hami::k8s
