// The Kunlunxin backends (issue 15; HAMi v2.10 pkg/device/kunlun): whole XPUs counted from node
// capacity (vendor key "kunlun") and virtual XPUs registered as JSON in
// hami.io/node-register-xpu with the generic handshake (vendor key "XPU"). Both place devices by
// the P800's eight-device topology: two wings of four (positions 0-3 and 4-7), interconnected
// pairs across wings, and known groups of four. Plain functions; the Device classes wrap them.
#ifndef HAMI_DEVICE_VENDORS_KUNLUN_KUNLUN_H_
#define HAMI_DEVICE_VENDORS_KUNLUN_KUNLUN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/device.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace hami::device::kunlun {

inline constexpr std::string_view kXpuVendorKey = "kunlun";  // whole devices
inline constexpr std::string_view kVxpuVendorKey = "XPU";    // virtual XPUs
// The pod annotation Kunlunxin's device plugin reads: the chosen device indexes, "0,1".
inline constexpr std::string_view kDeviceSelectionKey = "BAIDU_COM_DEVICE_IDX";
// A whole P800's memory (MiB); vXPU memory is rounded up to 24576, 49152 or this.
inline constexpr int32_t kMaxMemory = 98304;

// The `kunlun` section of device-config.yaml, with the chart's defaults.
struct KunlunConfig {
  std::string resource_count_name = "kunlunxin.com/xpu";
  std::string resource_vcount_name = "kunlunxin.com/vxpu";
  std::string resource_vmemory_name = "kunlunxin.com/vxpu-memory";
  bool operator==(const KunlunConfig&) const = default;
};

// ---- topology (HAMi topo.go) ----

// Whether a device may take the request.
using FitFn = std::function<bool(const DeviceUsage&)>;

// The device indexes chosen for `nums` devices among `devices` (positions matter: 0-3 are the
// left wing, 4-7 the right), or none. 8: all eight must fit. 1, 2, 4: a wing whose number of
// fitting devices is the tightest match (for odd requests in the order 1, 3, 2, 4 free devices)
// gives its first fitting devices; otherwise 2 takes a cross-wing pair (0-4, 1-5, 2-6, 3-7) and
// 4 a known group of four. Any other count: none. Positions past the list never fit (HAMi
// assumes eight devices and would index past a shorter list).
std::vector<uint64_t> GraphSelect(const std::vector<const DeviceUsage*>& devices, int32_t nums,
                                  const FitFn& fit);

// HAMi calcscore: the node score for a placement, from the indexes of the node's devices
// already in use and the indexes the pod takes. Each wing's count maps 4 -> 0, 1 -> 2, other ->
// 1 (no devices at all: 1); the score by (current - previous) is -1: 3000, 0: 2000, 1: 1000,
// 2: 0, else 1000.
double CalcScore(const std::vector<uint64_t>& previous, const std::vector<uint64_t>& current);

// ---- kunlun (whole devices) ----

// Devices of a node whose capacity of the count resource is `cards` (<= 0: none):
// "<node>-kunlun-<i>", count 100, 98304 MiB, 100 cores, NUMA 1 for the upper half.
std::vector<DeviceUsage> XpuNodeDevices(std::string_view node_name, int64_t cards);
// The webhook: true when the container's limits name the count resource; nothing is changed.
bool XpuMutateAdmission(const KunlunConfig& config, const ContainerView& container);
// nums = the count (limits, then requests), memreq 0, percentage 100, cores 0. No resource or
// zero: no request. A bad quantity is an error naming the container and resource.
Result<DeviceRequest> XpuNormalizeRequest(const KunlunConfig& config,
                                          const ContainerView& container);
// GraphSelect over the devices that are healthy, idle (used == 0) and pass the UUID lists
// (hami.io/use-xpu-uuid / no-use-xpu-uuid and baidu.com/use-gpuuuid / nouse-gpuuuid). Each pick
// holds the whole device (its total memory and cores). Failure: CardUuidMismatch for each
// device the lists rejected, else one NumaNotFit.
FitResult XpuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                 const FitContext& context);
// HAMi ScoreNode: 0 when any node device or pick is not a kunlun device, else CalcScore of the
// used devices' indexes and the pod's picks.
double XpuScore(const std::vector<const DeviceUsage*>& node_devices,
                const std::vector<uint64_t>& picked_indexes, bool all_picks_kunlun);
