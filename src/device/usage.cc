#include "device/usage.h"

#include <algorithm>
#include <cstdint>
#include <limits>

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
  u.mig_profiles = info.mig_profiles;
  return u;
}

std::set<std::string> ParseCordon(std::string_view value) {
  std::set<std::string> out;
  for (std::string_view id : SplitNonEmpty(value, ',')) out.emplace(id);
  return out;
}

namespace {

// a + b within int32: many containers of 2147483647 MiB must not wrap to a negative total (which
// would read as free memory); negative inputs count as 0 for the same reason.
int32_t AddHeld(int32_t a, int32_t b) {
  int64_t sum = static_cast<int64_t>(std::max(a, 0)) + std::max(b, 0);
  return static_cast<int32_t>(std::min<int64_t>(sum, std::numeric_limits<int32_t>::max()));
}

}  // namespace

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
        s.usedmem = AddHeld(s.usedmem, d.usedmem);
        s.usedcores = AddHeld(s.usedcores, d.usedcores);
        s.slots = AddHeld(s.slots, 1);
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
      auto apply = [sign](int32_t v, int32_t delta) {
        int64_t next = static_cast<int64_t>(v) + sign * static_cast<int64_t>(std::max(delta, 0));
        return static_cast<int32_t>(
            std::clamp<int64_t>(next, 0, std::numeric_limits<int32_t>::max()));
      };
      dev.used = apply(dev.used, std::max(d.slots, 1));
      dev.usedmem = apply(dev.usedmem, d.usedmem);
      dev.usedcores = apply(dev.usedcores, d.usedcores);
      if (!d.tag.empty()) {
        auto tag = dev.pod_tags.try_emplace(d.tag, 0).first;
        tag->second = apply(tag->second, std::max(d.slots, 1));
        if (tag->second == 0) dev.pod_tags.erase(tag);
      }
      break;
    }
  }
}

}  // namespace hami::device
