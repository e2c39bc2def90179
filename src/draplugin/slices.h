// The ResourceSlices hami-dra-plugin publishes for its node (docs/DRA.md "ResourceSlices"): one
// pool named after the node, one device per physical GPU that many claims may share by `memory`
// and `cores` (wire-compatible with HAMi's k8s-dra-driver: driver hami-core-gpu.project-hami.io,
// devices hami-gpu-<minor>), and for a GPU in MIG mode its MIG placements as partitionable
// devices drawing on a per-GPU counter set instead, so no claim gets a MIG instance and a share
// of the same GPU. Pure functions: the caller writes the objects.
#ifndef HAMI_DRAPLUGIN_SLICES_H_
#define HAMI_DRAPLUGIN_SLICES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "deviceplugin/discovery.h"

namespace hami::draplugin {

using Json = nlohmann::json;

// The driver name, DeviceClass name and attribute domain (HAMi's k8s-dra-driver).
inline constexpr std::string_view kDriverName = "hami-core-gpu.project-hami.io";
// The `type` attribute of a shareable GPU and of a MIG instance.
inline constexpr std::string_view kGpuType = "hami-gpu";
inline constexpr std::string_view kMigType = "hami-mig";
inline constexpr std::string_view kResourceApiVersion = "resource.k8s.io/v1";

// The API's limits (KEP-4815), checked before anything is written: an invalid pool makes every
// device of the node unallocatable.
inline constexpr size_t kMaxDevicesPerSlice = 128;
inline constexpr size_t kMaxAttributesAndCapacities = 32;
inline constexpr size_t kMaxCounterSetsPerSlice = 8;
inline constexpr size_t kMaxCountersPerSet = 32;
inline constexpr size_t kMaxConsumesCountersPerDevice = 2;

// A GPU as the DRA plugin describes it: what device discovery reports, plus the attributes
// HAMi's driver publishes. `attributes.minor` < 0 means the GPU's index.
struct GpuFacts {
  deviceplugin::GpuDevice gpu{};
  deviceplugin::GpuAttributes attributes{};
  int minor() const {
    return attributes.minor >= 0 ? attributes.minor : static_cast<int>(gpu.index);
  }
};

struct SliceOptions {
  std::string node_name{};
  // deviceMemoryScaling of the device plugin's config: the `memory` capacity published is the
  // GPU's memory times this (> 1 oversubscribes, as the device plugin's registration does).
  double memory_scaling = 1.0;
};

// "hami-gpu-<minor>".
std::string GpuDeviceName(int minor);
// "hami-gpu-<minor>-counters": the counter set of a GPU in MIG mode.
std::string CounterSetName(int minor);
// "hami-gpu-<minor>-mig-<profile with '.' as '-'>-<start>", e.g. hami-gpu-0-mig-1g-10gb-3.
std::string MigDeviceName(int minor, std::string_view profile, uint32_t start);
// The GPU minor a device or counter-set name above carries ("hami-gpu-3", "hami-gpu-3-counters",
// "hami-gpu-3-mig-1g-10gb-0" -> 3); -1 for a name of another form.
int DeviceNameMinor(std::string_view name);

// A byte count as Kubernetes writes a BinarySI quantity: the largest of Ki..Ei that divides it
// exactly ("80Gi", "3000Mi"), else the plain number.
std::string FormatBinaryBytes(int64_t bytes);

// The device entry of a shareable GPU (attributes, capacity with request policies,
// allowMultipleAllocations; a `taints` entry hami.io/unhealthy NoSchedule when unhealthy).
Json ShareableGpuDevice(const GpuFacts& gpu, double memory_scaling);

// Every ResourceSlice of the node's pool at `generation`: the shareable GPUs (and MIG devices)
// in slices of at most kMaxDevicesPerSlice, and the counter sets of GPUs in MIG mode in a slice
// of their own, named "<node>-hami-core-gpu-<i>"; every slice carries resourceSliceCount. Each
// is checked with ValidateSlice; the first violation is the error. No GPUs: no slices.
Result<std::vector<Json>> BuildSlices(const std::vector<GpuFacts>& gpus,
                                      const SliceOptions& options, int64_t generation);

// The API's checks on one slice that a driver can get wrong: device count, attributes plus
// capacities per device, counter sets and counters, consumed counter sets per device (each
// naming a set of `pool_counter_sets`), requestPolicy only with allowMultipleAllocations, and
// sharedCounters only in a slice without devices. Errors name the field path.
Status ValidateSlice(const Json& slice, const std::vector<std::string>& pool_counter_sets);

// Whether the pool must be written again: the desired slices differ from the published ones
// in anything but metadata and the pool generation. The caller then bumps the generation.
bool PoolChanged(const std::vector<Json>& published, const std::vector<Json>& desired);

}  // namespace hami::draplugin

#endif  // HAMI_DRAPLUGIN_SLICES_H_
