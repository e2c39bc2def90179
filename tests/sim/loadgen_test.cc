// `hami-sim loadgen` (sim/loadgen.h): kube-scheduler's default share of candidates, the
// over-commit count from the objects alone, and the binary end to end at a small size (its
// report's fields, every pod bound, 0 over-committed) and under SIGTERM (the children die too).
#include "sim/loadgen.h"
#include "sim/synthetic/cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "protocol/node_register.h"
#include "protocol/pod_devices.h"

namespace hami::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(LoadgenTest, CandidatesAreKubeSchedulersAdaptiveShare) {
  EXPECT_EQ(synthetic::KubeSchedulerCandidates(20), 20u);
  EXPECT_EQ(synthetic::KubeSchedulerCandidates(99), 99u);
  EXPECT_EQ(synthetic::KubeSchedulerCandidates(100),
            100u);  // 49 % of 100 is under the floor of 100
  EXPECT_EQ(synthetic::KubeSchedulerCandidates(1000), 420u);    // 42 %
  EXPECT_EQ(synthetic::KubeSchedulerCandidates(5000), 500u);    // 10 %
  EXPECT_EQ(synthetic::KubeSchedulerCandidates(20000), 1000u);  // 5 % at least
}

json Node(const std::string& name, const std::vector<std::string>& uuids) {
  std::vector<protocol::DeviceInfo> devices;
  for (const std::string& u : uuids) {
    devices.push_back({.id = u, .count = 2, .devmem = 1000, .devcore = 100, .health = true});
  }
  json node;
  node["metadata"]["name"] = name;
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
      protocol::EncodeNodeRegister(devices);
  return node;
}

json Pod(const std::string& node, const std::string& uuid, int mem, int cores,
         const std::string& phase = "Running") {
  json pod;
  pod["metadata"]["name"] = "p";
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  pod["status"]["phase"] = phase;
  pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] =
      protocol::EncodePodDevices({{{uuid, "NVIDIA", mem, cores}}});
  return pod;
}

TEST(LoadgenTest, CountOvercommitReadsOnlyBoundLivePods) {
  std::vector<json> nodes = {Node("n0", {"GPU-a", "GPU-b"})};
  std::vector<json> pods = {Pod("n0", "GPU-a", 600, 50), Pod("n0", "GPU-a", 400, 50),
                            Pod("", "GPU-b", 5000, 0),                  // not bound
                            Pod("n0", "GPU-b", 5000, 0, "Succeeded")};  // ended
  OvercommitCount c = CountOvercommit(nodes, pods);
  EXPECT_EQ(c.gpus, 2);
  EXPECT_EQ(c.overcommitted, 0);
  EXPECT_EQ(c.unknown, 0);
  EXPECT_TRUE(c.details.empty());
}

TEST(LoadgenTest, CountOvercommitFindsMemoryCoresAndSlotsAndUnknownGpus) {
  std::vector<json> nodes = {Node("n0", {"GPU-a", "GPU-b"}), Node("n1", {"GPU-c"})};
  std::vector<json> pods = {Pod("n0", "GPU-a", 900, 10), Pod("n0", "GPU-a", 200, 10),
                            Pod("n0", "GPU-b", 10, 60),  Pod("n0", "GPU-b", 10, 60),
                            Pod("n1", "GPU-c", 1, 1),    Pod("n1", "GPU-c", 1, 1),
                            Pod("n1", "GPU-c", 1, 1),    Pod("n1", "GPU-x", 1, 1)};
  OvercommitCount c = CountOvercommit(nodes, pods);
  EXPECT_EQ(c.gpus, 3);
  EXPECT_EQ(c.overcommitted, 3);
  EXPECT_EQ(c.unknown, 1);
  ASSERT_EQ(c.details.size(), 3u);
  EXPECT_EQ(c.details[0], "n0/GPU-a: memory 1100 > 1000");
  EXPECT_EQ(c.details[1], "n0/GPU-b: cores 120 > 100");
  EXPECT_EQ(c.details[2], "n1/GPU-c: pods 3 > 2");
}

