// What the NVIDIA device plugin reads from its configuration
// (docs/protocol.md#configuration-files): the `nvidia` section of device-config.yaml
// (--config-file) and the per-node overrides of config.json. A small struct of the fields the
// plugin uses; the YAML is read with the scheduler's loader (src/device/config.h), so both binaries
// accept and reject the same files.
#ifndef HAMI_DEVICEPLUGIN_PLUGIN_CONFIG_H_
#define HAMI_DEVICEPLUGIN_PLUGIN_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/vendors/nvidia/nvidia_config.h"
#include "protocol/vendor.h"

namespace hami::deviceplugin {

// `operatingmode` of a node whose GPUs are split into MIG instances (docs/MIG.md).
inline constexpr std::string_view kMigOperatingMode = "mig";

struct PluginConfig {
  std::string resource_name{protocol::kNvidiaCountResource};  // nvidia.resourceCountName
  int32_t device_split_count = 10;                            // >= 1
  double device_memory_scaling = 1.0;                         // > 0; > 1 sets CUDA_OVERSUBSCRIBE
  double device_core_scaling = 1.0;                           // > 0
  int64_t pre_configured_device_memory = 0;                   // MiB when NVML cannot report memory
  std::string lib_cuda_log_level = "1";                       // LIBCUDA_LOG_LEVEL when non-empty
  bool enable_numa_topology = false;         // attach NUMA topology in ListAndWatch
  bool disable_core_limit = false;           // GPU_CORE_UTILIZATION_POLICY=disable
  std::string operating_mode = "hami-core";  // "hami-core", "mps" or "mig"
  bool enable_preferred_allocation = false;  // Register option + UUIDs from kubelet's ids
  // What a container asks for, as the scheduler reads it (Allocate refuses more): nvidia.
  // memoryFactor, defaultMemory and defaultCores.
  int32_t memory_factor = 1;
  int32_t default_memory = 0;
  int32_t default_cores = 0;
  std::vector<std::string> filter_uuids{};  // GPUs hidden from the plugin
  std::vector<uint64_t> filter_indices{};
  // nvidia.migProfileAllowlist: the profiles a model may be split into in MIG mode.
  std::vector<device::nvidia::MigAllowlistEntry> mig_profile_allowlist =
      device::nvidia::DefaultMigProfileAllowlist();
  bool operator==(const PluginConfig&) const = default;
};

// Loads a device-config.yaml text with device::LoadDeviceConfig and takes the plugin's fields
// from its `nvidia` section (keys absent there take the chart defaults; without an `nvidia`
// section `base` is returned). Fields that only config.json sets (mode, filters, preferred
// allocation) keep their `base` value. Errors name the YAML path, e.g.
// `device config: nvidia.deviceSplitCount: want a positive integer, got "x"`.
Result<PluginConfig> ApplyDeviceConfigYaml(std::string_view yaml_text, PluginConfig base);

// Merges the `nodeconfig` entry whose name is `node_name` from a config.json text over `base`
// (present fields override). No entry for the node leaves `base` as is.
Result<PluginConfig> ApplyNodeConfigJson(std::string_view json_text, std::string_view node_name,
                                         PluginConfig base);

// Checks ranges: split count >= 1, scalings > 0, mode known.
Status ValidatePluginConfig(const PluginConfig& config);

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_PLUGIN_CONFIG_H_
