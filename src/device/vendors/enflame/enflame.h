// The Enflame backends (issue 15; HAMi v2.10 pkg/device/enflame): whole GCU devices counted from
// node capacity (vendor key "GCU"), and DRS slices of a GCU announced in the node annotation
// enflame.com/gcu-drs-capacity (vendor key "Enflame"). Plain functions over parsed values, so that
// the vendor's rules are testable on their own; the Device classes wrap them.
//
// GCU: `enflame.com/gcu: N` asks for N whole devices. A node with capacity C has devices
// "<node>-GCU-<i>" (i < C), each count 1, 100 "memory", 100 cores. Fit takes idle devices only
// (ExclusiveDeviceAllocateConflict otherwise). The scheduler writes the pod's devices under both
// hami.io/enflame-gcu-devices-to-allocate and hami.io/enflame-gcu-devices-allocated.
//
// DRS: a container asks either for a slice size directly (`enflame.com/drs-gcu: 3`, a profile
// "3g.<mem>gb") or by memory/cores (`enflame.com/gcu-memory`, `enflame.com/gcu-core`), which
// picks the smallest profile that covers both. The node annotation lists devices (index, minor,
// capacity = slices) and the node's profiles ("<size>g.<mem>gb" -> profile id). The scheduler
// writes hami.io/enflame-vgpu-devices-allocated plus the enflame.com/gcu-* annotations and
// `assigned-containers` that Enflame's device plugin reads.
#ifndef HAMI_DEVICE_VENDORS_ENFLAME_ENFLAME_H_
#define HAMI_DEVICE_VENDORS_ENFLAME_ENFLAME_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/device.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace hami::device::enflame {

inline constexpr std::string_view kGcuVendorKey = "GCU";
inline constexpr std::string_view kDrsVendorKey = "Enflame";

// Node annotation with the DRS devices and profiles.
inline constexpr std::string_view kDrsCapacityKey = "enflame.com/gcu-drs-capacity";
// Pod annotations the scheduler writes for a DRS pod (read by Enflame's device plugin).
inline constexpr std::string_view kPodRequestGcuSize = "enflame.com/gcu-request-size";
inline constexpr std::string_view kPodAssignedGcuId = "enflame.com/gcu-assigned-id";
inline constexpr std::string_view kPodHasAssignedGcu = "enflame.com/gcu-assigned";
inline constexpr std::string_view kPodAssignedGcuIndex = "enflame.com/gcu-assigned-index";
inline constexpr std::string_view kPodAssignedGcuMinor = "enflame.com/gcu-assigned-minor";
inline constexpr std::string_view kPodAssignedGcuTime = "enflame.com/gcu-assigned-time";
inline constexpr std::string_view kAssignedContainers = "assigned-containers";

// The `enflame` section of device-config.yaml, with the chart's defaults. An empty DRS, memory
// or core name falls back to the default (HAMi InitEnflameDevice; a legacy resourceNameVGCU
// stands in for an empty resourceNameDRSGCU).
struct EnflameConfig {
  std::string resource_name_gcu = "enflame.com/gcu";
  std::string resource_name_drs_gcu = "enflame.com/drs-gcu";
  std::string resource_name_gcu_memory = "enflame.com/gcu-memory";
  std::string resource_name_gcu_core = "enflame.com/gcu-core";
  std::string resource_name_vgcu{};  // legacy resourceNameVGCU; "" when not given
  bool operator==(const EnflameConfig&) const = default;
};
// Fills empty names with the defaults as HAMi does.
EnflameConfig Normalized(EnflameConfig config);

// (healthy, need_update) as HAMi's CheckHealth answers.
using HealthPair = std::pair<bool, bool>;

// ---- GCU (whole devices) ----

// Devices of a node whose capacity of the GCU resource is `capacity` (<= 0: none).
std::vector<DeviceUsage> GcuNodeDevices(std::string_view node_name, int64_t capacity);
// HAMi: (capacity > 0, true).
HealthPair GcuCheckHealth(int64_t capacity);
// The webhook: true when the container's limits name the GCU resource (HAMi looks at limits
// only); nothing is changed.
bool GcuMutateAdmission(const EnflameConfig& config, const ContainerView& container);
// nums = the count (limits, then requests); memreq 100, percentage 100, cores 100. No resource
// or a zero count: no request. A bad quantity is an error naming the container and resource.
Result<DeviceRequest> GcuNormalizeRequest(const EnflameConfig& config,
                                          const ContainerView& container);
