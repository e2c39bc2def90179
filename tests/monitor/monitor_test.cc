// monitor::Monitor against the sim API server in-process: pods found through the
// hami.io/vgpu-node label, region files written by the test under a temp HOOK_PATH, /metrics and
// /healthz served over HTTP; bad directories skipped while the others are served; a deleted pod's
// series gone; a pod re-created under the same name not counting the old directory.
#include "monitor/monitor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "k8s/client.h"
#include "k8s/object.h"
#include "monitor/region_writer.h"
#include "scheduler/test_env.h"
#include "sim/apiserver/apiserver.h"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;
using k8s::Json;
using testing::kV0;
using testing::kV1;
using testing::RegionWriter;

constexpr const char* kUuid0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";

// Polls `cond` until it holds or 30 s pass (the informer applies watch events on its thread).
bool Eventually(const std::function<bool()>& cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

Json Pod(const std::string& name, const std::string& node, std::vector<std::string> ctrs) {
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}};
  if (!node.empty()) pod["metadata"]["labels"]["hami.io/vgpu-node"] = node;
  pod["spec"]["containers"] = Json::array();
  for (const std::string& c : ctrs) pod["spec"]["containers"].push_back({{"name", c}});
  return pod;
}

RegionWriter Region(const testing::Offsets& o, uint64_t used) {
  RegionWriter w(o);
  w.Devices(1).Uuid(0, kUuid0).Limit(0, 2000ull << 20).ProcNum(1);
  w.Slot(0, 1, 0, 1).Used(0, 0, 0, 0, used, used).SmUtil(0, 0, 25);
  return w;
}

class MonitorTest : public scheduler::testing::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    char dir[] = "/tmp/hami-monitor-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    hook_ = dir;
  }
  void TearDown() override {
    if (monitor_) monitor_->Stop();
    std::error_code ec;
    fs::remove_all(hook_, ec);
  }

  void StartMonitor(bool legacy = false) {
    MonitorOptions o;
    o.node_name = "node-a";
    o.hook_path = hook_;
    o.metrics_bind = "127.0.0.1:0";
    o.legacy_metrics = legacy;
    monitor_ = std::make_unique<Monitor>(*client_, o);
    auto port = monitor_->Start();
    ASSERT_TRUE(port.ok()) << port.error();
    port_ = *port;
    ASSERT_TRUE(Eventually([&] { return monitor_->synced(); }));
  }

  // Creates the pod and returns its UID.
  std::string Create(const Json& pod) {
    auto r = client_->Create(k8s::resources::kPods, "default", pod);
    EXPECT_TRUE(r.ok());
    return r ? (*r)["metadata"]["uid"].get<std::string>() : "";
  }
  std::string Dir(const std::string& uid, const std::string& ctr) {
    std::string d = hook_ + "/containers/" + uid + "_" + ctr;
    fs::create_directories(d);
    return d;
  }
  std::string Scrape(const std::string& path = "/metrics", int* status = nullptr) {
    httplib::Client http("127.0.0.1", port_);
    auto res = http.Get(path.c_str());
    EXPECT_TRUE(res) << path;
    if (!res) return "";
    if (status != nullptr) *status = res->status;
    return res->body;
  }
  static std::string UsedLine(const std::string& pod, const std::string& ctr, const char* value) {
    return "hami_vgpu_memory_used_bytes{container=\"" + ctr + "\",device_uuid=\"" + kUuid0 +
           "\",namespace=\"default\",pod=\"" + pod + "\",vdevice_index=\"0\",zone=\"vGPU\"} " +
           value + "\n";
  }

  std::unique_ptr<Monitor> monitor_;
  std::string hook_;
  int port_ = 0;
};

