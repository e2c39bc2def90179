// Issue 30 against the real hami-vgpu-monitor binary: it runs as root on the host over
// $HOOK_PATH/containers/<podUID>_<container>/, which the container writes, while a thread of this
// test plays the container and mutates that directory for seconds: a symlink to a file outside
// the hook path swapped in for the region (the outside file's bytes never change), a FIFO swapped
// in (/metrics keeps answering), the region truncated while the feedback runs (no SIGBUS), a UUID
// that is not UTF-8 over its limit (the monitor lives, /metrics is valid Prometheus text, the Event
// is posted), priority 2^31-1 (a pass completes quickly) and a device node (never opened). The
// monitor runs with --feedback-period=50ms so that the feedback and the housekeeping passes run
// many times meanwhile. HAMI_HOSTILE_MONITOR_BIN replaces the binary (to check another build).
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "k8s/client.h"
#include "k8s/object.h"
#include "monitor/region_writer.h"
#include "scheduler/scheduler_process.h"
#include "scheduler/test_env.h"
#include "sim/apiserver/apiserver.h"

namespace hami {
namespace {

namespace fs = std::filesystem;
using k8s::Json;
using monitor::testing::kV1;
using monitor::testing::RegionWriter;
using scheduler::testing::SchedulerProcess;
using Clock = std::chrono::steady_clock;

constexpr const char* kUuid = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
constexpr const char* kOtherUuid = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
constexpr const char* kOutsideUuid = "GPU-0ut5ide0-0000-0000-0000-000000000000";

std::string MonitorBin() {
  const char* env = getenv("HAMI_HOSTILE_MONITOR_BIN");
  return env != nullptr && env[0] != '\0' ? env : HAMI_VGPU_MONITOR_BIN;
}

// A v1 region: one device, `used` bytes in one live slot (host PID unknown), limit 1 GiB.
RegionWriter Region(uint64_t used, const std::string& uuid = kUuid) {
  RegionWriter w(kV1);
  w.Devices(1).Uuid(0, uuid).Limit(0, 1ull << 30).ProcNum(1);
  w.Slot(0, 1, 0, 1).Used(0, 0, 0, 0, used, used).SmUtil(0, 0, 25);
  return w;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The length of the UTF-8 sequence at s[i], or 0 when it is not a valid one.
size_t Utf8At(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80                 ? 1
                   : c >= 0xc2 && c <= 0xdf ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  }
  return n;
}

// Why `text` is not valid Prometheus text exposition (0.0.4), or "" when it is: UTF-8 throughout,
// every line a comment or `name{label="value",...} value` with only \\, \" and \n escapes.
std::string PrometheusTextProblem(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8At(text, i);
    if (n == 0) return "byte " + std::to_string(i) + " is not UTF-8";
    i += n;
  }
  auto name_char = [](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
  };
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) return "no newline at the end";
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("# ", 0) == 0 || line.empty()) continue;
    size_t i = 0;
    while (i < line.size() && name_char(line[i], i == 0)) ++i;
    if (i == 0) return "no metric name: " + line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t label = i;
        while (i < line.size() && name_char(line[i], i == label) && line[i] != ':') ++i;
        if (i == label || line.compare(i, 2, "=\"") != 0) return "bad label: " + line;
        i += 2;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size() ||
                (line[i + 1] != '\\' && line[i + 1] != '"' && line[i + 1] != 'n')) {
              return "bad escape: " + line;
            }
            ++i;
          }
          ++i;
        }
        if (i >= line.size()) return "unterminated label value: " + line;
        ++i;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return "unterminated labels: " + line;
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') return "no value: " + line;
    const std::string value = line.substr(i + 1);
    char* parsed_end = nullptr;
    std::strtod(value.c_str(), &parsed_end);
    if (value.empty() || *parsed_end != '\0') return "bad value: " + line;
  }
  return "";
}

// Sets an environment variable for one scope (the child copies the environment at start).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

