#include "monitor/monitor.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/nvml.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "monitor/feedback.h"
#include "net/http_server.h"
#include "protocol/keys.h"
#include "vgpu/shared_region.h"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;

struct PodInfo {
  std::string ns;
  std::string name;
  std::vector<std::string> containers;
};

std::string Str(const k8s::Json& j, const char* a, const char* b) {
  if (!j.is_object() || !j.contains(a) || !j[a].is_object() || !j[a].contains(b) ||
      !j[a][b].is_string()) {
    return "";
  }
  return j[a][b].get<std::string>();
}

// The three int32 control words of a region (priority, recent_kernel, utilization_switch),
// mapped shared so that stores reach the container's processes. Only those 12 bytes' page is
// mapped; the region's lock is not taken (the words are written with atomics, as libvgpu reads
// them).
class MappedControls {
 public:
  enum Word { kUtilizationSwitch = 0, kRecentKernel = 1, kPriority = 2 };

  static Result<MappedControls> Open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return Error{"region file " + Quote(path) + ": " + std::strerror(errno)};
    struct stat st;
    if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < kRegionV0Size) {
      ::close(fd);
      return Error{"region file " + Quote(path) + ": smaller than a region"};
    }
    // utilization_switch follows proc_num in both layouts.
    const size_t off = static_cast<size_t>(st.st_size) >= sizeof(hami_shared_region_t)
                           ? offsetof(hami_shared_region_t, utilization_switch)
                           : kV0UtilizationSwitch;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t base = off / page * page;
    const size_t len = off - base + 3 * sizeof(int32_t);
    void* p =
        ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(base));
    ::close(fd);
    if (p == MAP_FAILED)
      return Error{"region file " + Quote(path) + ": mmap: " + std::strerror(errno)};
    MappedControls m;
    m.base_ = p;
    m.len_ = len;
    m.words_ = reinterpret_cast<int32_t*>(static_cast<char*>(p) + (off - base));
    return m;
  }
  MappedControls() = default;
  MappedControls(MappedControls&& o) noexcept { *this = std::move(o); }
  MappedControls& operator=(MappedControls&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(len_, o.len_);
    std::swap(words_, o.words_);
    return *this;
  }
  ~MappedControls() {
    if (base_ != nullptr) ::munmap(base_, len_);
  }
  int32_t Load(Word w) const { return __atomic_load_n(&words_[w], __ATOMIC_ACQUIRE); }
  void Store(Word w, int32_t v) { __atomic_store_n(&words_[w], v, __ATOMIC_RELEASE); }

 private:
  static constexpr size_t kV0UtilizationSwitch = 1197884;
  void* base_ = nullptr;
  size_t len_ = 0;
  int32_t* words_ = nullptr;
};

}  // namespace

Monitor::Monitor(k8s::Client& client, MonitorOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : RealClock()) {}

Monitor::~Monitor() { Stop(); }

