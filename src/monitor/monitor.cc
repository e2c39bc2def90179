#include "monitor/monitor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/nvml.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "monitor/claims.h"
#include "monitor/feedback.h"
#include "net/http_server.h"
#include "protocol/keys.h"
#include "vgpu/shared_region.h"

namespace hami::monitor {
namespace {

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

// Where the three int32 control words of a region (utilization_switch, recent_kernel, priority,
// in that order) start: they follow proc_num in both layouts. The layout is the one the scan
// parsed, not the size fstat saw (the file may have grown or shrunk in between).
size_t ControlWordsOffset(int version) {
  constexpr size_t kV0UtilizationSwitch = 1197884;
  return version == 1 ? offsetof(hami_shared_region_t, utilization_switch) : kV0UtilizationSwitch;
}
enum ControlWord { kUtilizationSwitch = 0, kRecentKernel = 1, kPriority = 2 };

// The control words of the region open as `fd`, read with pread (the file may shrink under us:
// a short read is an error, never a SIGBUS).
bool ReadControls(int fd, int version, int32_t words[3]) {
  const off_t off = static_cast<off_t>(ControlWordsOffset(version));
  return ::pread(fd, words, 3 * sizeof(int32_t), off) == 3 * sizeof(int32_t);
}

bool WriteControl(int fd, int version, ControlWord w, int32_t value) {
  const off_t off = static_cast<off_t>(ControlWordsOffset(version) + w * sizeof(int32_t));
  return ::pwrite(fd, &value, sizeof(value), off) == sizeof(value);
}

// The entry names of the directory open as `dir_fd` (read through a duplicate: the caller keeps
// its fd), sorted; empty when it cannot be read. At most `max` names: *more is set when the
// directory holds more (a container can fill its directory; a pass never lists it all).
std::vector<std::string> ListDir(int dir_fd, size_t max, bool* more = nullptr) {
  std::vector<std::string> out;
  if (more != nullptr) *more = false;
  int dup_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return out;
  DIR* d = ::fdopendir(dup_fd);
  if (d == nullptr) {
    ::close(dup_fd);
    return out;
  }
  ::rewinddir(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (out.size() == max) {
      if (more != nullptr) *more = true;
      break;
    }
    out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// A container directory holds its region, the limiter's side file and little else.
constexpr size_t kMaxContainerDirEntries = 256;
// containers/ holds one directory per GPU container of the node.
constexpr size_t kMaxContainerDirs = 1 << 16;

// Opens `name` in the directory `dir_fd` for reading and writing (reading only where writing is
// refused) when, and only when, it is a regular file with one link: the name is first opened with
// O_PATH | O_NOFOLLOW, which opens nothing (a FIFO does not block, a device node the container
// made with mknod is not opened by the host's root, a symbolic link is not followed), and that
// very inode is then re-opened through /proc/self/fd after fstat has checked it, so a name swapped
// in between is never opened. The error says what the entry is.
Result<int> OpenRegularFile(int dir_fd, const std::string& name, struct stat* st) {
  const int path_fd = ::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (path_fd < 0) return Error{std::strerror(errno)};
  if (::fstat(path_fd, st) != 0) {
    const std::string err = std::strerror(errno);
    ::close(path_fd);
    return Error{err};
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(path_fd);
    return Error{S_ISLNK(st->st_mode) ? "a symbolic link (not followed)" : "not a regular file"};
  }
  if (st->st_nlink != 1) {
    ::close(path_fd);
    return Error{std::to_string(st->st_nlink) + " hard links (a region has one)"};
  }
  const std::string proc = "/proc/self/fd/" + std::to_string(path_fd);
  int fd = ::open(proc.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && (errno == EACCES || errno == EROFS || errno == ETXTBSY)) {
    fd = ::open(proc.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  }
  const int open_errno = errno;
  ::close(path_fd);
  if (fd < 0)
    return Error{"re-open through /proc/self/fd: " + std::string(std::strerror(open_errno))};
  struct stat again;
  if (::fstat(fd, &again) != 0 || !S_ISREG(again.st_mode) || again.st_ino != st->st_ino ||
      again.st_dev != st->st_dev) {
    ::close(fd);
    return Error{"changed while it was opened"};
  }
  *st = again;
  return fd;
}

// Removes the entry `name` of the directory `dir_fd` and, when it is a directory, everything
// under it, without following a symbolic link anywhere: each directory is opened with O_NOFOLLOW
// relative to its parent's descriptor and its entries are unlinked relative to it, so an entry a
// container swaps for a link while this runs removes the link, never what it points at
// (std::filesystem::remove_all re-resolves paths). Returns false with errno set on failure.
bool RemoveTreeAt(int dir_fd, const std::string& name, int depth = 0) {
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0) return true;
  if (errno != EISDIR && errno != EPERM) return false;
  if (depth > 16) {
    errno = ELOOP;
    return false;
  }
  const int sub = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) return false;
  bool ok = true;
  for (int round = 0; round < 64; ++round) {
    bool more = false;
    const std::vector<std::string> entries = ListDir(sub, 4096, &more);
    for (const std::string& e : entries) ok = RemoveTreeAt(sub, e, depth + 1) && ok;
    if (!more || !ok) break;
  }
  const int saved = errno;
  ::close(sub);
  if (!ok) {
    errno = saved;
    return false;
  }
  return ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

}  // namespace

Monitor::Monitor(k8s::Client& client, MonitorOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : RealClock()) {}

Monitor::~Monitor() { Stop(); }

Monitor::OpenFile::~OpenFile() {
  if (fd >= 0) ::close(fd);
}

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
    std::string body;
    try {
      body = Metrics();
    } catch (const std::exception& e) {
      HAMI_ERROR("monitor: /metrics failed: {}", e.what());
      r.Send(net::Response{500, "text/plain", "metrics failed\n"});
      return;
    } catch (...) {
      HAMI_ERROR("monitor: /metrics failed: unknown exception");
      r.Send(net::Response{500, "text/plain", "metrics failed\n"});
      return;
    }
    r.Send(net::Response{200, "text/plain; version=0.0.4; charset=utf-8", std::move(body)});
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
  std::lock_guard<std::mutex> lock(dra_mu_);
  if (claims_) claims_->Stop();
  if (slices_) slices_->Stop();
}

bool Monitor::synced() const { return pods_ && pods_->HasSynced(); }

std::vector<ContainerUsage> Monitor::Scan() {
  std::vector<ContainerUsage> out;
  for (Found& f : ScanRegions()) {
    if (f.claim_uid.empty()) out.push_back(std::move(f.usage));
  }
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
  // Everything under containers/ is written by the containers: nothing there is followed (the
  // directories are opened with O_NOFOLLOW relative to their parent, the region files with
  // O_NOFOLLOW | O_NONBLOCK relative to their directory) and a file is used only after fstat
  // says it is a regular file of a region's size (docs/SECURITY.md, the monitor's boundary).
  const std::string root = options_.hook_path + "/containers";
  const int root_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  // A node in DRA mode has claims/ and no containers/: its absence is logged only when claims/
  // is absent too (below).
  const int root_errno = root_fd < 0 ? errno : 0;
  if (root_fd < 0 && root_errno != ENOENT) {
    problems.insert("monitor: cannot open " + Quote(root) + ": " + std::strerror(root_errno));
  }
  std::map<std::string, Found> found;  // by directory name: a stable order
  bool too_many_dirs = false;
  const std::vector<std::string> names = root_fd >= 0
                                             ? ListDir(root_fd, kMaxContainerDirs, &too_many_dirs)
                                             : std::vector<std::string>{};
  if (too_many_dirs) {
    problems.insert("monitor: " + Quote(root) + " holds more than " +
                    std::to_string(kMaxContainerDirs) + " entries: only the first are scanned");
  }
  for (const std::string& name : names) {
    const size_t sep = name.find('_');  // pod UIDs have no '_'; container names may
    if (sep == std::string::npos) continue;
    auto pod = by_uid.find(name.substr(0, sep));
    if (pod == by_uid.end()) continue;  // not (or no longer) a vGPU pod of this node
    const std::string container = name.substr(sep + 1);
    bool known = false;
    for (const std::string& c : pod->second.containers) known = known || c == container;
    if (!known) continue;
    const std::string dir_path = root + "/" + name;
    std::string region_path;
    std::shared_ptr<OpenFile> file =
        OpenDirRegion(root_fd, name, dir_path, &region_path, &problems);
    if (!file) continue;
    auto region = ReadRegionFd(file->fd, region_path, alive);
    if (!region) {
      problems.insert("monitor: skipping container " + pod->second.ns + "/" + pod->second.name +
                      "/" + container + ": " + region.error());
      continue;
    }
    found[name] = Found{
        region_path, pod->first, "",
        ContainerUsage{pod->second.ns, pod->second.name, container, std::move(*region)}, file};
  }
  if (root_fd >= 0) ::close(root_fd);
  for (auto& [name, f] : found) out.push_back(std::move(f));
  // DRA mode: hami-dra-plugin's claims/<claimUID>/ (docs/DRA.md "Prepare"), written by the
  // containers that use the claim exactly as a container's directory is: read the same way.
  // Only read here; the plugin's Unprepare removes a claim's directory, never the monitor.
  const std::string claims_root = options_.hook_path + "/claims";
  const int claims_fd =
      ::open(claims_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (claims_fd < 0 && errno != ENOENT) {
    problems.insert("monitor: cannot open " + Quote(claims_root) + ": " + std::strerror(errno));
  }
  if (root_errno == ENOENT && claims_fd < 0) {
    problems.insert("monitor: cannot open " + Quote(root) + ": " + std::strerror(root_errno));
  }
  bool too_many_claims = false;
  const std::vector<std::string> claim_names =
      claims_fd >= 0 ? ListDir(claims_fd, kMaxContainerDirs, &too_many_claims)
                     : std::vector<std::string>{};
  if (too_many_claims) {
    problems.insert("monitor: " + Quote(claims_root) + " holds more than " +
                    std::to_string(kMaxContainerDirs) + " entries: only the first are scanned");
  }
  bool any_claim = false;
  for (const std::string& name : claim_names) {
    const std::string dir_path = claims_root + "/" + name;
    if (!ValidClaimUid(name)) {
      problems.insert("monitor: skipping " + Quote(dir_path) +
                      ": not a claim UID (letters, digits and '-')");
      continue;
    }
    any_claim = true;
    std::string region_path;
    std::shared_ptr<OpenFile> file =
        OpenDirRegion(claims_fd, name, dir_path, &region_path, &problems);
    if (!file) continue;
    auto region = ReadRegionFd(file->fd, region_path, alive);
    if (!region) {
      problems.insert("monitor: skipping claim " + name + ": " + region.error());
      continue;
    }
    out.push_back(
        Found{region_path, "", name, ContainerUsage{"", "", "", std::move(*region)}, file});
  }
  if (claims_fd >= 0) ::close(claims_fd);
  if (any_claim) StartClaimInformers();
  LogProblems(problems);
  return out;
}

std::shared_ptr<Monitor::OpenFile> Monitor::OpenDirRegion(int root_fd, const std::string& name,
                                                          const std::string& dir_path,
                                                          std::string* region_path,
                                                          std::set<std::string>* problems) {
  const int dir_fd =
      ::openat(root_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    problems->insert("monitor: skipping " + Quote(dir_path) + ": " +
                     (errno == ELOOP || errno == ENOTDIR
                          ? std::string("not a directory (a symbolic link is not followed)")
                          : std::string(std::strerror(errno))));
    return nullptr;
  }
  bool too_many = false;
  const std::vector<std::string> entries = ListDir(dir_fd, kMaxContainerDirEntries, &too_many);
  if (too_many) {
    ::close(dir_fd);
    problems->insert("monitor: skipping " + Quote(dir_path) + ": more than " +
                     std::to_string(kMaxContainerDirEntries) + " entries");
    return nullptr;
  }
  // Region files: *.cache. The device plugin (or hami-dra-plugin) creates the file empty and
  // libvgpu sizes it when the first CUDA process starts: an empty file is normal, a short one is
  // not. Names are the container's: they reach the log only through Quote().
  std::vector<std::pair<std::string, std::shared_ptr<OpenFile>>> regions;
  for (const std::string& fname : entries) {
    if (fname.size() < 6 || fname.compare(fname.size() - 6, 6, ".cache") != 0) continue;
    const std::string path = dir_path + "/" + fname;
    struct stat st;
    auto fd = OpenRegularFile(dir_fd, fname, &st);
    if (!fd) {
      problems->insert("monitor: skipping " + Quote(path) + ": " + fd.error());
      continue;
    }
    auto file = std::make_shared<OpenFile>();
    file->fd = *fd;
    file->size = static_cast<size_t>(st.st_size);
    if (file->size == 0) continue;  // no CUDA process yet
    if (file->size < kRegionV0Size) {
      problems->insert("monitor: skipping " + Quote(path) + ": " + std::to_string(file->size) +
                       " bytes, smaller than a region (" + std::to_string(kRegionV0Size) + ")");
      continue;
    }
    regions.emplace_back(path, std::move(file));
  }
  ::close(dir_fd);
  if (regions.empty()) return nullptr;
  if (regions.size() > 1) {
    std::vector<std::string> paths;
    for (const auto& r : regions) paths.push_back(Quote(r.first));
    problems->insert("monitor: skipping " + Quote(dir_path) + ": " +
                     std::to_string(regions.size()) + " region files (" + Join(paths, ", ") +
                     "), want one");
    return nullptr;
  }
  *region_path = regions[0].first;
  return std::move(regions[0].second);
}

void Monitor::StartClaimInformers() {
  std::lock_guard<std::mutex> lock(dra_mu_);
  if (claims_ || !pods_) return;  // started already, or the monitor is not (tests' Scan())
  // Every node's monitor watches every claim of the cluster: the cache keeps a claim's identity
  // and, only for a claim with a result on this node's pool, those results and its consumers.
  k8s::InformerOptions claim_options;
  claim_options.transform = [node = options_.node_name](k8s::Json claim) {
    return TrimClaim(std::move(claim), node);
  };
  claims_ = std::make_unique<k8s::Informer>(client_, k8s::resources::kResourceClaims, claim_options,
                                            k8s::InformerHandlers{});
  k8s::InformerOptions slice_options;
  slice_options.field_selector = "spec.nodeName=" + options_.node_name;
  slices_ = std::make_unique<k8s::Informer>(client_, k8s::resources::kResourceSlices, slice_options,
                                            k8s::InformerHandlers{});
  claims_->Start();
  slices_->Start();
  HAMI_INFO(
      "monitor: claims found under {}: watching ResourceClaims and this node's "
      "ResourceSlices",
      Quote(options_.hook_path + "/claims"));
}

bool Monitor::claims_synced() const {
  std::lock_guard<std::mutex> lock(dra_mu_);
  return claims_ && claims_->HasSynced() && slices_ && slices_->HasSynced();
}

std::vector<DraDevice> Monitor::PoolDevices() {
  std::lock_guard<std::mutex> lock(dra_mu_);
  if (!slices_) return {};
  return ReadPoolDevices(slices_->List(), options_.node_name);
}

std::vector<ClaimUsage> Monitor::ScanClaims() { return JoinClaims(ScanRegions()); }

std::vector<ClaimUsage> Monitor::JoinClaims(std::vector<Found> regions) {
  std::map<std::string, ClaimUsage> by_uid;
  for (Found& f : regions) {
    if (f.claim_uid.empty()) continue;
    ClaimUsage& c = by_uid[f.claim_uid];
    c.claim.uid = f.claim_uid;
    c.has_region = true;
    c.region = std::move(f.usage.region);
  }
  std::lock_guard<std::mutex> lock(dra_mu_);
  // No informer before a claim's directory was seen (a node in device-plugin mode).
  for (const k8s::ObjectRef& obj : claims_ ? claims_->List() : std::vector<k8s::ObjectRef>{}) {
    ClaimInfo info = ReadClaimInfo(*obj, options_.node_name);
    if (info.uid.empty()) continue;
    auto it = by_uid.find(info.uid);
    if (info.shares.empty()) {
      // Not this node's: a region of it here is another node's business (a hook directory
      // shared by several nodes, as in hami-sim) or stale until the plugin's Unprepare.
      if (it != by_uid.end()) by_uid.erase(it);
      continue;
    }
    by_uid[info.uid].claim = std::move(info);
  }
  std::vector<ClaimUsage> out;
  for (auto& [uid, c] : by_uid) out.push_back(std::move(c));
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
  std::vector<const Found*> used;
  std::vector<FeedbackState> states;
  std::set<std::string> problems;
  for (const Found& f : regions) {
    const int version = f.usage.region.version;
    int32_t words[3];
    if (!ReadControls(f.file->fd, version, words)) {
      problems.insert("monitor: feedback: region file " + Quote(f.path) +
                      ": cannot read its control words");
      continue;
    }
    FeedbackState s;
    for (const DeviceUsage& d : f.usage.region.devices) s.uuids.push_back(d.uuid);
    // The container writes its priority: HAMi's two levels (0 high, 1 low) are used as they are,
    // anything else counts as the nearest of them (priority -1 would have the container block
    // every other one; 2^31-1 used to loop 2^31 times a pass).
    s.priority = std::clamp(words[kPriority], kHighestPriority, kLowestPriority);
    if (s.priority != words[kPriority]) {
      problems.insert("monitor: feedback: region file " + Quote(f.path) + ": priority " +
                      std::to_string(words[kPriority]) + " out of range [" +
                      std::to_string(kHighestPriority) + ", " + std::to_string(kLowestPriority) +
                      "], counted as " + std::to_string(s.priority));
    }
    s.recent_kernel = words[kRecentKernel];
    s.utilization_switch = words[kUtilizationSwitch];
    states.push_back(std::move(s));
    used.push_back(&f);
  }
  std::vector<FeedbackState> before = states;
  PriorityFeedback(states);
  // Written only through the descriptors this pass validated, and only the words that changed.
  for (size_t i = 0; i < states.size(); ++i) {
    const OpenFile& file = *used[i]->file;
    const int version = used[i]->usage.region.version;
    if ((states[i].recent_kernel != before[i].recent_kernel &&
         !WriteControl(file.fd, version, kRecentKernel, states[i].recent_kernel)) ||
        (states[i].utilization_switch != before[i].utilization_switch &&
         !WriteControl(file.fd, version, kUtilizationSwitch, states[i].utilization_switch))) {
      problems.insert("monitor: feedback: region file " + Quote(used[i]->path) +
                      ": write failed: " + std::strerror(errno));
    }
  }
  LogProblems(problems);
  return static_cast<int>(states.size());
}

void Monitor::LogProblems(const std::set<std::string>& problems) {
  // Each problem is logged when first seen and again at most every kProblemLogInterval while it
  // lasts, and no pass logs more than kMaxProblemLinesPerPass new lines: a container that swaps
  // its files in a loop, or makes thousands of them, cannot flood the node's log.
  const SystemTime now = clock_.Now();
  std::lock_guard<std::mutex> lock(log_mu_);
  for (auto it = logged_.begin(); it != logged_.end();) {
    it = now - it->second >= kProblemLogInterval ? logged_.erase(it) : std::next(it);
  }
  size_t lines = 0, suppressed = 0;
  for (const std::string& p : problems) {
    if (logged_.count(p) > 0) continue;
    if (lines == kMaxProblemLinesPerPass || logged_.size() >= kMaxRememberedProblems) {
      ++suppressed;
      continue;
    }
    HAMI_WARN("{}", p);
    logged_[p] = now;
    ++lines;
  }
  if (suppressed > 0) {
    HAMI_WARN("monitor: {} more problems in this pass not logged (at most {} lines a pass)",
              suppressed, kMaxProblemLinesPerPass);
  }
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
    // Nothing a container writes may end the passes: an exception is logged and the next period
    // runs as usual.
    try {
      if (feedback.count() > 0 && now >= next_feedback) {
        next_feedback = now + feedback;
        Feedback();
      }
      if (housekeeping.count() > 0 && now >= next_housekeeping) {
        next_housekeeping = now + housekeeping;
        Cleanup();
        CheckLimits();
      }
    } catch (const std::exception& e) {
      HAMI_ERROR("monitor: periodic pass failed: {}", e.what());
    } catch (...) {
      HAMI_ERROR("monitor: periodic pass failed: unknown exception");
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
  // containers/<podUID>_<container>/ and limits/<podUID>_<container>.limits, nothing else: DRA
  // mode's claims/<claimUID>/ and claim-limits/ belong to hami-dra-plugin, whose Unprepare
  // removes them (a claim outlives any one pod that uses it). What is under a
  // container's directory is the container's: it is removed through descriptors, never by a path
  // that a link swapped in meanwhile could redirect (RemoveTreeAt).
  for (const char* sub : {"containers", "limits"}) {
    const std::string root = options_.hook_path + "/" + sub;
    const int root_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root_fd < 0) continue;
    for (const std::string& name : ListDir(root_fd, kMaxContainerDirs)) {
      const size_t sep = name.find('_');
      if (sep == 0 || sep == std::string::npos) continue;  // not a <podUID>_<container> name
      struct stat st;
      if (::fstatat(root_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      const bool dir = S_ISDIR(st.st_mode);
      if (std::string(sub) == "containers"
              ? !dir
              : dir || name.size() < 7 || name.compare(name.size() - 7, 7, ".limits") != 0) {
        continue;
      }
      if (uids.count(name.substr(0, sep)) > 0) continue;
      const std::string path = root + "/" + name;
      auto seen = gone_since_.find(path);
      const SystemTime since = seen != gone_since_.end() ? seen->second : now;
      if (now - since < options_.resync_interval) {
        gone[path] = since;
        continue;
      }
      if (!RemoveTreeAt(root_fd, name)) {
        HAMI_WARN("monitor: cannot remove {}: {}", Quote(path), std::strerror(errno));
        gone[path] = since;
        continue;
      }
      HAMI_INFO("monitor: removed {}: pod {} is gone from node {}", Quote(path),
                Quote(name.substr(0, sep)), options_.node_name);
      ++removed;
    }
    ::close(root_fd);
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
    if (!f.claim_uid.empty()) continue;  // a claim's region: no one pod to post on
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
  MetricsInput input;
  input.node = options_.node_name;
  // One scan for both: the containers' regions and the claims'.
  std::vector<Found> regions = ScanRegions();
  for (Found& f : regions) {
    if (f.claim_uid.empty()) input.containers.push_back(f.usage);
  }
  input.claims = JoinClaims(std::move(regions));
  input.dra_devices = PoolDevices();
  input.host = options_.host_gpus ? options_.host_gpus(input.containers) : HostGpus();
  return RenderMetrics(input, options_.legacy_metrics, clock_.Now());
}

}  // namespace hami::monitor