class MonitorHookDirTest : public scheduler::testing::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    char dir[] = "/tmp/hami-hostile-monitor-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    hook_ = dir_ + "/vgpu";
    kubeconfig_ = dir_ + "/kubeconfig";
    ASSERT_TRUE(api_->WriteKubeconfig(kubeconfig_).ok());
    char out[] = "/tmp/hami-hostile-outside-XXXXXX";
    ASSERT_NE(mkdtemp(out), nullptr);
    outside_ = out;
    ctr_ = AddPod("p");
    ASSERT_FALSE(ctr_.empty());
  }
  void TearDown() override {
    StopMutator();
    if (monitor_ && monitor_->pid() > 0) {
      // SIGTERM, then 20 s to exit before SIGKILL (a pass stuck in a loop never lets it).
      ::kill(monitor_->pid(), SIGTERM);
      const auto deadline = Clock::now() + std::chrono::seconds(20);
      while (Running() && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      const int status = monitor_->Kill(Running() ? SIGKILL : 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "the monitor did not exit cleanly on SIGTERM: status " << status << "\n"
          << LogTail();
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::remove_all(outside_, ec);
  }

  // A vGPU pod of node-a with one container "main"; returns its directory under the hook path.
  std::string AddPod(const std::string& name) {
    Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    pod["metadata"] = {
        {"name", name}, {"namespace", "default"}, {"labels", {{"hami.io/vgpu-node", "node-a"}}}};
    pod["spec"]["containers"] = Json::array({{{"name", "main"}}});
    auto created = client_->Create(k8s::resources::kPods, "default", pod);
    if (!created.ok()) return "";
    const std::string d =
        hook_ + "/containers/" + (*created)["metadata"]["uid"].get<std::string>() + "_main";
    fs::create_directories(d);
    return d;
  }

  void StartMonitor(const std::string& period = "50ms") {
    ScopedEnv node("NODE_NAME", "node-a");
    ScopedEnv hook("HOOK_PATH", hook_);
    monitor_ = std::make_unique<SchedulerProcess>(
        MonitorBin(), std::vector<std::string>{
                          "--kubeconfig", kubeconfig_, "--metrics-bind-address", "127.0.0.1:0",
                          "--feedback-period", period, "--nvml-library", dir_ + "/no-nvml.so",
                          "--mig-apply-lock", dir_ + "/mig-apply.lock", "--logtostderr", "-v=2"});
    ASSERT_TRUE(monitor_->started());
    port_ = monitor_->WaitForPort();
    ASSERT_GT(port_, 0) << monitor_->log();
  }

  // GET `path` with a 5 s limit: the status (-1: no answer in time) and the body.
  int Get(const std::string& path, std::string* body = nullptr) {
    httplib::Client http("127.0.0.1", port_);
    http.set_connection_timeout(std::chrono::seconds(5));
    http.set_read_timeout(std::chrono::seconds(5));
    auto res = http.Get(path);
    if (!res) return -1;
    if (body != nullptr) *body = res->body;
    return res->status;
  }

  // Polls /metrics until it holds `needle` (true) or 20 s pass (false).
  bool WaitForMetric(const std::string& needle) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    std::string body;
    while (Clock::now() < deadline) {
      if (Get("/metrics", &body) == 200 && body.find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Whether the monitor process still runs (neither exited nor a zombie).
  bool Running() {
    if (!monitor_ || monitor_->pid() <= 0) return false;
    std::ifstream stat("/proc/" + std::to_string(monitor_->pid()) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    const size_t paren = text.rfind(')');
    return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
  }

  std::string LogTail() {
    const std::string log = monitor_ ? monitor_->log() : "";
    return log.size() > 4000 ? log.substr(log.size() - 4000) : log;
  }

  // Runs `step` in a loop on another thread until StopMutator(): the container at work.
  void Mutate(std::function<void()> step) {
    stop_ = false;
    mutator_ = std::thread([this, step = std::move(step)] {
      while (!stop_) step();
    });
  }
  void StopMutator() {
    stop_ = true;
    if (mutator_.joinable()) mutator_.join();
  }

  // Scrapes /metrics for `duration` while the mutator works: every scrape answers 200 within 5 s
  // and never shows `forbidden`. Returns the number of scrapes.
  int ScrapeFor(std::chrono::seconds duration, const std::string& forbidden = "") {
    const auto end = Clock::now() + duration;
    int scrapes = 0;
    while (Clock::now() < end) {
      std::string body;
      const int status = Get("/metrics", &body);
      EXPECT_EQ(status, 200) << "scrape " << scrapes << "\n" << LogTail();
      if (status != 200) break;
      if (!forbidden.empty() && body.find(forbidden) != std::string::npos) {
        ADD_FAILURE() << "scrape " << scrapes << " shows " << forbidden << ":\n" << body;
        break;
      }
      ++scrapes;
    }
    return scrapes;
  }

  std::string dir_, hook_, kubeconfig_, outside_, ctr_;
  std::unique_ptr<SchedulerProcess> monitor_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread mutator_;
};

// Item 1: a.cache swapped for a symlink to a region outside the hook path, planted once and then
// between every scan and feedback: the outside file's bytes never change and its numbers never
// show as this container's.
TEST_F(MonitorHookDirTest, SymlinkSwapNeverWritesOutsideTheHookPath) {
  const std::string victim = outside_ + "/victim";
  // recent_kernel 2: a feedback pass that reached it would write 1 there.
  ASSERT_TRUE(Region(7 << 20, kOutsideUuid).RecentKernel(2).Save(victim));
  const std::string before = ReadAll(victim);
  const std::string region = ctr_ + "/a.cache";
  fs::create_symlink(victim, region);
  StartMonitor();
  // A real region of another pod shows that the scans run.
  const std::string other = AddPod("q");
  ASSERT_TRUE(Region(3 << 20, kOtherUuid).Save(other + "/a.cache"));
  ASSERT_TRUE(WaitForMetric(kOtherUuid)) << LogTail();
  ScrapeFor(std::chrono::seconds(1), kOutsideUuid);
  EXPECT_EQ(ReadAll(victim), before) << "the monitor wrote through a planted symlink";
  const std::string staged = ctr_ + "/staged";
  Mutate([=] {
    std::error_code ec;
    Region(1 << 20).RecentKernel(2).Save(staged);
    fs::rename(staged, region, ec);  // a real region for the scan ...
    fs::remove(region, ec);
    fs::create_symlink(victim, region, ec);  // ... a link by the time the feedback writes
  });
  const int scrapes = ScrapeFor(std::chrono::seconds(4), kOutsideUuid);
  StopMutator();
  EXPECT_GT(scrapes, 10);
  EXPECT_EQ(ReadAll(victim), before) << "the monitor wrote outside the hook path";
  EXPECT_TRUE(Running()) << LogTail();
}

// Item 4: a.cache swapped with a FIFO for seconds: every /metrics answers within 5 s (an open()
// that blocked on the FIFO used to hold both metrics workers forever).
TEST_F(MonitorHookDirTest, FifoSwapKeepsMetricsAnswering) {
  StartMonitor();
  const std::string region = ctr_ + "/a.cache";
  ASSERT_TRUE(Region(2 << 20).Save(region));
  ASSERT_TRUE(WaitForMetric(kUuid)) << LogTail();
  const std::string staged = ctr_ + "/staged";
  const std::string fifo = ctr_ + "/fifo";
  // a.cache flips between a regular file of a region's size (sparse: made in microseconds) and a
  // FIFO, so that a scan sees a region by its type and size and then opens a FIFO.
  Mutate([=] {
    const int fd = ::open(staged.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (::ftruncate(fd, static_cast<off_t>(kV1.size)) != 0) {
        // the next round tries again
      }
      ::close(fd);
    }
    ::rename(staged.c_str(), region.c_str());
    ::mkfifo(fifo.c_str(), 0600);
    ::rename(fifo.c_str(), region.c_str());
  });
  const int scrapes = ScrapeFor(std::chrono::seconds(4));
  StopMutator();
  EXPECT_GT(scrapes, 10);
  EXPECT_EQ(Get("/healthz"), 200);
  EXPECT_EQ(Get("/metrics"), 200) << LogTail();
  EXPECT_TRUE(Running()) << LogTail();
}

// Item 3: the container truncates its region again and again while the feedback reads and writes
// it: no SIGBUS, the monitor keeps running and serving.
TEST_F(MonitorHookDirTest, TruncationDuringTheFeedbackIsHarmless) {
  const std::string region = ctr_ + "/a.cache";
  ASSERT_TRUE(Region(2 << 20).RecentKernel(1 << 30).Save(region));
  StartMonitor("1ms");
  ASSERT_TRUE(WaitForMetric(kUuid)) << LogTail();
  // Cut to its first page (magic, UUID, limit and slot 0 stay: still a region when full) and
  // sized again at once, every 300 us: whole for a scan to read, short for an instant after it.
  const int fd = ::open(region.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  Mutate([=] {
    if (::ftruncate(fd, 4096) != 0 || ::ftruncate(fd, static_cast<off_t>(kV1.size)) != 0) {
      ADD_FAILURE() << "ftruncate failed";
    }
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  });
  const int scrapes = ScrapeFor(std::chrono::seconds(4));
  StopMutator();
  EXPECT_GT(scrapes, 10);
  ::close(fd);
  EXPECT_TRUE(Running()) << "the monitor died while the region was truncated\n" << LogTail();
}

// Item 2: a UUID that is not UTF-8 on a device over its limit: the monitor keeps running (building
// the Event used to throw on the feedback thread and abort), the Event is posted, and /metrics is
// valid Prometheus text with the label escaped (Prometheus refused the node's whole scrape).
TEST_F(MonitorHookDirTest, AUuidThatIsNotUtf8OverItsLimit) {
  const std::string bad = std::string("GPU-\xff\xfe\xc3\x28-\x1b[31m\"x\\\n");
  ASSERT_TRUE(Region(3ull << 30, bad).Save(ctr_ + "/a.cache"));
  StartMonitor();
  ASSERT_TRUE(WaitForMetric("hami_vgpu_memory_exceeded_bytes")) << LogTail();
  // The housekeeping runs every 50 ms: wait for the Event.
  bool posted = false;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!posted && Clock::now() < deadline && Running()) {
    auto events = client_->List(k8s::resources::kEvents, "default", {});
    if (events.ok()) {
      for (const Json& e : events->items) {
        posted = posted || (e.contains("reason") && e["reason"] == "VGPUMemoryOverLimit");
      }
    }
    if (!posted) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(posted) << LogTail();
  // More passes over the same region.
  ScrapeFor(std::chrono::seconds(1));
  ASSERT_TRUE(Running()) << "the monitor died on the UUID\n" << LogTail();
  std::string body;
  ASSERT_EQ(Get("/metrics", &body), 200);
  EXPECT_EQ(PrometheusTextProblem(body), "");
  EXPECT_NE(body.find("device_uuid=\"GPU-"), std::string::npos) << body;
}

// Item 5: priority 2^31-1 alone on its GPU (no higher priority active there, so a loop over the
// priority values below it would run 2^31 times): the passes go on, another container's
// recent_kernel is decremented pass after pass.
TEST_F(MonitorHookDirTest, AnExtremePriorityDoesNotStopThePasses) {
  ASSERT_TRUE(Region(1 << 20).Priority(2147483647).RecentKernel(1 << 30).Save(ctr_ + "/a.cache"));
  const std::string other = AddPod("q");
  const std::string other_region = other + "/a.cache";
  ASSERT_TRUE(Region(1 << 20, kOtherUuid).Priority(0).RecentKernel(1000).Save(other_region));
  StartMonitor();
  ASSERT_TRUE(WaitForMetric(kOtherUuid)) << LogTail();
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  const size_t recent_kernel = kV1.proc_num + 8;
  while (Clock::now() < deadline && monitor::testing::ReadI32(other_region, recent_kernel) > 990) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_LE(monitor::testing::ReadI32(other_region, recent_kernel), 990)
      << "fewer than 10 feedback passes in 5 s\n"
      << LogTail();
  EXPECT_EQ(Get("/metrics"), 200);
  EXPECT_TRUE(Running()) << LogTail();
}

// A device node the container made with mknod (default container capabilities allow it; the
// device cgroup stops the container from opening it, not the host's root) is never opened: an
// open of a watchdog or a tape device has effects of its own. Needs root for mknod.
TEST_F(MonitorHookDirTest, ADeviceNodeIsNeverOpened) {
  if (geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  const std::string node = ctr_ + "/a.cache";
  ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << "mknod /dev/null's";
  const int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(inotify_add_watch(watch, ctr_.c_str(), IN_OPEN), 0);
  StartMonitor();
  const std::string other = AddPod("q");
  ASSERT_TRUE(Region(3 << 20, kOtherUuid).Save(other + "/a.cache"));
  ASSERT_TRUE(WaitForMetric(kOtherUuid)) << LogTail();
  ScrapeFor(std::chrono::seconds(1));
  // Opens of the directory itself (the scan lists it) come without a name.
  alignas(inotify_event) char buf[4096];
  std::vector<std::string> opened;
  for (ssize_t n; (n = read(watch, buf, sizeof(buf))) > 0;) {
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
      if (e->len > 0) opened.emplace_back(e->name);
      off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  close(watch);
  EXPECT_TRUE(opened.empty()) << "opened in the container's directory: " << opened[0];
  EXPECT_TRUE(Running()) << LogTail();
}

}  // namespace
}  // namespace hami