Result<int> Monitor::Start() {
  if (options_.node_name.empty()) return Error{"NODE_NAME: required, got \"\""};
  std::string host;
  int port = 0;
  if (!net::SplitHostPort(options_.metrics_bind, &host, &port)) {
    return Error{"--metrics-bind-address: want host:port, got " + Quote(options_.metrics_bind)};
  }
  k8s::InformerOptions pod_options;
  pod_options.label_selector = std::string(protocol::kVgpuNodeKey) + "=" + options_.node_name;
  // The scan reads names, namespace, UID and container names only.
  pod_options.transform = [](k8s::Json pod) {
    k8s::Json out = k8s::Json::object();
    if (!pod.is_object()) return out;
    if (pod.contains("metadata") && pod["metadata"].is_object()) {
      out["metadata"] = pod["metadata"];
      out["metadata"].erase("managedFields");
      out["metadata"].erase("annotations");
    }
    if (pod.contains("spec") && pod["spec"].is_object() && pod["spec"].contains("containers") &&
        pod["spec"]["containers"].is_array()) {
      out["spec"]["containers"] = k8s::Json::array();
      for (const auto& c : pod["spec"]["containers"]) {
        if (c.is_object() && c.contains("name")) {
          out["spec"]["containers"].push_back({{"name", c["name"]}});
        }
      }
    }
    return out;
  };
  pods_ = std::make_unique<k8s::Informer>(client_, k8s::resources::kPods, pod_options,
                                          k8s::InformerHandlers{});
  pods_->Start();

  net::HttpServerOptions http_options;
  http_options.name = "monitor";
  http_options.workers = 2;
  http_options.clock = &clock_;
  http_ = std::make_unique<net::HttpServer>(http_options);
  net::RouteOptions inline_route;
  inline_route.inline_handler = true;
  http_->Route("GET", "/healthz", inline_route, [](net::Request, net::Responder r) {
    r.Send(net::Response{200, "text/plain", "ok"});
  });
  http_->Route("GET", "/metrics", net::RouteOptions{}, [this](net::Request, net::Responder r) {
    r.Send(net::Response{200, "text/plain; version=0.0.4; charset=utf-8", Metrics()});
  });
  if (options_.host_gpus) {
    // host series from the containers (hami-sim)
  } else if (!options_.nvml_library.empty()) {
    auto nvml = std::make_unique<deviceplugin::NvmlDiscovery>(
        deviceplugin::NvmlOptions{options_.nvml_library, "/sys"});
    auto sample = nvml->Sample();
    if (sample) {
      nvml_ = std::move(nvml);
    } else {
      HAMI_INFO("monitor: host GPU series (hami_host_gpu_*) left out: {}", sample.error());
    }
  } else {
    HAMI_INFO("monitor: no NVML library given: host GPU series (hami_host_gpu_*) left out");
  }
  if (options_.feedback_period.count() > 0 || options_.housekeeping_period.count() > 0) {
    feedback_thread_ = std::thread([this] { FeedbackLoop(); });
  }
  auto listening = http_->Listen(host, port);
  if (!listening) {
    return Error{"--metrics-bind-address " + Quote(options_.metrics_bind) + ": " +
                 listening.error()};
  }
  return *listening;
}

void Monitor::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (feedback_thread_.joinable()) feedback_thread_.join();
  if (http_) http_->Stop();
  if (pods_) pods_->Stop();
}

bool Monitor::synced() const { return pods_ && pods_->HasSynced(); }

std::vector<ContainerUsage> Monitor::Scan() {
  std::vector<ContainerUsage> out;
  for (Found& f : ScanRegions()) out.push_back(std::move(f.usage));
  return out;
}

std::vector<Monitor::Found> Monitor::ScanRegions() {
  std::vector<Found> out;
  std::map<std::string, PodInfo> by_uid;
  if (pods_) {
    for (const k8s::ObjectRef& pod : pods_->List()) {
      const std::string uid = Str(*pod, "metadata", "uid");
      if (uid.empty()) continue;
      PodInfo info{Str(*pod, "metadata", "namespace"), Str(*pod, "metadata", "name"), {}};
      const k8s::Json& spec = (*pod).contains("spec") ? (*pod)["spec"] : k8s::Json();
      if (spec.is_object() && spec.contains("containers") && spec["containers"].is_array()) {
        for (const auto& c : spec["containers"]) {
          if (c.is_object() && c.contains("name") && c["name"].is_string()) {
            info.containers.push_back(c["name"].get<std::string>());
          }
        }
      }
      by_uid[uid] = std::move(info);
    }
  }
  std::set<std::string> problems;
  const PidAlive alive = ProcPidAlive(options_.proc_root);
  const fs::path root = fs::path(options_.hook_path) / "containers";
  std::error_code ec;
  fs::directory_iterator dirs(root, ec);
  if (ec) {
    problems.insert("monitor: cannot list " + Quote(root.string()) + ": " + ec.message());
    dirs = fs::directory_iterator();
  }
  std::map<std::string, Found> found;  // by directory name: a stable order
  for (const fs::directory_entry& dir : dirs) {
    std::error_code dec;
    if (!dir.is_directory(dec)) continue;
    const std::string name = dir.path().filename().string();
    const size_t sep = name.find('_');  // pod UIDs have no '_'; container names may
    if (sep == std::string::npos) continue;
    auto pod = by_uid.find(name.substr(0, sep));
    if (pod == by_uid.end()) continue;  // not (or no longer) a vGPU pod of this node
    const std::string container = name.substr(sep + 1);
    bool known = false;
    for (const std::string& c : pod->second.containers) known = known || c == container;
    if (!known) continue;
    // Region files: *.cache at least as large as a v0 region (the device plugin creates the
    // file empty at Allocate; libvgpu sizes it when the first CUDA process starts).
    std::vector<std::string> regions;
    for (const fs::directory_entry& f : fs::directory_iterator(dir.path(), dec)) {
      std::error_code fec;
      const std::string fname = f.path().filename().string();
      if (fname.size() < 6 || fname.compare(fname.size() - 6, 6, ".cache") != 0) continue;
      if (!f.is_regular_file(fec)) continue;
      const auto size = f.file_size(fec);
      if (fec || size < kRegionV0Size) continue;
      regions.push_back(f.path().string());
    }
    if (regions.empty()) continue;
    std::sort(regions.begin(), regions.end());
    if (regions.size() > 1) {
      problems.insert("monitor: skipping " + Quote(dir.path().string()) + ": " +
                      std::to_string(regions.size()) + " region files (" + Join(regions, ", ") +
                      "), want one");
      continue;
    }
    auto region = ReadRegionFile(regions[0], alive);
    if (!region) {
      problems.insert("monitor: skipping container " + pod->second.ns + "/" + pod->second.name +
                      "/" + container + ": " + region.error());
      continue;
    }
    found[name] =
        Found{regions[0], pod->first,
              ContainerUsage{pod->second.ns, pod->second.name, container, std::move(*region)}};
  }
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    for (const std::string& p : problems) {
      if (problems_.count(p) == 0) HAMI_WARN("{}", p);
    }
    problems_ = std::move(problems);
  }
  for (auto& [name, f] : found) out.push_back(std::move(f));
  return out;
}

