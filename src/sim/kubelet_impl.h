// KubeletFleet's state, shared by its parts (internal to hami-sim):
//   kubelet.cc             start/stop and each pod's lifecycle on its node: admit after the
//                          admission latency, Allocate per container, Running, then Succeeded or
//                          Failed (a timer queue served by a small pool)
//   kubelet_plugins.cc     the Node objects, each node's device plugin, and the kubelet's gRPC
//                          client of it (ListAndWatch, Allocate)
//   kubelet_registration.cc  the kubelet's Registration service, and the process faults
//                          (a plugin killed and restarted, the kubelet restarted)
//   kubelet_containers.cc  the container side: devices a container asks for, the pod status
//                          objects, the usage region files the node's monitor reads
//   kubelet_dra.cc         DRA mode: each node's hami-dra-plugin (DraAgent) and its
//                          registration, a pod's claims waited for, prepared and unprepared
//                          over the plugin's DRA gRPC API, the CDI edits that become its env
#ifndef HAMI_SIM_KUBELET_IMPL_H_
#define HAMI_SIM_KUBELET_IMPL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/plugin.h"
#include "deviceplugin/register.h"
#include "deviceplugin/simulated_mig_driver.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "draplugin/agent.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "sim/kubelet.h"
#include "sim/usage.h"
#include "sim/vendor_plugin.h"

namespace hami::sim {

namespace dp = deviceplugin;
using SteadyTime = std::chrono::steady_clock::time_point;

// The device count a container asks for: limits win (requests default to them for extended
// resources), then requests.
int64_t ContainerDeviceCount(const nlohmann::json& container, const std::string& resource);

// The pod status a kubelet writes when the pod's containers run, and when they end (`ok`:
// Succeeded; else Failed with reason UnexpectedAdmissionError and `message`).
nlohmann::json RunningStatus(const nlohmann::json& pod, SystemTime now);
nlohmann::json EndStatus(const nlohmann::json& pod, SystemTime now, bool ok,
                         const std::string& message);

// What a container runtime takes from CDI devices: the env ("K=V" entries of the spec's and the
// device's containerEdits) and the mounts (container path -> host path).
struct CdiEdits {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> mounts;
};

// Resolves fully qualified CDI device ids ("<vendor>/<class>=<name>") against the CDI spec files
// (*.json) in `cdi_dir`, as the runtime does. An id no spec defines is an error naming it.
Result<CdiEdits> ResolveCdiDevices(const std::string& cdi_dir, const std::vector<std::string>& ids);

// A claim as kubelet names it to a DRA plugin.
struct DraClaimRef {
  std::string ns, uid, name;
};

// The node's GPUs as given by the scenario, with the health the unhealthyGpu fault sets (what
// NVML's health events tell the real plugin).
class StaticDiscovery : public dp::Discovery {
 public:
  StaticDiscovery(std::vector<dp::GpuDevice> gpus, const std::vector<bool>* unhealthy,
                  std::mutex* mu)
      : gpus_(std::move(gpus)), unhealthy_(unhealthy), mu_(mu) {}
  Result<std::vector<dp::GpuDevice>> Discover() override {
    std::vector<dp::GpuDevice> out = gpus_;
    std::lock_guard<std::mutex> lock(*mu_);
    for (size_t i = 0; i < out.size() && i < unhealthy_->size(); ++i) {
      if ((*unhealthy_)[i]) out[i].healthy = false;
    }
    return out;
  }
  std::string Name() const override { return "sim"; }

 private:
  std::vector<dp::GpuDevice> gpus_;
  const std::vector<bool>* unhealthy_;
  std::mutex* mu_;
};

class KubeletFleet::Impl {
 public:
  using json = nlohmann::json;
  // One simulated node: its plugin (one process: the four parts below, or `vendor`) and the
  // kubelet's view of it.
  struct Node {
    SimNode spec;
    std::string dir;  // the node's device-plugins directory: kubelet.sock, nvidia-gpu.sock
    std::unique_ptr<dp::Discovery> discovery;  // the scenario's GPUs
    // DRA mode: the driver's MIG side for its GPUs in MIG mode (null when it has none); it
    // outlives the node's plugin processes, as the GPUs' instances outlive a plugin restart.
    std::unique_ptr<dp::SimulatedMigDriver> mig_driver;
    std::unique_ptr<dp::RegisterPublisher> publisher;
    std::unique_ptr<dp::Allocator> allocator;
    std::unique_ptr<dp::Plugin> plugin;
    std::shared_ptr<VendorPlugin> vendor;  // a vendor node's plugin instead of the above
    std::string vendor_resource;           // its count resource (kept while it is down)
    // The kubelet's Registration service on <dir>/kubelet.sock (NVIDIA nodes).
    std::unique_ptr<grpc::Service> registration_service;
    std::unique_ptr<grpc::Server> registration;
    // Serializes the process faults and Stop() on this node.
    std::mutex process_mu;
    bool plugin_down = false;   // process_mu
    bool kubelet_down = false;  // mu_ (Admit reads it)
    // What the kubelet knows of the plugin (mu_): set by a Register, gone when the plugin dies or
    // the kubelet restarts.
    bool registered = false;
    int registrations = 0;
    std::shared_ptr<v1beta1::DevicePlugin::Stub> stub;
    std::vector<std::string> device_ids;  // from ListAndWatch, healthy only
    std::set<std::string> in_use;         // kept across restarts (kubelet's checkpoint)
    std::vector<bool> unhealthy;          // per GPU: the unhealthyGpu fault's (mu_)
    // DRA mode (an NVIDIA node): hami-dra-plugin in-process instead of the device plugin (over
    // `discovery`), its directories (<dir>/dra: plugin socket, checkpoint; <dir>/reg:
    // registration; <dir>/cdi: CDI specs), and the kubelet's channel to the endpoint it
    // registered.
    std::unique_ptr<draplugin::DraAgent> dra;
    std::shared_ptr<grpc::Channel> dra_channel;  // mu_
    // Prepared claims (uid) -> the pods of this node using them (kubelet's claim info cache): a
    // claim is unprepared when its last pod here ends.
    std::map<std::string, std::set<std::string>> claim_users;  // mu_
  };
  enum class Step { kAdmit, kRunning, kFinish, kFailed, kUnprepare };
  struct PodRun {
    PodRunRecord rec;
    size_t node = 0;
    std::vector<std::string> ids;  // device IDs held
    bool done = false;             // terminal, deleted or abandoned: no more steps
    int status_attempts = 0;
    // DRA mode: the pod's claims sent to NodePrepareResources, those to unprepare now that it
    // ended, and the tries of each phase (waiting for allocation, prepare, unprepare).
    std::vector<DraClaimRef> claims, unprepare;
    int wait_attempts = 0, prepare_attempts = 0, unprepare_attempts = 0;
  };
  // What DRA admission decided for a pod.
  struct DraAdmission {
    enum Kind { kReady, kWait, kFail } kind = kReady;
    std::string message;                    // kFail: why
    std::map<std::string, CdiEdits> edits;  // kReady: pod claim entry name -> its claim's edits
  };

