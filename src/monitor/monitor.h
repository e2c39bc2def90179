// hami-vgpu-monitor as a component (docs/MONITOR.md): an informer on this node's vGPU pods
// (label hami.io/vgpu-node=<node>), a scan of $HOOK_PATH/containers/<podUID>_<container>/ for
// each container's shared region file, and /metrics + /healthz on one HTTP listener. Every scrape
// rescans, so a deleted pod's series are gone at the next scrape and a pod re-created under the
// same name (a new UID) never adds the old directory's numbers. With a feedback period it also
// runs the priority feedback (feedback.h) into the region files. A directory whose region cannot
// be read (two region files, truncated, wrong magic) is skipped with one log line naming the
// path; the other containers are still served. In DRA mode it also reads each claim's region
// under $HOOK_PATH/claims/<claimUID>/ the same way and names the claim's pods from its
// ResourceClaim (claims.h). hami-vgpu-monitor's main.cc and hami-sim can both run it.
#ifndef HAMI_MONITOR_MONITOR_H_
#define HAMI_MONITOR_MONITOR_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "k8s/client.h"
#include "monitor/metrics.h"

namespace hami::deviceplugin {
class NvmlDiscovery;
struct GpuSample;
}  // namespace hami::deviceplugin
namespace hami::k8s {
class Informer;
}
namespace hami::net {
class HttpServer;
}

namespace hami::monitor {

struct MonitorOptions {
  std::string node_name;                      // required
  std::string hook_path = "/usr/local/vgpu";  // containers/<podUID>_<ctr>/, claims/<claimUID>/
  std::string metrics_bind = ":9394";         // host:port; port 0 = ephemeral
  bool legacy_metrics = false;
  std::string proc_root = "/proc";  // host PIDs are checked under it (host PID namespace)
  const Clock* clock = nullptr;     // null = RealClock()
  // The priority feedback (feedback.h) runs this often on a thread of its own; 0 = never (tests
  // call Feedback()). Paused while `mig_apply_lock` exists.
  std::chrono::milliseconds feedback_period{0};
  std::string mig_apply_lock = "/tmp/hami/hami-mig-apply.lock";
  // The host GPU series (hami_host_gpu_*) come from this NVML library (dlopen); empty, or a
  // library that does not load or initialise: they are left out, with one log line.
  std::string nvml_library;
  // Instead of NVML: the host GPU series computed from each scrape's containers (hami-sim's
  // simulated GPUs). Set, it wins over nvml_library.
  std::function<std::vector<deviceplugin::GpuSample>(const std::vector<ContainerUsage>&)> host_gpus;
  // A directory under containers/ (and a limits/<podUID>_<ctr>.limits file) whose pod is gone
  // from this node is removed once it has been seen gone for this long (HAMI_RESYNC_INTERVAL).
  std::chrono::nanoseconds resync_interval = std::chrono::minutes(5);
  // The housekeeping pass (Cleanup() and CheckLimits()) runs this often on the feedback thread;
  // 0 = never (tests call them).
  std::chrono::milliseconds housekeeping_period{0};
};

class Monitor {
 public:
  // `client` must outlive the monitor.
  Monitor(k8s::Client& client, MonitorOptions options);
  ~Monitor();  // Stop()s
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Starts the pod informer and the HTTP listener; returns the metrics port. Errors name the
  // option and quote the value.
  Result<int> Start();
  void Stop();
  bool synced() const;