int Monitor::Feedback() {
  std::lock_guard<std::mutex> pass(feedback_mu_);
  struct stat st;
  if (::stat(options_.mig_apply_lock.c_str(), &st) == 0) {
    HAMI_VLOG(4, "monitor: {} exists: feedback paused", options_.mig_apply_lock);
    return 0;
  }
  std::vector<Found> regions = ScanRegions();
  std::vector<MappedControls> maps;
  std::vector<FeedbackState> states;
  for (const Found& f : regions) {
    auto m = MappedControls::Open(f.path);
    if (!m) {
      HAMI_WARN("monitor: feedback: {}", m.error());
      continue;
    }
    FeedbackState s;
    for (const DeviceUsage& d : f.usage.region.devices) s.uuids.push_back(d.uuid);
    s.priority = m->Load(MappedControls::kPriority);
    s.recent_kernel = m->Load(MappedControls::kRecentKernel);
    s.utilization_switch = m->Load(MappedControls::kUtilizationSwitch);
    states.push_back(std::move(s));
    maps.push_back(std::move(*m));
  }
  std::vector<FeedbackState> before = states;
  PriorityFeedback(states);
  for (size_t i = 0; i < states.size(); ++i) {
    if (states[i].recent_kernel != before[i].recent_kernel) {
      maps[i].Store(MappedControls::kRecentKernel, states[i].recent_kernel);
    }
    if (states[i].utilization_switch != before[i].utilization_switch) {
      maps[i].Store(MappedControls::kUtilizationSwitch, states[i].utilization_switch);
    }
  }
  return static_cast<int>(states.size());
}

void Monitor::FeedbackLoop() {
  // One thread for both periodic passes: each runs when its period is due.
  using std::chrono::milliseconds;
  const milliseconds feedback = options_.feedback_period;
  const milliseconds housekeeping = options_.housekeeping_period;
  milliseconds step = feedback.count() > 0 ? feedback : housekeeping;
  if (housekeeping.count() > 0) step = std::min(step, housekeeping);
  auto next_feedback = std::chrono::steady_clock::now() + feedback;
  auto next_housekeeping = std::chrono::steady_clock::now() + housekeeping;
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_cv_.wait_for(lock, step, [this] { return stopping_; })) {
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    if (feedback.count() > 0 && now >= next_feedback) {
      Feedback();
      next_feedback = now + feedback;
    }
    if (housekeeping.count() > 0 && now >= next_housekeeping) {
      Cleanup();
      CheckLimits();
      next_housekeeping = now + housekeeping;
    }
    lock.lock();
  }
}

