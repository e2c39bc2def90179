// The AMD GPU backend of the Device API (HAMi v2.10 pkg/device/amd; docs/VENDORS.md).
//   Registration: hami.io/node-amd-register, the JSON list AMD's HAMi plugin writes.
//   Health: no handshake; healthy while the node's capacity of the count resource is a whole
//     number > 0 (else {unhealthy, no update}).
//   Request (limits only): amd.com/gpu (count), amd.com/gpumem (MiB; 0 or absent = the whole
//     card's memory), amd.com/gpucores (percent of the card's compute units, 1..100, default
//     100); names as configured in `amd`.
//   Webhook: a container is AMD's when its limits name the count, memory or core resource;
//     with a count, a core limit outside 1..100 is rejected.
//   Fit: HAMi's checks in HAMi's order (see Fit); cores are compute units, the percentage
//     scaled to the card's total. The allocation keeps the registered product type (e.g.
//     "AMD_Instinct_MI300X_VF") in the type field.
//   Pod keys: hami.io/amd-devices-to-allocate, hami.io/amd-devices-allocated.
#ifndef HAMI_DEVICE_VENDORS_AMD_AMD_H_
#define HAMI_DEVICE_VENDORS_AMD_AMD_H_

#include <string_view>

#include "device/config.h"
#include "device/device.h"

namespace hami::device::amd {

inline constexpr std::string_view kVendorKey = "AMD";
inline constexpr std::string_view kSection = "amd";

// The `amd` section of device-config.yaml, with the chart's defaults.
struct AmdConfig {
  std::string resource_count_name = "amd.com/gpu";
  std::string resource_memory_name = "amd.com/gpumem";
  std::string resource_core_name = "amd.com/gpucores";
  bool operator==(const AmdConfig&) const = default;
};

// Reads the section (a map, or null): resourceCountName, resourceMemoryName, resourceCoreName;
// absent or null keys keep the defaults, unknown keys are ignored. A non-scalar or empty name is
// an error naming "amd.<key>".
Result<AmdConfig> ParseAmdConfig(const YAML::Node& section);

// HAMi checkAMDType: amd.com/use-gputype (when not blank) must name, and amd.com/nouse-gputype
// (when not blank) must not name, a case-insensitive substring of `card_type`; items are
// comma-separated and trimmed, empty items name nothing (so a use list of only commas admits no
// card).
bool CheckAmdType(const StringMap& annotations, std::string_view card_type);

class AmdDevice : public Device {
 public:
  explicit AmdDevice(AmdConfig config);

  const protocol::VendorInfo& Info() const override { return info_; }

  // Devices from hami.io/node-amd-register (JSON). No annotation or an empty list = no device;
  // a value that is not a JSON device list is an error naming the key.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // See the file comment: the node's count capacity decides, not the handshake.
  Health CheckHealth(const NodeView& node, Health handshake) const override;

  // See the file comment. The error is HAMi's: "<core resource> must be an integer percentage
  // between 1 and 100", with the value quoted.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  // From limits only (HAMi ignores requests here). No count or a count of 0 = no request;
  // mem_percentage 0; coresreq default 100. A bad quantity or a core percentage outside 1..100
  // is an error naming the container, resource and value (HAMi drops the request).
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // From the last candidate to the first, the first failing check: CardNotHealth,
  // CardTypeMismatch (request type "AMD", any case; CheckAmdType on the model),
  // CardUuidMismatch (amd.com/use|nouse-gpu-uuid), CardTimeSlicingExhausted,
  // ExclusiveDeviceAllocateConflict (mutex), CardInsufficientMemory (memreq 0 = the card's
  // memory), CardInsufficientCore (a percentage on a card with no compute units, or too few
  // free: units = total x pct / 100 within [1, total]; no percentage and the whole memory =
  // every unit). A failed request counts its partial picks as AllocatedCardsInsufficientRequest.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

 private:
  AmdConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::amd

#endif  // HAMI_DEVICE_VENDORS_AMD_AMD_H_