  // One scan: the containers of this node's pods that have a readable region.
  std::vector<ContainerUsage> Scan();
  // DRA mode (docs/MONITOR.md "DRA claims"): the claims under <hook_path>/claims/<claimUID>/
  // with their regions, and the claims of this node's pool that the API lists, joined by UID.
  // The ResourceClaim and ResourceSlice informers start at the first scan that finds a claim's
  // directory, so a node in device-plugin mode never lists them.
  std::vector<ClaimUsage> ScanClaims();
  // This node's pool devices (hami-dra-plugin's ResourceSlices); empty before the informers run.
  std::vector<DraDevice> PoolDevices();
  bool claims_synced() const;
  // Scan() rendered as the /metrics text.
  std::string Metrics();
  // One priority feedback pass over the readable regions: recent_kernel and utilization_switch
  // are written back (atomically, only when they change) into each region file. Returns the
  // number of regions it looked at; 0 while the MIG apply lock exists.
  int Feedback();
  // Removes the container directories and limits files of pods gone from this node for at least
  // the resync interval (by the injected clock, from the pass that first saw them gone). Nothing
  // is removed before the pod informer has synced. Returns the number of paths removed.
  int Cleanup();
  // Issue 20's cross-check: posts one Warning Event (reason VGPUMemoryOverLimit, aggregated by
  // the client's correlator) on a pod when a container's live slots on a device go over its
  // limit; again only after it has come back under. Returns the number of Events posted.
  int CheckLimits();
  // The host GPUs as NVML reports them now; empty without NVML.
  std::vector<deviceplugin::GpuSample> HostGpus();

 private:
  // A region file the scan opened (openat, O_NOFOLLOW, checked with fstat); the feedback reads
  // and writes only through it, never by path again (docs/SECURITY.md).
  struct OpenFile {
    int fd = -1;
    size_t size = 0;
    OpenFile() = default;
    OpenFile(const OpenFile&) = delete;
    OpenFile& operator=(const OpenFile&) = delete;
    ~OpenFile();
  };
  struct Found {
    std::string path;  // the region file
    std::string pod_uid;
    std::string claim_uid;  // set: a DRA claim's region (usage has no pod), pod_uid empty
    ContainerUsage usage;
    std::shared_ptr<const OpenFile> file;
  };
  std::vector<Found> ScanRegions();
  // The one region file of the directory `name` under `root_fd` (`dir_path` is its path, for
  // the log): opened with O_NOFOLLOW and checked (OpenRegularFile in monitor.cc); null when there
  // is none yet (empty file) or the directory is skipped, with the reason in `problems`.
  std::shared_ptr<OpenFile> OpenDirRegion(int root_fd, const std::string& name,
                                          const std::string& dir_path, std::string* region_path,
                                          std::set<std::string>* problems);
  void StartClaimInformers();
  // The claims of `regions` (their claim_uid set) joined with the claims the API lists.
  std::vector<ClaimUsage> JoinClaims(std::vector<Found> regions);
  void FeedbackLoop();

  k8s::Client& client_;
  const MonitorOptions options_;
  const Clock& clock_;
  std::unique_ptr<k8s::Informer> pods_;
  mutable std::mutex dra_mu_;  // guards claims_ and slices_ being started
  std::unique_ptr<k8s::Informer> claims_;
  std::unique_ptr<k8s::Informer> slices_;
  std::unique_ptr<net::HttpServer> http_;
  // Logs the problems of one pass (rate-limited: LogProblems in monitor.cc).
  void LogProblems(const std::set<std::string>& problems);
  static constexpr std::chrono::minutes kProblemLogInterval{10};
  static constexpr size_t kMaxProblemLinesPerPass = 20;
  static constexpr size_t kMaxRememberedProblems = 4096;
  std::mutex log_mu_;
  std::map<std::string, SystemTime> logged_;  // problem -> when it was last logged
  std::mutex feedback_mu_;                    // one pass at a time
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread feedback_thread_;
  std::mutex nvml_mu_;
  std::unique_ptr<deviceplugin::NvmlDiscovery> nvml_;  // null: no host series
  std::string nvml_problem_;                           // the last Sample() error, logged once
  std::mutex housekeeping_mu_;
  std::map<std::string, SystemTime> gone_since_;  // path -> when its pod was first seen gone
  std::set<std::string> over_limit_;  // "<podUID>/<container>/<uuid>" over its limit now
};

}  // namespace hami::monitor

#endif  // HAMI_MONITOR_MONITOR_H_
