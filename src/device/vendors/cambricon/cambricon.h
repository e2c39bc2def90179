// The Cambricon MLU backend of the Device API (HAMi v2.10 pkg/device/cambricon;
// docs/VENDORS.md).
//   Registration: node capacity, no annotation. ceil(vcore / 100) devices named
//     "<node>-cambricon-mlu-<i>", each with 100 slots, 100 % cores and
//     vmemory x 256 x 100 / vcore MiB, type "MLU", healthy; no vcore capacity = no device.
//   Handshake: none (always healthy).
//   Request: cambricon.com/vmlu (count), cambricon.com/mlu.smlu.vmemory (units of 256 MiB),
//     cambricon.com/mlu.smlu.vcore (percent, default 100); names as configured in `cambricon`.
//   Webhook: no mutation; a container asks for MLUs when its limits name the count resource.
//   Fit: HAMi's checks in HAMi's order (see Fit), with the namespace quota (memory factor 256).
//   Pod keys: hami.io/cambricon-mlu-devices-to-allocate, hami.io/cambricon-mlu-devices-allocated,
//     and the dynamic-sMLU profile CAMBRICON_DSMLU_PROFILE "<index>_<cores>_<mem/256>" with
//     CAMBRICON_DSMLU_ASSIGNED "false" for Cambricon's device plugin.
#ifndef HAMI_DEVICE_VENDORS_CAMBRICON_CAMBRICON_H_
#define HAMI_DEVICE_VENDORS_CAMBRICON_CAMBRICON_H_

#include <chrono>
#include <string_view>

#include "common/time_format.h"
#include "device/config.h"
#include "device/device.h"

namespace hami::device::cambricon {

inline constexpr std::string_view kVendorKey = "MLU";
inline constexpr std::string_view kSection = "cambricon";
// Memory requests and capacity count in units of 256 MiB (HAMi's fixed MemoryFactor).
inline constexpr int32_t kMemoryFactor = 256;
inline constexpr std::string_view kProfileKey = "CAMBRICON_DSMLU_PROFILE";
inline constexpr std::string_view kAssignedKey = "CAMBRICON_DSMLU_ASSIGNED";

// The `cambricon` section of device-config.yaml, with the chart's defaults.
struct CambriconConfig {
  std::string resource_count_name = "cambricon.com/vmlu";
  std::string resource_memory_name = "cambricon.com/mlu.smlu.vmemory";
  std::string resource_core_name = "cambricon.com/mlu.smlu.vcore";
  bool operator==(const CambriconConfig&) const = default;
};

// Reads the section (a map, or null for an empty section): resourceCountName,
// resourceMemoryName, resourceCoreName; absent or null keys keep the defaults, unknown keys are
// ignored. A non-scalar or empty name is an error naming "cambricon.<key>".
Result<CambriconConfig> ParseCambriconConfig(const YAML::Node& section);

// CAMBRICON_DSMLU_PROFILE: "<device index>_<cores percent>_<memory in 256 MiB units>".
struct DsmluProfile {
  int64_t index = 0;
  int32_t cores = 0;
  int32_t memory_units = 0;
  bool operator==(const DsmluProfile&) const = default;
};
std::string EncodeDsmluProfile(const DsmluProfile& profile);
// Three '_'-separated whole non-negative numbers (index int64, cores and units int32); anything
// else is an error naming CAMBRICON_DSMLU_PROFILE and quoting the value.
Result<DsmluProfile> DecodeDsmluProfile(std::string_view value);

// HAMi's Cambricon node lock (LockNode/ReleaseNodeLock): a bind of a pod that asks for MLUs
// writes the node annotation cambricon.com/dsmlu.lock = the bind's time (RFC 3339, whole
// seconds); a lock younger than two minutes refuses the bind; an older one is taken over. The
// Cambricon device plugin deletes the annotation once it has served the pod.
inline constexpr std::string_view kDsmluLockKey = "cambricon.com/dsmlu.lock";
inline constexpr std::chrono::minutes kDsmluLockExpiry{2};

// The value to write on the node (the lock taken, fresh or over an expired one), or why the bind
// must fail: "node <name> has been locked within 2 minutes" (HAMi's words), or a lock value
// that is not RFC 3339 (HAMi fails the bind on it too), naming the key and quoting the value.
// `zone`: the zone the value is written in (HAMi writes Go's time.Local).
Result<std::string> DsmluLock(const NodeView& node, SystemTime now, const Zone& zone);

class CambriconDevice : public Device {
 public:
  explicit CambriconDevice(CambriconConfig config);

  const protocol::VendorInfo& Info() const override { return info_; }
  // HAMi LockNode: its own node lock, cambricon.com/dsmlu.lock (DsmluLock above), which
  // Cambricon's device plugin removes.
  BindLock BindLockKind() const override { return BindLock::kVendor; }
  std::string_view VendorLockKey() const override { return kDsmluLockKey; }
  Result<std::string> TakeVendorLock(const NodeView& node, SystemTime now) const override;
  int32_t MemoryFactor() const override { return kMemoryFactor; }

  // From status.capacity (see the file comment). A vcore or vmemory capacity that is not a
  // whole non-negative count is an error naming the resource.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // Cambricon runs no handshake: always {healthy, need_update}.
  Health CheckHealth(const NodeView& node, Health handshake) const override;

  // HAMi's rule: limits (not requests) name the count resource. Nothing is edited.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  // Limits first, then requests. No count or a count of 0 = no request. memreq = vmemory x 256
  // and mem_percentage 0 when vmemory is given, else memreq 0 and mem_percentage 100; coresreq =
  // vcore, default 100. A bad quantity, or vmemory x 256 beyond int32, is an error naming the
  // container, resource and value (HAMi drops the request).
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // From the last candidate to the first, the first failing check: CardNotHealth,
  // CardTypeMismatch (request type only; HAMi's MLU fit reads no use/nouse-mlutype),
  // CardUuidMismatch, CardTimeSlicingExhausted, ExclusiveDeviceAllocateConflict (mutex),
  // [cores clamped to 100, memory from percentage], ResourceQuotaNotFit (the pod's collapsed
  // total with this device, memory factor 256), CardInsufficientMemory, CardInsufficientCore,
  // ExclusiveDeviceAllocateConflict (100 % cores on a used card), CardComputeUnitsExhausted.
  // A failed request counts its partial picks as AllocatedCardsInsufficientRequest.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

  // The default keys plus, when some container got a device, the profile of the first such
  // container's first device: "<index>_<cores>_<mem / 256>" (index = the number ending the
  // device id "<node>-cambricon-mlu-<i>", 0 when it has none) and CAMBRICON_DSMLU_ASSIGNED
  // "false".
  using Device::AllocationAnnotations;
  StringMap AllocationAnnotations(const AllocationContext& context,
                                  const protocol::PodDevices& devices) const override;

  // hami-sim's plugin: capacity count = sum of split counts, vcore = 100 per device, vmemory =
  // sum of device memory / 256; no annotation.
  NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const override;

 private:
  CambriconConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::cambricon

#endif  // HAMI_DEVICE_VENDORS_CAMBRICON_CAMBRICON_H_
