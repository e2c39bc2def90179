// Simulated kubelets for `hami-sim run`: one per node, each with the REAL NVIDIA device plugin
// (deviceplugin::Plugin with its RegisterPublisher and Allocator over a Discovery that returns the
// node's GPUs), reached over the real gRPC API on a unix socket <socket_dir>/<i>/nvidia-gpu.sock
// once it has registered with the node's kubelet.sock.
//
// What a kubelet does here, as the real one does for a pod bound to its node:
//  * at Start: create the Node (Ready, capacity/allocatable nvidia.com/gpu = GPUs x split count,
//    the count ListAndWatch advertises; a positive allocatable count is how NVIDIA answers the
//    scheduler's handshake), serve the Registration service on <socket_dir>/<i>/kubelet.sock,
//    start the plugin (it publishes hami.io/node-nvidia-register and registers), and on its
//    Register read the advertised device IDs from one ListAndWatch response;
//  * for each pod bound to the node and still Pending: wait admission_latency, then for every
//    container asking for nvidia.com/gpu call Allocate with that many free device IDs (kubelet's
//    device manager keeps them until the pod ends), then set phase Running (Ready condition,
//    startTime, containerStatuses); after the duration annotation, phase Succeeded. An Allocate
//    error sets phase Failed, reason UnexpectedAdmissionError, message = the error. Allocate is
//    called once per container, never retried, as a real kubelet does (the device plugin retries
//    its own API calls).
//
// Hosting: one grpc::Server per node, as in a cluster, so the real Plugin class serves every node
// unchanged. Measured (bench/sim_loops/README.md): about 3.3 threads and 0.2 MiB per node;
// 1,000 nodes start in about 10 s (Release, loaded 2-core dev machine, 8 nodes at a time).
// Affordable, so no multiplexing of several nodes onto one server.
//
// DRA mode (KubeletOptions::dra; docs/DRA.md "hami-sim in DRA mode"): an NVIDIA node runs the
// real hami-dra-plugin (draplugin::DraAgent) in-process instead of the device plugin, discovering
// the node's GPUs (MIG profiles and unhealthyGpu included), with its registration, plugin and CDI
// directories under <socket_dir>/<i>/. The Node has no nvidia.com/gpu capacity: the pool of
// ResourceSlices the agent publishes at Start is what the scheduler sees. The kubelet registers
// the plugin (pluginregistration GetInfo, NotifyRegistrationStatus). For a pod with
// spec.resourceClaims it waits (re-checking with backoff) until each claim exists, is allocated
// and lists the pod in status.reservedFor, calls NodePrepareResources (dra v1) with them, and
// resolves the answer's CDI device ids against the plugin's CDI specs: each container gets the
// env of the claims its resources.claims name (PodRunRecord::container_envs). A prepare error is
// retried (event FailedPrepareDynamicResources) and, after dra_prepare_attempts, fails the pod.
// NodeUnprepareResources follows when the pod ends or is deleted, for each claim no other pod of
// the node still uses. The device plugin's process faults are not simulated on a DRA node.
//
// Work is done by a small pool (not a thread per pod): admission latency and durations are
// deadlines in a timer queue, so a waiting pod occupies no thread. API errors (the sim apiserver
// can inject 500s) are retried with backoff; Stop() abandons what is still queued.
#ifndef HAMI_SIM_KUBELET_H_
#define HAMI_SIM_KUBELET_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "device/device.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/plugin_config.h"
#include "k8s/client.h"