// From the last candidate to the first: CardNotHealth, CardTypeMismatch (request type is not
// "GCU"), ExclusiveDeviceAllocateConflict (used > 0); otherwise picked. A failed request counts
// its partial picks as AllocatedCardsInsufficientRequest.
FitResult GcuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request);
// The annotations the scheduler writes for the pod's GCU devices (none when no container has
// any): to-allocate and allocated, both the pod device encoding.
StringMap GcuPatchAnnotations(const protocol::PodDevices& devices);

// ---- DRS (slices) ----

// One profile of the node: "<size>g.<mem>gb" (case-insensitive, blanks trimmed) with its id.
struct DrsProfile {
  std::string name{};
  std::string id{};
  int64_t size = 0;       // slices
  int64_t memory_gb = 0;  // GB
  int64_t core_percent = 0;
  bool operator==(const DrsProfile&) const = default;
};

// (size, memory GB) of a profile name; (0, 0) when the size does not parse, (size, 0) when only
// the memory does not. "3g.20gb" -> (3, 20).
std::pair<int64_t, int64_t> ParseProfileName(std::string_view name);

// A device of the DRS annotation.
struct DrsDevice {
  int64_t index = 0;
  std::string minor{};
  int32_t capacity = 0;  // slices
  bool operator==(const DrsDevice&) const = default;
};

// The decoded enflame.com/gcu-drs-capacity value of a node.
struct DrsNode {
  std::vector<DrsDevice> devices{};
  std::map<std::string, std::string> profiles{};  // profile name -> id
  int64_t max_slice = 0;                          // largest profile size
  int64_t max_memory_gb = 0;                      // largest profile memory (max_slice when none)
  bool operator==(const DrsNode&) const = default;

  // Usage rows: "<node>-enflame-drs-<index>", count = capacity, memory max_memory_gb x 1024 MiB,
  // 100 cores, type and vendor "Enflame", healthy.
  std::vector<DeviceUsage> Devices(std::string_view node_name) const;
  // The minor of the device with this index ("" when none).
  std::string MinorOf(int64_t index) const;
};

// Decodes the annotation value: {"devices":[{"index":"0","minor":"0","capacity":6}],
// "profiles":{"1g.6gb":"0",...}}. A device index that does not parse takes its position; an
// empty minor takes the index; capacity is a number or a numeric string (beyond int32: clamped).
// Errors (naming the key and the node): not JSON, no valid profile, a capacity that is not
// positive or not a number, no devices.
Result<DrsNode> ParseDrsCapacity(std::string_view node_name, std::string_view value);

// HAMi: always (true, true).
HealthPair DrsCheckHealth();

// The webhook. With the DRS count resource (limits, then requests): it must be > 0, and it is
// copied to whichever of limits/requests lacks it. Otherwise with gcu-memory and/or gcu-core:
// memory must be > 0, cores in (0,100], each copied likewise. Returns whether the container
// asks for DRS slices; errors read "<resource> must be greater than 0" / "<resource> must be in
// range (0,100]" as HAMi's.
Result<bool> DrsMutateAdmission(const EnflameConfig& config, ContainerView* container);

// Request modes, in DeviceRequest::mem_percentage.
inline constexpr int32_t kDrsModeDirect = 0;   // memreq is the slice size
inline constexpr int32_t kDrsModeBySpec = -1;  // memreq memory (GB or MiB), coresreq percent

// nums 1 always. The DRS count n > 0 -> memreq n, direct mode, cores 0; otherwise memory/cores
// (rounded up to whole numbers as Kubernetes' Value()) -> by-spec mode. None: no request. A
// value beyond int32 is no request (HAMi logs and ignores it); a bad quantity is an error.
Result<DeviceRequest> DrsNormalizeRequest(const EnflameConfig& config,
                                          const ContainerView& container);

// The node's profiles as candidates, sorted by size then memory; core_percent =
// ceil(size x 100 / max_slice). Profiles with a zero size or memory are left out.
std::vector<DrsProfile> DrsProfiles(const std::map<std::string, std::string>& profiles,
                                    int64_t max_slice);

