// The NVIDIA backend of the Device API (docs/protocol.md#resource-names-and-vendor-keys): node
// devices from hami.io/node-nvidia-register (JSON; the legacy colon form is read too), request
// normalisation of nvidia.com/gpu|gpumem|gpumem-percentage|gpucores (names as configured), and Fit
// with every check of docs/protocol.md#nvidias-fit in HAMi's order and with HAMi's reason names.
#ifndef HAMI_DEVICE_VENDORS_NVIDIA_NVIDIA_H_
#define HAMI_DEVICE_VENDORS_NVIDIA_NVIDIA_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device/device.h"
#include "device/search_budget.h"
#include "device/vendors/nvidia/nvidia_config.h"

namespace hami::device::nvidia {

inline constexpr std::string_view kVendorKey = "NVIDIA";

// What the NVIDIA health rule remembers of a node between registration passes (HAMi's
// ReportedGPUNum and ReportedRegisterAnnos).
struct NodeSeen {
  int64_t count = 0;           // allocatable count resource (nvidia.com/gpu)
  std::string register_value;  // hami.io/node-nvidia-register
  bool operator==(const NodeSeen&) const = default;
};

// HAMi's NVIDIA CheckHealth around the generic `handshake` verdict, as a pure function; records
// `allocatable` and `register_value` in `seen`:
//   allocatable 0, last 0       -> handshake
//   allocatable 0, last > 0     -> unhealthy, no update (the plugin left)
//   allocatable != last         -> healthy, update
//   register string changed     -> handshake's health, update
//   otherwise                   -> handshake
Health CheckNvidiaHealth(NodeSeen& seen, int64_t allocatable, std::string_view register_value,
                         Health handshake);

class NvidiaDevice : public Device {
 public:
  explicit NvidiaDevice(NvidiaConfig config);

  const protocol::VendorInfo& Info() const override { return info_; }
  int32_t MemoryFactor() const override { return config_.memory_factor; }
  const NvidiaConfig& config() const { return config_; }

  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // CheckNvidiaHealth with what this backend saw of the node in the previous call (register.cc):
  // the allocatable count resource (a whole number, else 0) and the register annotation.
  Health CheckHealth(const NodeView& node, Health handshake) const override;
  void ForgetNode(std::string_view node) const override;

  // hami.io/node-nvidia-score (protocol::DecodePairScores); none when absent.
  Result<protocol::PairScores> NodePairScores(const NodeView& node) const override;

  // docs/protocol.md#webhook, step 4 (admission.cc): a gpumem-percentage limit outside 0..100 is an
  // error; priority -> CUDA_TASK_PRIORITY env; gpuCorePolicy other than default ->
  // GPU_CORE_UTILIZATION_POLICY env; only mem/cores/percentage -> the count defaultGPUNum; a whole
  // card (no memory, or 100 %) without cores -> cores 100; runtimeClassName when configured and
  // unset; a container without the count and overwriteEnv -> NVIDIA_VISIBLE_DEVICES=none.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  // docs/protocol.md#request-normalisation: nums = count; memreq = gpumem x memoryFactor;
  // percentage default 101 (unset), > 100 clamped to 100 (also beyond int32), <= 0 ignored; neither
  // memory nor percentage: memreq = defaultMemory if non-zero, else percentage 100; cores =
  // gpucores or defaultCores. No count resource = no request, whatever else is set.
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // Scans `candidates` from the last to the first; each device is rejected with the first
  // failing check: CardNotHealth, CardCordoned, CardTypeMismatch (use/nouse-gputype, vgpu-mode,
  // request type), [numa-bind restart: partial picks count as NumaNotFit], CardUuidMismatch,
  // CardTimeSlicingExhausted (count <= used), ExclusiveDeviceAllocateConflict (mutex policy and
  // used > 0), [cores clamped to 100, memory from percentage], ResourceQuotaNotFit,
  // CardInsufficientMemory, CardInsufficientCore, ExclusiveDeviceAllocateConflict (whole-card
  // request on a used card), CardComputeUnitsExhausted, CardMigTopologyInfeasible (a GPU
  // in "mig" mode without a free placement of a profile large enough: mig.h MigFits). A MIG GPU
  // that passed is visited again, so one GPU may give a container several instances. A failed
  // request also counts its partial picks as AllocatedCardsInsufficientRequest. Topology-aware:
  // see PickByTopology.
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

