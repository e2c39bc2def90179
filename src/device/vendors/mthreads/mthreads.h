// The Moore Threads backend of the Device API (HAMi v2.10 pkg/device/mthreads;
// docs/VENDORS.md).
//   Registration: node capacity, no annotation: ceil(sgpu-core / 16) devices named
//     "<node>-mthreads-<i>", each with 100 slots, 16 cores and sgpu-memory x 512 x 16 / sgpu-core
//     MiB, type "Mthreads", healthy; no sgpu-core capacity = no device.
//   Handshake: none (always healthy).
//   Request: mthreads.com/vgpu (count), mthreads.com/sgpu-memory (units of 512 MiB),
//     mthreads.com/sgpu-core (default 0), memory and cores divided evenly over the count.
//   Webhook (count in limits or requests, > 0): a count above 1 asks for whole cards (core limit
//     count x 16, memory limit count x 96, pod annotation mthreads.com/request-gpu-num); one card
//     without a memory limit gets 16 cores and 96 units; a memory limit must be one of
//     2, 4, 8, 16, 32, 64, 96.
//   Fit: HAMi's checks in HAMi's order (see Fit); every container of a pod on one device.
//   Pod keys: hami.io/mthreads-vgpu-devices-allocated, mthreads.com/gpu-index,
//     mthreads.com/predicate-node, mthreads.com/predicate-time. HAMi registers the to-allocate
//     name hami.io/mthreads-vgpu-devices-to-allocate but never writes it; neither do we.
#ifndef HAMI_DEVICE_VENDORS_MTHREADS_MTHREADS_H_
#define HAMI_DEVICE_VENDORS_MTHREADS_MTHREADS_H_

#include <string_view>

#include "device/config.h"
#include "device/device.h"

namespace hami::device::mthreads {

inline constexpr std::string_view kVendorKey = "Mthreads";
inline constexpr std::string_view kSection = "mthreads";
inline constexpr int32_t kMemoryFactor = 512;  // sgpu-memory counts units of 512 MiB
inline constexpr int32_t kCoresPerGpu = 16;
inline constexpr int32_t kMemoryPerGpu = 96;  // units of 512 MiB
inline constexpr std::string_view kCustomFilterReason = "CardNotFoundCustomFilterRule";
inline constexpr std::string_view kRequestGpuNumKey = "mthreads.com/request-gpu-num";
inline constexpr std::string_view kGpuIndexKey = "mthreads.com/gpu-index";
inline constexpr std::string_view kPredicateNodeKey = "mthreads.com/predicate-node";
inline constexpr std::string_view kPredicateTimeKey = "mthreads.com/predicate-time";

// The `mthreads` section of device-config.yaml, with the chart's defaults.
struct MthreadsConfig {
  std::string resource_count_name = "mthreads.com/vgpu";
  std::string resource_memory_name = "mthreads.com/sgpu-memory";
  std::string resource_core_name = "mthreads.com/sgpu-core";
  bool operator==(const MthreadsConfig&) const = default;
};

// Reads the section (a map, or null): resourceCountName, resourceMemoryName, resourceCoreName;
// absent or null keys keep the defaults, unknown keys are ignored. A non-scalar or empty name is
// an error naming "mthreads.<key>".
Result<MthreadsConfig> ParseMthreadsConfig(const YAML::Node& section);

class MthreadsDevice : public Device {
 public:
  explicit MthreadsDevice(MthreadsConfig config);

  const protocol::VendorInfo& Info() const override { return info_; }
  // HAMi LockNode takes no node lock for this vendor (its plugin releases none).
  BindLock BindLockKind() const override { return BindLock::kNone; }
  int32_t MemoryFactor() const override { return kMemoryFactor; }

  // From status.capacity (see the file comment). A capacity that is not a whole non-negative
  // count is an error naming the resource.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // No handshake: always {healthy, need_update}.
  Health CheckHealth(const NodeView& node, Health handshake) const override;

  // See the file comment. Errors: a count that is not a whole number > 0 ("mthreads.com/vgpu
  // must be greater than 0", HAMi's words), and a memory limit outside the legal slices ("sGPU
  // memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96]").
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  // Limits first, then requests. No count or a count of 0 = no request. memreq = sgpu-memory x
  // 512 / count and mem_percentage 0 when memory is given, else memreq 0 and mem_percentage 100;
  // coresreq = sgpu-core / count (default 0). A bad quantity, or memory x 512 beyond int32, is
  // an error naming the container, resource and value (HAMi drops the request).
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // From the last candidate to the first, the first failing check: CardNotHealth,
  // CardTypeMismatch (the device type does not contain the request type, or the request is not
  // "Mthreads"), CardUuidMismatch (mthreads.ai/use|nouse-gpuuuid), CardTimeSlicingExhausted,
  // ExclusiveDeviceAllocateConflict (mutex), [cores clamped to 100, memory from percentage],
  // CardInsufficientMemory, CardInsufficientCore, ExclusiveDeviceAllocateConflict (100 % cores
  // on a used card), CardComputeUnitsExhausted, CardNotFoundCustomFilterRule (an earlier
  // container of the pod got another device). A failed request counts its partial picks as
  // AllocatedCardsInsufficientRequest.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

  // The allocated key and, for the last container that got devices, gpu-index (the devices'
  // indexes, comma-separated; an index is the number ending the id "<node>-mthreads-<i>", 0 when
  // it has none), predicate-node (the chosen node; without it the pod's hami.io/vgpu-node
  // annotation, else the node named by the device id "<node>-mthreads-<i>", else "") and
  // predicate-time (the decision's time in Unix nanoseconds; without it hami.io/vgpu-time
  // seconds x 10^9, else left out).
  using Device::AllocationAnnotations;
  StringMap AllocationAnnotations(const AllocationContext& context,
                                  const protocol::PodDevices& devices) const override;

  // HAMi writes no to-allocate key for this vendor: the allocated key is what the plugin serves.
  Result<std::optional<protocol::PodDevices>> PodToAllocate(
      const StringMap& pod_annotations) const override;

  // hami-sim's plugin: count = sum of split counts, sgpu-core = 16 per device, sgpu-memory = sum
  // of device memory / 512; no annotation.
  NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const override;

 private:
  MthreadsConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::mthreads

#endif  // HAMI_DEVICE_VENDORS_MTHREADS_MTHREADS_H_