// Runs `args` with stdout to `out_path`; returns the pid.
pid_t Spawn(std::vector<std::string> args, const std::string& out_path) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class LoadgenBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hami-loadgen-test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LoadgenBinaryTest, SmallRunReportsEveryFigureAndNoOvercommit) {
  const std::string report = (dir_ / "report.json").string();
  const std::string out = (dir_ / "out.txt").string();
  pid_t pid = Spawn({HAMI_SIM_BIN, "loadgen", "--nodes", "12", "--bound-pods", "30", "--pods", "40",
                     "--report", report},
                    out);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(WaitExit(pid), 0) << ReadFile(out);
  auto r = ParseJson(ReadFile(report));
  ASSERT_TRUE(r) << ReadFile(out);
  for (const char* key :
       {"pods_per_second", "filter_latency_p50_ms", "filter_latency_p99_ms", "bind_latency_p99_ms",
        "scheduler_peak_rss_mib", "overcommitted_devices", "wall_seconds", "sync_seconds",
        "scheduler_cpu_ms_per_pod", "apiserver_cpu_ms_per_pod"}) {
    ASSERT_TRUE(r->contains(key)) << key;
    EXPECT_TRUE((*r)[key].is_number()) << key;
  }
  EXPECT_EQ((*r)["nodes"], 12);
  EXPECT_EQ((*r)["gpus"], 96);
  EXPECT_EQ((*r)["candidates_per_filter"], 12);
  EXPECT_EQ((*r)["pods_bound"], 40) << r->dump(2);
  EXPECT_EQ((*r)["pods_failed"], 0) << r->dump(2);
  EXPECT_EQ((*r)["overcommitted_devices"], 0);
  EXPECT_EQ((*r)["unknown_device_allocations"], 0);
  // NVIDIA nodes at Requesting with allocatable GPUs get no handshake write (HAMi v2.8+).
  EXPECT_EQ((*r)["nodes_handshake_changed"], 0) << r->dump(2);
  EXPECT_GT((*r)["pods_per_second"].get<double>(), 0);
  EXPECT_GT((*r)["scheduler_peak_rss_mib"].get<double>(), 1);
  EXPECT_GE((*r)["filter_latency_p99_ms"].get<double>(),
            (*r)["filter_latency_p50_ms"].get<double>());
}

TEST_F(LoadgenBinaryTest, TooManyBoundPodsIsRefused) {
  const std::string out = (dir_ / "out.txt").string();
  pid_t pid = Spawn({HAMI_SIM_BIN, "loadgen", "--nodes", "1", "--bound-pods", "73"}, out);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 1);
  EXPECT_NE(ReadFile(out).find("--bound-pods 73: more than 72 fit on 1 nodes"), std::string::npos)
      << ReadFile(out);
}

bool Alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

TEST_F(LoadgenBinaryTest, SigtermKillsTheChildren) {
  const std::string out = (dir_ / "out.txt").string();
  // Big enough that the pre-load is still running when the signal comes.
  pid_t pid = Spawn(
      {HAMI_SIM_BIN, "loadgen", "--nodes", "3000", "--bound-pods", "60000", "--pods", "10"}, out);
  ASSERT_GT(pid, 0);
  static const std::regex started("apiserver \\(pid (\\d+)\\)");
  std::smatch m;
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  // Bounded poll for the progress line naming the child.
  while (!std::regex_search(text = ReadFile(out), m, started) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(std::regex_search(text, m, started)) << text;
  const pid_t child = std::stoi(m[1].str());
  EXPECT_TRUE(Alive(child));
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 128 + SIGTERM);
  // The child was SIGKILLed before loadgen exited; init reaps it.
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Alive(child) && std::chrono::steady_clock::now() < gone_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(Alive(child));
}

}  // namespace
}  // namespace hami::sim