TEST_F(MonitorTest, ServesV1AndV0RegionsOfThisNodesPods) {
  const std::string a = Create(Pod("a", "node-a", {"main", "side"}));
  const std::string other = Create(Pod("b", "node-b", {"main"}));
  ASSERT_TRUE(Region(kV1, 1048576).Save(Dir(a, "main") + "/x.cache"));
  ASSERT_TRUE(Region(kV0, 2097152).Save(Dir(a, "side") + "/y.cache"));
  ASSERT_TRUE(Region(kV1, 5).Save(Dir(other, "main") + "/z.cache"));  // another node's pod
  StartMonitor();
  int status = 0;
  EXPECT_EQ(Scrape("/healthz", &status), "ok");
  EXPECT_EQ(status, 200);
  const std::string text = Scrape();
  EXPECT_NE(text.find(UsedLine("a", "main", "1.048576e+06")), std::string::npos) << text;
  EXPECT_NE(text.find(UsedLine("a", "side", "2.097152e+06")), std::string::npos) << text;
  EXPECT_EQ(text.find("pod=\"b\""), std::string::npos) << text;
  EXPECT_NE(text.find("hami_vgpu_memory_limit_bytes{container=\"main\",device_uuid=\"" +
                      std::string(kUuid0) +
                      "\",namespace=\"default\",pod=\"a\",vdevice_index=\"0\",zone=\"vGPU\"} "
                      "2.097152e+09\n"),
            std::string::npos);
  EXPECT_EQ(text.find("vGPU_device_memory_usage_in_bytes"), std::string::npos);
}

