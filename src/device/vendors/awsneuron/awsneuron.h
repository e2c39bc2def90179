// The AWS Neuron backend (issue 15; HAMi v2.10 pkg/device/awsneuron), vendor key "AWSNeuron".
// Devices come from node capacity: aws.amazon.com/neuron devices with aws.amazon.com/neuroncore
// cores between them. A device's split count is its cores, its "cores" a bit mask of them (two
// cores: 3). A container asks for whole devices (`aws.amazon.com/neuron: N`) or for cores
// (`aws.amazon.com/neuroncore: C`: one device for C <= cores per device, else whole devices).
// Several devices are placed as a contiguous run (Inferentia: any run on the ring; otherwise
// aligned blocks of 1, 4, 8 or 16). One device takes free cores of the mask. Plain functions;
// the Device class wraps them.
#ifndef HAMI_DEVICE_VENDORS_AWSNEURON_AWSNEURON_H_
#define HAMI_DEVICE_VENDORS_AWSNEURON_AWSNEURON_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/device.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace hami::device::awsneuron {

inline constexpr std::string_view kVendorKey = "AWSNeuron";
// The node label naming the instance type ("inf2.xlarge", "trn1.32xlarge").
inline constexpr std::string_view kInstanceTypeLabel = "node.kubernetes.io/instance-type";
// Pod annotations the scheduler writes for Neuron's device plugin.
inline constexpr std::string_view kAssignedIndexKey = "AWS_NEURON_IDS";
inline constexpr std::string_view kAssignedNodeKey = "aws.amazon.com/predicate-node";
inline constexpr std::string_view kPredicateTimeKey = "NEURON_ALLOC_TIME";
inline constexpr std::string_view kResourceTypeKey = "NEURON_RESOURCE_TYPE";
inline constexpr std::string_view kAllocatedFlagKey = "NEURON_ALLOCATED";
// HAMi addresses at most two cores of a device (a two-bit mask).
inline constexpr int64_t kMaxCoresPerDevice = 2;
inline constexpr int64_t kMaxDeviceCount = 2147483647;

// The `awsneuron` section of device-config.yaml, with the chart's defaults.
struct NeuronConfig {
  std::string resource_count_name = "aws.amazon.com/neuron";
  std::string resource_core_name = "aws.amazon.com/neuroncore";
  // Cores per device as HAMi's scheduler observes them from a registered node (capacity of
  // cores / devices); 0 = not known, which splits core requests by kMaxCoresPerDevice. A whole-
  // device request asks for this many cores of its device.
  int64_t cores_per_device = 2;
  bool operator==(const NeuronConfig&) const = default;
};

// The devices of a node with `devices` Neuron devices and `cores` cores in its capacity:
// "<node>-AWSNeuron-<i>", count = cores / devices, totalcore = the mask of that many bits,
// no memory, healthy. No devices: none.
std::vector<DeviceUsage> NodeDevices(std::string_view node_name, int64_t devices, int64_t cores);

// Number of set bits of a core mask (HAMi countMaskAvailable; <= 0: 0).
int32_t CountMask(int32_t mask);

// The mask a single-device pick takes given the mask already used (HAMi addCoreUsage): nothing
// used -> 2 cores: 3, 1 core: 1 (other counts: 3); otherwise the cores left (3 - used).
int32_t AddCoreUsage(int32_t used_mask, int32_t require);

// (devices, cores per device) for a core count (HAMi splitCoreRequest): cores <= per-device ->
// (1, cores); otherwise whole devices, where the count must divide evenly. Errors read as
// HAMi's: "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3".
Result<std::pair<int32_t, int32_t>> SplitCoreRequest(const NeuronConfig& config, int64_t cores);

// The webhook: whether the container asks for Neuron devices or cores (limits, then requests),
// with HAMi's errors: "<resource> must be an integer", "... must be greater than 0", "... must
// not exceed <max>", or SplitCoreRequest's. Nothing is changed.
Result<bool> MutateAdmission(const NeuronConfig& config, const ContainerView& container);

