// Device discovery for the NVIDIA device plugin: one interface, two implementations (NVML loaded
// with dlopen, nvml.h; an inventory file, inventory.h), so a node without a GPU, a simulation or
// a test runs the same plugin code as a GPU node.
#ifndef HAMI_DEVICEPLUGIN_DISCOVERY_H_
#define HAMI_DEVICEPLUGIN_DISCOVERY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "protocol/node_register.h"

namespace hami::deviceplugin {

// One MIG profile a GPU offers in MIG mode (mig_profiles.h): what is registered, plus how many
// instances of it fit on the empty GPU (not registered; the register `count` is their maximum).
struct MigProfileCapacity {
  protocol::MigProfile profile{};
  uint32_t instance_count = 0;
  bool operator==(const MigProfileCapacity&) const = default;
};

// One physical GPU as discovered on this node.
struct GpuDevice {
  uint64_t index = 0;      // position on the node (NVML index)
  std::string uuid{};      // "GPU-0fc3eda5-..."
  std::string model{};     // NVML name, e.g. "Tesla V100-PCIE-32GB"
  int64_t memory_mib = 0;  // total device memory
  int64_t numa = 0;        // NUMA node of the PCI device; 0 when unknown
  bool healthy = true;
  // MIG mode only: the allowlisted profiles the GPU offers (mig_profiles.h MigProfilesFor).
  std::vector<MigProfileCapacity> mig_profiles{};
  bool operator==(const GpuDevice&) const = default;
};

// What NVML tells about a GPU beyond GpuDevice, for the DRA plugin's device attributes (HAMi's
// k8s-dra-driver publishes them). Strings empty where the library lacks the call or it failed;
// versions as semantic versions ("8.0.0", "550.54.15", "12.4.0").
struct GpuAttributes {
  int minor = -1;  // /dev/nvidia<minor>; -1 unknown (then the index is used)
  std::string brand{};
  std::string architecture{};
  std::string cuda_compute_capability{};
  std::string driver_version{};
  std::string cuda_driver_version{};
  std::string pcie_bus_id{};
  bool operator==(const GpuAttributes&) const = default;
};

class Discovery {
 public:
  virtual ~Discovery() = default;
  // The GPUs of this node in index order. Called again on every publish tick, so it must
  // reflect health changes. Thread-compatible: callers serialise calls.
  virtual Result<std::vector<GpuDevice>> Discover() = 0;
  // "nvml" or "inventory:<path>", for logs.
  virtual std::string Name() const = 0;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_DISCOVERY_H_
