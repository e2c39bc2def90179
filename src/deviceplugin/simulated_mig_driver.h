// A MigDriver over simulated GPUs (hami-sim's nodes in DRA mode; docs/DRA.md "hami-sim in DRA
// mode"): each GPU by NVML index with its model, memory and MIG mode; profiles from
// SimulatedGpuInstanceProfiles (NVIDIA's geometry for the model); instances kept in memory.
// Creating a GPU instance over slices another instance holds, or at a placement the profile does
// not offer, fails as NVML does. Thread-safe.
#ifndef HAMI_DEVICEPLUGIN_SIMULATED_MIG_DRIVER_H_
#define HAMI_DEVICEPLUGIN_SIMULATED_MIG_DRIVER_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "deviceplugin/mig_driver.h"

namespace hami::deviceplugin {

class SimulatedMigDriver final : public MigDriver {
 public:
  struct Gpu {
    std::string model;
    int64_t memory_mib = 0;
    bool mig_enabled = false;
    std::string uuid;  // the parent GPU's; MIG UUIDs are derived from it
  };
  explicit SimulatedMigDriver(std::map<uint32_t, Gpu> gpus);

  Result<bool> MigEnabled(uint32_t gpu) override;
  Result<std::vector<GpuInstanceProfile>> GpuInstanceProfiles(uint32_t gpu) override;
  Result<std::vector<MigInstance>> MigInstances(uint32_t gpu) override;
  Result<MigInstance> CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                        protocol::MigPlacement placement) override;
  Result<MigInstance> CreateComputeInstance(uint32_t gpu, uint32_t gpu_instance_id) override;
  Status DestroyGpuInstance(uint32_t gpu, uint32_t gpu_instance_id) override;

 private:
  struct State {
    Gpu gpu;
    std::vector<MigInstance> instances;
    uint32_t next_gpu_instance = 1;
  };
  Result<State*> Find(uint32_t gpu);  // mu_ held

  std::mutex mu_;
  std::map<uint32_t, State> gpus_;
  uint64_t serial_ = 0;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_SIMULATED_MIG_DRIVER_H_