// The profile a request selects: direct mode -> the profile whose size equals memreq; by spec ->
// the first profile with memory >= the request (memreq > 2 x the largest profile memory is MiB,
// rounded up to GB) and cores >= coresreq. nullopt: none.
std::optional<DrsProfile> SelectProfile(const std::vector<DrsProfile>& profiles,
                                        const DeviceRequest& request);

struct DrsPick {
  FitResult result{};
  DrsProfile profile{};  // the profile every pick uses (on success)
};

// Selects the profile (one ModeNotFit over all candidates when none, or when its size, memory in
// MiB or cores do not fit int32), then from the last candidate to the first: CardNotHealth,
// CardTypeMismatch (request type is not "Enflame"), CardUuidMismatch (enflame.com/use-gpuuuid /
// nouse-gpuuuid), CardTimeSlicingExhausted (count <= used), ExclusiveDeviceAllocateConflict
// (mutex policy and used > 0), CardInsufficientMemory (free memory < the profile's),
// CardInsufficientCore (totalcore > 0 and free cores < the profile's). Picks use the profile's
// memory (MiB) and cores.
DrsPick DrsFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
               const FitContext& context, const std::map<std::string, std::string>& profiles,
               int64_t max_slice);

// What one container's DRS pick carries to the pod annotations.
struct DrsAssignment {
  std::string container{};  // container name
  int64_t device_index = 0;
  std::string minor{};
  DrsProfile profile{};
  bool operator==(const DrsAssignment&) const = default;
};

// The annotations the scheduler writes for a DRS pod: the allocated key (pod device encoding),
// gcu-assigned "false", gcu-assigned-time `now_unix_nanos`, assigned-containers (Go JSON, keys
// sorted: {"<ctr>":{"allocated":false,"request":<slice>,"profileID":..,"profileName":..}}),
// gcu-assigned-index/-id/-minor and gcu-request-size from the first assignment. Nothing when
// `devices` holds no device.
StringMap DrsPatchAnnotations(const protocol::PodDevices& devices,
                              const std::vector<DrsAssignment>& assignments,
                              int64_t now_unix_nanos);

// ---- the Device classes (docs/VENDORS.md), registered by the `enflame` section ----

// Parses the `enflame` section (null: the chart's defaults); errors name the key.
Result<EnflameConfig> ParseEnflameConfig(const YAML::Node& section);

// Whole GCUs, vendor key "GCU".
class GcuDevice : public Device {
 public:
  explicit GcuDevice(EnflameConfig config);
  const protocol::VendorInfo& Info() const override { return info_; }
  // HAMi LockNode takes no node lock for this vendor (its plugin releases none).
  BindLock BindLockKind() const override { return BindLock::kNone; }
  // From status.capacity of the GCU resource.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;
  // (capacity > 0, true).
  Health CheckHealth(const NodeView& node, Health handshake) const override;
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;
  // The GCU resource as capacity: one per device.
  NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const override;

 private:
  EnflameConfig config_;
  protocol::VendorInfo info_;
};

// DRS slices, vendor key "Enflame". Each row's custom_info carries "index", "minor", "maxSlice"
// and "profiles" (the node's profiles as a JSON object, name -> id).
class DrsSliceDevice : public Device {
 public:
  explicit DrsSliceDevice(EnflameConfig config);
  const protocol::VendorInfo& Info() const override { return info_; }
  // HAMi LockNode takes no node lock for this vendor (its plugin releases none).
  BindLock BindLockKind() const override { return BindLock::kNone; }
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;
  Health CheckHealth(const NodeView& node, Health handshake) const override;
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;
  // DrsFit with the profiles the candidates carry.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;
  // DrsPatchAnnotations: per container its first pick's index and minor (from the pick's row on
  // the chosen node; without the node, the number ending the device id for both), the profile
  // Fit chose (the container's request against the node's profiles; without the node, none:
  // request 1, no profileID/profileName), and gcu-assigned-time the decision's time in Unix
  // nanoseconds (left out without a time).
  using Device::AllocationAnnotations;
  StringMap AllocationAnnotations(const AllocationContext& context,
                                  const protocol::PodDevices& devices) const override;
  // enflame.com/gcu-drs-capacity: each device with its split count as capacity, and profiles
  // for 1 slice, half and all of the first device's slices, memory in proportion.
  NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const override;

 private:
  EnflameConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::enflame

#endif  // HAMI_DEVICE_VENDORS_ENFLAME_ENFLAME_H_
