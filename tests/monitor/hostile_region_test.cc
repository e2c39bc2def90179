// Issue 30 items 1-5 and 14: hami-vgpu-monitor runs as root and reads containers/<pod>_<ctr>/,
// which the container writes. Each case below broke the monitor on ed374e3: it followed a
// symlink and wrote into the file it pointed at, aborted on a UUID that is not UTF-8, died of
// SIGBUS when the region shrank under its mapping, blocked in open() on a FIFO, and looped over
// 2^31 priority values. A second thread plays the container and mutates the directory while the
// monitor's passes run (docs/SECURITY.md, the monitor's trust boundary).
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "common/log.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "monitor/monitor.h"
#include "monitor/region_reader.h"
#include "monitor/region_writer.h"
#include "scheduler/test_env.h"
#include "sim/apiserver/apiserver.h"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;
using k8s::Json;
using testing::kV1;
using testing::RegionWriter;

constexpr const char* kUuid = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";

Json Pod(const std::string& name, const std::string& ctr) {
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {
      {"name", name}, {"namespace", "default"}, {"labels", {{"hami.io/vgpu-node", "node-a"}}}};
  pod["spec"]["containers"] = Json::array({{{"name", ctr}}});
  return pod;
}

RegionWriter Region(uint64_t used, const std::string& uuid = kUuid) {
  RegionWriter w(kV1);
  w.Devices(1).Uuid(0, uuid).Limit(0, 2000ull << 20).ProcNum(1);
  w.Slot(0, 1, 0, 1).Used(0, 0, 0, 0, used, used).SmUtil(0, 0, 25);
  return w;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class HostileRegionTest : public scheduler::testing::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    char dir[] = "/tmp/hami-monitor-hostile-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    hook_ = dir;
    auto r = client_->Create(k8s::resources::kPods, "default", Pod("p", "main"));
    ASSERT_TRUE(r.ok());
    uid_ = (*r)["metadata"]["uid"].get<std::string>();
    dir_ = hook_ + "/containers/" + uid_ + "_main";
    fs::create_directories(dir_);
    MonitorOptions o;
    o.node_name = "node-a";
    o.hook_path = hook_;
    o.metrics_bind = "127.0.0.1:0";
    o.mig_apply_lock = hook_ + "/mig-apply.lock";  // not the node's: the feedback must run
    monitor_ = std::make_unique<Monitor>(*client_, o);
    auto port = monitor_->Start();
    ASSERT_TRUE(port.ok()) << port.error();
    port_ = *port;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!monitor_->synced() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(monitor_->synced());
  }
  void TearDown() override {
    stop_ = true;
    if (mutator_.joinable()) mutator_.join();
    if (monitor_) monitor_->Stop();
    std::error_code ec;
    fs::remove_all(hook_, ec);
    fs::remove_all(outside_, ec);
  }
  // Runs `step` in a loop on another thread until the test ends: the container at work.
  void Mutate(std::function<void()> step) {
    mutator_ = std::thread([this, step = std::move(step)] {
      while (!stop_) step();
    });
  }
  int Scrape(std::string* body) {
    httplib::Client http("127.0.0.1", port_);
    http.set_read_timeout(std::chrono::seconds(5));
    auto res = http.Get("/metrics");
    if (!res) return -1;
    *body = res->body;
    return res->status;
  }
  // Runs the monitor's passes for about `seconds` while the mutator works.
  void RunPasses(int seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      monitor_->Feedback();
      monitor_->CheckLimits();
      std::string body;
      ASSERT_EQ(Scrape(&body), 200);
    }
  }

  std::unique_ptr<Monitor> monitor_;
  std::string hook_, uid_, dir_, outside_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread mutator_;
};