  // HAMi isMIGRequest (mig.h IsMigRequest) with the pod's nvidia.com/vgpu-mode annotation.
  bool MayShareOneDevice(const DeviceRequest& request,
                         const std::vector<const DeviceUsage*>& candidates,
                         const PodView& pod) const override;

  // A GPU in "mig" mode: mig.h AddMigUsage (the instance is chosen and reserved). Others: nullopt.
  std::optional<PickUsage> AddPickUsage(DeviceUsage* dev,
                                        protocol::ContainerDevice* chosen) const override;

 private:
  // The pod's selection annotations (null = absent), looked up once per Fit, not per device.
  struct PodSelection {
    const std::string* vgpu_mode = nullptr;  // nvidia.com/vgpu-mode
    const std::string* use_type = nullptr;   // use/nouse-gputype
    const std::string* nouse_type = nullptr;
    const std::string* use_uuid = nullptr;  // use/nouse-gpuuuid
    const std::string* nouse_uuid = nullptr;
  };
  PodSelection Selection(const StringMap& annos) const;
  std::optional<std::string_view> CheckIdentity(const DeviceUsage& dev,
                                                const DeviceRequest& request, const FitContext& ctx,
                                                const PodSelection& sel) const;
  std::optional<std::string_view> CheckCapacity(const DeviceUsage& dev,
                                                const DeviceRequest& request, const FitContext& ctx,
                                                const PodSelection& sel,
                                                const protocol::ContainerDevices& picked,
                                                protocol::ContainerDevice* chosen) const;

  NvidiaConfig config_;
  protocol::VendorInfo info_;
  mutable std::mutex seen_mu_;
  mutable std::map<std::string, NodeSeen, std::less<>> seen_;  // by node name
};

// use/nouse UUID lists (vector 9): CSV, items trimmed, empty items ignored, exact match; a list
// with no item is no constraint; nouse wins.
bool CheckUuid(const StringMap& annotations, std::string_view use_key, std::string_view nouse_key,
               std::string_view uuid);

// use/nouse type lists (vector 10): CSV, items trimmed, empty items ignored, case-insensitive
// substring of the device type; a list with no item is no constraint; nouse wins.
bool CheckType(const StringMap& annotations, std::string_view use_key, std::string_view nouse_key,
               std::string_view device_type);

// The reason a topology-aware Fit gives when the filter's search budget (search_budget.h) cannot
// pay even the greedy pick on this node: "<passed>/<candidates> TopologySearchBudgetSpent".
inline constexpr std::string_view kTopologySearchBudgetSpent = "TopologySearchBudgetSpent";

// Topology-aware choice among the devices that passed (in pick order; a MIG GPU once per
// instance): exactly `nums` -> all of them; nums == 1 -> the device with the lowest sum of pair
// scores to the others (first wins on ties); otherwise the combination with the highest sum of
// pairwise scores, combinations generated in lexicographic order of positions, first maximum
// wins (HAMi's exhaustive search) -- when that costs at most kNodeSearchSteps steps and
// `budget` (null: unlimited) has them. A larger search is replaced by a greedy pick: the pair
// with the highest score (first in that order), then each time the position adding the most to
// the chosen ones' sum (lowest on ties). Returns positions into `passed`, ascending; empty when
// nums is 0 or above passed.size(), or when `budget` cannot pay the greedy pick either. Pair
// score a-b reads a's entry for b, else b's entry for a, else 0. Spends from `budget`: the pair
// table (d x d for d distinct devices), plus C(n, k) x k(k-1)/2 exhaustive or n^2/2 + n x k
// greedy.
std::vector<size_t> PickByTopology(const std::vector<const DeviceUsage*>& passed, int32_t nums,
                                   const protocol::PairScores& scores,
                                   SearchBudget* budget = nullptr);

}  // namespace hami::device::nvidia

#endif  // HAMI_DEVICE_VENDORS_NVIDIA_NVIDIA_H_
