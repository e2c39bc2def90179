#include "deviceplugin/register.h"

#include <algorithm>
#include <limits>

namespace hami::deviceplugin {

std::string RegisterType(std::string_view model) {
  if (model.substr(0, 6) == "NVIDIA") return std::string(model);
  return "NVIDIA-" + std::string(model);
}

std::vector<GpuDevice> FilterDevices(const std::vector<GpuDevice>& devices,
                                     const PluginConfig& config) {
  std::vector<GpuDevice> out;
  for (const GpuDevice& d : devices) {
    const auto& uuids = config.filter_uuids;
    const auto& indices = config.filter_indices;
    if (std::find(uuids.begin(), uuids.end(), d.uuid) != uuids.end()) continue;
    if (std::find(indices.begin(), indices.end(), d.index) != indices.end()) continue;
    out.push_back(d);
  }
  return out;
}

std::vector<protocol::DeviceInfo> BuildDeviceInfos(const std::vector<GpuDevice>& devices,
                                                   const PluginConfig& config) {
  std::vector<protocol::DeviceInfo> out;
  for (const GpuDevice& d : devices) {
    const int64_t mib = d.memory_mib > 0 ? d.memory_mib : config.pre_configured_device_memory;
    if (mib <= 0) continue;
    protocol::DeviceInfo info;
    info.id = d.uuid;
    info.index = d.index;
    info.count = config.device_split_count;
    // Saturates: a scaled size past int32 (the annotation's devmem) must not wrap to a negative.
    const double scaled = static_cast<double>(mib) * config.device_memory_scaling;
    info.devmem = scaled >= static_cast<double>(std::numeric_limits<int32_t>::max())
                      ? std::numeric_limits<int32_t>::max()
                      : static_cast<int32_t>(scaled);
    info.devcore = static_cast<int32_t>(100 * config.device_core_scaling);
    info.type = RegisterType(d.model);
    info.numa = d.numa;
    info.mode = config.operating_mode;
    info.health = d.healthy;
    if (config.operating_mode == kMigOperatingMode) {
      if (d.mig_profiles.empty()) continue;
      info.devmem =
          static_cast<int32_t>(std::min<int64_t>(mib, std::numeric_limits<int32_t>::max()));
      info.devcore = 100;
      info.count = 0;
      for (const auto& p : d.mig_profiles) {
        info.count =
            std::max(info.count, static_cast<int32_t>(std::min<uint32_t>(
                                     p.instance_count, std::numeric_limits<int32_t>::max())));
        info.mig_profiles.push_back(p.profile);
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

RegisterPublisher::RegisterPublisher(Discovery* discovery, PluginConfig config,
                                     AnnotateNodeFn annotate, const Clock& clock)
    : discovery_(discovery),
      config_(std::move(config)),
      annotate_(std::move(annotate)),
      clock_(clock) {}

Result<bool> RegisterPublisher::Tick() {
  const SystemTime now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (has_next_ && now < next_) return false;
  }
  Result<bool> r = PublishIfChanged();
  std::lock_guard<std::mutex> lock(mu_);
  has_next_ = true;
  next_ =
      now + (r.ok() ? std::chrono::duration_cast<std::chrono::nanoseconds>(kPublishInterval)
                    : std::chrono::duration_cast<std::chrono::nanoseconds>(kPublishRetryInterval));
  return r;
}

Result<bool> RegisterPublisher::PublishIfChanged() {
  auto found = discovery_->Discover();
  if (!found) return Error{discovery_->Name() + ": " + found.error()};
  std::vector<GpuDevice> devices = FilterDevices(*found, config_);
  const std::string value = protocol::EncodeNodeRegister(BuildDeviceInfos(devices, config_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (devices != devices_) {
      devices_ = devices;
      ++generation_;
    }
    if (value == last_value_) return false;
  }
  if (Status s = annotate_(kNvidiaRegisterKey, value); !s) return std::move(s).take_error();
  std::lock_guard<std::mutex> lock(mu_);
  last_value_ = value;
  return true;
}

std::vector<GpuDevice> RegisterPublisher::devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return devices_;
}

std::string RegisterPublisher::last_value() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_value_;
}

uint64_t RegisterPublisher::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

}  // namespace hami::deviceplugin
