// Discovery in `operatingmode: mig` (docs/MIG.md "Device plugin"): a decorator over the plain
// NVML discovery that fills GpuDevice::mig_profiles from the driver's GPU instance profiles and
// the migProfileAllowlist (mig_profiles.h MigProfilesFor), so the register JSON carries
// `migProfiles`. A GPU not in MIG mode, or whose model no allowlist entry names, gets no profiles
// and is therefore not registered (register.h BuildDeviceInfos); each is logged once. MIG mode is
// never changed.
#ifndef HAMI_DEVICEPLUGIN_MIG_DISCOVERY_H_
#define HAMI_DEVICEPLUGIN_MIG_DISCOVERY_H_

#include <set>
#include <string>
#include <vector>

#include "device/vendors/nvidia/nvidia_config.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/mig_driver.h"

namespace hami::deviceplugin {

class MigDiscovery : public Discovery {
 public:
  // `base` lists the GPUs, `driver` answers the MIG queries by NVML index (often the same
  // NvmlDiscovery); both must outlive this object.
  MigDiscovery(Discovery* base, MigDriver* driver,
               std::vector<device::nvidia::MigAllowlistEntry> allowlist);

  // The base's GPUs, each healthy GPU in MIG mode with its allowlisted profiles. Errors: the
  // base's, or a failing MIG query (naming the GPU and the NVML call).
  Result<std::vector<GpuDevice>> Discover() override;
  std::string Name() const override { return base_->Name() + " (MIG)"; }

 private:
  void WarnOnce(const std::string& uuid, const std::string& why);

  Discovery* base_;
  MigDriver* driver_;
  const std::vector<device::nvidia::MigAllowlistEntry> allowlist_;
  std::set<std::string> warned_;  // "<uuid>: <why>" already logged
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_MIG_DISCOVERY_H_
