// Metax-SGPU: the register format, fit, placement preference, score and annotations
// (metax.h).
#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include "common/json.h"
#include "common/strings.h"
#include "device/vendors/metax/metax.h"
#include "protocol/node_register.h"

namespace hami::device::metax {
namespace {

using Json = nlohmann::ordered_json;

enum class Kind { kString, kInt32, kBool };

struct Field {
  const char* name;
  Kind kind;
  std::string* s = nullptr;
  int32_t* i = nullptr;
  bool* b = nullptr;
};

std::vector<Field> Fields(SDeviceInfo& d) {
  return {{"uuid", Kind::kString, &d.uuid},
          {"bdf", Kind::kString, &d.bdf},
          {"model", Kind::kString, &d.model},
          {"totalDevCount", Kind::kInt32, nullptr, &d.total_dev_count},
          {"totalCompute", Kind::kInt32, nullptr, &d.total_compute},
          {"totalVRam", Kind::kInt32, nullptr, &d.total_vram},
          {"availableDevCount", Kind::kInt32, nullptr, &d.available_dev_count},
          {"availableCompute", Kind::kInt32, nullptr, &d.available_compute},
          {"availableVRam", Kind::kInt32, nullptr, &d.available_vram},
          {"numa", Kind::kInt32, nullptr, &d.numa},
          {"healthy", Kind::kBool, nullptr, nullptr, &d.healthy},
          {"qosPolicy", Kind::kString, &d.qos_policy},
          {"linkZone", Kind::kInt32, nullptr, &d.link_zone}};
}

// Go's encoding/json: an exact field name wins, else a case-insensitive one.
Field* Match(std::vector<Field>& fields, const std::string& key) {
  for (auto& f : fields) {
    if (key == f.name) return &f;
  }
  std::string lower = ToLower(key);
  for (auto& f : fields) {
    if (lower == ToLower(f.name)) return &f;
  }
  return nullptr;
}

Status Assign(const Field& f, const Json& v, size_t device) {
  auto fail = [&](std::string_view want) {
    return Error{"device " + std::to_string(device) + ": field " + Quote(f.name) + ": want " +
                 std::string(want) + ", got " + Quote(v.dump())};
  };
  if (v.is_null()) return OkStatus();  // Go leaves the zero value
  switch (f.kind) {
    case Kind::kString:
      if (!v.is_string()) return fail("a string");
      *f.s = v.get<std::string>();
      break;
    case Kind::kBool:
      if (!v.is_boolean()) return fail("a boolean");
      *f.b = v.get<bool>();
      break;
    case Kind::kInt32: {
      bool fits = (v.is_number_integer() && !v.is_number_unsigned() &&
                   v.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                   v.get<int64_t>() <= std::numeric_limits<int32_t>::max()) ||
                  (v.is_number_unsigned() &&
                   v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()));
      if (!fits) return fail("an int32");
      *f.i = static_cast<int32_t>(v.get<int64_t>());
      break;
    }
  }
  return OkStatus();
}

void AppendKey(std::string* out, bool* first, std::string_view key) {
  if (!*first) out->push_back(',');
  *first = false;
  protocol::AppendGoJsonString(out, key);
  out->push_back(':');
}

void AppendInt(std::string* out, bool* first, std::string_view key, int64_t v) {
  if (v == 0) return;
  AppendKey(out, first, key);
  *out += std::to_string(v);
}

void AppendStr(std::string* out, bool* first, std::string_view key, const std::string& v,
               bool always = false) {
  if (v.empty() && !always) return;
  AppendKey(out, first, key);
  protocol::AppendGoJsonString(out, v);
}

std::string_view Info(const DeviceUsage& d, std::string_view key) {
  auto it = d.custom_info.find(key);
  return it == d.custom_info.end() ? std::string_view() : std::string_view(it->second);
}

int32_t LinkZone(const DeviceUsage& d) { return ParseInt32(Info(d, kInfoLinkZone)).value_or(0); }

struct LinkDevice {
  std::string uuid;
  int32_t zone = 0;
};

// HAMi LinkDevices.Score: 10 per pair of distinct devices in the same non-zero zone.
int LinkScore(const std::vector<LinkDevice>& devs) {
  int score = 0;
  for (size_t i = 0; i < devs.size(); ++i) {
    for (size_t j = i + 1; j < devs.size(); ++j) {
      if (devs[i].uuid != devs[j].uuid && devs[i].zone != 0 && devs[i].zone == devs[j].zone) {
        score += 10;
      }
    }
  }
  return score;
}

}  // namespace