namespace hami::sim {

// A pod's run time in the sim (decimal seconds, may be fractional); absent or 0 = runs forever.
inline constexpr std::string_view kDurationAnnotation = "sim.hami.io/duration-seconds";

struct SimNode {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<deviceplugin::GpuDevice> gpus;
  // The HAMi vendor key of the node's devices; "" = NVIDIA (the real plugin). Another vendor's
  // node is served by hami-sim's generic plugin (sim/vendor_plugin.h) through that vendor's
  // backend in KubeletOptions::registry.
  std::string vendor{};
};

struct KubeletOptions {
  std::chrono::milliseconds admission_latency{20};  // before Allocate, per pod
  std::string socket_dir;  // each node's plugin listens on a unix socket under it (keep it short)
  deviceplugin::PluginConfig plugin_config{};  // split count, scaling, ... (chart defaults)
  int workers = 8;                             // Allocate + status patch pool
  // Where Allocate creates the per-container cache dirs (HOOK_PATH); "" = <socket_dir>/hook.
  std::string hook_path;
  // The device plugins' own API identity (their ServiceAccount under RBAC); null = the kubelets'
  // client. Must outlive the fleet.
  k8s::Client* plugin_client = nullptr;
  // The backends for vendor nodes (SimNode::vendor); must outlive the fleet.
  const device::Registry* registry = nullptr;
  // The device plugins' clock (their publish schedule, a vendor plugin's handshake time);
  // null = the fleet's. hami-sim's clockSkew.plugins. Must outlive the fleet.
  const Clock* plugin_clock = nullptr;
  // DRA mode (above): hami-dra-plugin on every NVIDIA node instead of the device plugin.
  bool dra = false;
  // DRA mode: NodePrepareResources calls for one pod before it is failed with the last error.
  int dra_prepare_attempts = 5;
  // DRA mode: the longest wait between two checks of a pod's claims (and between two prepare or
  // unprepare tries); the first is 20 ms, doubled each time.
  std::chrono::milliseconds dra_max_backoff{1000};
};

struct PodRunRecord {
  std::string ns, name, node;
  SystemTime running_at{};                                 // valid iff running
  SystemTime finished_at{};                                // valid iff finished
  bool running = false, finished = false, failed = false;  // failed implies finished
  std::string message;                                     // Allocate error, if any
  // Added: the env each GPU container got from Allocate (CUDA_DEVICE_MEMORY_LIMIT_0, ...), in
  // container order (init containers first). DRA mode: the env of the CDI devices of the claims
  // each container names in resources.claims (containers naming none are left out).
  std::vector<std::map<std::string, std::string>> container_envs;
};

// The duration annotation's value; nullopt-like 0 for absent, unparsable or <= 0.
std::chrono::milliseconds PodDuration(const k8s::Json& pod);

class KubeletFleet {
 public:
  // `client` and `clock` must outlive the fleet.
  KubeletFleet(k8s::Client& client, std::vector<SimNode> nodes, KubeletOptions options,
               const Clock& clock = RealClock());
  ~KubeletFleet();  // Stop()s
  KubeletFleet(const KubeletFleet&) = delete;
  KubeletFleet& operator=(const KubeletFleet&) = delete;

  // Creates the Node objects, starts each node's device plugin and the pod watch. Returns once
  // every plugin serves and the pod informer has synced.
  Status Start();
  void Stop();  // idempotent

  // Process faults (docs/RELIABILITY.md), by node index (the order the nodes were given).
  size_t size() const;
  // The node's device plugin dies as with SIGKILL: its gRPC server and its registration with the
  // kubelet are gone, nothing is cleaned up (a node lock it held, the annotations it wrote stay).
  // Until RestartPlugin, a pod the kubelet admits on the node fails Allocate ("cannot allocate
  // unregistered device ..."), once, as with a real kubelet. False when it is down already.
  bool KillPlugin(size_t node);
  // A new plugin process: it serves, publishes its GPUs and registers with the kubelet again
  // (returns once it has, unless the kubelet is down). Counted in PluginRestarts().
  Status RestartPlugin(size_t node);
  // The node's kubelet stops: its Registration service goes, so it forgets the plugin; pods it
  // runs keep running (their containers do not stop with the kubelet), pods waiting for
  // admission wait. False when it is stopped already.
  bool StopKubelet(size_t node);
  // The kubelet starts again: it clears the device-plugin directory (the plugin's socket too)
  // and serves a new kubelet.sock; the plugin sees that and registers again within its poll
  // interval (1 s). Admission resumes; until the registration a pod fails Allocate as above.
  Status StartKubelet(size_t node);
  // The node's plugin sees GPU `gpu` (its index on the node) turn unhealthy, or healthy again,
  // as NVML's health events tell the real one: it publishes the register annotation with the
  // GPU's health and sends a new ListAndWatch list, from which the kubelet takes the healthy
  // device IDs. Pods running on the GPU keep running. NVIDIA nodes only (an error otherwise).
  Status SetGpuHealth(size_t node, size_t gpu, bool healthy);
  // After deleteNode (the runner stops the node's kubelet and kills its plugin, then deletes
  // the Node object and its pods): the machine comes back. Its kubelet creates the Node object
  // again and starts, a new plugin publishes and registers. Pods the kubelet ran are gone.
  Status RecreateNode(size_t node);
  bool PluginAlive(size_t node) const;
  bool KubeletUp(size_t node) const;
  // Whether the kubelet knows the node's plugin now, and how many Register calls it accepted.
  bool Registered(size_t node) const;
  int Registrations(size_t node) const;
  int PluginRestarts() const;

  std::vector<PodRunRecord> Records() const;
  // How many of the records are running, finished or failed, without copying them (the runner
  // polls this every few ms while 10,000 pods start).
  size_t Started() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_KUBELET_H_