  Impl(k8s::Client& client, std::vector<SimNode> nodes, KubeletOptions options, const Clock& clock)
      : client_(client), options_(std::move(options)), clock_(clock) {
    for (SimNode& n : nodes) {
      auto node = std::make_unique<Node>();
      node->spec = std::move(n);
      nodes_.push_back(std::move(node));
    }
  }

  // Start/stop and the pods' lifecycle (kubelet.cc).
  Status Start();
  void Stop();
  // Nodes, their device plugins and the gRPC calls to them (kubelet_plugins.cc).
  Status CreateNode(Node& node);
  std::shared_ptr<VendorPlugin> NewVendorPlugin(const device::Device& dev, const Node& node);
  Status StartPlugin(size_t index);
  Status StartNodes();
  // The kubelet's Registration service (kubelet_registration.cc): Register dials the plugin's
  // endpoint and reads its devices, as kubelet's device manager does.
  Status ServeRegistration(size_t index);
  grpc::Status OnRegister(size_t index, const v1beta1::RegisterRequest& req);
  Result<std::vector<std::string>> ReadDevices(v1beta1::DevicePlugin::Stub& stub,
                                               const std::string& socket);
  // Process faults (kubelet_registration.cc).
  bool KillPlugin(size_t index);
  Status RestartPlugin(size_t index, bool count = true);
  bool StopKubelet(size_t index);
  Status StartKubelet(size_t index);
  Status SetGpuHealth(size_t index, size_t gpu, bool healthy);
  Status RecreateNode(size_t index);

  void OnPod(const json& pod);
  void OnPodGone(const json& pod);
  void Schedule(std::chrono::milliseconds delay, const std::string& key, Step step);
  void Worker();
  void Run(const std::string& key, Step step);
  void Admit(const std::string& key);
  void PatchStatus(const std::string& key, Step step);
  // Under mu_: the pod's device IDs go back, and its claims no other pod of the node uses are
  // queued for NodeUnprepareResources.
  void ReleaseIds(const std::string& key, PodRun& run);
  Result<std::map<std::string, std::string>> VendorAllocate(VendorPlugin* plugin,
                                                            const std::string& resource);
  Result<std::map<std::string, std::string>> AllocateContainer(size_t node, const std::string& key,
                                                               int64_t count);
  // DRA mode (kubelet_dra.cc).
  bool DraNode(size_t index) const { return options_.dra && nodes_[index]->spec.vendor.empty(); }
  Status StartDraPlugin(size_t index);
  Status RegisterDraPlugin(size_t index);
  DraAdmission AdmitDra(const std::string& key, const json& pod, size_t index);
  void Unprepare(const std::string& key);
  Status SetDraGpuHealth(size_t index);
  std::string HookPath() const {
    return options_.hook_path.empty() ? options_.socket_dir + "/hook" : options_.hook_path;
  }
  // The scenario's usage, written where the node's monitor reads it (kubelet_containers.cc).
  std::map<std::string, SimUsage> PodUsage(const json& pod);
  // `mounts` (DRA: the CDI mounts, container path -> host path) place the region where the
  // container's CUDA_DEVICE_MEMORY_SHARED_CACHE is mounted from; empty: the device plugin's
  // per-container directory.
  void WriteUsage(const json& pod, const std::string& container,
                  const std::map<std::string, SimUsage>& usage,
                  const std::map<std::string, std::string>& envs,
                  const std::map<std::string, std::string>& mounts = {});

  k8s::Client& client_;
  const KubeletOptions options_;
  const Clock& clock_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::string, size_t> node_index_;
  std::unique_ptr<k8s::Informer> pods_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable registered_cv_;  // a node's plugin registered
  int plugin_restarts_ = 0;                // mu_
  std::map<std::string, PodRun> runs_;
  std::set<std::tuple<SteadyTime, uint64_t, std::string, Step>> timers_;
  uint64_t timer_seq_ = 0;
  size_t started_ = 0;  // runs_ records running, finished or failed
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_KUBELET_IMPL_H_
