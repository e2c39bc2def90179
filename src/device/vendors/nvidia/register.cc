// NVIDIA's self-registration (device.h HAMI_REGISTER_VENDOR): the `nvidia` section of
// device-config.yaml makes the NVIDIA backend active.
#include <yaml-cpp/yaml.h>

#include "device/vendors/nvidia/nvidia.h"

namespace hami::device::nvidia {
namespace {

// The `nvidia` section is read into DeviceConfig::nvidia by config.cc.
Result<std::vector<std::unique_ptr<Device>>> MakeNvidia(const YAML::Node& /*section*/,
                                                        const DeviceConfig& config) {
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<NvidiaDevice>(config.nvidia));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(nvidia, "nvidia", MakeNvidia);

}  // namespace hami::device::nvidia
