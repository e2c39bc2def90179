// The device configuration file `device-config.yaml` (spec hami.md §7.1): the scheduler reads it
// with --device-config-file, the device plugin with --config-file. Every default below equals the
// HAMi chart's default (charts/hami/templates/scheduler/device-configmap.yaml), so
// DefaultDeviceConfig() is what an unmodified install runs with.
//
// Loading is strict about values and lenient about keys: a wrong type or an out-of-range value is
// an error naming the YAML path (`nvidia.deviceSplitCount: want a positive integer, got "x"`);
// keys we do not know are ignored, as HAMi's loader ignores them, so a config written for a newer
// HAMi still loads.
#ifndef HAMI_DEVICE_CONFIG_H_
#define HAMI_DEVICE_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "protocol/vendor.h"

namespace hami::device {

// One `migProfileAllowlist` entry: GPUs whose model contains any of `models` may be split into
// the listed profiles, each of the form `<N>g.<memory>` (e.g. "1g.5gb").
struct MigAllowlistEntry {
  std::vector<std::string> models{};
  std::vector<std::string> profiles{};
  bool operator==(const MigAllowlistEntry&) const = default;
};

// The `nvidia` section (HAMi NvidiaConfig).
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
  std::string gpu_core_policy = "default";                 // "default", "force" or "disable"
  std::string runtime_class_name{};                        // set on GPU pods when non-empty
  std::vector<MigAllowlistEntry> mig_profile_allowlist{};  // chart default: see the .cc
  // Node-overridable (per-node config.json, §7.2).
  int32_t device_split_count = 10;           // vGPUs per physical GPU; >= 1
  double device_memory_scaling = 1.0;        // > 0; > 1 oversubscribes memory
  double device_core_scaling = 1.0;          // > 0
  int64_t pre_configured_device_memory = 0;  // MiB, for GPUs whose NVML memory is unsupported
  std::string lib_cuda_log_level = "1";
  bool enable_numa_topology = false;
  bool operator==(const NvidiaConfig&) const = default;
};

// A vendor section we only need the resource names of (cambricon, hygon, mthreads, amd, ...):
// the section's scalar values by key, as written (e.g. "resourceCountName" -> "amd.com/gpu").
struct VendorSection {
  std::map<std::string, std::string> values{};
  bool operator==(const VendorSection&) const = default;
};

// The scheduler's policy defaults. HAMi takes them from flags (--node-scheduler-policy,
// --gpu-scheduler-policy); we also accept them in an optional top-level `scheduler` section
// (`nodeSchedulerPolicy`, `gpuSchedulerPolicy`) so a simulation scenario can carry them.
struct SchedulerPolicyConfig {
  std::string node_scheduler_policy = "binpack";  // "binpack" or "spread"
  std::string gpu_scheduler_policy = "spread";    // policy chain, see policy.h
  bool operator==(const SchedulerPolicyConfig&) const = default;
};

struct DeviceConfig {
  NvidiaConfig nvidia{};
  bool has_nvidia = true;  // false when a loaded file has no `nvidia` section
  // Other top-level sections present in the file, by key ("cambricon", "hygon", ...). List
  // sections (`iluvatars`, `vnpus.configs`) keep one VendorSection per element under
  // "<key>[<i>]", e.g. "iluvatars[0]".
  std::map<std::string, VendorSection> others{};
  // Every top-level vendor section present, by name ("nvidia", "hygon", "iluvatars", "vnpus",
  // ...), as YAML text ("" for an empty section). A vendor is active when its section is here;
  // its registered factory (device.h, HAMI_REGISTER_VENDOR) parses the text.
  std::map<std::string, std::string> sections{};
  SchedulerPolicyConfig scheduler{};
  bool operator==(const DeviceConfig&) const = default;
};

// The nvidia section alone, with the defaults above and the chart's MIG allowlist (A30, A100
// 40/80 GB, H100 80/94 GB, H20/GH200, H200, B200, RTX PRO 6000): what the scheduler runs with
// when no --device-config-file is given.
DeviceConfig DefaultDeviceConfig();

// Parses a device-config.yaml text. Keys absent from a present section keep the defaults above.
// A document with none of HAMi's top-level sections is an error ("all configurations are
// empty"), as in HAMi. Never throws.
Result<DeviceConfig> LoadDeviceConfig(std::string_view yaml_text);

// Checks every value of `config` (the same checks LoadDeviceConfig applies), e.g. after flags
// override fields. Errors name the YAML path of the field.
Status ValidateDeviceConfig(const DeviceConfig& config);

}  // namespace hami::device

#endif  // HAMI_DEVICE_CONFIG_H_
