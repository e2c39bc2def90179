// The Allocate answer as a pure function (docs/protocol.md#device-plugin-api-and-allocate): from
// the pod's pending `hami.io/vgpu-devices-to-allocate` entries and kubelet's container requests to
// the env, mounts and annotations of each container, plus the annotation value left afterwards. No
// I/O: the caller (allocator.h) reads the pod, supplies fresh cache ids and writes the result.
#ifndef HAMI_DEVICEPLUGIN_ALLOCATE_H_
#define HAMI_DEVICEPLUGIN_ALLOCATE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "deviceplugin/plugin_config.h"
#include "protocol/mig_allocations.h"
#include "protocol/pod_devices.h"
#include "protocol/vendor.h"

namespace hami::deviceplugin {

// NVIDIA's keys from the vendor table (protocol/vendor.h).
inline constexpr std::string_view kToAllocateKey = protocol::kNvidiaToAllocateKey;
inline constexpr std::string_view kNvidiaVendorKey = protocol::kNvidiaVendorKey;
// Where the volume-mounts strategy lists devices inside the container.
inline constexpr std::string_view kContainerDevicesDir = "/var/run/nvidia-container-devices";

enum class DeviceListStrategy { kEnvvar, kVolumeMounts, kCdiAnnotations };
// "envvar", "volume-mounts", "cdi-annotations"; errors name the flag and value.
Result<DeviceListStrategy> ParseDeviceListStrategy(std::string_view value);

struct MountSpec {
  std::string container_path;
  std::string host_path;
  bool read_only = false;
  bool operator==(const MountSpec&) const = default;
};

// A file the device plugin writes on the host before it answers kubelet.
struct FileSpec {
  std::string host_path;
  std::string content;
  unsigned mode = 0644;
  bool operator==(const FileSpec&) const = default;
};

// libvgpu reads its limits from this file beside itself (docs/vgpu.md "Limits file"); the
// container sees it read-only at <hook>/vgpu/vgpu.limits.
inline constexpr std::string_view kLimitsFileName = "vgpu.limits";

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<MountSpec> mounts;
  std::vector<FileSpec> files;  // the limits file, the (empty) region file
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;
  bool operator==(const ContainerAllocation&) const = default;
};

// Everything outside the pod that shapes the answer.
struct AllocateEnv {
  std::string hook_path = "/usr/local";  // HOOK_PATH
  // Host path of the library mounted at <hook>/vgpu/libvgpu.so: <hook>/vgpu/libvgpu.so.<version>
  // when that file exists; "" means <hook>/vgpu/libvgpu.so.
  std::string libvgpu_host_path;
  bool license_present = false;  // <hook>/vgpu/license exists
  PluginConfig config;
  DeviceListStrategy strategy = DeviceListStrategy::kEnvvar;
  // MPS mode: the host directory with one <GPU UUID>/{pipe,log} pair per control daemon.
  std::string mps_root = "/run/nvidia/mps";
};

// What a container's own resources entitle it to per device (HAMi ValidateContainerAllocation):
// nvidia.com/gpumem x memoryFactor (or defaultMemory) MiB, nvidia.com/gpucores (or defaultCores)
// percent; nullopt = not bounded (a percentage: the card's memory is not known here; cores 0).
struct ContainerRequestLimit {
  std::optional<int64_t> memory_mib{};
  std::optional<int32_t> cores{};
  bool operator==(const ContainerRequestLimit&) const = default;
};

// One container of the pod in the annotation's index space (init containers first).
struct ContainerInfo {
  std::string name;
  bool disable_control = false;    // its env CUDA_DISABLE_CONTROL parses as true
  std::string task_priority = "";  // its env CUDA_TASK_PRIORITY (set by the webhook), "" if none
  ContainerRequestLimit limit{};   // from its limits (else requests); unbounded when unknown
};

struct PodView {
  std::string ns, name, uid;
  std::vector<ContainerInfo> containers;
  std::string to_allocate;  // the raw annotation value
};