Result<std::vector<SDeviceInfo>> DecodeSDevices(std::string_view value) {
  auto doc = ParseJson<Json>(value);
  if (!doc) return Error{"not valid JSON"};
  std::vector<SDeviceInfo> out;
  if (doc->is_null()) return out;
  if (!doc->is_array()) return Error{"want a JSON list, got " + Quote(doc->dump())};
  std::set<std::string> seen;
  for (size_t i = 0; i < doc->size(); ++i) {
    const Json& item = (*doc)[i];
    if (!item.is_object()) {
      return Error{"device " + std::to_string(i) + ": want an object, got " + Quote(item.dump())};
    }
    SDeviceInfo d;
    std::vector<Field> fields = Fields(d);
    bool has_uuid = false;  // a non-null member read into uuid
    for (auto it = item.begin(); it != item.end(); ++it) {
      if (Field* f = Match(fields, it.key())) {
        if (Status s = Assign(*f, it.value(), i); !s) return std::move(s).take_error();
        if (f->s == &d.uuid && !it.value().is_null()) has_uuid = true;
      }
    }
    // Two devices without a uuid would be one device, picked twice.
    if (d.uuid.empty()) {
      return Error{"device " + std::to_string(i) + ": field \"uuid\": " +
                   (has_uuid ? "must not be empty, got " + Quote("") : std::string("missing"))};
    }
    for (auto [name, v] : {std::pair{"totalDevCount", d.total_dev_count},
                           {"totalCompute", d.total_compute},
                           {"totalVRam", d.total_vram}}) {
      if (v < 0) {
        return Error{"device " + std::to_string(i) + ": field " + Quote(name) +
                     ": must not be negative, got " + std::to_string(v)};
      }
    }
    if (!seen.insert(d.uuid).second) {
      return Error{"device " + std::to_string(i) + ": uuid " + Quote(d.uuid) + " is listed twice"};
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string EncodeSDevices(const std::vector<SDeviceInfo>& devices) {
  std::string out = "[";
  for (size_t i = 0; i < devices.size(); ++i) {
    const SDeviceInfo& d = devices[i];
    if (i > 0) out += ",";
    out += "{";
    bool first = true;
    AppendStr(&out, &first, "uuid", d.uuid, /*always=*/true);
    AppendStr(&out, &first, "bdf", d.bdf);
    AppendStr(&out, &first, "model", d.model);
    AppendInt(&out, &first, "totalDevCount", d.total_dev_count);
    AppendInt(&out, &first, "totalCompute", d.total_compute);
    AppendInt(&out, &first, "totalVRam", d.total_vram);
    AppendInt(&out, &first, "availableDevCount", d.available_dev_count);
    AppendInt(&out, &first, "availableCompute", d.available_compute);
    AppendInt(&out, &first, "availableVRam", d.available_vram);
    AppendInt(&out, &first, "numa", d.numa);
    if (d.healthy) {
      AppendKey(&out, &first, "healthy");
      out += "true";
    }
    AppendStr(&out, &first, "qosPolicy", d.qos_policy);
    AppendInt(&out, &first, "linkZone", d.link_zone);
    out += "}";
  }
  return out + "]";
}

std::vector<DeviceUsage> SgpuRows(const std::vector<SDeviceInfo>& devices) {
  std::vector<DeviceUsage> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    const SDeviceInfo& d = devices[i];
    DeviceUsage row{.id = d.uuid,
                    .index = i,
                    .type = std::string(kSgpuKey),
                    .vendor = std::string(kSgpuKey),
                    .health = d.healthy,
                    .numa = d.numa,
                    .count = d.total_dev_count,
                    .totalmem = d.total_vram,
                    .totalcore = d.total_compute};
    row.custom_info[std::string(kInfoQosPolicy)] = d.qos_policy;
    row.custom_info[std::string(kInfoModel)] = d.model;
    row.custom_info[std::string(kInfoLinkZone)] = std::to_string(d.link_zone);
    out.push_back(std::move(row));
  }
  return out;
}

FitResult SgpuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                  const StringMap& pod_annotations, bool mutex) {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  const std::string* app_class = FindValue(pod_annotations, kAppClassKey);
  std::string_view request_class = app_class ? std::string_view(*app_class) : std::string_view();
  bool online = request_class == kOnline;
  const std::string* qos = FindValue(pod_annotations, kQosPolicyKey);
  auto memory_for = [&](const DeviceUsage& dev) {
    if (request.memreq > 0) return request.memreq;
    return static_cast<int32_t>(static_cast<int64_t>(dev.totalmem) * request.mem_percentage / 100);
  };
  std::vector<const DeviceUsage*> passing;
  for (size_t k = candidates.size(); k-- > 0;) {
    const DeviceUsage& dev = *candidates[k];
    std::optional<std::string_view> reason;
    std::string_view dev_qos = Info(dev, kInfoQosPolicy);
    if (request.type != kSgpuKey) {
      reason = protocol::kCardTypeMismatch;
    } else if (!dev.health) {
      reason = kCardUnhealthy;
    } else if (!SgpuAppClassFits(request_class, dev)) {
      reason = kCardAppClassMismatch;
    } else if (!online && dev.used > 0 && request.coresreq != 100 && !dev_qos.empty() &&
               dev_qos != (qos ? std::string_view(*qos) : std::string_view())) {
      reason = kCardQosPolicyMismatch;
    } else if (!CheckUuidLists(pod_annotations, dev.id)) {
      reason = protocol::kCardUuidMismatch;
    } else if (dev.count <= dev.used) {
      reason = protocol::kCardTimeSlicingExhausted;
    } else if (mutex && dev.used > 0) {
      reason = protocol::kExclusiveDeviceAllocateConflict;
    } else if (static_cast<int64_t>(dev.totalmem) - dev.usedmem < memory_for(dev)) {
      reason = protocol::kCardInsufficientMemory;
    } else if (!online) {
      if (static_cast<int64_t>(dev.totalcore) - dev.usedcores < request.coresreq) {
        reason = protocol::kCardInsufficientCore;
      } else if (dev.totalcore == 100 && request.coresreq == 100 && dev.used > 0) {
        reason = protocol::kExclusiveDeviceAllocateConflict;
      } else if (dev.totalcore != 0 && dev.usedcores == dev.totalcore && request.coresreq == 0) {
        reason = protocol::kCardComputeUnitsExhausted;
      }
    }
    if (reason) {
      r.reasons[std::string(*reason)] += 1;
      continue;
    }
    passing.push_back(&dev);
  }
  auto nums = static_cast<size_t>(request.nums);
  if (passing.size() < nums) {
    if (!passing.empty()) {
      r.reasons[std::string(protocol::kAllocatedCardsInsufficientRequest)] =
          static_cast<int>(passing.size());
    }
    return r;
  }
  std::vector<const DeviceUsage*> best(passing.begin(), passing.begin() + nums);
  if (passing.size() > nums) {
    // An online pod prefers devices by their pods' classes; an offline one takes the scan order.
    if (app_class) {
      if (online) best = PrioritizeOnline(passing, nums);
    } else if (request.coresreq == 100) {
      best = PrioritizeExclusive(passing, nums);
    }
  }
  int32_t cores = online ? 0 : request.coresreq;
  for (const DeviceUsage* dev : best) {
    r.devices.push_back(protocol::ContainerDevice{dev->id, dev->type, memory_for(*dev), cores});
  }
  r.fit = true;
  return r;
}

std::string SgpuAppClass(const StringMap& pod_annotations) {
  const std::string* v = FindValue(pod_annotations, kAppClassKey);
  if (v && (*v == kOnline || *v == kOffline)) return *v;
  return {};
}

AppClassCount CountAppClasses(const DeviceUsage& dev) {
  auto count = [&](std::string_view tag) {
    auto it = dev.pod_tags.find(tag);
    return it == dev.pod_tags.end() ? 0 : it->second;
  };
  return AppClassCount{.online = count(kOnline), .offline = count(kOffline)};
}

bool SgpuAppClassFits(std::string_view request_class, const DeviceUsage& dev) {
  if (dev.used == 0) return true;
  AppClassCount n = CountAppClasses(dev);
  bool dev_classed = n.online > 0 || n.offline > 0;
  bool request_classed = request_class == kOnline || request_class == kOffline;
  // Ordinary and classed pods never share a device; an online pod suspends the offline ones on
  // its device, so no offline pod joins it.
  if (dev_classed != request_classed) return false;
  return !(n.online > 0 && request_class == kOffline);
}

std::vector<const DeviceUsage*> PrioritizeOnline(std::vector<const DeviceUsage*> passing,
                                                 size_t nums) {
  if (passing.size() <= nums) return passing;
  auto key = [](const DeviceUsage* d) {
    AppClassCount n = CountAppClasses(*d);
    return std::tuple(n.OnlyOffline(), n.online, n.offline);
  };
  std::stable_sort(passing.begin(), passing.end(),
                   [&](const DeviceUsage* a, const DeviceUsage* b) { return key(a) < key(b); });
  passing.resize(nums);
  return passing;
}

int SgpuOnlineScore(const protocol::PodDevices& pod_devices,
                    const std::vector<DeviceUsage>& previous) {
  int score = 0;
  for (const DeviceUsage& d : previous) {
    bool taken = std::any_of(pod_devices.begin(), pod_devices.end(), [&](const auto& container) {
      return std::any_of(container.begin(), container.end(),
                         [&](const protocol::ContainerDevice& c) { return c.uuid == d.id; });
    });
    if (!taken) continue;
    AppClassCount n = CountAppClasses(d);
    score += n.OnlyOffline() ? -100 * n.offline : -20 * n.online - 2 * n.offline;
  }
  return score;
}

bool CheckUuidLists(const StringMap& annotations, std::string_view id) {
  auto listed = [&](const std::string& list) {
    for (std::string_view item : Split(list, ',')) {
      if (Trim(item) == id) return true;
    }
    return false;
  };
  static const protocol::VendorInfo info = SgpuVendor();
  if (const std::string* use = FindValue(annotations, info.use_uuid_key);
      use && !Trim(*use).empty() && !listed(*use)) {
    return false;
  }
  if (const std::string* nouse = FindValue(annotations, info.nouse_uuid_key);
      nouse && !Trim(*nouse).empty() && listed(*nouse)) {
    return false;
  }
  return true;
}

std::vector<const DeviceUsage*> PrioritizeExclusive(const std::vector<const DeviceUsage*>& passing,
                                                    size_t nums) {
  if (passing.size() <= nums) return passing;
  std::vector<std::pair<int32_t, std::vector<const DeviceUsage*>>> zones;
  std::vector<const DeviceUsage*> others;
  for (const DeviceUsage* d : passing) {
    int32_t zone = LinkZone(*d);
    if (zone <= 0) {
      others.push_back(d);
      continue;
    }
    auto it =
        std::find_if(zones.begin(), zones.end(), [&](const auto& z) { return z.first == zone; });
    if (it == zones.end()) it = zones.insert(zones.end(), {zone, {}});
    it->second.push_back(d);
  }
  std::stable_sort(zones.begin(), zones.end(),
                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  for (const auto& z : zones) {
    if (z.second.size() >= nums) return {z.second.begin(), z.second.begin() + nums};
  }
  std::vector<const DeviceUsage*> out;
  for (const auto& z : zones) {
    for (const DeviceUsage* d : z.second) {
      out.push_back(d);
      if (out.size() >= nums) return out;
    }
  }
  for (const DeviceUsage* d : others) {
    out.push_back(d);
    if (out.size() >= nums) return out;
  }
  return {passing.begin(), passing.begin() + nums};
}

int SgpuExclusiveScore(const protocol::PodDevices& pod_devices,
                       const std::vector<DeviceUsage>& previous) {
  std::vector<LinkDevice> available, allocated, rest;
  std::map<std::string, int32_t> zones;
  for (const auto& d : previous) zones[d.id] = LinkZone(d);
  for (const auto& container : pod_devices) {
    for (const auto& d : container) {
      if (d.usedcores != 100) continue;
      auto it = zones.find(d.uuid);
      allocated.push_back({d.uuid, it == zones.end() ? 0 : it->second});
    }
  }
  for (const auto& d : previous) {
    if (d.used != 0) continue;
    LinkDevice ld{d.id, LinkZone(d)};
    available.push_back(ld);
    bool taken = std::any_of(allocated.begin(), allocated.end(),
                             [&](const LinkDevice& a) { return a.uuid == d.id; });
    if (!taken) rest.push_back(ld);
  }
  int allocated_score = LinkScore(allocated);
  int loss = LinkScore(available) - allocated_score - LinkScore(rest);
  return 10 * allocated_score - loss;
}

StringMap SgpuAnnotations(const protocol::PodDevices& pod_devices) {
  StringMap out;
  if (pod_devices.empty()) return out;
  static const protocol::VendorInfo info = SgpuVendor();
  std::string encoded = protocol::EncodePodDevices(pod_devices);
  out[info.to_allocate_key] = encoded;
  out[info.allocated_key] = encoded;
  std::string list = "[";
  for (size_t c = 0; c < pod_devices.size(); ++c) {
    if (c > 0) list += ",";
    list += "[";
    for (size_t k = 0; k < pod_devices[c].size(); ++k) {
      const auto& d = pod_devices[c][k];
      if (k > 0) list += ",";
      list += "{";
      bool first = true;
      AppendStr(&list, &first, "uuid", d.uuid, /*always=*/true);
      AppendInt(&list, &first, "compute", d.usedcores);
      AppendInt(&list, &first, "vRam", d.usedmem);
      list += "}";
    }
    list += "]";
  }
  out[std::string(kPodAllocatedKey)] = list + "]";
  return out;
}

}  // namespace hami::device::metax
