// The Biren backend of the Device API (HAMi v2.10 pkg/device/biren; docs/VENDORS.md): whole
// devices, counted only.
//   Registration: hami.io/node-biren-register, the JSON list Biren's device plugin writes; every
//     device's cores read as 100 (HAMi: "only for score use").
//   Handshake: hami.io/node-handshake-biren (the generic Requesting/Reported check).
//   Request: birentech.com/gpu (count; name as configured in `biren`); no memory or core
//     resource: memory 100 %, cores 0.
//   Webhook: no mutation; a container asks for Birens when its limits name the count resource.
//   Fit: CardNotHealth, CardTypeMismatch, CardUuidMismatch, CardTimeSlicingExhausted,
//     ExclusiveDeviceAllocateConflict (mutex); a pick holds no memory or cores. No quota.
//   Pod keys: hami.io/Biren-devices-to-allocate, hami.io/Biren-devices-allocated.
#ifndef HAMI_DEVICE_VENDORS_BIREN_BIREN_H_
#define HAMI_DEVICE_VENDORS_BIREN_BIREN_H_

#include <string_view>

#include "device/config.h"
#include "device/device.h"

namespace hami::device::biren {

inline constexpr std::string_view kVendorKey = "Biren";
inline constexpr std::string_view kSection = "biren";

// The `biren` section of device-config.yaml, with the chart's default.
struct BirenConfig {
  std::string resource_count_name = "birentech.com/gpu";
  bool operator==(const BirenConfig&) const = default;
};

// Reads the section (a map, or null): resourceCountName; absent or null keeps the default,
// unknown keys are ignored. A non-scalar or empty name is an error naming
// "biren.resourceCountName".
Result<BirenConfig> ParseBirenConfig(const YAML::Node& section);

class BirenDevice : public Device {
 public:
  explicit BirenDevice(BirenConfig config);

  const protocol::VendorInfo& Info() const override { return info_; }

  // Devices from hami.io/node-biren-register (JSON; cores set to 100). No annotation or an
  // empty list = no device; a value that is not a JSON device list is an error naming the key.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // HAMi's rule: limits (not requests) name the count resource. Nothing is edited.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  // Limits first, then requests: nums = the count (0 = no request), memreq 0, mem_percentage
  // 100, coresreq 0. A count that is not a whole non-negative number is an error naming the
  // container, resource and value.
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // See the file comment; from the last candidate to the first. A failed request counts its
  // partial picks as AllocatedCardsInsufficientRequest.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

 private:
  BirenConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::biren

#endif  // HAMI_DEVICE_VENDORS_BIREN_BIREN_H_
