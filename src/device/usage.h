// The values fit and score work on: a container's normalised request per vendor, a device's
// capacity and current usage, a node's devices, and the collapse of a pod's per-container
// allocation into per-device usage (docs/protocol.md#usage-of-a-pod). Plain data and pure
// functions.
#ifndef HAMI_DEVICE_USAGE_H_
#define HAMI_DEVICE_USAGE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "protocol/mig_allocations.h"
#include "protocol/node_register.h"
#include "protocol/pair_score.h"
#include "protocol/pod_devices.h"

namespace hami::device {

// "Percentage not given": HAMi's sentinel, so a request with Memreq 0 and this value falls back
// to the configured default.
inline constexpr int32_t kPercentUnset = 101;

// One container's request for one vendor's devices (HAMi ContainerDeviceRequest).
struct DeviceRequest {
  int32_t nums = 0;                        // devices wanted; 0 = no request
  std::string type{};                      // vendor key, e.g. "NVIDIA"
  int32_t memreq = 0;                      // MiB per device (already x memoryFactor); 0 = use pct
  int32_t mem_percentage = kPercentUnset;  // percent of a device's memory, 0..100 or 101
  int32_t coresreq = 0;                    // percent of a device's SMs (may exceed 100; fit clamps)
  bool operator==(const DeviceRequest&) const = default;
};

// A container's requests by vendor key.
using ContainerRequests = std::map<std::string, DeviceRequest>;

// A pod's requests: one entry per container, init containers first (positional like PodDevices).
struct PodRequests {
  size_t init_count = 0;
  std::vector<ContainerRequests> containers{};
  bool Empty() const;  // true when no container requests anything
};

// One MIG instance reserved on a GPU (docs/protocol.md#mig): its profile and placement, and the
// runtime identity once the device plugin created it.
struct MigInstance {
  std::string profile{};
  protocol::MigPlacement placement{};
  std::optional<protocol::MigRuntimeIdentity> runtime{};
  bool operator==(const MigInstance&) const = default;
};

// One physical device with its capacity (from registration) and its usage (from pods).
struct DeviceUsage {
  std::string id{};      // UUID
  uint64_t index = 0;    // position on the node
  std::string type{};    // model as registered, e.g. "NVIDIA A100-SXM4-40GB"
  std::string vendor{};  // vendor key of the backend that registered it, e.g. "NVIDIA"
  bool health = false;
  // The pods' MIG state contradicts the device (a MIG GPU used without a reservation, a
  // reservation on a non-MIG GPU or on a GPU the node does not have): Fit treats the device as
  // unhealthy until the state is consistent again (docs/protocol.md#mig).
  bool mig_inconsistent = false;
  std::string mode{};  // "hami-core", "mig", "mps"
  int64_t numa = 0;
  int32_t count = 0;     // split count: concurrent vGPUs allowed
  int32_t used = 0;      // vGPUs in use
  int32_t totalmem = 0;  // MiB
  int32_t usedmem = 0;
  int32_t totalcore = 0;  // percent
  int32_t usedcores = 0;
  // MIG mode: the profiles the GPU offers (registration) and the instances reserved on it (pods'
  // hami.io/vgpu-mig-allocations, in the order the index saw them).
  std::vector<protocol::MigProfile> mig_profiles{};
  std::vector<MigInstance> mig_in_use{};
  // What a vendor registers beside the common fields (HAMi DeviceInfo.CustomInfo), by key, as
  // text: e.g. Ascend's "NetworkID" ("3", its HCCS ring), MetaX sGPU's "QosPolicy".
  std::map<std::string, std::string, std::less<>> custom_info{};
  // The pods on the device by the tag their backend gives them (Device::UsageTag, e.g. MetaX
  // sGPU's app class "online"/"offline"): tag -> device entries of such pods, counted like
  // `used` (max(slots, 1) per pod). HAMi keeps the pods themselves (DeviceUsage.PodInfos); a
  // vendor reads only this reduction of them. Untagged pods are not listed; empty for every
  // backend that defines no tag. Usage index only: a pick in the running decision adds none
  // (HAMi's AddResourceUsage appends no PodInfo either).
  std::map<std::string, int32_t, std::less<>> pod_tags{};
  bool operator==(const DeviceUsage&) const = default;
};

// A usage row with zero usage from a registered device.
DeviceUsage UsageFromDeviceInfo(const protocol::DeviceInfo& info, const std::string& vendor);

// One node's devices (all vendors) plus the node facts fit needs.
struct NodeUsage {
  std::string name{};
  std::vector<DeviceUsage> devices{};
  std::set<std::string> cordoned{};    // hami.io/device-cordon, trimmed, empties dropped
  protocol::PairScores pair_scores{};  // hami.io/node-nvidia-score
  bool operator==(const NodeUsage&) const = default;
};

// Parses the hami.io/device-cordon value: a CSV of UUIDs; blanks are trimmed and empty items
// dropped ("dev-1, " -> {"dev-1"}).
std::set<std::string> ParseCordon(std::string_view value);

// The usage one pod puts on one device after collapsing its containers
// (docs/protocol.md#usage-of-a-pod).
struct DeviceDelta {
  std::string uuid{};
  std::string vendor{};  // the Type field of the pod device string, e.g. "NVIDIA"
  int32_t usedmem = 0;
  int32_t usedcores = 0;
  int32_t slots = 0;  // vGPU slots held; the index adds max(slots, 1) to `used`
  std::string tag{};  // the pod's Device::UsageTag for this backend; "" = none
  bool operator==(const DeviceDelta&) const = default;
};

// Collapses one vendor's PodDevices (init containers first, `init_count` of them) into one delta
// per device UUID, sorted by UUID. Per UUID: init peak = per-field max over init containers
// (slots 1); app sum = sum over regular containers (slots = occurrences); result = per-field
// max(peak, sum), slots at least 1. With `init_done` (every init container exited 0) only the
// app sum counts. Containers past the end of the list hold nothing. Sums saturate at int32 max
// and negative sizes count as 0.
std::vector<DeviceDelta> CollapsePodDevices(const protocol::PodDevices& devices, size_t init_count,
                                            bool init_done);

// Adds (sign +1) or removes (sign -1) deltas on the matching devices of `devices` by UUID:
// used += sign*max(slots,1), usedmem += sign*usedmem, usedcores += sign*usedcores and, with a
// tag, pod_tags[tag] += sign*max(slots,1) (dropped at 0), a negative delta counting as 0 and each
// result kept within [0, int32 max] (a bad annotation never frees what is held). Deltas naming no
// device in the list are ignored.
void ApplyDeltas(const std::vector<DeviceDelta>& deltas, int sign,
                 std::vector<DeviceUsage>* devices);

}  // namespace hami::device

#endif  // HAMI_DEVICE_USAGE_H_
