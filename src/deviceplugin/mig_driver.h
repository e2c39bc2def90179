// What the device plugin asks of the driver about MIG (docs/MIG.md "Device plugin"): a GPU's
// MIG mode, its GPU instance profiles with their placements, the instances that exist, and
// creating or destroying one. NvmlDiscovery (nvml.h) implements it over libnvidia-ml; tests
// run it against the fake library in tests/deviceplugin. GPUs are named by NVML index.
#ifndef HAMI_DEVICEPLUGIN_MIG_DRIVER_H_
#define HAMI_DEVICEPLUGIN_MIG_DRIVER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "protocol/node_register.h"  // MigPlacement

namespace hami::deviceplugin {

// What NVML reports for one GPU instance profile of a GPU (nvmlGpuInstanceProfileInfo_t and
// nvmlDeviceGetGpuInstancePossiblePlacements).
struct GpuInstanceProfile {
  uint32_t profile_id = 0;       // NVML_GPU_INSTANCE_PROFILE_*: 0 = 1 slice, 1 = 2, 2 = 3, 3 = 4,
                                 // 4 = 7, 5 = 8, 6 = 6 slices
  uint32_t slice_count = 0;      // compute slices
  uint32_t instance_count = 0;   // how many fit on an empty GPU
  uint32_t multiprocessors = 0;  // SMs of one instance
  int64_t memory_mib = 0;
  std::vector<protocol::MigPlacement> placements{};
  bool operator==(const GpuInstanceProfile&) const = default;
};

// One GPU instance and, once created, the compute instance spanning it (the MIG device).
struct MigInstance {
  uint32_t gpu_instance_id = 0;
  uint32_t profile_id = 0;  // NVML_GPU_INSTANCE_PROFILE_* of the GPU instance
  protocol::MigPlacement placement{};
  std::optional<uint32_t> compute_instance_id{};  // absent: no compute instance yet
  std::string mig_uuid{};                         // "MIG-..."; "" without a compute instance
  bool operator==(const MigInstance&) const = default;
};

// Thread-compatible: callers serialise calls (MigManager holds its lock around each).
class MigDriver {
 public:
  virtual ~MigDriver() = default;
  // Whether GPU `gpu` is in MIG mode now (current mode; a pending change does not count).
  // A GPU without MIG support answers false.
  virtual Result<bool> MigEnabled(uint32_t gpu) = 0;
  // The GPU instance profiles the GPU offers (profile ids 0..6 that NVML answers).
  virtual Result<std::vector<GpuInstanceProfile>> GpuInstanceProfiles(uint32_t gpu) = 0;
  // Every GPU instance of the GPU, by GPU instance id.
  virtual Result<std::vector<MigInstance>> MigInstances(uint32_t gpu) = 0;
  // Creates a GPU instance of `profile_id` at exactly `placement` (never elsewhere).
  virtual Result<MigInstance> CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                                protocol::MigPlacement placement) = 0;
  // Creates the compute instance spanning GPU instance `gpu_instance_id` (shared engines) and
  // returns the instance with its compute instance id and MIG UUID.
  virtual Result<MigInstance> CreateComputeInstance(uint32_t gpu, uint32_t gpu_instance_id) = 0;
  // Destroys the GPU instance's compute instances, then the GPU instance. A GPU instance that
  // is already gone is not an error.
  virtual Status DestroyGpuInstance(uint32_t gpu, uint32_t gpu_instance_id) = 0;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_MIG_DRIVER_H_
