// MIG profile discovery for the NVIDIA device plugin in `operatingmode: mig` (docs/MIG.md): which
// profiles a GPU registers under `migProfiles` of hami.io/node-nvidia-register
// (docs/MIG.md#the-wire-compatible-with-hami-v210), from what NVML reports for its GPU instance
// profiles and the `migProfileAllowlist` of device-config.yaml. Pure functions; NVML is read by
// nvml.cc, a simulated GPU by hami-sim.
#ifndef HAMI_DEVICEPLUGIN_MIG_PROFILES_H_
#define HAMI_DEVICEPLUGIN_MIG_PROFILES_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "device/vendors/nvidia/nvidia_config.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/mig_driver.h"
#include "protocol/node_register.h"

namespace hami::deviceplugin {

// The NVML GPU instance profile id for a profile name's slice part ("1g.5gb" -> 0 for 1 slice,
// "7g.40gb" -> 4); -1 when the name has no known slice count (HAMi's profileNameToGIProfileID).
int32_t GpuInstanceProfileId(std::string_view profile_name);

// HAMi discoverMigProfiles: for the first allowlist entry whose model list names a substring of
// `model` (case-sensitive), each allowlisted profile that the GPU offers (by its slice part),
// named as in the allowlist, with NVML's memory, slice count, instance count and placements;
// `core` = ceil(SMs x 100 / the largest profile's SMs). Allowlisted names the GPU does not offer
// are left out; no matching entry gives no profiles (the GPU is then not registered in MIG mode).
std::vector<MigProfileCapacity> MigProfilesFor(
    const std::vector<device::nvidia::MigAllowlistEntry>& allow, std::string_view model,
    const std::vector<GpuInstanceProfile>& offered);

// The GPU instance profiles of a simulated GPU (hami-sim and the fake libnvidia-ml): NVIDIA's
// geometry for the model (A30: 4 slices; A100, H100, H200, B200, GH200, H20: 7 slices), with the
// memory of each profile in proportion to `memory_mib`. Unknown models get the 7-slice geometry.
std::vector<GpuInstanceProfile> SimulatedGpuInstanceProfiles(std::string_view model,
                                                             int64_t memory_mib);

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_MIG_PROFILES_H_