// Devices: nums = N, cores per device as configured. Cores: SplitCoreRequest. An invalid value
// (what MutateAdmission refuses) is no request, as in HAMi (which logs it).
DeviceRequest NormalizeRequest(const NeuronConfig& config, const ContainerView& container);

// The positions of `count` devices in a contiguous run whose devices are all idle and healthy:
// on Inferentia (`node_type` contains "inf"/"Inf") the first run from any position, otherwise
// for count 1, 4, 8 or 16 the first aligned block. None otherwise.
std::vector<size_t> GraphSelect(const std::vector<const DeviceUsage*>& devices, int32_t count,
                                std::string_view node_type);

// nums > 1: GraphSelect (positions read as device indexes, as HAMi does); each pick holds the
// device's whole mask; failure "1/N NumaNotFit". nums <= 1: from the last candidate to the
// first: CardNotHealth, CardTypeMismatch, CardUuidMismatch (aws.amazon.com/use-neuron-uuid,
// nouse-neuron-uuid), CardTimeSlicingExhausted (count <= used), ExclusiveDeviceAllocateConflict
// (mutex and used > 0), CardInsufficientCore (free cores of the mask < coresreq); the pick's
// usedcores is AddCoreUsage of the used mask.
FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
              const FitContext& context, std::string_view node_type);

// A container of the pod, as the allocation annotations need it.
struct ContainerAsk {
  bool count_in_limits = false;  // its limits name the count resource
  bool count_positive = false;   // ... with a whole value > 0
  bool operator==(const ContainerAsk&) const = default;
};

// The ContainerAsk of a container (HAMi reads the limits only).
ContainerAsk AskOf(const NeuronConfig& config, const ContainerView& container);

// The pod annotations: hami.io/aws-neuron-devices-allocated (pod device encoding); and, when
// some container got devices, AWS_NEURON_IDS (device indexes for containers whose count is
// positive; nothing for a count <= 0; for containers without the count in their limits,
// cores_per_device x index (+1 for the second core) per bit of the pick's mask; across all
// containers, comma-separated), NEURON_ALLOC_TIME `now_unix_nanos`, NEURON_ALLOCATED "false",
// aws.amazon.com/predicate-node `node_name`, and NEURON_RESOURCE_TYPE (the core resource) when a
// core container contributed. `asks` is positional like `devices`.
StringMap PatchAnnotations(const NeuronConfig& config, const protocol::PodDevices& devices,
                           const std::vector<ContainerAsk>& asks,
                           const std::map<std::string, uint64_t>& index_of,
                           std::string_view node_name, int64_t now_unix_nanos);

// ---- the Device class (docs/VENDORS.md), registered by the `awsneuron` section ----

// Parses the `awsneuron` section (null: the chart's defaults); errors name the key.
Result<NeuronConfig> ParseNeuronConfig(const YAML::Node& section);

class NeuronDevice : public Device {
 public:
  explicit NeuronDevice(NeuronConfig config);
  const protocol::VendorInfo& Info() const override { return info_; }
  // HAMi LockNode takes no node lock for this vendor (its plugin releases none).
  BindLock BindLockKind() const override { return BindLock::kNone; }
  // From status.capacity (devices and cores); each row's custom_info "AWSNodeType" is the
  // node's instance-type label.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;
  // HAMi: always (true, true).
  Health CheckHealth(const NodeView& node, Health handshake) const override;
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;
  // Fit with the node type of the first candidate (HAMi reads devices[0]).
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;
  // PatchAnnotations with the pod's containers, the device index from the device id, the chosen
  // node (without it: the node the device id names, "<node>-AWSNeuron-<i>"; else
  // hami.io/vgpu-node, else spec.nodeName) and NEURON_ALLOC_TIME the decision's time in Unix
  // nanoseconds (left out without a time).
  using Device::AllocationAnnotations;
  StringMap AllocationAnnotations(const AllocationContext& context,
                                  const protocol::PodDevices& devices) const override;
  // Devices and cores (two per device, as on inf2/trn1) as capacity.
  NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const override;

 private:
  NeuronConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::awsneuron

#endif  // HAMI_DEVICE_VENDORS_AWSNEURON_AWSNEURON_H_
