// Shared by the tests that run the real hami-scheduler binary against the in-process sim API
// server (tests/scheduler/binary_integration_test.cc, tests/hostile/parse_*_test.cc): the
// server's kubeconfig in a fresh directory, the flags every start shares, and a start that
// connects an HTTP client to the scheduler. The including target defines HAMI_SCHEDULER_BIN.
#ifndef HAMI_TESTS_SCHEDULER_BINARY_FIXTURE_H_
#define HAMI_TESTS_SCHEDULER_BINARY_FIXTURE_H_

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "k8s/object.h"
#include "scheduler_process.h"
#include "test_env.h"

namespace hami::scheduler::testing {

class SchedulerBinaryTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    char dir[] = "/tmp/hami-sched-bin-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    kubeconfig_ = dir_ + "/kubeconfig";
    ASSERT_TRUE(api_->WriteKubeconfig(kubeconfig_));
  }
  void TearDown() override {
    unlink(kubeconfig_.c_str());
    rmdir(dir_.c_str());
  }

  // The flags every start shares (kubeconfig_, ephemeral HTTP and metrics ports, HAMi's
  // scheduler name), then `extra`.
  std::vector<std::string> SchedulerArgs(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {
        "--kubeconfig",           kubeconfig_,   "--http_bind",      "127.0.0.1:0",
        "--metrics-bind-address", "127.0.0.1:0", "--scheduler-name", "hami-scheduler"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // Starts the binary with SchedulerArgs(extra) into sched_ and connects http_ to it (30 s read
  // timeout); a fatal failure when it does not come up.
  void StartScheduler(const std::vector<std::string>& extra = {}) {
    sched_ = std::make_unique<SchedulerProcess>(HAMI_SCHEDULER_BIN, SchedulerArgs(extra));
    ASSERT_TRUE(sched_->started());
    int port = sched_->WaitForPort();
    ASSERT_GT(port, 0) << sched_->log();
    http_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    http_->set_read_timeout(std::chrono::seconds(30));
  }

  // Node `node`'s annotation `key` once it is set, polled for up to 10 s; nullopt if never. The
  // registration pass makes its handshake writes after the rows are in, so a node's
  // Requesting_<time> may land just after the first filter was answered.
  std::optional<std::string> AwaitNodeAnnotation(const std::string& node, const std::string& key) {
    return AwaitAnnotation(k8s::resources::kNodes, "", node, key);
  }
  // Pod default/`pod`'s annotation `key` once it is set (to `want`, when given), the same way:
  // the filter's decision is written in the background (--async-decision-write, the default)
  // after its answer.
  std::optional<std::string> AwaitPodAnnotation(const std::string& pod, const std::string& key,
                                                const std::optional<std::string>& want = {}) {
    return AwaitAnnotation(k8s::resources::kPods, "default", pod, key, want);
  }

  // The annotation once it is set (to `want`, when given); its last value (or nullopt) after
  // 10 s.
  std::optional<std::string> AwaitAnnotation(const k8s::Resource& resource, const std::string& ns,
                                             const std::string& name, const std::string& key,
                                             const std::optional<std::string>& want = {}) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      std::optional<std::string> value;
      if (auto got = client_->Get(resource, ns, name)) value = k8s::Annotation(*got, key);
      if (value && (!want || value == want)) return value;
      if (std::chrono::steady_clock::now() >= deadline) return value;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval only
    }
  }

  std::unique_ptr<SchedulerProcess> sched_;
  std::unique_ptr<httplib::Client> http_;
  std::string dir_;
  std::string kubeconfig_;
};

}  // namespace hami::scheduler::testing

#endif  // HAMI_TESTS_SCHEDULER_BINARY_FIXTURE_H_
