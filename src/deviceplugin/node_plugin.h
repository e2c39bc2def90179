// The whole NVIDIA device plugin of one node, as hami-device-plugin runs it (main.cc only parses
// flags): discovery (NVML or an inventory; in `operatingmode: mig` wrapped in MigDiscovery), the
// node-register publisher, the Allocator and the kubelet-facing Plugin; in MIG mode also the
// MigManager over the plugin's GPUs with its start-up pass and the 5 s reconciler
// (docs/MIG.md "Device plugin"); in MPS mode the control daemons (mps_daemon.h). The clock, the
// apply lock's path and the MPS control binary are injected so tests run the same code path.
#ifndef HAMI_DEVICEPLUGIN_NODE_PLUGIN_H_
#define HAMI_DEVICEPLUGIN_NODE_PLUGIN_H_

#include <chrono>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "deviceplugin/allocate.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/mig_apply_lock.h"
#include "deviceplugin/mps_daemon.h"
#include "deviceplugin/nvml.h"
#include "deviceplugin/plugin.h"
#include "deviceplugin/plugin_config.h"

namespace hami::k8s {
class Client;
}

namespace hami::deviceplugin {

struct NodePluginOptions {
  std::string node_name;
  std::string kubelet_socket = kDefaultKubeletSocket;
  std::string hook_path = "/usr/local";
  DeviceListStrategy strategy = DeviceListStrategy::kEnvvar;
  std::string device_inventory;  // non-empty: GPUs from this file instead of NVML
  NvmlOptions nvml;
  PluginConfig config;
  std::string mig_lock_path = std::string(kMigApplyLockPath);
  MigLockWait mig_lock_wait{};  // how long a MIG pass waits for another holder of that lock
  MpsDaemonOptions mps;  // mps.root is also where Allocate mounts the daemons' directories from
  std::chrono::milliseconds poll_interval{1000};  // the Plugin's loop
};

// The discovery `options` select: an inventory file, or NVML; in MIG mode NVML wrapped in
// MigDiscovery. Errors: MIG mode with an inventory (it has no MIG driver).
class NodeDiscovery {
 public:
  static Result<std::unique_ptr<NodeDiscovery>> Make(const NodePluginOptions& options);
  Discovery* get() const { return top_; }
  NvmlDiscovery* nvml() const { return nvml_.get(); }  // null with an inventory

 private:
  std::unique_ptr<Discovery> inventory_;
  std::unique_ptr<NvmlDiscovery> nvml_;
  std::unique_ptr<Discovery> mig_;
  Discovery* top_ = nullptr;
};

class NodePlugin {
 public:
  // `client` and `clock` must outlive the object.
  NodePlugin(NodePluginOptions options, k8s::Client* client, const Clock& clock);
  ~NodePlugin();  // Stop()s
  NodePlugin(const NodePlugin&) = delete;
  NodePlugin& operator=(const NodePlugin&) = delete;

  // Discovers the GPUs (an error ends the start before anything is published); in MIG mode
  // builds the MigManager over the GPUs the config keeps and runs the start-up pass (destroys
  // the instances no live pod of the node references, keeps the others: a failed pass is
  // logged and retried by the reconciler); in MPS mode starts the control daemons (a failure is
  // logged and retried by the watch); then serves the kubelet plugin, whose loop ticks the
  // reconciler and the daemon watch.
  Status Start();
  // Stops the plugin (its loop first), then sends `quit` to the MPS daemons. Idempotent.
  void Stop();

  std::string socket_path() const;
  std::string discovery_name() const;
  const PluginOptions& plugin_options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_NODE_PLUGIN_H_