// The annotations for a pod's kunlun devices: hami.io/kunlun-allocated (pod device encoding) and
// BAIDU_COM_DEVICE_IDX, the indexes of the last container with devices ("0,4"); `index_of`
// gives a device's index by UUID (a UUID it lacks is left out). Nothing when no device.
StringMap XpuPatchAnnotations(const protocol::PodDevices& devices,
                              const std::map<std::string, uint64_t>& index_of);

// ---- XPU (virtual) ----

// Memory rounded up to a vXPU size: <= 24576 -> 24576, <= 49152 -> 49152, else 98304.
int64_t TrimMemory(int64_t mib);
// The vXPU devices registered in hami.io/node-register-xpu (JSON). No annotation: none; an
// empty list or an undecodable value is an error naming the node and key.
Result<std::vector<DeviceUsage>> VxpuNodeDevices(std::string_view node_name,
                                                 const StringMap& node_annotations);
// The webhook: false unless the limits name the vXPU count. With a vXPU memory limit, the
// limit and the request both become the rounded size (TrimMemory of its whole value).
Result<bool> VxpuMutateAdmission(const KunlunConfig& config, ContainerView* container);
// nums = the vXPU count; memory (limits, then requests) rounded by TrimMemory; cores = memory x
// 100 / 98304. No memory: 98304 MiB, percentage 100, cores 100 (a whole device).
Result<DeviceRequest> VxpuNormalizeRequest(const KunlunConfig& config,
                                           const ContainerView& container);
// HAMi FitVXPU: healthy, memory left for the request, and on a used device the same slice size
// as its holders (usedmem / used == memreq).
bool FitVxpu(const DeviceUsage& device, const DeviceRequest& request);
// GraphSelect over FitVxpu (mutex policy: idle devices only) and the UUID lists. Picks hold the
// request's memory and cores. Failure: with mutex, ExclusiveDeviceAllocateConflict for each used
// device that would otherwise fit; else CardUuidMismatch per rejected device; else one NumaNotFit.
FitResult VxpuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                  const FitContext& context);

// ---- the Device classes (docs/VENDORS.md), registered by the `kunlun` section ----

// Parses the `kunlun` section (null: the chart's defaults); errors name the key.
Result<KunlunConfig> ParseKunlunConfig(const YAML::Node& section);

// Whole XPUs, vendor key "kunlun".
class KunlunDevice : public Device {
 public:
  explicit KunlunDevice(KunlunConfig config);
  const protocol::VendorInfo& Info() const override { return info_; }
  // HAMi LockNode takes no node lock for this vendor (its plugin releases none).
  BindLock BindLockKind() const override { return BindLock::kNone; }
  // From status.capacity of the count resource.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;
  // HAMi: always (true, true).
  Health CheckHealth(const NodeView& node, Health handshake) const override;
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;
  // HAMi ScoreNode: XpuScore over the node's devices before the pod and the picks' indexes
  // (their rows' index; the id's number for a device the row lacks).
  double ScoreNode(const ScoreContext& context) const override;
  bool ScoresNodes() const override { return true; }
  // XpuPatchAnnotations, the device index read from the device id ("<node>-kunlun-<i>").
  using Device::AllocationAnnotations;
  StringMap AllocationAnnotations(const AllocationContext& context,
                                  const protocol::PodDevices& devices) const override;
  // The count resource as capacity: one per device.
  NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const override;

 private:
  KunlunConfig config_;
  protocol::VendorInfo info_;
};

// Virtual XPUs, vendor key "XPU": JSON registration and the generic handshake (the defaults).
class VxpuDevice : public Device {
 public:
  explicit VxpuDevice(KunlunConfig config);
  const protocol::VendorInfo& Info() const override { return info_; }
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;
  // VxpuMutateAdmission: the rounded memory is written to the limits and the requests.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

 private:
  KunlunConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::kunlun

#endif  // HAMI_DEVICE_VENDORS_KUNLUN_KUNLUN_H_
