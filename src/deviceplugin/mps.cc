#include "deviceplugin/mps.h"

namespace hami::deviceplugin {

std::string MpsPipeHostDir(std::string_view root, std::string_view uuid) {
  return std::string(root) + "/" + std::string(uuid) + "/pipe";
}

std::string MpsLogHostDir(std::string_view root, std::string_view uuid) {
  return std::string(root) + "/" + std::string(uuid) + "/log";
}

void AddMpsSettings(const protocol::ContainerDevices& devices, std::string_view root,
                    ContainerAllocation* out) {
  if (devices.empty()) return;
  const std::string& first = devices.front().uuid;
  out->envs["CUDA_MPS_PIPE_DIRECTORY"] = std::string(kMpsContainerPipeDir);
  out->envs["CUDA_MPS_LOG_DIRECTORY"] = std::string(kMpsContainerLogDir);
  out->mounts.push_back({std::string(kMpsContainerPipeDir), MpsPipeHostDir(root, first), false});
  out->mounts.push_back({std::string(kMpsContainerLogDir), MpsLogHostDir(root, first), false});
  const int32_t cores = devices.front().usedcores;
  if (cores > 0 && cores < 100) {
    out->envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(cores);
  }
  std::string limits;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].usedmem <= 0) continue;
    if (!limits.empty()) limits += ",";
    limits += std::to_string(i) + "=" + std::to_string(devices[i].usedmem) + "M";
  }
  if (!limits.empty()) out->envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = limits;
}

}  // namespace hami::deviceplugin
