// The Huawei Ascend backend (HAMi pkg/device/ascend; docs/vendors/ascend.md): one backend per
// `vnpus` entry, keyed by the chip's common word. Devices register as JSON on
// hami.io/node-register-<word>, each optionally carrying customInfo.NetworkID (the HCCS ring a
// 910 sits on); the scheduler handshakes on hami.io/node-handshake-<word>.
//
// Two split modes: the default hard split rounds a memory request up to a vNPU template; with
// the pod annotation huawei.com/vnpu-mode=hami-core (soft split) memory and -core are taken as
// asked, and only nodes that support it (annotation hami-vnpu-core=true, else the section's
// hamiVnpuCore) take such pods.
//
// Everything here is pure and deterministic. Where HAMi's result depends on Go's map iteration
// order (ties between HCCS rings or 910C modules), ties go to the one met first in the scan.
#ifndef HAMI_DEVICE_VENDORS_ASCEND_ASCEND_H_
#define HAMI_DEVICE_VENDORS_ASCEND_ASCEND_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "device/device.h"
#include "device/vendors/ascend/ascend_config.h"
#include "protocol/pod_devices.h"

namespace hami::device::ascend {

inline constexpr std::string_view kAscend910Prefix = "Ascend910";
inline constexpr std::string_view kAscend910C = "Ascend910C";
inline constexpr int kNetworkWeight = 10;  // ScoreNode multiplier for HCCS-ring locality
inline constexpr std::string_view kModeNotFit = "ModeNotFit";
// The pod annotation HAMi's Ascend PatchAnnotations writes with the decision: Unix seconds.
inline constexpr std::string_view kPredicateTimeKey = "predicate-time";

// The pod annotation choosing the split mode, its soft-split value, and the node annotation
// saying whether the node supports soft split. (HAMi spells these in its ascend package.)
inline constexpr std::string_view kVnpuModeKey = "huawei.com/vnpu-mode";
inline constexpr std::string_view kVnpuModeHamiCore = "hami-core";
inline constexpr std::string_view kNodeHamiCoreKey = "hami-vnpu-core";

// The resource names and annotation keys of one family, with the configured resource names.
protocol::VendorInfo AscendInfo(const VnpuConfig& config);

// Rounds `memory` MiB up to the smallest template holding it: (template memory, its name).
// Past the largest template, a request within memoryCapacity gets (memoryAllocatable, "");
// beyond that (0, "").
std::pair<int64_t, std::string> TrimMemory(const VnpuConfig& config, int64_t memory);

// One registered device and its HCCS ring (customInfo.NetworkID, truncated to an integer as Go's
// int(float64) does; nullopt when absent or not a number).
struct RegisteredDevice {
  protocol::DeviceInfo info{};
  std::optional<int64_t> network_id{};
  bool operator==(const RegisteredDevice&) const = default;
};

// Decodes the register annotation value: the DeviceInfo list (protocol::DecodeNodeRegister with
// require_id, so Go's case-insensitive keys "ID", "Count", ... are read and every device has an
// id of its own) plus each device's customInfo.NetworkID. A customInfo that is present but not an
// object is an error naming the device.
Result<std::vector<RegisteredDevice>> DecodeRegister(std::string_view value);

// Container request (HAMi GenerateResourceRequests): count from limits else requests; 0 = none.
// Memory (limits else requests) is a whole MiB count x memoryFactor (when > 1); no memory means
// 100 % of a device (mem_percentage 100), else mem_percentage 0. Cores from the -core resource.
// HAMi drops such a container from scheduling silently; we return an error naming the container,
// resource and value for: a count beyond int32, negative or fractional memory, memory beyond
// int32 MiB (a byte quantity such as "16Gi": Ascend memory is counted in MiB) before or after
// the factor, negative or oversized cores.
Result<DeviceRequest> NormalizeRequest(const VnpuConfig& config, const ContainerView& container);

// What the webhook changes in one container and its pod (HAMi MutateAdmission).
struct Admission {
  bool asks = false;                   // the container requests this family (limits only)
  std::optional<std::string> error{};  // reject the pod (HTTP 500), with this message
  // resource name -> new quantity text, written into limits / requests.
  std::map<std::string, std::string> limits{};
  std::map<std::string, std::string> requests{};
  std::vector<std::pair<std::string, std::string>> env{};  // appended to the container's env
  std::string runtime_class{};  // set on the pod when it has none ("" = leave it)
  bool operator==(const Admission&) const = default;
};

// The rules, in HAMi's order:
//  * no count in limits: not asking; with overwriteEnv, env ASCEND_VISIBLE_DEVICES="".
//  * 910C with superPod: a count of 1 becomes 2 (limits, and requests when set there); another
//    odd count is rejected: "Ascend910C device request must be 1 or 2*n, got 3".
//  * hard split: a -core request > 0 is rejected: "<core resource> is only supported in hami-core
//    (soft split) mode".
//  * memory limit: soft split keeps it; hard split rounds it up (TrimMemory), and a request no
//    template or capacity holds is rejected: "<memory resource> <value> is invalid"; no memory
//    limit means memoryAllocatable.
//  * hard split with count > 1 and a memory short of memoryAllocatable: rejected, "vNPU not
//    supported for multiple devices" (asks stays true).
//  * memory limit and request both set to the result; runtimeClassName when configured.
// `pod_has_runtime_class`: the pod already names one (then it is kept).
Admission MutateAdmission(const VnpuConfig& config, const ContainerView& container,
                          const StringMap& pod_annotations, bool pod_has_runtime_class);

// A candidate device for Fit: its usage row and its HCCS ring.
struct Candidate {
  const DeviceUsage* usage = nullptr;
  std::optional<int64_t> network_id{};
};

// What Fit reads besides the candidates and the request.
struct FitInput {
  const StringMap* pod_annotations = nullptr;   // use/no-use uuid, vnpu-mode; may be null
  const StringMap* node_annotations = nullptr;  // hami-vnpu-core; may be null
  bool hami_vnpu_core = false;                  // the section's default for nodes
  bool mutex = false;                           // GPU policy "mutex"
};

// HAMi Fit: a hami-core pod on a node without soft split fails with ModeNotFit on every device.
// Then scans candidates from the last to the first; each device is rejected with the first
// failing check: CardNotHealth, CardTypeMismatch (request type != common word),
// CardUuidMismatch (hami.io/use-<word>-uuid / no-use-<word>-uuid), CardTimeSlicingExhausted,
// ExclusiveDeviceAllocateConflict (mutex and used), [cores clamped to 100; memory from the
// percentage when memreq is 0], CardInsufficientMemory, CardInsufficientCore (soft split counts
// a device as 100 cores), ExclusiveDeviceAllocateConflict (whole-core request on a used device),
// CardComputeUnitsExhausted. Then the picks:
//  * 910C with a request > 1: whole modules (devices 2k and 2k+1) only, fullest modules first;
//    fewer than asked fails with AllocatedCardsInsufficientRequest = devices paired (none
//    paired: the passing devices), over the request as denominator;
//  * a 910 family whose every candidate has a NetworkID: all passing devices are collected and
//    the request is filled ring by ring, largest ring first (one device: the first passing);
//  * otherwise the first `nums` passing devices in scan order.
// A shortfall counts the partial picks as AllocatedCardsInsufficientRequest.
FitResult Fit(const VnpuConfig& config, const std::vector<Candidate>& candidates,
              const DeviceRequest& request, const FitInput& input);

// HAMi ScoreNode for one pod on one node: 0 unless the family starts with "Ascend910"; per
// container with devices, (devices on its most used ring / its devices), summed, x 10; 0 when
// any chosen device has no NetworkID in `network_ids` (uuid -> ring).
double ScoreNode(const VnpuConfig& config, const protocol::PodDevices& pod_devices,
                 const std::map<std::string, int64_t>& network_ids);

// The annotations the scheduler writes on a pod placed on this family (HAMi PatchAnnotations):
// to-allocate and allocated (protocol::EncodePodDevices), and huawei.com/<word> with the runtime
// list [{"UUID":..,"temp":..,"memory":..,"core":..}] over every container's devices, Go's JSON
// with empty fields omitted; "temp" is the template TrimMemory picks for the device's memory, left
// out in soft split. Nothing when `pod_devices` has no container.
StringMap PatchAnnotations(const VnpuConfig& config, const StringMap& pod_annotations,
                           const protocol::PodDevices& pod_devices);

// The runtime list alone (the huawei.com/<word> value).
std::string EncodeRuntimeInfo(const VnpuConfig& config, bool soft_split,
                              const protocol::PodDevices& pod_devices);

// One entry of the runtime list (HAMi RuntimeInfo).
struct RuntimeEntry {
  std::string uuid{};  // "UUID"
  std::string temp{};  // "temp": the vNPU template name
  int64_t memory = 0;  // "memory", MiB
  int32_t core = 0;    // "core"
  bool operator==(const RuntimeEntry&) const = default;
};

// Go's encoding/json of the list: keys UUID, temp, memory, core, empty ones omitted; no entry
// encodes as null (Go's nil slice).
std::string EncodeRuntimeEntries(const std::vector<RuntimeEntry>& entries);

// Reads the list as Go's encoding/json would (keys matched case-insensitively when no exact match,
// unknown keys ignored, null values and "null" kept empty). A wrong type or a number out of range
// is an error naming the entry and field, e.g. `entry 0: field "memory": want an int64, got "x"`.
Result<std::vector<RuntimeEntry>> DecodeRuntimeEntries(std::string_view value);

}  // namespace hami::device::ascend

#endif  // HAMI_DEVICE_VENDORS_ASCEND_ASCEND_H_
