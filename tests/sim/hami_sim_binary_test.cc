// The `hami-sim apiserver` command: it writes a kubeconfig that works (over HTTP and with
// --tls), stops cleanly on SIGTERM, and rejects a bad --listen.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "k8s/client.h"
#include "k8s/kubeconfig.h"

extern char** environ;

namespace hami::sim {
namespace {

namespace fs = std::filesystem;

pid_t Spawn(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class HamiSimBinary : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hami-sim-bin-" + std::to_string(getpid()) + (GetParam() ? "-tls" : "-http"));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(HamiSimBinary, ServesAndWritesAWorkingKubeconfig) {
  std::string kubeconfig = (dir_ / "kubeconfig").string();
  std::vector<std::string> args = {HAMI_SIM_BIN,  "apiserver",        "--listen",
                                   "127.0.0.1:0", "--kubeconfig-out", kubeconfig};
  if (GetParam()) {
    args.insert(args.end(), {"--tls", "--cert-dir", (dir_ / "certs").string()});
  }
  pid_t pid = Spawn(args);
  ASSERT_GT(pid, 0);
  // The kubeconfig appears once the server listens; poll for it with a bound.
  Result<k8s::RestConfig> cfg = Error{"not yet"};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!cfg && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (fs::exists(kubeconfig)) cfg = k8s::LoadKubeconfigFile(kubeconfig);
  }
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->server.rfind(GetParam() ? "https://" : "http://", 0), 0u) << cfg->server;
  k8s::Client client(*cfg);
  auto ns = client.Get(k8s::resources::kNamespaces, "", "default");
  EXPECT_TRUE(ns) << ns.error().ToString();
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
}

INSTANTIATE_TEST_SUITE_P(HttpAndTls, HamiSimBinary, ::testing::Bool());

TEST(HamiSimBinaryFlags, BadListenIsAUsageError) {
  pid_t pid = Spawn({HAMI_SIM_BIN, "apiserver", "--listen", "nonsense"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 2);
}

// `run --serve` writes its kubeconfig into a fresh temporary directory, not the current one,
// and prints its absolute path with an `export KUBECONFIG=` line that works.
TEST(HamiSimRunServe, KubeconfigGoesToATempDirAndIsPrinted) {
  const fs::path cwd = fs::temp_directory_path() / ("hami-sim-serve-" + std::to_string(getpid()));
  fs::remove_all(cwd);
  fs::create_directories(cwd);
  const std::string out_file = (cwd / "stdout").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<std::string> args = {
      HAMI_SIM_BIN, "run", std::string(HAMI_EXAMPLES_DIR) + "/demo.yaml", "--serve", "--no-color"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  std::string kubeconfig;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (kubeconfig.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(out_file);
    std::string line;
    while (std::getline(in, line)) {
      const std::string prefix = "  export KUBECONFIG=";
      if (line.rfind(prefix, 0) == 0) kubeconfig = line.substr(prefix.size());
    }
  }
  ASSERT_FALSE(kubeconfig.empty()) << "no export line in the output";
  EXPECT_TRUE(fs::path(kubeconfig).is_absolute()) << kubeconfig;
  EXPECT_NE(fs::path(kubeconfig).parent_path(), cwd) << kubeconfig;
  EXPECT_FALSE(fs::exists(cwd / "hami-sim.kubeconfig"));
  auto cfg = k8s::LoadKubeconfigFile(kubeconfig);
  ASSERT_TRUE(cfg) << cfg.error();
  k8s::Client client(*cfg);
  auto nodes = client.List(k8s::resources::kNodes, "", {});
  EXPECT_TRUE(nodes) << nodes.error().ToString();
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
  fs::remove_all(fs::path(kubeconfig).parent_path());
  fs::remove_all(cwd);
}

// Go-style flags (src/common/flags.h): -v=2 and -listen=... parse, so the run reaches the
// --listen check (exit 2); CLI11 alone would refuse "-v=2" (value "=2") with its own code.
TEST(HamiSimBinaryFlags, GoStyleFlagsParse) {
  pid_t pid = Spawn({HAMI_SIM_BIN, "-v=2", "apiserver", "-listen=nonsense"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 2);
}

}  // namespace
}  // namespace hami::sim
