// The hami-scheduler binary: --help names every flag of the issue; against the sim apiserver it
// serves /healthz and exits 0 on SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

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
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    execl(HAMI_SCHEDULER_BIN, HAMI_SCHEDULER_BIN, "--kubeconfig", kubeconfig.c_str(), "--http_bind",
          "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  // The binary logs its port once it listens; read stderr until then.
  std::string log;
  std::smatch m;
  std::regex serving("serving on port (\\d+)");
  char buf[512];
  ssize_t n;
  while (!std::regex_search(log, m, serving) && (n = read(fds[0], buf, sizeof(buf))) > 0) {
    log.append(buf, static_cast<size_t>(n));
  }
  ASSERT_TRUE(std::regex_search(log, m, serving)) << log;
  httplib::Client http("127.0.0.1", std::stoi(m[1].str()));
  auto res = http.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  close(fds[0]);
  unlink(kubeconfig.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace hami::scheduler
