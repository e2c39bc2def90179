// The hami-vgpu-monitor binary against the sim API server (the code of `hami-sim apiserver`,
// in-process on loopback): NODE_NAME and HOOK_PATH from the environment as HAMi's chart sets
// them, Go-style flags, /healthz and a region file's numbers on /metrics; without NODE_NAME it
// exits 2.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

#include "k8s/client.h"
#include "k8s/object.h"
#include "monitor/region_writer.h"
#include "scheduler/scheduler_process.h"
#include "scheduler/test_env.h"
#include "sim/apiserver/apiserver.h"

namespace hami::monitor {
namespace {

using scheduler::testing::SchedulerProcess;

// Sets an environment variable for one scope (the child copies the environment at start).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

class MonitorBinaryTest : public scheduler::testing::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    char dir[] = "/tmp/hami-monitor-bin-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    kubeconfig_ = dir_ + "/kubeconfig";
    ASSERT_TRUE(api_->WriteKubeconfig(kubeconfig_).ok());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_;
  std::string kubeconfig_;
};

TEST_F(MonitorBinaryTest, ServesTheRegionOfAPodOnItsNode) {
  k8s::Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {
      {"name", "train"}, {"namespace", "default"}, {"labels", {{"hami.io/vgpu-node", "node-a"}}}};
  pod["spec"]["containers"] = k8s::Json::array({{{"name", "main"}}});
  auto created = client_->Create(k8s::resources::kPods, "default", pod);
  ASSERT_TRUE(created.ok());
  const std::string uid = (*created)["metadata"]["uid"].get<std::string>();
  const std::string hook = dir_ + "/vgpu";
  std::filesystem::create_directories(hook + "/containers/" + uid + "_main");
  testing::RegionWriter w(testing::kV1);
  w.Devices(1).Uuid(0, "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec").Limit(0, 1ull << 30);
  w.ProcNum(1).Slot(0, 1, 0, 1).Used(0, 0, 0, 0, 1048576, 1048576);
  ASSERT_TRUE(w.Save(hook + "/containers/" + uid + "_main/a.cache"));

  ScopedEnv node("NODE_NAME", "node-a");
  ScopedEnv hook_path("HOOK_PATH", hook);
  ScopedEnv resync("HAMI_RESYNC_INTERVAL", "5m");
  SchedulerProcess p(HAMI_VGPU_MONITOR_BIN,
                     {"-kubeconfig=" + kubeconfig_, "--metrics-bind-address", "127.0.0.1:0", "-v=4",
                      "--logtostderr", "--legacy-metrics"});
  ASSERT_TRUE(p.started());
  const int port = p.WaitForPort();
  ASSERT_GT(port, 0) << p.log();
  httplib::Client http("127.0.0.1", port);
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const std::string used =
      "hami_vgpu_memory_used_bytes{container=\"main\",device_uuid=\"GPU-00552014-5c87-89ac-b1a6-"
      "7b53aa24b0ec\",namespace=\"default\",pod=\"train\",vdevice_index=\"0\",zone=\"vGPU\"} "
      "1.048576e+06\n";
  // The binary's informer syncs after it listens: poll until the pod shows.
  std::string body;
  for (int i = 0; i < 3000 && body.find(used) == std::string::npos; ++i) {
    auto res = http.Get("/metrics");
    ASSERT_TRUE(res);
    body = res->body;
    if (body.find(used) == std::string::npos) usleep(10000);
  }
  EXPECT_NE(body.find(used), std::string::npos) << body << p.log();
  EXPECT_NE(body.find("vGPU_device_memory_usage_in_bytes{ctrname=\"main\""), std::string::npos);
  const int status = p.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << p.log();
}

TEST_F(MonitorBinaryTest, NodeNameIsRequired) {
  unsetenv("NODE_NAME");
  SchedulerProcess p(HAMI_VGPU_MONITOR_BIN, {"--kubeconfig", kubeconfig_});
  ASSERT_TRUE(p.started());
  const int status = p.Kill(0);  // waits for it to exit by itself
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  ASSERT_EQ(p.WaitForPort(), -1);  // returns once its stderr is drained to the end
  EXPECT_NE(p.log().find("NODE_NAME (or --node-name) is required"), std::string::npos) << p.log();
}

TEST_F(MonitorBinaryTest, BadResyncIntervalIsRefused) {
  ScopedEnv node("NODE_NAME", "node-a");
  ScopedEnv resync("HAMI_RESYNC_INTERVAL", "soon");
  SchedulerProcess p(HAMI_VGPU_MONITOR_BIN, {"--kubeconfig", kubeconfig_});
  ASSERT_TRUE(p.started());
  const int status = p.Kill(0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  ASSERT_EQ(p.WaitForPort(), -1);
  EXPECT_NE(p.log().find("HAMI_RESYNC_INTERVAL: want a duration such as 5m, got \"soon\""),
            std::string::npos)
      << p.log();
}

}  // namespace
}  // namespace hami::monitor
