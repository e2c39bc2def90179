// The VastAI backend of the Device API (HAMi v2.10 pkg/device/vastai; docs/VENDORS.md): whole
// devices (cards, or dies of a card in "die" mode), counted only.
//   Registration: hami.io/node-va-register, the JSON list VastAI's device plugin writes; every
//     device's cores read as 100. Each entry's "custominfo" may say {"DeviceStrategy": "die",
//     "AIC": "<card>"}: the device is one die of card <card>. Both strings are kept in
//     DeviceUsage::custom_info under the same keys (other values are ignored).
//   Handshake: hami.io/node-handshake-va (the generic Requesting/Reported check).
//   Request: vastaitech.com/va (count; name as configured in `vastai`): memory 100 %, cores 0.
//   Webhook: no mutation; a container asks for VastAI devices when its limits name the count.
//   Fit: see Fit. No quota.
//   Pod keys: hami.io/Vastai-devices-to-allocate, hami.io/Vastai-devices-allocated.
#ifndef HAMI_DEVICE_VENDORS_VASTAI_VASTAI_H_
#define HAMI_DEVICE_VENDORS_VASTAI_VASTAI_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device/config.h"
#include "device/device.h"

namespace hami::device::vastai {

inline constexpr std::string_view kVendorKey = "Vastai";
inline constexpr std::string_view kSection = "vastai";
inline constexpr std::string_view kStrategyKey = "DeviceStrategy";
inline constexpr std::string_view kDieStrategy = "die";
inline constexpr std::string_view kAicKey = "AIC";

// The `vastai` section of device-config.yaml, with the chart's default.
struct VastaiConfig {
  std::string resource_count_name = "vastaitech.com/va";
  bool operator==(const VastaiConfig&) const = default;
};

// Reads the section (a map, or null): resourceCountName; absent or null keeps the default,
// unknown keys are ignored. A non-scalar or empty name is an error naming
// "vastai.resourceCountName".
Result<VastaiConfig> ParseVastaiConfig(const YAML::Node& section);

// HAMi computeBestCombination over die picks (their cards' AIC in `aic`, by pick position):
// the dies grouped by card, cards with more picked dies first (ties: the card picked first),
// dies in pick order, the first `nums`; dies without a card are left out. Returns positions.
std::vector<size_t> BestDieCombination(const std::vector<std::optional<std::string>>& aic,
                                       size_t nums);

class VastaiDevice : public Device {
 public:
  explicit VastaiDevice(VastaiConfig config);

  const protocol::VendorInfo& Info() const override { return info_; }

  // See the file comment. No annotation or an empty list = no device; a value that is not a
  // JSON device list is an error naming the key.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // HAMi's rule: limits (not requests) name the count resource. Nothing is edited.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  // Limits first, then requests: nums = the count (0 = no request), mem_percentage 100. A
  // count that is not a whole non-negative number is an error naming the container, resource
  // and value.
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // From the last candidate to the first, the first failing check: CardNotHealth,
  // CardTypeMismatch, CardUuidMismatch (vastaitech.com/use|nouse-gpuuuid),
  // CardTimeSlicingExhausted, ExclusiveDeviceAllocateConflict (mutex: the device is used, or,
  // in die mode, another die of its card is). Die mode (the first candidate is a die): every
  // passing die is collected, then exactly `nums` are chosen (one: the first collected; more:
  // BestDieCombination). A failed request (fewer passing devices, or a combination short of
  // `nums`) counts its partial picks as AllocatedCardsInsufficientRequest. Picks hold no memory.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

  // HAMi ScoreNode: per container with picks, (its dies on its most used card / its picks),
  // summed (float32). 0 when a pick's row has no AIC or a DeviceStrategy other than "die".
  double ScoreNode(const ScoreContext& context) const override;
  bool ScoresNodes() const override { return true; }

 private:
  VastaiConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::vastai

#endif  // HAMI_DEVICE_VENDORS_VASTAI_VASTAI_H_