std::vector<deviceplugin::GpuSample> Monitor::HostGpus() {
  std::lock_guard<std::mutex> lock(nvml_mu_);
  if (!nvml_) return {};
  auto sample = nvml_->Sample();
  if (!sample) {
    if (sample.error() != nvml_problem_) HAMI_WARN("monitor: host GPU series: {}", sample.error());
    nvml_problem_ = sample.error();
    return {};
  }
  nvml_problem_.clear();
  return std::move(*sample);
}

int Monitor::Cleanup() {
  if (!synced()) return 0;  // an informer that has not synced knows no pods: remove nothing
  std::set<std::string> uids;
  for (const k8s::ObjectRef& pod : pods_->List()) uids.insert(Str(*pod, "metadata", "uid"));
  std::lock_guard<std::mutex> lock(housekeeping_mu_);
  const SystemTime now = clock_.Now();
  std::map<std::string, SystemTime> gone;
  int removed = 0;
  // containers/<podUID>_<container>/ and limits/<podUID>_<container>.limits
  for (const char* sub : {"containers", "limits"}) {
    const fs::path root = fs::path(options_.hook_path) / sub;
    std::error_code ec;
    fs::directory_iterator entries(root, ec);
    if (ec) continue;
    for (const fs::directory_entry& e : entries) {
      const std::string name = e.path().filename().string();
      const size_t sep = name.find('_');
      if (sep == 0 || sep == std::string::npos) continue;  // not a <podUID>_<container> name
      std::error_code tec;
      const bool dir = e.is_directory(tec);
      if (std::string(sub) == "containers"
              ? !dir
              : dir || name.size() < 7 || name.compare(name.size() - 7, 7, ".limits") != 0) {
        continue;
      }
      if (uids.count(name.substr(0, sep)) > 0) continue;
      const std::string path = e.path().string();
      auto seen = gone_since_.find(path);
      const SystemTime since = seen != gone_since_.end() ? seen->second : now;
      if (now - since < options_.resync_interval) {
        gone[path] = since;
        continue;
      }
      std::error_code rec;
      fs::remove_all(e.path(), rec);
      if (rec) {
        HAMI_WARN("monitor: cannot remove {}: {}", Quote(path), rec.message());
        gone[path] = since;
        continue;
      }
      HAMI_INFO("monitor: removed {}: pod {} is gone from node {}", Quote(path),
                name.substr(0, sep), options_.node_name);
      ++removed;
    }
  }
  gone_since_ = std::move(gone);
  return removed;
}

int Monitor::CheckLimits() {
  std::vector<Found> regions = ScanRegions();
  std::lock_guard<std::mutex> lock(housekeeping_mu_);
  std::set<std::string> over;
  int posted = 0;
  for (const Found& f : regions) {
    const ContainerUsage& c = f.usage;
    for (const DeviceUsage& d : c.region.devices) {
      if (d.limit == 0 || d.total <= d.limit) continue;
      const std::string key = f.pod_uid + "/" + c.container + "/" + d.uuid;
      over.insert(key);
      if (over_limit_.count(key) > 0) continue;  // still over: posted when it went over
      const k8s::Json pod = {
          {"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", c.pod}, {"namespace", c.ns}, {"uid", f.pod_uid}}}};
      const std::string message = "container " + Quote(c.container) + " uses more memory on " +
                                  d.uuid + " than its limit of " +
                                  std::to_string(d.limit / (1024 * 1024)) +
                                  " MiB (hami_vgpu_memory_exceeded_bytes says by how much)";
      auto event =
          client_.RecordEvent(pod, "Warning", "VGPUMemoryOverLimit", message, "hami-vgpu-monitor");
      if (!event) {
        HAMI_WARN("monitor: event on pod {}/{}: {}", c.ns, c.pod, event.error().ToString());
        over.erase(key);  // try again next pass
        continue;
      }
      HAMI_WARN("monitor: pod {}/{}: {}", c.ns, c.pod, message);
      ++posted;
    }
  }
  over_limit_ = std::move(over);
  return posted;
}

std::string Monitor::Metrics() {
  MetricsInput input{options_.node_name, {}, Scan()};
  input.host = options_.host_gpus ? options_.host_gpus(input.containers) : HostGpus();
  return RenderMetrics(input, options_.legacy_metrics, clock_.Now());
}

}  // namespace hami::monitor
