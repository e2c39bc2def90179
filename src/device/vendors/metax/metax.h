// The MetaX backends (HAMi pkg/device/metax; docs/vendors/metax.md), both configured by the
// `metax` section of device-config.yaml:
//  * Metax-GPU: whole devices counted from the node's capacity (metax-tech.com/gpu), each
//    64 GiB / 100 cores; node scores come from the plugin's topology annotations.
//  * Metax-SGPU: shared devices registered as JSON on metax-tech.com/node-gpu-devices in MetaX's
//    own format (MetaxSDeviceInfo below), with a QoS policy per device and app classes
//    (online / offline) per pod.
// Everything here is pure and deterministic.
#ifndef HAMI_DEVICE_VENDORS_METAX_METAX_H_
#define HAMI_DEVICE_VENDORS_METAX_METAX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/device.h"
#include "protocol/pod_devices.h"

namespace YAML {
class Node;
}

namespace hami::device::metax {

inline constexpr std::string_view kGpuKey = "Metax-GPU";
inline constexpr std::string_view kSgpuKey = "Metax-SGPU";
// HAMi's reason for a device other than the one the pod's earlier containers hold.
inline constexpr std::string_view kCardNotFoundCustomFilterRule = "CardNotFoundCustomFilterRule";

// The `metax` section (HAMi MetaxConfig) with the chart's defaults.
struct MetaxConfig {
  std::string resource_count_name = "metax-tech.com/gpu";        // "resourceCountName"
  std::string resource_vcount_name = "metax-tech.com/sgpu";      // "resourceVCountName"
  std::string resource_vmemory_name = "metax-tech.com/vmemory";  // "resourceVMemoryName"
  std::string resource_vcore_name = "metax-tech.com/vcore";      // "resourceVCoreName"
  bool topology_aware = false;                                   // "sgpuTopologyAware"
  bool operator==(const MetaxConfig&) const = default;
};

// The vendor table rows (protocol::FindVendor) with the configured resource names.
protocol::VendorInfo GpuVendor(const MetaxConfig& config = {});
protocol::VendorInfo SgpuVendor(const MetaxConfig& config = {});

// Reads a `metax` node; absent keys keep the defaults. Errors name the YAML path
// (`metax.sgpuTopologyAware: want a boolean, got "x"`).
Result<MetaxConfig> ParseMetaxConfig(const YAML::Node& node);

// ---- Metax-GPU ----

inline constexpr int32_t kGpuMemory = 65536;  // MiB every whole device registers with
inline constexpr std::string_view kLossesKey = "metax-tech.com/gpu.topology.losses";
inline constexpr std::string_view kScoresKey = "metax-tech.com/gpu.topology.scores";

// `count` devices "<node>-metax-<i>", each count 1, 64 GiB, 100 cores, healthy, type Metax-GPU.
// A count <= 0 gives none (HAMi: "device not found").
std::vector<DeviceUsage> GpuNodeDevices(const std::string& node_name, int64_t count);

// The count resource from limits, else requests: nums = count, memory 100 %, cores 100. A count
// that is not a whole int32 is an error naming the container, resource and value.
Result<DeviceRequest> GpuRequest(const MetaxConfig& config, const ContainerView& container);

// HAMi Fit for whole devices: the checks of the common fit in HAMi's order (CardNotHealth,
// CardTypeMismatch, CardTimeSlicingExhausted, ExclusiveDeviceAllocateConflict under mutex,
// CardInsufficientMemory, CardInsufficientCore, ExclusiveDeviceAllocateConflict,
// CardComputeUnitsExhausted), then CardNotFoundCustomFilterRule: a device other than one an
// earlier container of the pod already holds (`earlier`, may be null) is refused. First `nums`
// passing devices from the end win; a shortfall counts AllocatedCardsInsufficientRequest.
FitResult GpuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                 const protocol::PodDevices* earlier, bool mutex);

// HAMi parseMetaxAnnos: the value under key `index` of a JSON object {"1":0,"2":110,...}; 0 when
// the text does not decode (Go: a map[int]int) or lacks the key.
double TopologyValue(std::string_view annotation, int index);

// HAMi ScoreNode: binpack 2000 - losses[n], spread 2000 - scores[n], n = devices the pod takes on
// the node; 0 when the policy's annotation is absent.
double GpuScoreNode(const StringMap& node_annotations, const protocol::PodDevices& pod_devices,
                    NodePolicy policy);

// ---- Metax-SGPU ----

