// The kubelet-facing half of hami-device-plugin (docs/protocol.md#device-plugin-api-and-allocate):
// a gRPC DevicePlugin server on <device-plugins dir>/nvidia-gpu.sock that registers with kubelet,
// advertises every GPU deviceSplitCount times as "<UUID>-<i>", pushes the full list on every health
// change, and answers Allocate through the Allocator. One background loop ticks the node-register
// publisher and watches kubelet.sock: when kubelet restarts (its socket is re-created) or our
// socket disappears, the server is restarted and registers again. The annotation keeps being
// published while kubelet is absent.
#ifndef HAMI_DEVICEPLUGIN_PLUGIN_H_
#define HAMI_DEVICEPLUGIN_PLUGIN_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "deviceplugin/discovery.h"
#include "protocol/vendor.h"

namespace hami::deviceplugin {

class Allocator;
class RegisterPublisher;

inline constexpr const char* kApiVersion = "v1beta1";
inline constexpr const char* kDefaultKubeletSocket = "/var/lib/kubelet/device-plugins/kubelet.sock";
inline constexpr const char* kPluginEndpoint = "nvidia-gpu.sock";

struct PluginOptions {
  // The plugin's socket is created in the same directory.
  std::string kubelet_socket = kDefaultKubeletSocket;
  std::string endpoint = kPluginEndpoint;
  std::string resource_name{protocol::kNvidiaCountResource};
  int32_t split_count = 10;
  bool numa_topology = false;         // attach TopologyInfo to each advertised device
  bool preferred_allocation = false;  // Register option GetPreferredAllocationAvailable
  // How often the loop ticks the publisher and checks kubelet.sock (re-register within 5 s).
  std::chrono::milliseconds poll_interval{1000};
  // Called by the loop on every pass, after the publisher's Tick: clock-driven node work that
  // runs when due (the MIG reconciler, the MPS daemon watch). Must not throw; may be empty.
  std::function<void()> tick{};
};

// One kubelet-visible device: a replica of a GPU.
struct AdvertisedDevice {
  std::string id;  // "<UUID>-<i>"
  bool healthy = true;
  int64_t numa = 0;
  bool operator==(const AdvertisedDevice&) const = default;
};

// Each GPU `split` times, GPU order, then replica order.
std::vector<AdvertisedDevice> Advertise(const std::vector<GpuDevice>& gpus, int32_t split);

class Plugin {
 public:
  // `publisher` and `allocator` must outlive the plugin.
  Plugin(PluginOptions options, RegisterPublisher* publisher, Allocator* allocator);
  ~Plugin();  // Stop()s
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Publishes once, starts serving on socket_path() and the background loop. Registration is
  // tried at once and retried by the loop while kubelet is absent. Errors: the socket could not
  // be served.
  Status Start();
  // Ends ListAndWatch streams, stops the server and the loop, removes the socket. Idempotent.
  void Stop();

  std::string socket_path() const;
  // Successful Register calls so far (a kubelet restart adds one).
  int registrations() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_PLUGIN_H_
