// The `vnpus` section of device-config.yaml (HAMi VNPUs): one entry per Huawei Ascend chip
// family, keyed by its "common word" (e.g. "Ascend910B3"), which also builds the family's
// resource names and annotation keys (protocol::AscendVendor). Each entry lists the vNPU
// templates a device can be split into; a memory request is rounded up to the smallest template
// that holds it (docs/vendors/ascend.md).
#ifndef HAMI_DEVICE_VENDORS_ASCEND_ASCEND_CONFIG_H_
#define HAMI_DEVICE_VENDORS_ASCEND_ASCEND_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace YAML {
class Node;
}

namespace hami::device::ascend {

// One vNPU template (HAMi Template): a named hard slice of a device.
struct Template {
  std::string name{};   // e.g. "vir05_1c_16g"
  int64_t memory = 0;   // MiB
  int32_t ai_core = 0;  // "aiCore"
  int32_t ai_cpu = 0;   // "aiCPU"
  bool operator==(const Template&) const = default;
};

// One `vnpus.configs` entry (HAMi VNPUConfig). Absent keys keep these zero values, as HAMi's
// loader leaves them.
struct VnpuConfig {
  std::string common_word{};  // "commonWord": the vendor key, e.g. "Ascend910B3"
  std::string chip_name{};    // "chipName", e.g. "910B3"
  std::string resource_name{};
  std::string resource_memory_name{};
  std::string resource_core_name{};
  int64_t memory_allocatable = 0;  // MiB a whole device offers a pod
  int64_t memory_capacity = 0;     // MiB; larger requests are invalid
  int32_t memory_factor = 0;       // > 1 multiplies memory requests; 0 and 1 leave them
  int32_t ai_core = 0;
  int32_t ai_cpu = 0;
  std::string runtime_class_name{};
  bool overwrite_env = false;         // ASCEND_VISIBLE_DEVICES="" for containers without a request
  std::vector<Template> templates{};  // sorted by memory, ascending, after loading
  bool super_pod = false;             // "superPod": 910C module pairing in the webhook
  bool operator==(const VnpuConfig&) const = default;
};

// The whole section (HAMi VNPUs).
struct Vnpus {
  bool hami_vnpu_core = false;  // "hamiVnpuCore": nodes accept hami-core (soft split) pods
  std::vector<VnpuConfig> configs{};
  bool operator==(const Vnpus&) const = default;
};

// The chart's default section (charts/hami/templates/scheduler/device-configmap.yaml): 910A,
// 910B2, 910B3, 910B4-1, 910B4, 310P3 and 910C (superPod), runtimeClassName "" and
// overwriteEnv false.
Vnpus DefaultVnpus();

// Reads a `vnpus` node. Wrong types are errors naming the YAML path, e.g.
// `vnpus.configs[1].memoryCapacity: want an integer, got "x"`; an entry without a commonWord,
// or two entries with the same commonWord, is an error too (the common word is the vendor key).
// Unknown keys are ignored. Templates come back sorted by memory (stable). An empty section, or
// one without `configs`, has the chart's families (DefaultVnpus); `configs: []` has none.
Result<Vnpus> ParseVnpus(const YAML::Node& node);

// The same from YAML text holding the section's body (hamiVnpuCore, configs).
Result<Vnpus> ParseVnpusText(const std::string& yaml_text);

}  // namespace hami::device::ascend

#endif  // HAMI_DEVICE_VENDORS_ASCEND_ASCEND_CONFIG_H_