// A region swapped for a symlink to a file outside the hook path (a plain link, and a link that
// comes and goes between the scan and the feedback): the outside file is never written, and a
// link is never read as this container's region.
TEST_F(HostileRegionTest, SymlinksAreNeverFollowedNorWritten) {
  char out[] = "/tmp/hami-monitor-outside-XXXXXX";
  ASSERT_NE(mkdtemp(out), nullptr);
  outside_ = out;
  const std::string target = outside_ + "/victim";
  // A valid region with recent_kernel 2: the feedback would decrement it if it wrote there.
  ASSERT_TRUE(Region(1).RecentKernel(2).Save(target));
  const std::string before = ReadAll(target);
  const std::string region = dir_ + "/a.cache";
  fs::create_symlink(target, region);
  EXPECT_TRUE(monitor_->Scan().empty()) << "a symlink was read as the container's region";
  EXPECT_EQ(monitor_->Feedback(), 0);
  Mutate([=] {
    std::error_code ec;
    fs::remove(region, ec);
    Region(1).RecentKernel(2).Save(region);  // a real region for the scan ...
    fs::remove(region, ec);
    fs::create_symlink(target, region, ec);  // ... a link by the time the feedback writes
  });
  RunPasses(3);
  EXPECT_EQ(ReadAll(target), before) << "the monitor wrote outside the hook path";
}

// A symlinked container directory is not followed either.
TEST_F(HostileRegionTest, ASymlinkedContainerDirectoryIsNotFollowed) {
  char out[] = "/tmp/hami-monitor-outside-XXXXXX";
  ASSERT_NE(mkdtemp(out), nullptr);
  outside_ = out;
  ASSERT_TRUE(Region(1).RecentKernel(2).Save(outside_ + "/a.cache"));
  const std::string before = ReadAll(outside_ + "/a.cache");
  fs::remove(dir_);
  fs::create_directory_symlink(outside_, dir_);
  EXPECT_TRUE(monitor_->Scan().empty());
  EXPECT_EQ(monitor_->Feedback(), 0);
  EXPECT_EQ(ReadAll(outside_ + "/a.cache"), before);
}

// A FIFO in place of the region: /metrics and the passes keep answering (open() used to block
// both metrics workers forever).
TEST_F(HostileRegionTest, AFifoDoesNotBlockTheScrape) {
  const std::string region = dir_ + "/a.cache";
  ASSERT_EQ(mkfifo(region.c_str(), 0600), 0);
  EXPECT_TRUE(monitor_->Scan().empty());
  Mutate([=] {
    std::error_code ec;
    fs::remove(region, ec);
    Region(1).Save(region);
    fs::remove(region, ec);
    mkfifo(region.c_str(), 0600);
  });
  RunPasses(2);
}

// The container truncates its region while the passes read and write it: no SIGBUS, every pass
// completes (the monitor maps nothing; a short read fails to parse and is skipped).
TEST_F(HostileRegionTest, TruncationDuringThePassesIsHarmless) {
  const std::string region = dir_ + "/a.cache";
  ASSERT_TRUE(Region(1).RecentKernel(2).Save(region));
  Mutate([=] {
    ::truncate(region.c_str(), 4096);
    Region(1).RecentKernel(2).Save(region);
  });
  RunPasses(3);
}

// A UUID that is not UTF-8, with usage over the limit: the Event is posted, /metrics stays valid
// text (the label is escaped) and nothing throws (the feedback thread used to abort).
TEST_F(HostileRegionTest, AUuidThatIsNotUtf8IsEscapedEverywhere) {
  const std::string bad = std::string("GPU-\xff\xfe\x1b[31m\"x\\") + "\n";
  ASSERT_TRUE(Region(3000ull << 20, bad).Save(dir_ + "/a.cache"));
  auto scanned = monitor_->Scan();
  ASSERT_EQ(scanned.size(), 1u);
  EXPECT_EQ(scanned[0].region.devices[0].uuid, "GPU-\\xff\\xfe\\x1b[31m\"x\\\\x0a");
  EXPECT_EQ(monitor_->CheckLimits(), 1);
  std::string body;
  ASSERT_EQ(Scrape(&body), 200);
  for (unsigned char c : body) {
    ASSERT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "byte " << int(c) << " in /metrics";
  }
  EXPECT_NE(body.find("GPU-\\\\xff\\\\xfe\\\\x1b[31m\\\"x\\\\\\\\x0a"), std::string::npos) << body;
}

