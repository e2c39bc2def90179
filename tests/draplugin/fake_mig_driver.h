// An in-memory MigDriver for the DRA plugin's tests: GPUs by NVML index, each in MIG mode or
// not, offering the A100-80GB geometry (mig_profiles.h SimulatedGpuInstanceProfiles), with the
// instances that exist. Creating a GPU instance over slices another instance holds fails as NVML
// does (NVML_ERROR_INSUFFICIENT_RESOURCES); every create and destroy is counted.
#ifndef HAMI_TESTS_DRAPLUGIN_FAKE_MIG_DRIVER_H_
#define HAMI_TESTS_DRAPLUGIN_FAKE_MIG_DRIVER_H_

#include <map>
#include <string>
#include <vector>

#include "deviceplugin/mig_driver.h"
#include "deviceplugin/mig_profiles.h"

namespace hami::draplugin::testing {

class FakeMigDriver : public deviceplugin::MigDriver {
 public:
  struct Gpu {
    bool mig_enabled = true;
    std::vector<deviceplugin::MigInstance> instances{};
  };

  // GPU `index` exists, in MIG mode or not.
  void AddGpu(uint32_t index, bool mig_enabled) { gpus_[index].mig_enabled = mig_enabled; }
  const std::vector<deviceplugin::MigInstance>& instances(uint32_t gpu) {
    return gpus_[gpu].instances;
  }
  int creates = 0;   // GPU and compute instances created
  int destroys = 0;  // GPU instances destroyed

  Result<bool> MigEnabled(uint32_t gpu) override {
    auto it = gpus_.find(gpu);
    if (it == gpus_.end())
      return Error{"nvmlDeviceGetHandleByIndex_v2(" + std::to_string(gpu) +
                   ") failed: NVML error 2"};
    return it->second.mig_enabled;
  }
  Result<std::vector<deviceplugin::GpuInstanceProfile>> GpuInstanceProfiles(uint32_t) override {
    return deviceplugin::SimulatedGpuInstanceProfiles("NVIDIA A100-SXM4-80GB", 81920);
  }
  Result<std::vector<deviceplugin::MigInstance>> MigInstances(uint32_t gpu) override {
    return gpus_[gpu].instances;
  }
  Result<deviceplugin::MigInstance> CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                                      protocol::MigPlacement at) override {
    Gpu& g = gpus_[gpu];
    for (const auto& i : g.instances) {
      if (at.start < i.placement.start + i.placement.size &&
          i.placement.start < at.start + at.size) {
        return Error{"nvmlDeviceCreateGpuInstanceWithPlacement for GPU " + std::to_string(gpu) +
                     " failed: NVML error 23"};
      }
    }
    ++creates;
    deviceplugin::MigInstance inst;
    inst.gpu_instance_id = next_gi_++;
    inst.profile_id = profile_id;
    inst.placement = at;
    g.instances.push_back(inst);
    return inst;
  }
  Result<deviceplugin::MigInstance> CreateComputeInstance(uint32_t gpu, uint32_t gi) override {
    for (auto& i : gpus_[gpu].instances) {
      if (i.gpu_instance_id != gi) continue;
      ++creates;
      i.compute_instance_id = 0;
      i.mig_uuid =
          "MIG-" + std::to_string(gpu) + "-" + std::to_string(gi) + "-" + std::to_string(serial_++);
      return i;
    }
    return Error{"nvmlDeviceGetGpuInstanceById failed: NVML error 6"};
  }
  Status DestroyGpuInstance(uint32_t gpu, uint32_t gi) override {
    auto& list = gpus_[gpu].instances;
    std::erase_if(list, [&](const deviceplugin::MigInstance& i) {
      if (i.gpu_instance_id != gi) return false;
      ++destroys;
      return true;
    });
    return OkStatus();
  }

 private:
  std::map<uint32_t, Gpu> gpus_;
  uint32_t next_gi_ = 1;
  uint32_t serial_ = 100;
};

}  // namespace hami::draplugin::testing

#endif  // HAMI_TESTS_DRAPLUGIN_FAKE_MIG_DRIVER_H_
