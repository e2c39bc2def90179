// The hami-scheduler binary: --help names every flag of the issue; against the sim apiserver it
// serves /healthz and exits 0 on SIGTERM, also started with the command line HAMi's chart v2.10.0
// renders (Go-style flags, --debug) and with Go's single-dash forms.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "scheduler_process.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/certs.h"

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
  for (const char* flag :
       {"--http_bind", "--cert_file", "--key_file", "--scheduler-name", "--node-scheduler-policy",
        "--gpu-scheduler-policy", "--metrics-bind-address", "--device-config-file",
        "--node-label-selector", "--kube-qps", "--kube-burst", "--kube-timeout",
        "--node-lock-timeout", "--node-lock-retry-timeout", "--force-overwrite-default-scheduler",
        "--leader-elect", "--leader-elect-resource-name", "--leader-elect-resource-namespace",
        "--legacy-metrics", "--kubeconfig", "-v",
        // HAMi's flags accepted and ignored (its chart renders the first three)
        "Accepted for HAMi compatibility (ignored)", "--debug", "--enable-ascend",
        "--enable-iluvatar", "--profiling", "--logtostderr"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  }
  // Every vendor with a device-config.yaml section is scheduled (issue 15).
  EXPECT_EQ(out.find("only NVIDIA"), std::string::npos);
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

// Starts hami-scheduler with `args` (plus the sim apiserver's kubeconfig) and expects /healthz
// to answer 200 on the HTTPS port when `tls`, plain HTTP otherwise, and a clean SIGTERM exit.
// Returns the process log.
std::string ServeHealthz(const std::vector<std::string>& args, const std::string& ca_cert = "") {
  sim::ApiServer api(sim::ApiServerOptions{});
  EXPECT_TRUE(api.Start());
  char dir[] = "/tmp/hami-sched-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  const std::string kubeconfig = std::string(dir) + "/kubeconfig";
  EXPECT_TRUE(api.WriteKubeconfig(kubeconfig));
  std::vector<std::string> all = args;
  all.push_back("--kubeconfig=" + kubeconfig);
  testing::SchedulerProcess sched(HAMI_SCHEDULER_BIN, all);
  const int port = sched.WaitForPort();
  EXPECT_GT(port, 0) << sched.log();
  if (port > 0) {
    int code = -1;
    if (ca_cert.empty()) {
      httplib::Client http("127.0.0.1", port);
      auto res = http.Get("/healthz");
      code = res ? res->status : -1;
    } else {
      httplib::SSLClient https("127.0.0.1", port);
      https.set_ca_cert_path(ca_cert.c_str());
      https.enable_server_certificate_verification(true);
      auto res = https.Get("/healthz");
      code = res ? res->status : -1;
    }
    EXPECT_EQ(code, 200) << sched.log();
  }
  const int status = sched.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << sched.log();
  std::filesystem::remove_all(dir);
  return sched.log();
}

// The decision is written in the background by default; --async-decision-write=false (also Go's
// single-dash form) restores HAMi's order.
TEST(BinaryTest, DecisionsAreWrittenInTheBackgroundUnlessTurnedOff) {
  EXPECT_NE(ServeHealthz({"--http_bind=127.0.0.1:0"})
                .find("decisions written in the background (4 writers)"),
            std::string::npos);
  EXPECT_NE(ServeHealthz({"--http_bind=127.0.0.1:0", "--decision-writers=2"})
                .find("decisions written in the background (2 writers)"),
            std::string::npos);
  for (const char* off : {"--async-decision-write=false", "-async-decision-write=false"}) {
    EXPECT_NE(ServeHealthz({"--http_bind=127.0.0.1:0", off})
                  .find("decisions written before /filter answers (HAMi's order)"),
              std::string::npos)
        << off;
  }
}

// HAMi v2.10.0's chart renders this command for its default values (webhook on; the binary is
// `scheduler` there): every flag as it is, only the addresses and file paths made local.
TEST(BinaryTest, StartsWithTheCommandLineHamisChartRenders) {
  char dir[] = "/tmp/hami-sched-chart-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto tls = sim::GenerateTlsFiles(std::string(dir) + "/tls");
  ASSERT_TRUE(tls.ok());
  const std::string device_config = std::string(dir) + "/device-config.yaml";
  std::ofstream(device_config) << "nvidia:\n  resourceCountName: nvidia.com/gpu\n"
                                  "  deviceSplitCount: 10\n";
  const std::string log = ServeHealthz(
      {"--http_bind=127.0.0.1:0",  // HAMi: 0.0.0.0:443
       "--cert_file=" + tls->server_cert, "--key_file=" + tls->server_key,
       "--scheduler-name=hami-scheduler",
       "--metrics-bind-address=127.0.0.1:0",  // HAMi: :9395
       "--node-scheduler-policy=binpack", "--gpu-scheduler-policy=spread",
       "--force-overwrite-default-scheduler=true", "--device-config-file=" + device_config,
       "--leader-elect=true", "--leader-elect-resource-name=hami-scheduler",
       "--leader-elect-resource-namespace=kube-system",
       // scheduler.extender.extraArgs in HAMi's values.yaml
       "--debug", "-v=4"},
      tls->ca_cert);
  EXPECT_NE(log.find("--debug=true ignored"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

// Go's flag package reads -name=value, -name value and --name value alike.
TEST(BinaryTest, StartsWithGoSingleDashFlags) {
  const std::string log =
      ServeHealthz({"-http_bind=127.0.0.1:0", "-metrics-bind-address", "127.0.0.1:0", "-v", "2",
                    "-leader-elect=false", "-enable-ascend=true", "-logtostderr"});
  EXPECT_NE(log.find("--enable-ascend=true ignored"), std::string::npos) << log;
  EXPECT_NE(log.find("--logtostderr=true ignored"), std::string::npos) << log;
}

TEST(BinaryTest, GoStyleFlagErrorsStillFail) {
  int status = -1;
  // A value after -v=: not a number; an unknown single-dash flag.
  for (const char* args : {" -v=four", " -no-such-flag=1", " --debug=maybe"}) {
    const std::string out = RunCapture(std::string(HAMI_SCHEDULER_BIN) + args + " 2>&1", &status);
    EXPECT_NE(status, 0) << args << ": " << out;
  }
}

}  // namespace
}  // namespace hami::scheduler