inline constexpr int32_t kSgpuMemoryFactor = 1024;  // a bare vmemory value is GiB
inline constexpr std::string_view kQosPolicyKey = "metax-tech.com/sgpu-qos-policy";
inline constexpr std::string_view kAppClassKey = "metax-tech.com/sgpu-app-class";
inline constexpr std::string_view kTopologyAwareKey = "metax-tech.com/sgpu-topology-aware";
inline constexpr std::string_view kPodAllocatedKey = "metax-tech.com/gpu-devices-allocated";
inline constexpr std::string_view kPredicateTimeKey = "metax-tech.com/predicate-time";
// HAMi's weight of a policy-neutral score (MetaX sGPU): binpack adds it, spread subtracts it.
inline constexpr double kPolicyNeutralWeight = 10000;
inline constexpr std::string_view kBestEffort = "best-effort";
inline constexpr std::string_view kFixedShare = "fixed-share";
inline constexpr std::string_view kBurstShare = "burst-share";
inline constexpr std::string_view kOnline = "online";
inline constexpr std::string_view kOffline = "offline";
// sGPU-only reason names.
inline constexpr std::string_view kCardUnhealthy = "CardUnhealthy";
inline constexpr std::string_view kCardQosPolicyMismatch = "CardQosPolicyMismatch";
inline constexpr std::string_view kCardAppClassMismatch = "CardAppClassMismatch";
// custom_info keys of an sGPU usage row.
inline constexpr std::string_view kInfoQosPolicy = "QosPolicy";
inline constexpr std::string_view kInfoModel = "Model";
inline constexpr std::string_view kInfoLinkZone = "LinkZone";

// One device of metax-tech.com/node-gpu-devices (HAMi MetaxSDeviceInfo). JSON keys: uuid, bdf,
// model, totalDevCount, totalCompute, totalVRam, availableDevCount, availableCompute,
// availableVRam, numa, healthy, qosPolicy, linkZone; all but uuid omitted when zero.
struct SDeviceInfo {
  std::string uuid{};
  std::string bdf{};
  std::string model{};
  int32_t total_dev_count = 0;
  int32_t total_compute = 0;
  int32_t total_vram = 0;  // MiB
  int32_t available_dev_count = 0;
  int32_t available_compute = 0;
  int32_t available_vram = 0;
  int32_t numa = 0;
  bool healthy = false;
  std::string qos_policy{};
  int32_t link_zone = 0;
  bool operator==(const SDeviceInfo&) const = default;
};

// Reads the annotation as Go's encoding/json reads it into []*MetaxSDeviceInfo: exact keys first,
// then case-insensitive; unknown keys ignored; null values and "null" keep zero values. A value of
// the wrong type or out of int32 range, a negative count/compute/VRAM, a device without a UUID
// (missing, or "") or a UUID listed twice is an error naming the device and field, e.g.
// `device 1: field "totalVRam": want an int32, got "x"`, `device 0: field "uuid": missing`.
// (HAMi also fails an empty list; here it holds no devices.)
Result<std::vector<SDeviceInfo>> DecodeSDevices(std::string_view value);

// The encoding the MetaX plugin writes (Go's encoding/json of the list, keys in the order above).
std::string EncodeSDevices(const std::vector<SDeviceInfo>& devices);

// Usage rows (HAMi convertMetaxSDeviceToHAMIDevice): id uuid, index = position, count
// totalDevCount, memory totalVRam, cores totalCompute, numa, health, vendor/type Metax-SGPU, and
// custom_info QosPolicy, Model, LinkZone.
std::vector<DeviceUsage> SgpuRows(const std::vector<SDeviceInfo>& devices);

// Container request (HAMi GenerateResourceRequests; limits only): nums = the sgpu count (no count
// or 0: no request); cores = vcore (default 100); memory = vmemory: a bare number is GiB (x1024),
// a quantity with a unit is bytes (/ 2^20, rounded down); no memory means 100 %. Errors name the
// container, resource and value: a count beyond int32, a negative or oversized vcore or vmemory.
Result<DeviceRequest> SgpuRequest(const MetaxConfig& config, const ContainerView& container);

// What the webhook does for one container (HAMi MutateAdmission).
struct SgpuAdmission {
  bool asks = false;
  std::optional<std::string> error{};           // reject (HTTP 500)
  std::optional<std::string> set_qos_policy{};  // pod annotation to add (best-effort)
  bool operator==(const SgpuAdmission&) const = default;
};

// No sgpu count in limits: not asking. An app-class annotation must be online or offline
// ("metax-tech.com/sgpu-app-class must be set one of [online, offline]") and its pod must ask
// for exactly one device ("app-class pod must request single device"). A pod that is not online
// gets qos policy best-effort when it names none, and must name one of best-effort,
// fixed-share, burst-share ("metax-tech.com/sgpu-qos-policy must be set one of [best-effort,
// fixed-share, burst-share]").
SgpuAdmission SgpuMutate(const MetaxConfig& config, const ContainerView& container,
                         const StringMap& pod_annotations);