TEST_F(MonitorTest, LegacyMetricsFlag) {
  const std::string a = Create(Pod("a", "node-a", {"main"}));
  ASSERT_TRUE(Region(kV1, 1048576).Save(Dir(a, "main") + "/x.cache"));
  StartMonitor(/*legacy=*/true);
  const std::string text = Scrape();
  EXPECT_NE(text.find("vGPU_device_memory_usage_in_bytes{ctrname=\"main\",deviceuuid=\"" +
                      std::string(kUuid0) +
                      "\",podname=\"a\",podnamespace=\"default\",vdeviceid=\"0\",zone=\"vGPU\"} "
                      "1.048576e+06\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(UsedLine("a", "main", "1.048576e+06")), std::string::npos);
}

TEST_F(MonitorTest, BadDirectoriesAreSkippedOthersServed) {
  const std::string p = Create(Pod("p", "node-a", {"good", "two", "short", "magic", "empty"}));
  ASSERT_TRUE(Region(kV1, 1048576).Save(Dir(p, "good") + "/g.cache"));
  ASSERT_TRUE(Region(kV1, 1).Save(Dir(p, "two") + "/1.cache"));
  ASSERT_TRUE(Region(kV1, 2).Save(Dir(p, "two") + "/2.cache"));
  ASSERT_TRUE(Region(kV1, 3).Save(Dir(p, "short") + "/s.cache", 2000000));
  RegionWriter bad = Region(kV1, 4);
  bad.Magic(7);
  ASSERT_TRUE(bad.Save(Dir(p, "magic") + "/m.cache"));
  // Created empty by the device plugin at Allocate, not yet sized by libvgpu.
  ASSERT_TRUE(RegionWriter(kV1).Save(Dir(p, "empty") + "/e.cache", 0));
  // A directory of a container the pod does not have, and a name without '_'.
  ASSERT_TRUE(Region(kV1, 9).Save(Dir(p, "ghost") + "/g.cache"));
  fs::create_directories(hook_ + "/containers/junk");
  StartMonitor();
  std::vector<ContainerUsage> scan = monitor_->Scan();
  ASSERT_EQ(scan.size(), 1u);
  EXPECT_EQ(scan[0].container, "good");
  EXPECT_EQ(scan[0].region.devices[0].total, 1048576u);
  const std::string text = Scrape();
  EXPECT_NE(text.find(UsedLine("p", "good", "1.048576e+06")), std::string::npos) << text;
  for (const char* c : {"two", "short", "magic", "empty", "ghost"}) {
    EXPECT_EQ(text.find("container=\"" + std::string(c) + "\""), std::string::npos) << c;
  }
}

TEST_F(MonitorTest, DeletedPodGoneRecreatedPodNotDoubleCounted) {
  const std::string old_uid = Create(Pod("a", "node-a", {"main"}));
  ASSERT_TRUE(Region(kV1, 1048576).Save(Dir(old_uid, "main") + "/x.cache"));
  StartMonitor();
  EXPECT_NE(Scrape().find(UsedLine("a", "main", "1.048576e+06")), std::string::npos);
  ASSERT_TRUE(client_->Delete(k8s::resources::kPods, "default", "a").ok());
  ASSERT_TRUE(Eventually([&] { return monitor_->Scan().empty(); }));
  EXPECT_EQ(Scrape(), "");
  // Same name, new UID, new directory; the old directory is still on disk.
  const std::string new_uid = Create(Pod("a", "node-a", {"main"}));
  ASSERT_NE(new_uid, old_uid);
  ASSERT_TRUE(Region(kV1, 3145728).Save(Dir(new_uid, "main") + "/x.cache"));
  ASSERT_TRUE(Eventually([&] { return monitor_->Scan().size() == 1; }));
  const std::string text = Scrape();
  EXPECT_NE(text.find(UsedLine("a", "main", "3.145728e+06")), std::string::npos) << text;
  EXPECT_EQ(text.find("1.048576e+06"), std::string::npos) << text;
}

// The priority feedback writes into the region files themselves: a low-priority container
// sharing a GPU with an active high-priority one is blocked and throttled (v1 and v0 files).
TEST_F(MonitorTest, FeedbackWritesBackIntoTheRegions) {
  const std::string p = Create(Pod("p", "node-a", {"high", "low"}));
  const std::string high = Dir(p, "high") + "/h.cache";
  const std::string low = Dir(p, "low") + "/l.cache";
  ASSERT_TRUE(Region(kV1, 1).Priority(0).RecentKernel(2).Save(high));
  ASSERT_TRUE(Region(kV0, 1).Priority(1).RecentKernel(2).Save(low));
  const std::string lock = hook_ + "/mig-apply.lock";
  MonitorOptions o;
  o.node_name = "node-a";
  o.hook_path = hook_;
  o.metrics_bind = "127.0.0.1:0";
  o.mig_apply_lock = lock;
  monitor_ = std::make_unique<Monitor>(*client_, o);
  ASSERT_TRUE(monitor_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return monitor_->Scan().size() == 2; }));
  // Paused while the MIG apply lock exists: nothing is written.
  { std::ofstream(lock) << ""; }
  EXPECT_EQ(monitor_->Feedback(), 0);
  EXPECT_EQ(testing::ReadI32(high, kV1.proc_num + 8), 2);
  fs::remove(lock);
  EXPECT_EQ(monitor_->Feedback(), 2);
  EXPECT_EQ(testing::ReadI32(high, kV1.proc_num + 8), 1);  // recent_kernel decremented
  EXPECT_EQ(testing::ReadI32(high, kV1.proc_num + 4), 0);  // utilization_switch
  EXPECT_EQ(testing::ReadI32(low, kV0.proc_num + 8), -1);  // blocked
  EXPECT_EQ(testing::ReadI32(low, kV0.proc_num + 4), 1);
  EXPECT_EQ(testing::ReadI32(low, kV0.proc_num + 12), 1);  // priority untouched
  // The high-priority task goes idle: the low one is released.
  EXPECT_EQ(monitor_->Feedback(), 2);
  EXPECT_EQ(testing::ReadI32(high, kV1.proc_num + 8), 0);
  EXPECT_EQ(testing::ReadI32(low, kV0.proc_num + 8), 0);
  EXPECT_EQ(testing::ReadI32(low, kV0.proc_num + 4), 0);
}

// With a feedback period the monitor runs the feedback by itself (main.cc uses 5 s).
TEST_F(MonitorTest, FeedbackRunsPeriodically) {
  const std::string p = Create(Pod("p", "node-a", {"high", "low"}));
  const std::string low = Dir(p, "low") + "/l.cache";
  ASSERT_TRUE(Region(kV1, 1).Priority(0).RecentKernel(1 << 30).Save(Dir(p, "high") + "/h.cache"));
  ASSERT_TRUE(Region(kV1, 1).Priority(1).RecentKernel(2).Save(low));
  MonitorOptions o;
  o.node_name = "node-a";
  o.hook_path = hook_;
  o.metrics_bind = "127.0.0.1:0";
  o.mig_apply_lock = hook_ + "/no-lock";
  o.feedback_period = std::chrono::milliseconds(1);
  monitor_ = std::make_unique<Monitor>(*client_, o);
  ASSERT_TRUE(monitor_->Start().ok());
  EXPECT_TRUE(Eventually([&] { return testing::ReadI32(low, kV1.proc_num + 8) == -1; }));
  EXPECT_EQ(testing::ReadI32(low, kV1.proc_num + 4), 1);
  monitor_->Stop();  // joins the feedback thread
}

