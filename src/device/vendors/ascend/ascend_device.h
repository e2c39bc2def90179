// The Ascend backends behind the Device API: one AscendDevice per `vnpus.configs` entry, all
// registered by the `vnpus` section's factory (docs/VENDORS.md). The rules are the pure
// functions of ascend.h; this class reads them from the Device API's views.
//
// Each usage row of an Ascend device carries what Fit needs from its node: `mode` is "hami-core"
// when the node takes soft-split pods (node annotation hami-vnpu-core, else the section's
// hamiVnpuCore) and "vnpu-template" otherwise, and custom_info["NetworkID"] is the device's HCCS
// ring when it registered one.
#ifndef HAMI_DEVICE_VENDORS_ASCEND_ASCEND_DEVICE_H_
#define HAMI_DEVICE_VENDORS_ASCEND_ASCEND_DEVICE_H_

#include <string_view>

#include "device/device.h"
#include "device/vendors/ascend/ascend.h"
#include "device/vendors/ascend/ascend_config.h"

namespace hami::device::ascend {

inline constexpr std::string_view kSection = "vnpus";
inline constexpr std::string_view kModeSoftSplit = "hami-core";
inline constexpr std::string_view kModeTemplates = "vnpu-template";
inline constexpr std::string_view kNetworkIdKey = "NetworkID";

class AscendDevice : public Device {
 public:
  // `hami_vnpu_core`: the section's default for nodes without the hami-vnpu-core annotation.
  AscendDevice(VnpuConfig config, bool hami_vnpu_core);

  const protocol::VendorInfo& Info() const override { return info_; }
  int32_t MemoryFactor() const override;
  const VnpuConfig& config() const { return config_; }

  // hami.io/node-register-<word> (JSON). No annotation: no devices. An undecodable value is an
  // error naming the key. (HAMi also fails a node whose list is empty; here it has no devices.)
  Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const override;

  // ascend::MutateAdmission applied through `edit`; its error rejects the pod.
  Result<bool> MutateAdmission(AdmissionEdit& edit) const override;

  Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const override;

  // ascend::Fit over the rows' mode and NetworkID (see the file comment).
  FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                const FitContext& context) const override;

  // HAMi ScoreNode: ascend::ScoreNode over the picks, each pick's HCCS ring read from its row's
  // NetworkID on the node.
  double ScoreNode(const ScoreContext& context) const override;
  bool ScoresNodes() const override { return true; }

  // To-allocate, allocated and the huawei.com/<word> runtime list (ascend::PatchAnnotations),
  // and with the decision's time `predicate-time` (Unix seconds, as HAMi writes it).
  using Device::AllocationAnnotations;
  StringMap AllocationAnnotations(const AllocationContext& context,
                                  const protocol::PodDevices& devices) const override;

 private:
  VnpuConfig config_;
  bool hami_vnpu_core_;
  protocol::VendorInfo info_;
};

}  // namespace hami::device::ascend

#endif  // HAMI_DEVICE_VENDORS_ASCEND_ASCEND_DEVICE_H_