// The app class a pod gives each sGPU it holds (MetaxSgpuDevice::UsageTag): its
// metax-tech.com/sgpu-app-class when that is exactly "online" or "offline", else "" (HAMi's
// switch on the value counts nothing else).
std::string SgpuAppClass(const StringMap& pod_annotations);

// The pods on a device by app class, from its row's pod_tags.
struct AppClassCount {
  int32_t online = 0;
  int32_t offline = 0;
  bool OnlyOffline() const { return online == 0 && offline > 0; }
};
AppClassCount CountAppClasses(const DeviceUsage& dev);

// HAMi checkAppClass: whether a pod of app class `request_class` ("" when none) may go on `dev`.
// An unused device takes any pod. Otherwise a device running online or offline pods takes only
// online/offline pods and no offline pod once it runs an online one; a device running only
// ordinary pods takes only ordinary pods.
bool SgpuAppClassFits(std::string_view request_class, const DeviceUsage& dev);

// HAMi Fit for shared devices. Scans from the last candidate: CardTypeMismatch, CardUnhealthy,
// CardAppClassMismatch (SgpuAppClassFits), and for pods not online CardQosPolicyMismatch (a used
// device whose QosPolicy is set and differs, unless the request is a whole device),
// CardUuidMismatch (metax-tech.com/use-gpuuuid / nouse-gpuuuid), CardTimeSlicingExhausted,
// ExclusiveDeviceAllocateConflict (mutex), CardInsufficientMemory, and for pods not online
// CardInsufficientCore, ExclusiveDeviceAllocateConflict, CardComputeUnitsExhausted. Fewer passing
// devices than asked: AllocatedCardsInsufficientRequest = passing devices (when any). Otherwise the
// first `nums`, except with more passing devices than asked: an online pod prefers devices by
// PrioritizeOnline, and a whole-device request (cores 100) from a pod without an app class prefers
// MetaLink zones (PrioritizeExclusive). Online pods hold 0 cores.
FitResult SgpuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                  const StringMap& pod_annotations, bool mutex);

// HAMi CheckUUID on metax-tech.com/use-gpuuuid / nouse-gpuuuid: a non-blank use list must
// contain `id`, a non-blank no-use list must not (items trimmed, exact match).
bool CheckUuidLists(const StringMap& annotations, std::string_view id);

// HAMi prioritizeExclusiveDevices over the passing devices (scan order): the smallest MetaLink
// zone (LinkZone > 0) holding `nums`; else zones, smallest first, then devices without a zone.
// Zones of equal size keep the order they were met in.
std::vector<const DeviceUsage*> PrioritizeExclusive(const std::vector<const DeviceUsage*>& passing,
                                                    size_t nums);

// HAMi prioritizeOnlineDevices over the passing devices (scan order): the first `nums` after a
// stable sort that puts devices running only offline pods last (fewer offline pods first among
// them) and orders the others by fewer online pods, then fewer offline pods. (HAMi's sort.Slice
// is Go's pdqsort, stable only up to 12 elements; ties among more keep the scan order here.)
std::vector<const DeviceUsage*> PrioritizeOnline(std::vector<const DeviceUsage*> passing,
                                                 size_t nums);

// HAMi scoreOnlineDevices: over the devices of `previous` (the node's devices before the pod)
// that the pod took, -100 per offline pod on a device running only offline pods, else -20 per
// online and -2 per offline pod.
int SgpuOnlineScore(const protocol::PodDevices& pod_devices,
                    const std::vector<DeviceUsage>& previous);

// HAMi scoreExclusiveDevices: with `previous` the node's devices before the pod, links between
// devices in one zone score 10; 10 x (links among the pod's whole devices) - (links the pod's
// choice breaks among the free devices).
int SgpuExclusiveScore(const protocol::PodDevices& pod_devices,
                       const std::vector<DeviceUsage>& previous);

// The pod annotations for an sGPU allocation: to-allocate and allocated (EncodePodDevices), and
// metax-tech.com/gpu-devices-allocated, the per-container list [[{"uuid":..,"compute":..,
// "vRam":..}]] (Go JSON, zero fields omitted). (HAMi also writes metax-tech.com/predicate-time,
// a clock reading: MetaxSgpuDevice::AllocationAnnotations adds it from the decision's time.)
StringMap SgpuAnnotations(const protocol::PodDevices& pod_devices);

}  // namespace hami::device::metax

#endif  // HAMI_DEVICE_VENDORS_METAX_METAX_H_
