// The Hygon DCU backend of the Device API (HAMi v2.10 pkg/device/hygon; docs/VENDORS.md).
//   Registration: hami.io/node-dcu-register, the legacy colon form
//     "id,count,mem,core,type,numa,health[,index,mode]:" written by Hygon's device plugin.
//   Handshake: hami.io/node-handshake-dcu (the generic Requesting/Reported check).
//   Request: hygon.com/dcunum (count), hygon.com/dcumem (MiB, x memoryFactor), hygon.com/dcucores
//     (percent, default 100); names as configured in the `hygon` section.
//   Webhook: no mutation; a container asks for DCUs when its limits name the count resource.
//   Fit: HAMi's checks in HAMi's order with HAMi's reason names (see Fit). No quota, score 0.
//   Pod keys: the scheduler writes hami.io/hcu-devices-to-allocate (our key, docs/protocol.md; HAMi
//   v2.10
//     writes hami.io/dcu-devices-to-allocate, which readers still accept) and
//     hami.io/dcu-devices-allocated.
#ifndef HAMI_DEVICE_VENDORS_HYGON_HYGON_H_
#define HAMI_DEVICE_VENDORS_HYGON_HYGON_H_

#include <string_view>

#include "device/config.h"
#include "device/device.h"

namespace hami::device::hygon {

inline constexpr std::string_view kVendorKey = "DCU";
inline constexpr std::string_view kSection = "hygon";

// The `hygon` section of device-config.yaml, with the chart's defaults.
struct HygonConfig {
  std::string resource_count_name = "hygon.com/dcunum";
  std::string resource_memory_name = "hygon.com/dcumem";
  std::string resource_core_name = "hygon.com/dcucores";
  int32_t memory_factor = 1;  // multiplies dcumem requests; >= 1
  bool operator==(const HygonConfig&) const = default;
};

// Reads the section (a map, or null for an empty section): resourceCountName,
// resourceMemoryName, resourceCoreName, memoryFactor; absent or null keys keep the defaults,
// unknown keys are ignored. A non-scalar or empty name, or a memoryFactor that is not a whole
// number >= 1, is an error naming "hygon.<key>" and quoting what was found.
Result<HygonConfig> ParseHygonConfig(const YAML::Node& section);

class HygonDevice : public Device {
 public:
  explicit HygonDevice(HygonConfig config);

  const protocol::VendorInfo& Info() const override { return info_; }
  int32_t MemoryFactor() const override { return config_.memory_factor; }
  const HygonConfig& config() const { return config_; }

  // Devices from hami.io/node-dcu-register (legacy colon form; 7 fields mean index 0 and mode
  // "hami-core"). No annotation, or one that lists no device (":"), is no device; a value that
  // does not decode is an error naming the key.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // Limits first, then requests, per resource. No count resource or a count of 0 = no request.
  // memreq = dcumem x memoryFactor and mem_percentage 0 when dcumem is given, else memreq 0 and
  // mem_percentage 100; coresreq = dcucores, default 100. A bad quantity, or dcumem x
  // memoryFactor beyond int32, is an error naming the container, resource and value (HAMi drops
  // the request silently).
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // HAMi's rule: the container asks for DCUs when its limits (not its requests) name the count
  // resource. Nothing is edited.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  // Scans `candidates` from the last to the first; each is rejected with the first failing
  // check: CardNotHealth, CardTypeMismatch (request type or use/nouse-dcutype),
  // CardUuidMismatch (use/nouse-gpuuuid), CardTimeSlicingExhausted (count <= used),
  // ExclusiveDeviceAllocateConflict (mutex policy and used > 0), [cores clamped to 100, memory
  // from percentage], CardInsufficientMemory, CardInsufficientCore,
  // ExclusiveDeviceAllocateConflict (100 % cores on a used card), CardComputeUnitsExhausted.
  // A failed request counts its partial picks as AllocatedCardsInsufficientRequest.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

 private:
  HygonConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::hygon

#endif  // HAMI_DEVICE_VENDORS_HYGON_HYGON_H_
