// The device configuration file `device-config.yaml` (docs/protocol.md#configuration-files): the
// scheduler reads it with --device-config-file, the device plugin with --config-file. Each
// top-level section belongs to the vendor backend registered for it (device.h
// HAMI_REGISTER_VENDOR), which parses it with the defaults of the HAMi chart
// (charts/hami/templates/scheduler/device-configmap.yaml); this file knows no section but the
// scheduler's own, so DefaultDeviceConfig() is what an unmodified install runs with: every
// registered vendor with its chart defaults.
//
// Loading is strict about values and lenient about keys: a wrong type or an out-of-range value is
// an error naming the YAML path (`nvidia.deviceSplitCount: want a positive integer, got "x"`);
// keys and sections no backend knows are ignored, as HAMi's loader ignores them, so a config
// written for a newer HAMi still loads.
#ifndef HAMI_DEVICE_CONFIG_H_
#define HAMI_DEVICE_CONFIG_H_

#include <map>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hami::device {

// The scheduler's policy defaults. HAMi takes them from flags (--node-scheduler-policy,
// --gpu-scheduler-policy); we also accept them in an optional top-level `scheduler` section
// (`nodeSchedulerPolicy`, `gpuSchedulerPolicy`) so a simulation scenario can carry them.
struct SchedulerPolicyConfig {
  std::string node_scheduler_policy = "binpack";  // "binpack" or "spread"
  std::string gpu_scheduler_policy = "spread";    // policy chain, see policy.h
  bool operator==(const SchedulerPolicyConfig&) const = default;
};

struct DeviceConfig {
  // Every top-level section present and not null, by name ("nvidia", "hygon", "iluvatars",
  // "vnpus", ...; the `scheduler` section aside), as YAML text ("" for a section to take its
  // vendor's defaults). A vendor is active when its section is here; its registered factory
  // (device.h, HAMI_REGISTER_VENDOR) parses the text. Sections no vendor registered are kept
  // and ignored.
  std::map<std::string, std::string> sections{};
  SchedulerPolicyConfig scheduler{};
  bool operator==(const DeviceConfig&) const = default;
};

// Every registered vendor's section with the defaults of HAMi's chart (an empty text each: a
// factory given no section takes the chart's values), and the scheduler defaults: what the
// scheduler runs with when no --device-config-file is given.
DeviceConfig DefaultDeviceConfig();

// Parses a device-config.yaml text; each registered section present is parsed by its vendor's
// factory (the first failing one is the error). A document with no registered vendor's section
// is an error ("all configurations are empty"), as in HAMi. Never throws.
Result<DeviceConfig> LoadDeviceConfig(std::string_view yaml_text);

// Checks every value of `config` (the same checks LoadDeviceConfig applies: the scheduler
// section, and each present section through its vendor's factory), e.g. after code changed it.
// Errors name the YAML path of the field.
Status ValidateDeviceConfig(const DeviceConfig& config);

}  // namespace hami::device

#endif  // HAMI_DEVICE_CONFIG_H_