#ifdef HAMI_FAKE_NVML_PATH
// The host series come from NVML (the device plugin's fake libnvidia-ml.so.1 here), labelled with
// this node's name and joined to the scheduler's series by device_uuid.
TEST_F(MonitorTest, HostGpuSeriesFromNvml) {
  setenv("HAMI_FAKE_NVML_DEVICES", "GPU-h0|Tesla T4|15360|0000:3B:00.0;GPU-h1|A100|40960|x", 1);
  setenv("HAMI_FAKE_NVML_USAGE", "1024|40|7;2048|-|0", 1);
  setenv("HAMI_FAKE_NVML_SENSORS", "55|70000|4|-;-|-|-|-", 1);
  MonitorOptions o;
  o.node_name = "node-a";
  o.hook_path = hook_;
  o.metrics_bind = "127.0.0.1:0";
  o.nvml_library = HAMI_FAKE_NVML_PATH;
  monitor_ = std::make_unique<Monitor>(*client_, o);
  auto port = monitor_->Start();
  ASSERT_TRUE(port.ok()) << port.error();
  port_ = *port;
  const std::string text = Scrape();
  unsetenv("HAMI_FAKE_NVML_DEVICES");
  unsetenv("HAMI_FAKE_NVML_USAGE");
  unsetenv("HAMI_FAKE_NVML_SENSORS");
  EXPECT_NE(text.find("hami_host_gpu_memory_used_bytes{device_index=\"0\",device_type=\"NVIDIA-"
                      "Tesla T4\",device_uuid=\"GPU-h0\",node=\"node-a\",zone=\"vGPU\"} "
                      "1.073741824e+09\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hami_host_gpu_memory_used_bytes{device_index=\"1\",device_type=\"NVIDIA-"
                      "A100\",device_uuid=\"GPU-h1\",node=\"node-a\",zone=\"vGPU\"} "
                      "2.147483648e+09\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hami_host_gpu_utilization_ratio{device_index=\"0\",device_type=\"NVIDIA-"
                      "Tesla T4\",device_uuid=\"GPU-h0\",node=\"node-a\",zone=\"vGPU\"} 40\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hami_host_gpu_memory_controller_utilization_ratio{device_index=\"0\","
                      "device_type=\"NVIDIA-Tesla T4\",device_uuid=\"GPU-h0\",node=\"node-a\","
                      "zone=\"vGPU\"} 7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hami_host_gpu_temperature_celsius{device_index=\"0\",device_type=\"NVIDIA-"
                      "Tesla T4\",device_uuid=\"GPU-h0\",node=\"node-a\",zone=\"vGPU\"} 55\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hami_host_gpu_power_usage_watts{device_index=\"0\""), std::string::npos);
  EXPECT_NE(text.find("hami_host_gpu_ecc_errors_total{device_index=\"0\",device_type=\"NVIDIA-"
                      "Tesla T4\",device_uuid=\"GPU-h0\",error_type=\"corrected\",node=\"node-a\","
                      "zone=\"vGPU\"} 4\n"),
            std::string::npos)
      << text;
  // GPU 0 answers NOT_SUPPORTED for its uncorrected count: that series alone is left out.
  EXPECT_EQ(text.find("error_type=\"uncorrected\""), std::string::npos) << text;
  // GPU 1 answers NOT_SUPPORTED for its sensors: none of their series.
  EXPECT_EQ(text.find("hami_host_gpu_temperature_celsius{device_index=\"1\""), std::string::npos);
  EXPECT_EQ(text.find("hami_host_gpu_ecc_errors_total{device_index=\"1\""), std::string::npos);
  // GPU 1 answers NOT_SUPPORTED for its utilisation: only its memory series.
  EXPECT_EQ(text.find("hami_host_gpu_utilization_ratio{device_index=\"1\""), std::string::npos)
      << text;
}
#endif

