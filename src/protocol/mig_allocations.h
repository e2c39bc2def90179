// MIG allocation annotation `hami.io/vgpu-mig-allocations` (docs/protocol.md#mig): the MIG instance
// the scheduler reserved for each (container, device) of a pod, plus the runtime identity the
// device plugin fills in after creating it:
//   [{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb",
//     "placement":{"start":6,"size":1},"migUUID":"MIG-x","gpuInstanceID":3,"computeInstanceID":0}]
// All functions here are pure and total.
#ifndef HAMI_PROTOCOL_MIG_ALLOCATIONS_H_
#define HAMI_PROTOCOL_MIG_ALLOCATIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "protocol/node_register.h"  // MigPlacement

namespace hami::protocol {

// What the device plugin learnt after creating the instance. Ids of 0 are valid.
struct MigRuntimeIdentity {
  std::string mig_uuid{};  // "migUUID"; must not be empty
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
  bool operator==(const MigRuntimeIdentity&) const = default;
};

struct MigAllocation {
  int64_t container_index = 0;  // positional, init containers first
  int64_t device_index = 0;     // position within the container's devices
  std::string gpu_uuid{};       // "gpuUUID"
  std::string profile{};        // e.g. "1g.5gb"
  MigPlacement placement;
  std::optional<MigRuntimeIdentity> runtime{};  // set by the device plugin
  bool operator==(const MigAllocation&) const = default;
};

// Compact JSON, keys in the order containerIndex, deviceIndex, gpuUUID, profile,
// placement{start,size}, then (only when runtime is set) migUUID, gpuInstanceID,
// computeInstanceID; Go's string escaping. An empty list encodes as "[]" (HAMi leaves the
// annotation out instead; that is the caller's choice).
std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations);

// "" and "null" decode to no allocations. Rejects (naming the allocation and field): invalid
// JSON, wrong types, out-of-range numbers, a negative index, an empty gpuUUID or profile, a
// placement size of 0, a partial runtime identity (migUUID, gpuInstanceID and computeInstanceID
// are all present or all absent; an empty migUUID counts as absent), and a duplicate
// (containerIndex, deviceIndex).
Result<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view value);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_MIG_ALLOCATIONS_H_
