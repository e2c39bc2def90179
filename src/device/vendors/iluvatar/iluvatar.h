// The Iluvatar backend of the Device API (HAMi v2.10 pkg/device/iluvatar; docs/VENDORS.md): one
// backend per entry of the `iluvatars` list, each keyed by its chip's common word (e.g.
// "MR-V100"), which is also the vendor key and the word in every key:
//   Registration: hami.io/node-<word>-register, the legacy colon form.
//   Handshake: hami.io/node-handshake-<word> (the generic Requesting/Reported check).
//   Request: iluvatar.ai/<word>-vgpu (count), iluvatar.ai/<word>.vMem (units of 256 MiB),
//     iluvatar.ai/<word>.vCore (percent, default 0); names as configured.
//   Webhook: for a container whose limits name the count resource: a count above 1 sets the
//     core limit to count x 100 (whole cards), and SOL_CONTINER_NAME=<container name> is added
//     to the env unless present (HAMi's spelling, kept for Iluvatar's runtime).
//   Fit: HAMi's checks in HAMi's order (see Fit). No quota, score 0.
//   Pod keys: hami.io/<word>-devices-to-allocate, hami.io/<word>-devices-allocated.
#ifndef HAMI_DEVICE_VENDORS_ILUVATAR_ILUVATAR_H_
#define HAMI_DEVICE_VENDORS_ILUVATAR_ILUVATAR_H_

#include <string_view>

#include "device/config.h"
#include "device/device.h"

namespace hami::device::iluvatar {

inline constexpr std::string_view kSection = "iluvatars";
inline constexpr int32_t kMemoryFactor = 256;  // vMem counts units of 256 MiB
inline constexpr std::string_view kContainerNameEnv = "SOL_CONTINER_NAME";

// One entry of the `iluvatars` list.
struct IluvatarConfig {
  std::string common_word{};  // required: the vendor key, e.g. "MR-V100"
  std::string chip_name{};
  // Default to iluvatar.ai/<word>-vgpu, iluvatar.ai/<word>.vMem, iluvatar.ai/<word>.vCore.
  std::string resource_count_name{};
  std::string resource_memory_name{};
  std::string resource_core_name{};
  bool operator==(const IluvatarConfig&) const = default;
};

// The chart's list (charts/hami/templates/scheduler/device-configmap.yaml): MR-V100, MR-V50,
// BI-V150 and BI-V100, each its own chip name, with the default resource names.
std::vector<IluvatarConfig> DefaultIluvatarConfigs();

// Reads the `iluvatars` list (null = the chart's, DefaultIluvatarConfigs; [] = none). Each entry is
// a map with commonWord (required, non-empty), chipName and the three resource names (default from
// the common word); unknown keys are ignored. Errors name "iluvatars[<i>].<key>"; a common word
// listed twice is an error.
Result<std::vector<IluvatarConfig>> ParseIluvatarConfigs(const YAML::Node& section);

class IluvatarDevice : public Device {
 public:
  explicit IluvatarDevice(IluvatarConfig config);

  const protocol::VendorInfo& Info() const override { return info_; }
  int32_t MemoryFactor() const override { return kMemoryFactor; }
  const IluvatarConfig& config() const { return config_; }

  // Devices from hami.io/node-<word>-register (legacy colon form). No annotation or an empty
  // list = no device; an undecodable value is an error naming the key.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // See the file comment. A count that is not a whole number is an error naming the resource.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  // Limits first, then requests. No count or a count of 0 = no request. memreq = vMem x 256 and
  // mem_percentage 0 when vMem is given, else memreq 0 and mem_percentage 100; coresreq = vCore,
  // default 0. A bad quantity, or vMem x 256 beyond int32, is an error naming the container,
  // resource and value (HAMi drops the request).
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // From the last candidate to the first, the first failing check: CardNotHealth,
  // CardTypeMismatch (the request's type is not this word), CardUuidMismatch
  // (hami.io/use-<word>-uuid, hami.io/no-use-<word>-uuid), CardTimeSlicingExhausted,
  // ExclusiveDeviceAllocateConflict (mutex), [cores clamped to 100, memory from percentage],
  // CardInsufficientMemory, CardInsufficientCore, ExclusiveDeviceAllocateConflict (100 % cores
  // on a used card), CardComputeUnitsExhausted. A failed request counts its partial picks as
  // AllocatedCardsInsufficientRequest.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

 private:
  IluvatarConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::iluvatar

#endif  // HAMI_DEVICE_VENDORS_ILUVATAR_ILUVATAR_H_