// Without a usable NVML the host series are left out and the containers are still served.
TEST_F(MonitorTest, WithoutNvmlHostSeriesLeftOut) {
  const std::string a = Create(Pod("a", "node-a", {"main"}));
  ASSERT_TRUE(Region(kV1, 1048576).Save(Dir(a, "main") + "/x.cache"));
  MonitorOptions o;
  o.node_name = "node-a";
  o.hook_path = hook_;
  o.metrics_bind = "127.0.0.1:0";
  o.nvml_library = hook_ + "/no-such-libnvidia-ml.so.1";
  monitor_ = std::make_unique<Monitor>(*client_, o);
  auto port = monitor_->Start();
  ASSERT_TRUE(port.ok()) << port.error();
  port_ = *port;
  ASSERT_TRUE(Eventually([&] { return monitor_->synced(); }));
  EXPECT_TRUE(monitor_->HostGpus().empty());
  const std::string text = Scrape();
  EXPECT_EQ(text.find("hami_host_gpu"), std::string::npos) << text;
  EXPECT_NE(text.find(UsedLine("a", "main", "1.048576e+06")), std::string::npos) << text;
}

// Directories and limits files of pods gone from the node go after HAMI_RESYNC_INTERVAL, counted
// by the injected clock from the pass that first saw them gone; a live pod's stay; nothing goes
// before the informer has synced.
TEST_F(MonitorTest, CleanupRemovesWhatGonePodsLeftAfterTheResyncInterval) {
  FakeClock clock;
  const std::string live = Create(Pod("live", "node-a", {"main"}));
  const std::string doomed = Create(Pod("doomed", "node-a", {"main"}));
  const std::string gone = "0b7e1d9c-gone";
  for (const std::string& uid : {live, doomed, gone}) {
    ASSERT_TRUE(Region(kV1, 1).Save(Dir(uid, "main") + "/x.cache"));
    fs::create_directories(hook_ + "/limits");
    std::ofstream(hook_ + "/limits/" + uid + "_main.limits") << "CUDA_DEVICE_MEMORY_LIMIT_0=1g\n";
  }
  std::ofstream(hook_ + "/limits/README") << "not a limits file";
  MonitorOptions o;
  o.node_name = "node-a";
  o.hook_path = hook_;
  o.metrics_bind = "127.0.0.1:0";
  o.clock = &clock;
  o.resync_interval = std::chrono::minutes(5);
  monitor_ = std::make_unique<Monitor>(*client_, o);
  EXPECT_EQ(monitor_->Cleanup(), 0);  // not started: no informer, nothing known, nothing removed
  clock.Advance(std::chrono::hours(1));
  EXPECT_EQ(monitor_->Cleanup(), 0);
  EXPECT_TRUE(fs::exists(hook_ + "/containers/" + gone + "_main"));
  auto port = monitor_->Start();
  ASSERT_TRUE(port.ok()) << port.error();
  ASSERT_TRUE(Eventually([&] { return monitor_->synced(); }));
  EXPECT_EQ(monitor_->Cleanup(), 0);  // first seen gone now
  clock.Advance(std::chrono::minutes(5) - std::chrono::seconds(1));
  EXPECT_EQ(monitor_->Cleanup(), 0);
  EXPECT_TRUE(fs::exists(hook_ + "/containers/" + gone + "_main"));
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(monitor_->Cleanup(), 2);
  EXPECT_FALSE(fs::exists(hook_ + "/containers/" + gone + "_main"));
  EXPECT_FALSE(fs::exists(hook_ + "/limits/" + gone + "_main.limits"));
  // A pod deleted now: its files wait a whole interval from now.
  ASSERT_TRUE(client_->Delete(k8s::resources::kPods, "default", "doomed").ok());
  ASSERT_TRUE(Eventually([&] { return monitor_->Scan().size() == 1; }));
  EXPECT_EQ(monitor_->Cleanup(), 0);
  clock.Advance(std::chrono::minutes(4));
  EXPECT_EQ(monitor_->Cleanup(), 0);
  EXPECT_TRUE(fs::exists(hook_ + "/limits/" + doomed + "_main.limits"));
  clock.Advance(std::chrono::minutes(1));
  EXPECT_EQ(monitor_->Cleanup(), 2);
  EXPECT_FALSE(fs::exists(hook_ + "/containers/" + doomed + "_main"));
  EXPECT_FALSE(fs::exists(hook_ + "/limits/" + doomed + "_main.limits"));
  // The live pod's files and what is not <podUID>_<container> stay.
  EXPECT_TRUE(fs::exists(hook_ + "/containers/" + live + "_main/x.cache"));
  EXPECT_TRUE(fs::exists(hook_ + "/limits/" + live + "_main.limits"));
  EXPECT_TRUE(fs::exists(hook_ + "/limits/README"));
  clock.Advance(std::chrono::hours(1));
  EXPECT_EQ(monitor_->Cleanup(), 0);
  monitor_->Stop();  // its threads read `clock`, which ends with this scope
  monitor_.reset();
}