// priority = 2^31-1 (and negative): a pass takes no longer than any other.
TEST_F(HostileRegionTest, AnExtremePriorityCostsNothing) {
  auto r = client_->Create(k8s::resources::kPods, "default", Pod("q", "main"));
  ASSERT_TRUE(r.ok());
  const std::string other =
      hook_ + "/containers/" + (*r)["metadata"]["uid"].get<std::string>() + "_main";
  fs::create_directories(other);
  ASSERT_TRUE(Region(1).Priority(0).RecentKernel(2).Save(other + "/a.cache"));
  ASSERT_TRUE(Region(1).Priority(2147483647).RecentKernel(2).Save(dir_ + "/a.cache"));
  // The informer learns of pod q on its own thread.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (monitor_->Scan().size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(Region(1).Priority(0).RecentKernel(2).Save(other + "/a.cache"));
  ASSERT_TRUE(Region(1).Priority(2147483647).RecentKernel(2).Save(dir_ + "/a.cache"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(monitor_->Feedback(), 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // The low-priority one is blocked behind the active priority-0 one, as for priority 1.
  EXPECT_EQ(testing::ReadI32(dir_ + "/a.cache", kV1.proc_num + 8), -1);
  ASSERT_TRUE(Region(1).Priority(-2147483647 - 1).RecentKernel(2).Save(dir_ + "/a.cache"));
  EXPECT_EQ(monitor_->Feedback(), 2);
}

// A non-empty file shorter than a region is skipped (and logged with its path); an empty one is
// the plugin's placeholder.
TEST_F(HostileRegionTest, ShortFilesAreSkipped) {
  ASSERT_TRUE(Region(1).Save(dir_ + "/a.cache", 100));
  EXPECT_TRUE(monitor_->Scan().empty());
  ASSERT_TRUE(Region(1).Save(dir_ + "/a.cache", 0));
  EXPECT_TRUE(monitor_->Scan().empty());
  ASSERT_TRUE(Region(1).Save(dir_ + "/a.cache"));
  EXPECT_EQ(monitor_->Scan().size(), 1u);
}

// The monitor's log lines, captured while a LogCapture lives.
std::mutex g_log_mu;
std::vector<std::string> g_log;
class LogCapture {
 public:
  LogCapture() {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log.clear();
    log::SetSink([](std::string_view line) {
      std::lock_guard<std::mutex> l(g_log_mu);
      g_log.emplace_back(line);
    });
  }
  ~LogCapture() { log::SetSink(nullptr); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // The lines holding every one of `parts`.
  static int Count(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(g_log_mu);
    int n = 0;
    for (const std::string& line : g_log) {
      bool all = true;
      for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
      n += all ? 1 : 0;
    }
    return n;
  }
};

// Item 14: a non-empty file shorter than a region is logged with its path and size; the
// plugin's empty placeholder is not. A problem that comes and goes (a container flipping its
// file in a loop) is logged once, not at every scan.
TEST_F(HostileRegionTest, AShortFileIsLoggedWithItsPathOnce) {
  LogCapture capture;
  const std::string region = dir_ + "/a.cache";
  ASSERT_TRUE(Region(1).Save(region, 0));
  EXPECT_TRUE(monitor_->Scan().empty());
  EXPECT_EQ(LogCapture::Count({"a.cache"}), 0);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(Region(1).Save(region, 100));
    EXPECT_TRUE(monitor_->Scan().empty());
    ASSERT_TRUE(Region(1).Save(region));
    EXPECT_EQ(monitor_->Scan().size(), 1u);
  }
  EXPECT_EQ(LogCapture::Count({"skipping \"" + region + "\"", "100 bytes, smaller than a region"}),
            1);
}

// A hard link to a file elsewhere is not this container's region (nothing it points at is read or
// written), nor is a device node the container made with mknod ever opened.
TEST_F(HostileRegionTest, HardLinksAndDeviceNodesAreNotRegions) {
  char out[] = "/tmp/hami-monitor-outside-XXXXXX";
  ASSERT_NE(mkdtemp(out), nullptr);
  outside_ = out;
  const std::string target = outside_ + "/victim";
  ASSERT_TRUE(Region(1).RecentKernel(2).Save(target));
  const std::string before = ReadAll(target);
  ASSERT_EQ(::link(target.c_str(), (dir_ + "/a.cache").c_str()), 0);
  EXPECT_TRUE(monitor_->Scan().empty());
  EXPECT_EQ(monitor_->Feedback(), 0);
  EXPECT_EQ(ReadAll(target), before);
  fs::remove(dir_ + "/a.cache");
  if (geteuid() == 0) {
    ASSERT_EQ(::mknod((dir_ + "/a.cache").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    const int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ASSERT_GE(watch, 0);
    ASSERT_GE(inotify_add_watch(watch, dir_.c_str(), IN_OPEN), 0);
    EXPECT_TRUE(monitor_->Scan().empty());
    EXPECT_EQ(monitor_->Feedback(), 0);
    alignas(inotify_event) char buf[4096];
    std::string opened;
    for (ssize_t n; (n = read(watch, buf, sizeof(buf))) > 0;) {
      for (ssize_t off = 0; off < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
        if (e->len > 0) opened += std::string(e->name) + " ";  // the directory's own: no name
        off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
    close(watch);
    EXPECT_EQ(opened, "") << "a device node was opened";
  }
}

// A region's priority outside HAMi's two levels counts as the nearest one: -5 is 0 (it does not
// block a priority-0 container on its GPU), 2^31-1 is 1.
TEST_F(HostileRegionTest, PrioritiesOutsideHamisLevelsCountAsTheNearest) {
  auto r = client_->Create(k8s::resources::kPods, "default", Pod("q", "main"));
  ASSERT_TRUE(r.ok());
  const std::string other =
      hook_ + "/containers/" + (*r)["metadata"]["uid"].get<std::string>() + "_main";
  fs::create_directories(other);
  ASSERT_TRUE(Region(1).Priority(-5).RecentKernel(100).Save(dir_ + "/a.cache"));
  ASSERT_TRUE(Region(1).Priority(0).RecentKernel(100).Save(other + "/a.cache"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (monitor_->Scan().size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(monitor_->Feedback(), 2);
  // Both active at the same level: neither blocked, both share.
  EXPECT_EQ(testing::ReadI32(other + "/a.cache", kV1.proc_num + 8), 99);
  EXPECT_EQ(testing::ReadI32(other + "/a.cache", kV1.proc_num + 4), 1);
  EXPECT_EQ(testing::ReadI32(dir_ + "/a.cache", kV1.proc_num + 8), 99);
  // 2^31-1 is the low level: blocked behind the active priority-0 one.
  ASSERT_TRUE(Region(1).Priority(2147483647).RecentKernel(100).Save(dir_ + "/a.cache"));
  EXPECT_EQ(monitor_->Feedback(), 2);
  EXPECT_EQ(testing::ReadI32(dir_ + "/a.cache", kV1.proc_num + 8), -1);
  EXPECT_EQ(testing::ReadI32(other + "/a.cache", kV1.proc_num + 8), 98);
}

// A container directory with more entries than a container makes is skipped, not listed whole.
TEST_F(HostileRegionTest, ADirectoryFullOfEntriesIsSkipped) {
  ASSERT_TRUE(Region(1).Save(dir_ + "/a.cache"));
  ASSERT_EQ(monitor_->Scan().size(), 1u);
  for (int i = 0; i < 300; ++i) std::ofstream(dir_ + "/junk-" + std::to_string(i));
  EXPECT_TRUE(monitor_->Scan().empty());
}

// Clean-up of a gone pod's directory removes links, never what they point at.
TEST_F(HostileRegionTest, CleanupRemovesLinksNotTheirTargets) {
  char out[] = "/tmp/hami-monitor-outside-XXXXXX";
  ASSERT_NE(mkdtemp(out), nullptr);
  outside_ = out;
  std::ofstream(outside_ + "/keep") << "host file";
  const std::string gone = hook_ + "/containers/0b7e1d9c-gone_main";
  fs::create_directories(gone + "/sub/deeper");
  std::ofstream(gone + "/sub/deeper/f") << "x";
  fs::create_directory_symlink(outside_, gone + "/sub/link");
  fs::create_symlink(outside_ + "/keep", gone + "/file-link");
  EXPECT_EQ(monitor_->Cleanup(), 0);  // first seen gone; the default interval is 5 minutes
  MonitorOptions o;
  o.node_name = "node-a";
  o.hook_path = hook_;
  o.metrics_bind = "127.0.0.1:0";
  o.resync_interval = std::chrono::nanoseconds(0);
  Monitor now(*client_, o);
  ASSERT_TRUE(now.Start().ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!now.synced() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(now.Cleanup(), 1);
  EXPECT_FALSE(fs::exists(gone));
  EXPECT_EQ(ReadAll(outside_ + "/keep"), "host file");
  now.Stop();
}

}  // namespace
}  // namespace hami::monitor
