// The whole of hami-dra-plugin on one node (main.cc only parses flags): discovery (NVML or an
// inventory file, as the device plugin's), the GPUs' DRA facts, the ResourceSlice publisher, the
// checkpointed PreparedClaims and the kubelet gRPC server, refreshed every `refresh` (health,
// GPUs come and go) and withdrawn on Stop (docs/DRA.md).
#ifndef HAMI_DRAPLUGIN_AGENT_H_
#define HAMI_DRAPLUGIN_AGENT_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "deviceplugin/node_plugin.h"
#include "draplugin/prepare.h"
#include "draplugin/publisher.h"
#include "draplugin/server.h"
#include "draplugin/state.h"

namespace hami::draplugin {

struct AgentOptions {
  // node_name, device_inventory, nvml and config.device_memory_scaling are read.
  deviceplugin::NodePluginOptions discovery{};
  ServerOptions server{};
  PrepareEnv prepare{};
  std::string checkpoint_path{};  // "" = <server.plugin_dir>/checkpoint.json
  std::chrono::milliseconds refresh{30000};
  // The device plugin's kubelet socket: when a process serves it, this node is in device-plugin
  // mode and the DRA plugin refuses to start (both would hand out the same GPUs). "" = no check.
  std::string device_plugin_socket = "/var/lib/kubelet/device-plugins/nvidia-gpu.sock";
  // The node's GPUs from this discovery instead of NVML or discovery.device_inventory (no NVML
  // attributes then): hami-sim's nodes, whose GPUs may be in MIG mode, which an inventory cannot
  // say; the MIG profiles it reports are published as they are (mig_driver only prepares).
  // Null = discovery's choice. Must outlive the agent.
  deviceplugin::Discovery* discovery_source = nullptr;
  // The MIG driver (tests, the simulator): which GPUs are in MIG mode, and so publish MIG
  // devices, and what makes claims' MIG instances. Null: NVML's when discovery is NVML; none
  // with an inventory (no MIG devices; a claim for one fails, saying so). Must outlive the agent.
  deviceplugin::MigDriver* mig_driver = nullptr;
  std::string mig_lock_path = std::string(deviceplugin::kMigApplyLockPath);
};

// The GPUs of `devices` with their attributes (`attributes` by index; empty: none known).
std::vector<GpuFacts> MakeFacts(const std::vector<deviceplugin::GpuDevice>& devices,
                                const std::vector<deviceplugin::GpuAttributes>& attributes);

// The node's GPUs with their DRA facts from `discovery` (NVML attributes where NVML is used).
Result<std::vector<GpuFacts>> DiscoverGpus(deviceplugin::NodeDiscovery& discovery);

// The GPUs with the MIG profiles they publish (docs/DRA.md "ResourceSlices"): a GPU `driver` says
// is in MIG mode gets the profiles of `allowlist` it offers (mig_profiles.h MigProfilesFor); one
// in MIG mode that offers none of them is left out (it cannot be shared either), and so is an
// unhealthy one whose profiles cannot be read. A GPU whose MIG mode cannot be read (a driver
// without MIG) is not in MIG mode. Each GPU left out, or whose mode was unreadable, adds a line
// to `notes`.
std::vector<GpuFacts> WithMigProfiles(
    std::vector<GpuFacts> gpus, deviceplugin::MigDriver& driver,
    const std::vector<device::nvidia::MigAllowlistEntry>& allowlist,
    std::vector<std::string>* notes);

// Whether a process accepts connections on unix socket `path` (a stale socket file does not).
bool SomeoneServes(const std::string& path);

class DraAgent {
 public:
  // `client` and `clock` must outlive the agent.
  DraAgent(AgentOptions options, k8s::Client* client, const Clock& clock);
  ~DraAgent();
  DraAgent(const DraAgent&) = delete;
  DraAgent& operator=(const DraAgent&) = delete;

  // Refuses a node in device-plugin mode, discovers, loads the checkpoint, publishes the pool,
  // serves kubelet and starts the refresh loop. Errors name the step.
  Status Start();
  // One refresh: discovery, the pool (written when changed), the health stream.
  Status Refresh();
  // Ends the loop and the server, and withdraws the pool's slices.
  void Stop();

  const DraServer* server() const { return server_.get(); }
  const SlicePublisher& publisher() const { return publisher_; }

 private:
  std::vector<GpuFacts> Gpus() const;

  AgentOptions options_;
  k8s::Client* client_;
  const Clock& clock_;
  std::unique_ptr<deviceplugin::NodeDiscovery> discovery_;
  bool discovering_ = false;  // Start got past the device-plugin check: Stop withdraws the pool
  deviceplugin::MigDriver* mig_driver_ = nullptr;
  std::set<std::string> noted_;  // WithMigProfiles notes already logged; guarded by mu_
  SlicePublisher publisher_;
  std::unique_ptr<PreparedClaims> claims_;
  std::unique_ptr<DraServer> server_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<GpuFacts> gpus_;
  std::thread loop_;
};

}  // namespace hami::draplugin

#endif  // HAMI_DRAPLUGIN_AGENT_H_
