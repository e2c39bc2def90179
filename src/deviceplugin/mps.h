// MPS mode (`operatingmode: mps`, docs/MIG.md "MPS"): what a container gets on top of the
// HAMi-core answer so its CUDA clients talk to the MPS control daemon of its GPU, with the SM
// share and memory limit the scheduler gave it. Pure; the daemons themselves are the host's.
#ifndef HAMI_DEVICEPLUGIN_MPS_H_
#define HAMI_DEVICEPLUGIN_MPS_H_

#include <string>
#include <string_view>

#include "deviceplugin/allocate.h"
#include "protocol/pod_devices.h"

namespace hami::deviceplugin {

inline constexpr std::string_view kMpsOperatingMode = "mps";
// Where a container finds the daemon's pipe and log directories.
inline constexpr std::string_view kMpsContainerPipeDir = "/tmp/nvidia-mps";
inline constexpr std::string_view kMpsContainerLogDir = "/tmp/nvidia-mps-log";

// <root>/<uuid>/pipe and <root>/<uuid>/log: the host directories of GPU `uuid`'s daemon.
std::string MpsPipeHostDir(std::string_view root, std::string_view uuid);
std::string MpsLogHostDir(std::string_view root, std::string_view uuid);

// Adds to `out` for a container holding `devices` (nothing when it holds none):
// CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY with their mounts (read-write) from the
// first device's daemon under `root`; CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = the first device's
// cores when in 1..99 (0 and 100 leave the SMs unlimited); CUDA_MPS_PINNED_DEVICE_MEM_LIMIT =
// "0=<MiB>M,1=<MiB>M,..." for the devices with a memory limit, by container device ordinal.
void AddMpsSettings(const protocol::ContainerDevices& devices, std::string_view root,
                    ContainerAllocation* out);

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_MPS_H_