// Issue 20's cross-check: a container whose live slots use more than its limit gets one Warning
// Event; it is posted again (the same Event, count 2) only after the use came back under.
TEST_F(MonitorTest, OverLimitPostsOneAggregatedEvent) {
  const std::string p = Create(Pod("p", "node-a", {"main", "fine"}));
  const std::string region = Dir(p, "main") + "/x.cache";
  ASSERT_TRUE(Region(kV1, 3000ull << 20).Save(region));  // limit 2000 MiB
  ASSERT_TRUE(Region(kV1, 1000ull << 20).Save(Dir(p, "fine") + "/x.cache"));
  StartMonitor();
  const std::string text = Scrape();
  EXPECT_NE(text.find("hami_vgpu_memory_exceeded_bytes{container=\"main\",device_uuid=\"" +
                      std::string(kUuid0) +
                      "\",namespace=\"default\",pod=\"p\",vdevice_index=\"0\",zone=\"vGPU\"} "
                      "1.048576e+09\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("hami_vgpu_memory_exceeded_bytes{container=\"fine\""), std::string::npos);
  EXPECT_EQ(monitor_->CheckLimits(), 1);
  EXPECT_EQ(monitor_->CheckLimits(), 0);  // still over: no new Event
  auto events = [&] {
    auto list = client_->List(k8s::resources::kEvents, "default", {});
    EXPECT_TRUE(list.ok());
    std::vector<Json> out;
    if (list) {
      for (const auto& e : list->items) {
        if (e.value("reason", "") == "VGPUMemoryOverLimit") out.push_back(e);
      }
    }
    return out;
  };
  auto first = events();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["type"], "Warning");
  EXPECT_EQ(first[0]["involvedObject"]["name"], "p");
  EXPECT_EQ(first[0]["involvedObject"]["uid"], p);
  EXPECT_EQ(first[0]["source"]["component"], "hami-vgpu-monitor");
  EXPECT_EQ(first[0]["message"], "container \"main\" uses more memory on " + std::string(kUuid0) +
                                     " than its limit of 2000 MiB "
                                     "(hami_vgpu_memory_exceeded_bytes says by how much)");
  EXPECT_EQ(first[0]["count"], 1);
  ASSERT_TRUE(Region(kV1, 1000ull << 20).Save(region));  // back under
  EXPECT_EQ(monitor_->CheckLimits(), 0);
  ASSERT_TRUE(Region(kV1, 2500ull << 20).Save(region));  // over again
  EXPECT_EQ(monitor_->CheckLimits(), 1);
  auto second = events();
  ASSERT_EQ(second.size(), 1u);  // aggregated into the same Event
  EXPECT_EQ(second[0]["count"], 2);
}

TEST_F(MonitorTest, StartErrorsNameTheOption) {
  MonitorOptions o;
  o.node_name = "node-a";
  o.hook_path = hook_;
  o.metrics_bind = "nowhere";
  Monitor m(*client_, o);
  auto r = m.Start();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "--metrics-bind-address: want host:port, got \"nowhere\"");
  o.node_name = "";
  Monitor n(*client_, o);
  auto s = n.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "NODE_NAME: required, got \"\"");
}

}  // namespace
}  // namespace hami::monitor
