#include "device/usage.h"

#include <algorithm>

#include "common/strings.h"

namespace hami::device {

bool PodRequests::Empty() const {
  for (const auto& c : containers) {
    for (const auto& [vendor, req] : c) {
      if (req.nums > 0) return false;
    }
  }
  return true;
}

DeviceUsage UsageFromDeviceInfo(const protocol::DeviceInfo& info, const std::string& vendor) {
  DeviceUsage u;
  u.id = info.id;
  u.index = info.index;
  u.type = info.type;
  u.vendor = vendor;
  u.health = info.health;
  u.mode = info.mode;
  u.numa = info.numa;
  u.count = info.count;
  u.totalmem = info.devmem;
  u.totalcore = info.devcore;
  return u;
}

std::set<std::string> ParseCordon(std::string_view value) {
  std::set<std::string> out;
  for (std::string_view id : SplitNonEmpty(value, ',')) out.emplace(id);
  return out;
}

std::vector<DeviceDelta> CollapsePodDevices(const protocol::PodDevices& devices, size_t init_count,
                                            bool init_done) {
  std::map<std::string, DeviceDelta> peak;  // init containers
  std::map<std::string, DeviceDelta> sum;   // regular containers
  for (size_t i = 0; i < devices.size(); ++i) {
    bool is_init = i < init_count;
    if (is_init && init_done) continue;
    for (const auto& d : devices[i]) {
      if (is_init) {
        DeviceDelta& p = peak[d.uuid];
        p.uuid = d.uuid;
        p.vendor = d.type;
        p.usedmem = std::max(p.usedmem, d.usedmem);
        p.usedcores = std::max(p.usedcores, d.usedcores);
        p.slots = 1;
      } else {
        DeviceDelta& s = sum[d.uuid];
        s.uuid = d.uuid;
        s.vendor = d.type;
        s.usedmem += d.usedmem;
        s.usedcores += d.usedcores;
        s.slots += 1;
      }
    }
  }
  for (const auto& [uuid, p] : peak) {
    DeviceDelta& s = sum[uuid];
    if (s.uuid.empty()) s = DeviceDelta{.uuid = uuid, .vendor = p.vendor};
    s.usedmem = std::max(s.usedmem, p.usedmem);
    s.usedcores = std::max(s.usedcores, p.usedcores);
    s.slots = std::max(s.slots, p.slots);
  }
  std::vector<DeviceDelta> out;
  out.reserve(sum.size());
  for (auto& [uuid, s] : sum) {
    s.slots = std::max(s.slots, 1);
    out.push_back(std::move(s));
  }
  return out;
}

void ApplyDeltas(const std::vector<DeviceDelta>& deltas, int sign,
                 std::vector<DeviceUsage>* devices) {
  for (const auto& d : deltas) {
    for (auto& dev : *devices) {
      if (dev.id != d.uuid) continue;
      dev.used += sign * std::max(d.slots, 1);
      dev.usedmem += sign * d.usedmem;
      dev.usedcores += sign * d.usedcores;
      break;
    }
  }
}

}  // namespace hami::device
