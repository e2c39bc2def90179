#include "deviceplugin/simulated_mig_driver.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "deviceplugin/mig_profiles.h"

namespace hami::deviceplugin {

SimulatedMigDriver::SimulatedMigDriver(std::map<uint32_t, Gpu> gpus) {
  for (auto& [index, gpu] : gpus) gpus_[index].gpu = std::move(gpu);
}

Result<SimulatedMigDriver::State*> SimulatedMigDriver::Find(uint32_t gpu) {
  auto it = gpus_.find(gpu);
  if (it == gpus_.end()) {
    // NVML_ERROR_INVALID_ARGUMENT, as nvmlDeviceGetHandleByIndex answers an index past the end.
    return Error{"nvmlDeviceGetHandleByIndex_v2(" + std::to_string(gpu) + ") failed: NVML error 2"};
  }
  return &it->second;
}

Result<bool> SimulatedMigDriver::MigEnabled(uint32_t gpu) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = Find(gpu);
  if (!s) return std::move(s).take_error();
  return (*s)->gpu.mig_enabled;
}

Result<std::vector<GpuInstanceProfile>> SimulatedMigDriver::GpuInstanceProfiles(uint32_t gpu) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = Find(gpu);
  if (!s) return std::move(s).take_error();
  return SimulatedGpuInstanceProfiles((*s)->gpu.model, (*s)->gpu.memory_mib);
}

Result<std::vector<MigInstance>> SimulatedMigDriver::MigInstances(uint32_t gpu) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = Find(gpu);
  if (!s) return std::move(s).take_error();
  return (*s)->instances;
}

Result<MigInstance> SimulatedMigDriver::CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                                          protocol::MigPlacement at) {
  std::lock_guard<std::mutex> lock(mu_);
  auto found = Find(gpu);
  if (!found) return std::move(found).take_error();
  State& s = **found;
  const std::string call = "nvmlDeviceCreateGpuInstanceWithPlacement(GPU " + std::to_string(gpu) +
                           ", profile " + std::to_string(profile_id) + ", start " +
                           std::to_string(at.start) + ")";
  if (!s.gpu.mig_enabled) return Error{call + " failed: NVML error 3"};  // NOT_SUPPORTED
  const auto profiles = SimulatedGpuInstanceProfiles(s.gpu.model, s.gpu.memory_mib);
  auto profile = std::find_if(profiles.begin(), profiles.end(), [&](const GpuInstanceProfile& p) {
    return p.profile_id == profile_id;
  });
  if (profile == profiles.end() || std::find(profile->placements.begin(), profile->placements.end(),
                                             at) == profile->placements.end()) {
    return Error{call + " failed: NVML error 2"};  // INVALID_ARGUMENT
  }
  for (const MigInstance& i : s.instances) {
    if (at.start < i.placement.start + i.placement.size && i.placement.start < at.start + at.size) {
      return Error{call + " failed: NVML error 23"};  // INSUFFICIENT_RESOURCES
    }
  }
  MigInstance inst;
  inst.gpu_instance_id = s.next_gpu_instance++;
  inst.profile_id = profile_id;
  inst.placement = at;
  s.instances.push_back(inst);
  return inst;
}

Result<MigInstance> SimulatedMigDriver::CreateComputeInstance(uint32_t gpu,
                                                              uint32_t gpu_instance_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto found = Find(gpu);
  if (!found) return std::move(found).take_error();
  for (MigInstance& i : (*found)->instances) {
    if (i.gpu_instance_id != gpu_instance_id) continue;
    if (!i.compute_instance_id) {
      i.compute_instance_id = 0;
      // A MIG UUID: the parent's first group, then the instance and a serial.
      const std::string& parent = (*found)->gpu.uuid;
      char buf[64];
      std::snprintf(buf, sizeof buf, "-%02u%02u-%04llx", gpu, gpu_instance_id,
                    static_cast<unsigned long long>(++serial_ & 0xffff));
      i.mig_uuid = "MIG-" + parent.substr(parent.rfind("GPU-", 0) == 0 ? 4 : 0, 8) + buf;
    }
    return i;
  }
  return Error{"nvmlGpuInstanceGetComputeInstanceProfileInfo(GPU " + std::to_string(gpu) +
               ", GPU instance " + std::to_string(gpu_instance_id) + ") failed: NVML error 6"};
}

Status SimulatedMigDriver::DestroyGpuInstance(uint32_t gpu, uint32_t gpu_instance_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto found = Find(gpu);
  if (!found) return std::move(found).take_error();
  std::erase_if((*found)->instances,
                [&](const MigInstance& i) { return i.gpu_instance_id == gpu_instance_id; });
  return OkStatus();
}

}  // namespace hami::deviceplugin
