// Node registration (docs/protocol.md#node-registration-and-the-handshake): the plugin
// publishes its GPUs as `hami.io/node-nvidia-register` JSON on its Node. It re-discovers every
// 30 s (5 s after an error) and patches only when the serialized inventory changed. It never
// writes a handshake annotation: the scheduler owns hami.io/node-handshake.
#ifndef HAMI_DEVICEPLUGIN_REGISTER_H_
#define HAMI_DEVICEPLUGIN_REGISTER_H_

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/plugin_config.h"
#include "protocol/node_register.h"
#include "protocol/vendor.h"

namespace hami::deviceplugin {

inline constexpr std::string_view kNvidiaRegisterKey = protocol::kNvidiaRegisterKey;
inline constexpr std::chrono::seconds kPublishInterval{30};
inline constexpr std::chrono::seconds kPublishRetryInterval{5};

// "NVIDIA-" + model, unless the model already starts with "NVIDIA".
std::string RegisterType(std::string_view model);

// Drops the GPUs config.filter_uuids / filter_indices name.
std::vector<GpuDevice> FilterDevices(const std::vector<GpuDevice>& devices,
                                     const PluginConfig& config);

// One DeviceInfo per GPU: count = deviceSplitCount, devmem = MiB x deviceMemoryScaling
// (preConfiguredDeviceMemory when the GPU reports 0 MiB; the GPU is skipped when both are 0),
// devcore = 100 x deviceCoreScaling, type per RegisterType, mode = operating mode, health.
// In MIG mode (docs/MIG.md): migProfiles = the GPU's discovered profiles, count = their largest
// instance count, devmem unscaled, devcore 100; a GPU without profiles is not registered.
std::vector<protocol::DeviceInfo> BuildDeviceInfos(const std::vector<GpuDevice>& devices,
                                                   const PluginConfig& config);

// Writes one node annotation; the k8s adapter is K8sNodeAnnotator in plugin.h.
using AnnotateNodeFn = std::function<Status(std::string_view key, std::string_view value)>;

// The 30 s publish loop as a clock-driven state machine: the owner calls Tick() often (the
// plugin every second); Tick publishes when due. Thread-safe.
class RegisterPublisher {
 public:
  // `discovery` and `clock` must outlive the publisher.
  RegisterPublisher(Discovery* discovery, PluginConfig config, AnnotateNodeFn annotate,
                    const Clock& clock);

  // When due (the first call always is): discovers, and patches if the annotation value differs
  // from the last one written. Returns whether it patched. After an error the next attempt is
  // due in 5 s, else in 30 s.
  Result<bool> Tick();
  // Discovers and patches if changed, regardless of the schedule.
  Result<bool> PublishIfChanged();

  // The GPUs of the last successful discovery (after filtering); empty before.
  std::vector<GpuDevice> devices() const;
  // The last value written; "" before the first write.
  std::string last_value() const;
  // Bumped whenever devices() changes (health included), for ListAndWatch.
  uint64_t generation() const;

 private:
  Discovery* discovery_;
  const PluginConfig config_;
  AnnotateNodeFn annotate_;
  const Clock& clock_;
  mutable std::mutex mu_;
  bool has_next_ = false;
  SystemTime next_{};
  std::vector<GpuDevice> devices_;
  std::string last_value_;
  uint64_t generation_ = 0;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_REGISTER_H_
