#include "deviceplugin/mig_discovery.h"

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/mig_profiles.h"

namespace hami::deviceplugin {

MigDiscovery::MigDiscovery(Discovery* base, MigDriver* driver,
                           std::vector<device::nvidia::MigAllowlistEntry> allowlist)
    : base_(base), driver_(driver), allowlist_(std::move(allowlist)) {}

void MigDiscovery::WarnOnce(const std::string& uuid, const std::string& why) {
  if (!warned_.insert(uuid + ": " + why).second) return;
  HAMI_WARN("operatingmode mig: GPU {} {}; it is not registered", Quote(uuid), why);
}

Result<std::vector<GpuDevice>> MigDiscovery::Discover() {
  auto gpus = base_->Discover();
  if (!gpus) return gpus;
  for (GpuDevice& gpu : *gpus) {
    gpu.mig_profiles.clear();
    if (!gpu.healthy) continue;
    const auto index = static_cast<uint32_t>(gpu.index);
    auto enabled = driver_->MigEnabled(index);
    if (!enabled) return std::move(enabled).take_error();
    if (!*enabled) {
      WarnOnce(gpu.uuid, "is not in MIG mode (the plugin never changes the mode)");
      continue;
    }
    auto offered = driver_->GpuInstanceProfiles(index);
    if (!offered) return std::move(offered).take_error();
    gpu.mig_profiles = MigProfilesFor(allowlist_, gpu.model, *offered);
    if (gpu.mig_profiles.empty()) {
      WarnOnce(gpu.uuid, "(" + Quote(gpu.model) +
                             ") matches no migProfileAllowlist entry, or offers none of its "
                             "profiles");
    }
  }
  return gpus;
}

}  // namespace hami::deviceplugin
