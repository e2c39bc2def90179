// The MetaX backends behind the Device API: MetaxGpuDevice (whole devices from capacity) and
// MetaxSgpuDevice (shared devices from metax-tech.com/node-gpu-devices), both made by the
// `metax` section's factory (docs/VENDORS.md). The rules are the pure functions of metax.h.
#ifndef HAMI_DEVICE_VENDORS_METAX_METAX_DEVICE_H_
#define HAMI_DEVICE_VENDORS_METAX_METAX_DEVICE_H_

#include <string_view>

#include "device/device.h"
#include "device/vendors/metax/metax.h"

namespace hami::device::metax {

inline constexpr std::string_view kSection = "metax";

class MetaxGpuDevice : public Device {
 public:
  explicit MetaxGpuDevice(MetaxConfig config);
  const protocol::VendorInfo& Info() const override { return info_; }
  // HAMi LockNode takes no node lock for this vendor (its plugin releases none).
  BindLock BindLockKind() const override { return BindLock::kNone; }
  // status.capacity[resourceCountName] whole devices; absent or 0: none. A capacity that is not
  // a whole count is an error naming the resource.
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;
  // Healthy while the node's capacity has a device; always re-registered (HAMi CheckHealth).
  Health CheckHealth(const NodeView& node, Health handshake) const override;
  // Asks when the count resource is in limits (HAMi reads limits only); no edit.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;
  // GpuFit; the custom filter rule reads context.earlier (the pod's earlier containers' picks).
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;
  // HAMi ScoreNode: GpuScoreNode over the topology annotations the node's Metax-GPU rows carry
  // (NodeDevices copies kLossesKey and kScoresKey into each row's custom_info).
  double ScoreNode(const ScoreContext& context) const override;
  bool ScoresNodes() const override { return true; }
  // One whole device each: the count resource as capacity (no annotation).
  NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const override;

 private:
  MetaxConfig config_;
  protocol::VendorInfo info_;
};

class MetaxSgpuDevice : public Device {
 public:
  explicit MetaxSgpuDevice(MetaxConfig config);
  const protocol::VendorInfo& Info() const override { return info_; }
  // A bare vmemory is GiB: quota limits on vmemory count x1024 (HAMi MemoryFactor).
  int32_t MemoryFactor() const override { return kSgpuMemoryFactor; }
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;
  // Healthy while the register annotation lists a device; always re-registered.
  Health CheckHealth(const NodeView& node, Health handshake) const override;
  // SgpuMutate: its error rejects the pod; a missing QoS policy is added as a pod annotation.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;
  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;
  // The pod's app class (SgpuAppClass): the usage index counts the online and offline pods on
  // each device (DeviceUsage::pod_tags) for SgpuFit and ScoreNode.
  std::string UsageTag(const StringMap& pod_annotations) const override;
  // HAMi ScoreNode (a policy-neutral score: x10000 under binpack, x-10000 under spread): an
  // online pod that took devices scores SgpuOnlineScore over the node's devices before the pod;
  // else with topology awareness (the section's sgpuTopologyAware, overridden by the pod's
  // metax-tech.com/sgpu-topology-aware, read only when a pick takes a whole device)
  // SgpuExclusiveScore over the node's devices before the pod; else 0.
  double ScoreNode(const ScoreContext& context) const override;
  bool ScoresNodes() const override { return true; }
  // SgpuAnnotations, and with the decision's time metax-tech.com/predicate-time (Unix nanoseconds).
  using Device::AllocationAnnotations;
  StringMap AllocationAnnotations(const AllocationContext& context,
                                  const protocol::PodDevices& devices) const override;
  // The register annotation in MetaX's format (uuid, totalDevCount = count, totalCompute =
  // devcore, totalVRam = devmem, numa, healthy) and the sgpu count as capacity.
  NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const override;

 private:
  MetaxConfig config_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::metax

#endif  // HAMI_DEVICE_VENDORS_METAX_METAX_DEVICE_H_
