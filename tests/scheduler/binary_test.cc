// The hami-scheduler binary: --help names every flag of the issue; against the sim apiserver it
// serves /healthz and exits 0 on SIGTERM.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

#include "scheduler_process.h"
#include "sim/apiserver.h"

namespace hami::scheduler {
namespace {

std::string RunCapture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = pclose(p);
  return out;
}

TEST(BinaryTest, HelpNamesEveryFlag) {
  int status = -1;
  std::string out = RunCapture(std::string(HAMI_SCHEDULER_BIN) + " --help 2>&1", &status);
  EXPECT_EQ(status, 0);
  for (const char* flag : {"--http_bind",
                           "--cert_file",
                           "--key_file",
                           "--scheduler-name",
                           "--node-scheduler-policy",
                           "--gpu-scheduler-policy",
                           "--metrics-bind-address",
                           "--device-config-file",
                           "--node-label-selector",
                           "--kube-qps",
                           "--kube-burst",
                           "--kube-timeout",
                           "--node-lock-timeout",
                           "--node-lock-retry-timeout",
                           "--force-overwrite-default-scheduler",
                           "--leader-elect",
                           "--leader-elect-resource-name",
                           "--leader-elect-resource-namespace",
                           "--legacy-metrics",
                           "--kubeconfig",
                           "-v"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  }
}

TEST(BinaryTest, BadPolicyFails) {
  int status = -1;
  std::string out =
      RunCapture(std::string(HAMI_SCHEDULER_BIN) + " --node-scheduler-policy=nope 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--node-scheduler-policy"), std::string::npos) << out;
}

TEST(BinaryTest, ServesAndStopsOnSigterm) {
  sim::ApiServer api(sim::ApiServerOptions{});
  ASSERT_TRUE(api.Start());
  char dir[] = "/tmp/hami-sched-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string kubeconfig = std::string(dir) + "/kubeconfig";
  ASSERT_TRUE(api.WriteKubeconfig(kubeconfig));
  testing::SchedulerProcess sched(HAMI_SCHEDULER_BIN,
                                  {"--kubeconfig", kubeconfig, "--http_bind", "127.0.0.1:0",
                                   "--metrics-bind-address", "127.0.0.1:0"});
  int port = sched.WaitForPort();
  ASSERT_GT(port, 0) << sched.log();
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/healthz");
  ASSERT_TRUE(res) << sched.log();
  EXPECT_EQ(res->status, 200);
  int status = sched.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  unlink(kubeconfig.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace hami::scheduler
