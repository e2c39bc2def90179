// The `nvidia` section of device-config.yaml (docs/protocol.md#configuration-files; HAMi
// NvidiaConfig), owned by
// the NVIDIA backend: its fields, their defaults (each equal to the HAMi chart's,
// charts/hami/templates/scheduler/device-configmap.yaml) and its parser. The scheduler reads the
// section through the backend's factory (register.cc); the device plugin and hami-sim read it
// with NvidiaConfigOf.
//
// Strict about values, lenient about keys: a wrong type or an out-of-range value is an error
// naming the YAML path (`nvidia.deviceSplitCount: want a positive integer, got "x"`); unknown
// keys are ignored, as HAMi's loader ignores them.
#ifndef HAMI_DEVICE_VENDORS_NVIDIA_NVIDIA_CONFIG_H_
#define HAMI_DEVICE_VENDORS_NVIDIA_NVIDIA_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/config.h"
#include "protocol/vendor.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace hami::device::nvidia {

// The section's name in device-config.yaml.
inline constexpr std::string_view kSection = "nvidia";

// One `migProfileAllowlist` entry: GPUs whose model contains any of `models` may be split into
// the listed profiles, each of the form `<N>g.<memory>` (e.g. "1g.5gb").
struct MigAllowlistEntry {
  std::vector<std::string> models{};
  std::vector<std::string> profiles{};
  bool operator==(const MigAllowlistEntry&) const = default;
};

// The chart's allowlist: A30, A100 40/80 GB, H100 80/94 GB, H20/GH200, H200, B200, RTX PRO 6000.
std::vector<MigAllowlistEntry> DefaultMigProfileAllowlist();

struct NvidiaConfig {
  // The resource names default to the vendor table's (protocol/vendor.h).
  std::string resource_count_name{protocol::kNvidiaCountResource};
  std::string resource_memory_name{protocol::kNvidiaMemoryResource};
  std::string resource_memory_percentage_name{protocol::kNvidiaMemoryPercentageResource};
  std::string resource_core_name{protocol::kNvidiaCoreResource};
  std::string resource_priority_name{protocol::kNvidiaPriorityResource};
  bool overwrite_env = false;       // NVIDIA_VISIBLE_DEVICES=none for non-GPU containers
  int32_t default_memory = 0;       // MiB when neither gpumem nor percentage is given; 0 = 100 %
  int32_t default_cores = 0;        // percent when gpucores is not given
  int32_t default_gpu_num = 1;      // count the webhook adds when only mem/cores are given
  int32_t memory_factor = 1;        // multiplies gpumem requests and quota limits; >= 1
  bool disable_core_limit = false;  // plugin env GPU_CORE_UTILIZATION_POLICY=disable
  std::string gpu_core_policy = "default";  // "default", "force" or "disable"
  std::string runtime_class_name{};         // set on GPU pods when non-empty
  std::vector<MigAllowlistEntry> mig_profile_allowlist = DefaultMigProfileAllowlist();
  // Node-overridable (per-node config.json, docs/protocol.md#configuration-files).
  int32_t device_split_count = 10;           // vGPUs per physical GPU; >= 1
  double device_memory_scaling = 1.0;        // > 0; > 1 oversubscribes memory
  double device_core_scaling = 1.0;          // > 0
  int64_t pre_configured_device_memory = 0;  // MiB, for GPUs whose NVML memory is unsupported
  std::string lib_cuda_log_level = "1";
  bool enable_numa_topology = false;
  bool operator==(const NvidiaConfig&) const = default;
};

// Parses the section (a map; a null node gives the defaults). Keys absent keep the defaults.
// The allowlist is checked entry by entry (each profile `<N>g.<rest>`, path
// `nvidia.migProfileAllowlist[i].profiles[j]`) and then with HAMi's ValidateMigProfileAllowlist
// (every entry names a model and a profile). Never throws.
Result<NvidiaConfig> ParseNvidiaConfig(const YAML::Node& section);

// The `nvidia` section of a loaded configuration, parsed; the defaults when the section is
// absent (HasNvidiaSection says which).
Result<NvidiaConfig> NvidiaConfigOf(const DeviceConfig& config);
bool HasNvidiaSection(const DeviceConfig& config);
// NvidiaConfigOf for a configuration LoadDeviceConfig accepted (so the section parses); a section
// that does not parse reads as the defaults.
NvidiaConfig NvidiaSectionOrDefaults(const DeviceConfig& config);

}  // namespace hami::device::nvidia

#endif  // HAMI_DEVICE_VENDORS_NVIDIA_NVIDIA_CONFIG_H_