// <hook>/vgpu/containers/<podUID>_<container>: the host side of the per-container cache dir.
std::string ContainerCacheHostDir(std::string_view hook_path, std::string_view pod_uid,
                                  std::string_view container);

// <hook>/vgpu/limits/<podUID>_<container>.limits: the host side of the container's read-only
// limits file. Outside the container's writable cache dir, so the container cannot change it.
std::string ContainerLimitsHostPath(std::string_view hook_path, std::string_view pod_uid,
                                    std::string_view container);

// The limits file's content: a comment line, then NAME=VALUE for each limit variable among
// `envs` (CUDA_DEVICE_MEMORY_LIMIT_<i>, CUDA_DEVICE_SM_LIMIT, CUDA_DEVICE_MEMORY_SHARED_CACHE,
// GPU_CORE_UTILIZATION_POLICY, CUDA_TASK_PRIORITY), in name order. GPU_CORE_UTILIZATION_POLICY
// is always present ("default" when `envs` has none).
// `writer` names the component in the comment line.
std::string LimitsFileContent(const std::map<std::string, std::string>& envs,
                              std::string_view writer = "hami-device-plugin");

// kubelet's replica ID "<uuid>-<n>" back to the UUID: the suffix is stripped when the ID has
// exactly 6 dashes (GPU UUIDs have 5).
std::string StripReplicaSuffix(std::string_view id);

// The answer for one container given its devices; `cache_id` names the shared cache file.
ContainerAllocation BuildContainerAllocation(const protocol::ContainerDevices& devices,
                                             const ContainerInfo& container,
                                             std::string_view pod_uid, std::string_view cache_id,
                                             const AllocateEnv& env);

// MIG mode (docs/MIG.md "Device plugin"): a container's answer is its MIG devices only, by the
// device list strategy (NVIDIA_VISIBLE_DEVICES, volume mounts or CDI); no HAMi-core limiter,
// since the instance is the hardware limit. `cache_id` names the CDI annotation.
ContainerAllocation BuildMigContainerAllocation(const std::vector<std::string>& mig_uuids,
                                                std::string_view cache_id, const AllocateEnv& env);

// The reservations of annotation container `container_index`, by device index; there must be
// one per device of `devices`, on the same GPU. Errors name the container and the mismatch.
Result<std::vector<protocol::MigAllocation>> ContainerMigReservations(
    const std::vector<protocol::MigAllocation>& all, size_t container_index,
    const protocol::ContainerDevices& devices);

struct AllocationPlan {
  std::vector<ContainerAllocation> containers;  // one per request, in request order
  std::vector<size_t> consumed;                 // annotation indices served, in request order
  std::string remaining;                        // to-allocate value with those entries emptied
};

// Serves kubelet's requests (device ID lists, in kubelet order) positionally: each takes the
// first still non-empty entry; its device count must equal the request's, and outside MIG mode
// no device of it may hold more memory or cores than the container's own request
// (ContainerInfo::limit; HAMi #3075): `container "main" is allocated 8000 MB on device "GPU-a"
// but requests 3000 MB`, `... is allocated 80% of the cores on device "GPU-a" but requests 30%`.
// `new_cache_id` is called once per container. Errors name the container index and reason, e.g.
// "container 1: device number not matched: annotation has 2, kubelet asked for 1".
Result<AllocationPlan> PlanAllocate(const PodView& pod,
                                    const std::vector<std::vector<std::string>>& requests,
                                    const AllocateEnv& env,
                                    const std::function<std::string()>& new_cache_id);

// GetPreferredAllocation: for each request, replica IDs (from `available`) of the GPUs in the
// pod's next not yet preferred non-empty entries, `size` of them, first replica first. Falls
// back to the first `size` available IDs when the annotation does not name enough.
std::vector<std::vector<std::string>> PreferReplicas(
    const protocol::PodDevices& pod, const std::vector<std::vector<std::string>>& available,
    const std::vector<int32_t>& sizes);

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_ALLOCATE_H_
