#include "device/vendors/enflame/enflame.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <tuple>

#include "common/json.h"
#include "common/strings.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::enflame {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
// HAMi common.ModeNotFit: no DRS profile matches the request.
constexpr std::string_view kModeNotFit = "ModeNotFit";

int32_t Clamp32(int64_t v) { return static_cast<int32_t>(std::clamp(v, kInt32Min, kInt32Max)); }

const std::string* Lookup(const ContainerView& c, const std::string& resource) {
  if (const std::string* v = FindValue(c.limits, resource)) return v;
  return FindValue(c.requests, resource);
}

Error ContainerError(const ContainerView& c, const std::string& why) {
  return Error{"container " + Quote(c.name) + ": " + why};
}

// Kubernetes Quantity.Value(): the value rounded up to a whole number (saturating at int64).
Result<int64_t> QuantityValue(const ContainerView& c, const std::string& resource,
                              const std::string& text) {
  auto q = protocol::ParseQuantity(text);
  if (!q) {
    return ContainerError(c, "resource " + resource + " value " + Quote(text) + ": " + q.error());
  }
  long double v = static_cast<long double>(q->mantissa);
  v *= std::pow(10.0L, q->exp10);
  v *= std::pow(2.0L, q->exp2);
  v = std::ceil(v);
  if (q->negative) v = -v;
  if (v >= 9.2e18L) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18L) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Go strconv.Atoi on a 64-bit int: optional sign, decimal digits, in range.
std::optional<int64_t> Atoi(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return std::nullopt;
  return ParseInt64(s);
}

std::string_view TrimSuffix(std::string_view s, std::string_view suffix) {
  if (s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix) {
    s.remove_suffix(suffix.size());
  }
  return s;
}

}  // namespace

EnflameConfig Normalized(EnflameConfig config) {
  if (config.resource_name_drs_gcu.empty())
    config.resource_name_drs_gcu = config.resource_name_vgcu;
  if (config.resource_name_drs_gcu.empty()) config.resource_name_drs_gcu = "enflame.com/drs-gcu";
  if (config.resource_name_gcu_memory.empty()) {
    config.resource_name_gcu_memory = "enflame.com/gcu-memory";
  }
  if (config.resource_name_gcu_core.empty()) config.resource_name_gcu_core = "enflame.com/gcu-core";
  return config;
}

// ---- GCU ----

std::vector<DeviceUsage> GcuNodeDevices(std::string_view node_name, int64_t capacity) {
  std::vector<DeviceUsage> out;
  for (int64_t i = 0; i < capacity && i < kInt32Max; ++i) {
    DeviceUsage d;
    d.id = std::string(node_name) + "-GCU-" + std::to_string(i);
    d.index = static_cast<uint64_t>(i);
    d.type = std::string(kGcuVendorKey);
    d.vendor = std::string(kGcuVendorKey);
    d.health = true;
    d.count = 1;
    d.totalmem = 100;
    d.totalcore = 100;
    out.push_back(std::move(d));
  }
  return out;
}

HealthPair GcuCheckHealth(int64_t capacity) { return {capacity > 0, true}; }

bool GcuMutateAdmission(const EnflameConfig& config, const ContainerView& container) {
  return FindValue(container.limits, config.resource_name_gcu) != nullptr;
}

Result<DeviceRequest> GcuNormalizeRequest(const EnflameConfig& config,
                                          const ContainerView& container) {
  DeviceRequest req;
  const std::string* count = Lookup(container, config.resource_name_gcu);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config.resource_name_gcu, *count);
  if (!nums) return ContainerError(container, nums.error());
  if (*nums == 0) return req;
  req.nums = *nums;
  req.type = std::string(kGcuVendorKey);
  req.memreq = 100;
  req.mem_percentage = 100;
  req.coresreq = 100;
  return req;
}

FitResult GcuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request) {
  FitResult out;
  out.devices_considered = static_cast<int>(candidates.size());
  int32_t want = request.nums;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const DeviceUsage& dev = **it;
    if (!dev.health) {
      ++out.reasons[std::string(protocol::kCardNotHealth)];
      continue;
    }
    if (request.type != kGcuVendorKey) {
      ++out.reasons[std::string(protocol::kCardTypeMismatch)];
      continue;
    }
    if (dev.used > 0) {
      ++out.reasons[std::string(protocol::kExclusiveDeviceAllocateConflict)];
      continue;
    }
    if (want > 0) {
      --want;
      out.devices.push_back(protocol::ContainerDevice{
          .uuid = dev.id,
          .type = request.type,
          .usedmem = request.memreq,
          .usedcores = request.coresreq,
      });
    }
    if (want == 0) {
      out.fit = true;
      out.reasons.clear();
      return out;
    }
  }
  if (!out.devices.empty()) {
    out.reasons[std::string(protocol::kAllocatedCardsInsufficientRequest)] =
        static_cast<int>(out.devices.size());
  }
  return out;
}

StringMap GcuPatchAnnotations(const protocol::PodDevices& devices) {
  StringMap out;
  bool any = std::any_of(devices.begin(), devices.end(),
                         [](const protocol::ContainerDevices& c) { return !c.empty(); });
  if (!any) return out;
  std::string value = protocol::EncodePodDevices(devices);
  const protocol::VendorInfo info = *protocol::FindVendor(kGcuVendorKey);
  out[info.to_allocate_key] = value;
  out[info.allocated_key] = value;
  return out;
}

// ---- DRS ----

std::pair<int64_t, int64_t> ParseProfileName(std::string_view name) {
  std::string normalized = ToLower(Trim(name));
  std::vector<std::string_view> parts = Split(normalized, '.');
  if (parts.size() < 2) return {0, 0};
  auto size = Atoi(TrimSuffix(Trim(parts[0]), "g"));
  if (!size) return {0, 0};
  auto mem = Atoi(TrimSuffix(Trim(parts[1]), "gb"));
  if (!mem) return {*size, 0};
  return {*size, *mem};
}

std::vector<DeviceUsage> DrsNode::Devices(std::string_view node_name) const {
  std::vector<DeviceUsage> out;
  int64_t mem_mib = max_memory_gb * 1024;
  for (const DrsDevice& d : devices) {
    DeviceUsage u;
    u.id = std::string(node_name) + "-enflame-drs-" + std::to_string(d.index);
    u.index = static_cast<uint64_t>(d.index);
    u.type = std::string(kDrsVendorKey);
    u.vendor = std::string(kDrsVendorKey);
    u.health = true;
    u.count = d.capacity;
    u.totalmem = Clamp32(mem_mib);
    u.totalcore = 100;
    out.push_back(std::move(u));
  }
  return out;
}

std::string DrsNode::MinorOf(int64_t index) const {
  for (const DrsDevice& d : devices) {
    if (d.index == index) return d.minor;
  }
  return "";
}

Result<DrsNode> ParseDrsCapacity(std::string_view node_name, std::string_view value) {
  auto fail = [&](const std::string& why) {
    return Error{"node " + Quote(node_name) + ": annotation " + std::string(kDrsCapacityKey) +
                 ": " + why};
  };
  auto parsed = ParseJson(value);
  if (!parsed) return fail(parsed.error());
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return fail("not a JSON object");
  DrsNode node;
  if (auto p = j.find("profiles"); p != j.end() && !p->is_null()) {
    if (!p->is_object()) return fail("\"profiles\" is not an object");
    for (const auto& [name, id] : p->items()) {
      if (!id.is_string()) return fail("profile " + Quote(name) + ": id is not a string");
      node.profiles[name] = id.get<std::string>();
    }
  }
  for (const auto& [name, id] : node.profiles) {
    auto [size, mem] = ParseProfileName(name);
    node.max_slice = std::max(node.max_slice, size);
    node.max_memory_gb = std::max(node.max_memory_gb, mem);
  }
  if (node.max_slice <= 0) return fail("no valid DRS profile (\"<size>g.<memory>gb\")");
  if (node.max_memory_gb <= 0) node.max_memory_gb = node.max_slice;
  const nlohmann::json* devs = nullptr;
  if (auto d = j.find("devices"); d != j.end() && !d->is_null()) {
    if (!d->is_array()) return fail("\"devices\" is not an array");
    devs = &*d;
  }
  if (devs) {
    for (size_t i = 0; i < devs->size(); ++i) {
      const nlohmann::json& d = (*devs)[i];
      std::string where = "device " + std::to_string(i) + ": ";
      if (!d.is_object()) return fail(where + "not an object");
      auto text = [&](const char* key) -> Result<std::string> {
        auto it = d.find(key);
        if (it == d.end() || it->is_null()) return std::string();
        if (!it->is_string()) return Error{where + "\"" + key + "\" is not a string"};
        return it->get<std::string>();
      };
      auto index_text = text("index");
      if (!index_text) return fail(index_text.error());
      auto minor_text = text("minor");
      if (!minor_text) return fail(minor_text.error());
      DrsDevice dev;
      auto index = Atoi(*index_text);
      dev.index = index ? *index : static_cast<int64_t>(i);
      // HAMi keeps the index as an unsigned device position.
      if (dev.index < 0) return fail(where + "index " + Quote(*index_text) + " is negative");
      auto cap = d.find("capacity");
      std::optional<int64_t> capacity;
      std::string cap_text = cap == d.end() ? "" : cap->dump();
      if (cap != d.end() && cap->is_number()) {
        double v = cap->get<double>();
        if (std::isfinite(v) && v <= static_cast<double>(kInt32Max) &&
            v >= static_cast<double>(kInt32Min)) {
          capacity = static_cast<int64_t>(v);
        }
      } else if (cap != d.end() && cap->is_string()) {
        auto v = Atoi(Trim(cap->get<std::string>()));
        if (v) capacity = Clamp32(*v);
      }
      if (!capacity || *capacity <= 0) {
        return fail(where + "capacity " + Quote(cap_text) + " is not a positive number");
      }
      dev.capacity = static_cast<int32_t>(*capacity);
      std::string minor(Trim(*minor_text));
      dev.minor = minor.empty() ? std::to_string(dev.index) : minor;
      node.devices.push_back(std::move(dev));
    }
  }
  if (node.devices.empty()) return fail("no DRS devices");
  return node;
}

HealthPair DrsCheckHealth() { return {true, true}; }

Result<bool> DrsMutateAdmission(const EnflameConfig& config, ContainerView* container) {
  ContainerView& c = *container;
  auto copy_both = [&](const std::string& resource) {
    const std::string* v = FindValue(c.limits, resource);
    std::string value = v ? *v : *FindValue(c.requests, resource);
    if (!v) c.limits[resource] = value;
    if (!FindValue(c.requests, resource)) c.requests[resource] = value;
  };
  const std::string& drs = config.resource_name_drs_gcu;
  if (const std::string* count = Lookup(c, drs)) {
    auto v = QuantityValue(c, drs, *count);
    if (!v) return std::move(v).take_error();
    if (*v <= 0) return ContainerError(c, drs + " must be greater than 0");
    copy_both(drs);
    return true;
  }
  const std::string& mem_name = config.resource_name_gcu_memory;
  const std::string& core_name = config.resource_name_gcu_core;
  const std::string* mem = Lookup(c, mem_name);
  const std::string* core = Lookup(c, core_name);
  if (!mem && !core) return false;
  if (mem) {
    auto v = QuantityValue(c, mem_name, *mem);
    if (!v) return std::move(v).take_error();
    if (*v <= 0) return ContainerError(c, mem_name + " must be greater than 0");
  }
  if (core) {
    auto v = QuantityValue(c, core_name, *core);
    if (!v) return std::move(v).take_error();
    if (*v <= 0 || *v > 100) return ContainerError(c, core_name + " must be in range (0,100]");
  }
  if (mem) copy_both(mem_name);
  if (core) copy_both(core_name);
  return true;
}

Result<DeviceRequest> DrsNormalizeRequest(const EnflameConfig& config,
                                          const ContainerView& container) {
  DeviceRequest req;
  const std::string& drs = config.resource_name_drs_gcu;
  if (const std::string* count = Lookup(container, drs)) {
    // HAMi's AsInt64: only an exact whole number counts; anything else falls through.
    auto n = protocol::ParseDeviceCount(drs, *count);
    if (n && *n > 0) {
      req.nums = 1;
      req.type = std::string(kDrsVendorKey);
      req.memreq = *n;
      req.mem_percentage = kDrsModeDirect;
      req.coresreq = 0;
      return req;
    }
    auto q = protocol::ParseQuantity(*count);
    if (!q) return ContainerError(container, n.error());
  }
  const std::string& mem_name = config.resource_name_gcu_memory;
  const std::string& core_name = config.resource_name_gcu_core;
  const std::string* mem = Lookup(container, mem_name);
  const std::string* core = Lookup(container, core_name);
  if (!mem && !core) return req;
  int64_t mem_value = 0, core_value = 0;
  if (mem) {
    auto v = QuantityValue(container, mem_name, *mem);
    if (!v) return std::move(v).take_error();
    mem_value = *v;
  }
  if (core) {
    auto v = QuantityValue(container, core_name, *core);
    if (!v) return std::move(v).take_error();
    core_value = *v;
  }
  if (mem_value > kInt32Max || core_value > kInt32Max) return req;
  req.nums = 1;
  req.type = std::string(kDrsVendorKey);
  req.memreq = Clamp32(mem_value);
  req.mem_percentage = kDrsModeBySpec;
  req.coresreq = Clamp32(core_value);
  return req;
}

std::vector<DrsProfile> DrsProfiles(const std::map<std::string, std::string>& profiles,
                                    int64_t max_slice) {
  std::vector<DrsProfile> out;
  if (max_slice <= 0) return out;
  for (const auto& [name, id] : profiles) {
    auto [size, mem] = ParseProfileName(name);
    if (size <= 0 || mem <= 0) continue;
    long double pct = std::ceil(static_cast<long double>(size) * 100 / max_slice);
    out.push_back(DrsProfile{
        .name = name,
        .id = id,
        .size = size,
        .memory_gb = mem,
        .core_percent =
            pct > 9e18L ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(pct),
    });
  }
  // Stable on the name order, so equal (size, memory) profiles come out in a fixed order.
  std::stable_sort(out.begin(), out.end(), [](const DrsProfile& a, const DrsProfile& b) {
    if (a.size != b.size) return a.size < b.size;
    return a.memory_gb < b.memory_gb;
  });
  return out;
}

std::optional<DrsProfile> SelectProfile(const std::vector<DrsProfile>& profiles,
                                        const DeviceRequest& request) {
  if (profiles.empty()) return std::nullopt;
  if (request.mem_percentage == kDrsModeDirect) {
    for (const DrsProfile& p : profiles) {
      if (p.size == request.memreq) return p;
    }
    return std::nullopt;
  }
  int64_t max_mem = profiles.back().memory_gb;
  int64_t want_gb = 0;
  if (request.memreq > 0) {
    want_gb = request.memreq;
    if (max_mem > 0 && request.memreq > max_mem * 2) want_gb = (request.memreq + 1023) / 1024;
  }
  for (const DrsProfile& p : profiles) {
    if (want_gb > 0 && p.memory_gb < want_gb) continue;
    if (request.coresreq > 0 && p.core_percent < request.coresreq) continue;
    return p;
  }
  return std::nullopt;
}

DrsPick DrsFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
               const FitContext& context, const std::map<std::string, std::string>& profiles,
               int64_t max_slice) {
  DrsPick pick;
  FitResult& out = pick.result;
  out.devices_considered = static_cast<int>(candidates.size());
  auto profile = SelectProfile(DrsProfiles(profiles, max_slice), request);
  if (!profile || profile->size <= 0 || profile->size > kInt32Max || profile->memory_gb <= 0 ||
      profile->memory_gb > kInt32Max / 1024 || profile->core_percent > kInt32Max) {
    out.reasons[std::string(kModeNotFit)] = 1;
    return pick;
  }
  pick.profile = *profile;
  const int32_t mem_mib = static_cast<int32_t>(profile->memory_gb * 1024);
  const int32_t cores = static_cast<int32_t>(profile->core_percent);
  static const StringMap kNoAnnotations;
  const protocol::VendorInfo info = *protocol::FindVendor(kDrsVendorKey);
  const StringMap& annos = context.pod ? context.pod->annotations : kNoAnnotations;
  int32_t want = request.nums;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const DeviceUsage& dev = **it;
    std::string_view reason;
    if (!dev.health) {
      reason = protocol::kCardNotHealth;
    } else if (request.type != kDrsVendorKey) {
      reason = protocol::kCardTypeMismatch;
    } else if (!nvidia::CheckUuid(annos, info.use_uuid_key, info.nouse_uuid_key, dev.id)) {
      reason = protocol::kCardUuidMismatch;
    } else if (dev.count <= dev.used) {
      reason = protocol::kCardTimeSlicingExhausted;
    } else if (context.policy.mutex && dev.used > 0) {
      reason = protocol::kExclusiveDeviceAllocateConflict;
    } else if (static_cast<int64_t>(dev.totalmem) - dev.usedmem < mem_mib) {
      reason = protocol::kCardInsufficientMemory;
    } else if (dev.totalcore > 0 && static_cast<int64_t>(dev.totalcore) - dev.usedcores < cores) {
      reason = protocol::kCardInsufficientCore;
    }
    if (!reason.empty()) {
      ++out.reasons[std::string(reason)];
      continue;
    }
    if (want > 0) {
      --want;
      out.devices.push_back(protocol::ContainerDevice{
          .uuid = dev.id,
          .type = request.type,
          .usedmem = mem_mib,
          .usedcores = cores,
      });
    }
    if (want == 0) {
      out.fit = true;
      out.reasons.clear();
      return pick;
    }
  }
  if (!out.devices.empty()) {
    out.reasons[std::string(protocol::kAllocatedCardsInsufficientRequest)] =
        static_cast<int>(out.devices.size());
  }
  return pick;
}

StringMap DrsPatchAnnotations(const protocol::PodDevices& devices,
                              const std::vector<DrsAssignment>& assignments,
                              int64_t now_unix_nanos) {
  StringMap out;
  bool any = std::any_of(devices.begin(), devices.end(),
                         [](const protocol::ContainerDevices& c) { return !c.empty(); });
  if (!any) return out;
  const protocol::VendorInfo info = *protocol::FindVendor(kDrsVendorKey);
  out[info.allocated_key] = protocol::EncodePodDevices(devices);
  out[std::string(kPodHasAssignedGcu)] = "false";
  out[std::string(kPodAssignedGcuTime)] = std::to_string(now_unix_nanos);
  std::map<std::string, const DrsAssignment*> by_name;  // Go's json.Marshal sorts map keys
  for (const DrsAssignment& a : assignments) {
    int64_t slice = a.profile.size > 0 ? a.profile.size : 1;
    if (!out.count(std::string(kPodAssignedGcuIndex))) {
      out[std::string(kPodAssignedGcuIndex)] = std::to_string(a.device_index);
      out[std::string(kPodAssignedGcuId)] = std::to_string(a.device_index);
    }
    if (!out.count(std::string(kPodAssignedGcuMinor)) && !a.minor.empty()) {
      out[std::string(kPodAssignedGcuMinor)] = a.minor;
    }
    if (!out.count(std::string(kPodRequestGcuSize))) {
      out[std::string(kPodRequestGcuSize)] = std::to_string(slice);
    }
    by_name[a.container] = &a;  // a later container of the same name wins, as in a Go map
  }
  if (!by_name.empty()) {
    std::string json = "{";
    for (const auto& [name, a] : by_name) {
      if (json.size() > 1) json += ',';
      protocol::AppendGoJsonString(&json, name);
      json += ":{\"allocated\":false,\"request\":";
      json += std::to_string(Clamp32(a->profile.size > 0 ? a->profile.size : 1));
      if (!a->profile.id.empty()) {
        json += ",\"profileID\":";
        protocol::AppendGoJsonString(&json, a->profile.id);
      }
      if (!a->profile.name.empty()) {
        json += ",\"profileName\":";
        protocol::AppendGoJsonString(&json, a->profile.name);
      }
      json += '}';
    }
    json += '}';
    out[std::string(kAssignedContainers)] = json;
  }
  return out;
}

// ---- the Device classes ----

namespace {

constexpr std::string_view kSection = "enflame";

// A container under admission as a ContainerView (quantities as text), through the pod reader.
Result<ContainerView> ContainerOf(const AdmissionEdit& edit) {
  nlohmann::json pod = {{"spec", {{"containers", nlohmann::json::array({edit.Container()})}}}};
  auto view = ParsePodView(pod);
  if (!view) return std::move(view).take_error();
  return view->containers.at(0);
}

// Writes the edits DrsMutateAdmission made to `after` (limits/requests it added).
void ApplyResourceEdits(const ContainerView& before, const ContainerView& after,
                        AdmissionEdit& edit) {
  for (const auto& [list, b, a] : {std::tuple{"limits", &before.limits, &after.limits},
                                   std::tuple{"requests", &before.requests, &after.requests}}) {
    for (const auto& [name, value] : *a) {
      const std::string* old = FindValue(*b, name);
      if (!old || *old != value) edit.Set({"resources", list, name}, value);
    }
  }
}

int64_t CapacityOf(const NodeView& node, const std::string& resource) {
  const std::string* v = FindValue(node.capacity, resource);
  if (!v) return 0;
  auto n = protocol::ParseDeviceCount(resource, *v);
  return n ? *n : 0;
}

protocol::VendorInfo GcuInfo(const EnflameConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kGcuVendorKey);
  info.count_resource = config.resource_name_gcu;
  return info;
}

protocol::VendorInfo DrsInfo(const EnflameConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kDrsVendorKey);
  info.count_resource = config.resource_name_drs_gcu;
  info.memory_resource = config.resource_name_gcu_memory;
  info.core_resource = config.resource_name_gcu_core;
  return info;
}

// The number after the last '-' of a device id ("<node>-enflame-drs-3" -> 3), else 0.
int64_t IndexFromId(std::string_view id) {
  size_t dash = id.rfind('-');
  if (dash == std::string_view::npos) return 0;
  return ParseInt64(id.substr(dash + 1)).value_or(0);
}

}  // namespace

Result<EnflameConfig> ParseEnflameConfig(const YAML::Node& section) {
  EnflameConfig config;
  if (!section || section.IsNull()) return config;
  if (!section.IsMap()) return FieldError(std::string(kSection), "a map", Describe(section));
  for (auto [key, field] : {std::pair{"resourceNameGCU", &config.resource_name_gcu},
                            std::pair{"resourceNameDRSGCU", &config.resource_name_drs_gcu},
                            std::pair{"resourceNameGCUMemory", &config.resource_name_gcu_memory},
                            std::pair{"resourceNameGCUCore", &config.resource_name_gcu_core},
                            std::pair{"resourceNameVGCU", &config.resource_name_vgcu}}) {
    YAML::Node value = section[key];
    if (!value || value.IsNull()) continue;
    if (!value.IsScalar()) {
      return FieldError(std::string(kSection) + "." + key, "a resource name", Describe(value));
    }
    *field = std::string(Trim(value.Scalar()));
  }
  if (config.resource_name_gcu.empty()) config.resource_name_gcu = "enflame.com/gcu";
  return Normalized(std::move(config));
}

GcuDevice::GcuDevice(EnflameConfig config) : config_(std::move(config)), info_(GcuInfo(config_)) {}

Result<std::vector<DeviceUsage>> GcuDevice::NodeDevices(const NodeView& node) const {
  const std::string* v = FindValue(node.capacity, config_.resource_name_gcu);
  if (!v) return std::vector<DeviceUsage>{};
  auto n = protocol::ParseDeviceCount(config_.resource_name_gcu, *v);
  if (!n) return Error{"node " + Quote(node.name) + ": capacity " + n.error()};
  return GcuNodeDevices(node.name, *n);
}

Health GcuDevice::CheckHealth(const NodeView& node, Health /*handshake*/) const {
  auto [healthy, update] = GcuCheckHealth(CapacityOf(node, config_.resource_name_gcu));
  return Health{healthy, update};
}

Result<bool> GcuDevice::MutateAdmission(AdmissionEdit& edit) const {
  auto c = ContainerOf(edit);
  if (!c) return std::move(c).take_error();
  return GcuMutateAdmission(config_, *c);
}

Result<DeviceRequest> GcuDevice::NormalizeRequest(const ContainerView& container) const {
  return GcuNormalizeRequest(config_, container);
}

FitResult GcuDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                         const DeviceRequest& request, const FitContext& /*context*/) const {
  return GcuFit(candidates, request);
}

NodeRegistration GcuDevice::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  NodeRegistration out;
  out.capacity[config_.resource_name_gcu] = std::to_string(devices.size());
  return out;
}

DrsSliceDevice::DrsSliceDevice(EnflameConfig config)
    : config_(std::move(config)), info_(DrsInfo(config_)) {}

Result<std::vector<DeviceUsage>> DrsSliceDevice::NodeDevices(const NodeView& node) const {
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return std::vector<DeviceUsage>{};
  auto parsed = ParseDrsCapacity(node.name, *value);
  if (!parsed) return std::move(parsed).take_error();
  nlohmann::json profiles = nlohmann::json::object();
  for (const auto& [name, id] : parsed->profiles) profiles[name] = id;
  std::string profiles_text = profiles.dump();
  std::vector<DeviceUsage> rows = parsed->Devices(node.name);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].custom_info["index"] = std::to_string(parsed->devices[i].index);
    rows[i].custom_info["minor"] = parsed->devices[i].minor;
    rows[i].custom_info["maxSlice"] = std::to_string(parsed->max_slice);
    rows[i].custom_info["profiles"] = profiles_text;
  }
  return rows;
}

Health DrsSliceDevice::CheckHealth(const NodeView& /*node*/, Health /*handshake*/) const {
  auto [healthy, update] = DrsCheckHealth();
  return Health{healthy, update};
}

Result<bool> DrsSliceDevice::MutateAdmission(AdmissionEdit& edit) const {
  auto c = ContainerOf(edit);
  if (!c) return std::move(c).take_error();
  ContainerView after = *c;
  auto asks = DrsMutateAdmission(config_, &after);
  if (!asks) return std::move(asks).take_error();
  if (*asks) ApplyResourceEdits(*c, after, edit);
  return *asks;
}

Result<DeviceRequest> DrsSliceDevice::NormalizeRequest(const ContainerView& container) const {
  return DrsNormalizeRequest(config_, container);
}

namespace {

// HAMi collectDRSProfiles: the largest maxSlice and the union of the rows' profiles.
std::pair<std::map<std::string, std::string>, int64_t> CollectProfiles(
    const std::vector<const DeviceUsage*>& candidates) {
  std::map<std::string, std::string> profiles;
  int64_t max_slice = 0;
  for (const DeviceUsage* d : candidates) {
    if (auto it = d->custom_info.find("maxSlice"); it != d->custom_info.end()) {
      max_slice = std::max(max_slice, ParseInt64(it->second).value_or(0));
    }
    auto it = d->custom_info.find("profiles");
    if (it == d->custom_info.end()) continue;
    auto j = ParseJson(it->second);
    if (!j || !j->is_object()) continue;
    for (const auto& [name, id] : j->items()) {
      if (id.is_string()) profiles[name] = id.get<std::string>();
    }
  }
  if (max_slice <= 0) {
    for (const auto& [name, id] : profiles)
      max_slice = std::max(max_slice, ParseProfileName(name).first);
  }
  return {std::move(profiles), max_slice};
}

}  // namespace

FitResult DrsSliceDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                              const DeviceRequest& request, const FitContext& context) const {
  auto [profiles, max_slice] = CollectProfiles(candidates);
  return DrsFit(candidates, request, context, profiles, max_slice).result;
}

StringMap DrsSliceDevice::AllocationAnnotations(const AllocationContext& context,
                                                const protocol::PodDevices& devices) const {
  static const PodView kNoPod;
  const PodView& pod = context.pod ? *context.pod : kNoPod;
  std::vector<const ContainerView*> containers = pod.AllContainers();
  // The node's DRS rows: each pick's index and minor, and the profiles Fit chose from.
  std::vector<const DeviceUsage*> rows;
  if (context.devices) {
    for (const DeviceUsage& d : *context.devices) {
      if (d.vendor == info_.vendor_key) rows.push_back(&d);
    }
  }
  auto [profiles, max_slice] = CollectProfiles(rows);
  const std::vector<DrsProfile> choices = DrsProfiles(profiles, max_slice);
  std::vector<DrsAssignment> assignments;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].empty()) continue;
    const protocol::ContainerDevice& d = devices[i][0];
    DrsAssignment a{
        .container = i < containers.size() ? containers[i]->name : "container-" + std::to_string(i),
        .device_index = IndexFromId(d.uuid),
        .minor = std::to_string(IndexFromId(d.uuid)),
        .profile = {},
    };
    auto row = std::find_if(rows.begin(), rows.end(),
                            [&](const DeviceUsage* r) { return r->id == d.uuid; });
    if (row != rows.end()) {
      const auto& info = (*row)->custom_info;
      if (auto it = info.find("index"); it != info.end()) {
        a.device_index = ParseInt64(it->second).value_or(a.device_index);
      }
      if (auto it = info.find("minor"); it != info.end()) a.minor = it->second;
    }
    // The profile Fit chose: the container's request against the node's profiles.
    if (i < containers.size() && !choices.empty()) {
      auto request = DrsNormalizeRequest(config_, *containers[i]);
      if (request && request->nums > 0) {
        if (auto p = SelectProfile(choices, *request)) a.profile = *p;
      }
    }
    assignments.push_back(std::move(a));
  }
  int64_t now =
      context.now
          ? std::chrono::duration_cast<std::chrono::nanoseconds>(context.now->time_since_epoch())
                .count()
          : 0;
  StringMap out = DrsPatchAnnotations(devices, assignments, now);
  if (!context.now) out.erase(std::string(kPodAssignedGcuTime));
  return out;
}

NodeRegistration DrsSliceDevice::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  NodeRegistration out;
  nlohmann::json devs = nlohmann::json::array();
  for (const protocol::DeviceInfo& d : devices) {
    devs.push_back({{"index", std::to_string(d.index)},
                    {"minor", std::to_string(d.index)},
                    {"capacity", std::max<int32_t>(d.count, 1)}});
  }
  nlohmann::json profiles = nlohmann::json::object();
  if (!devices.empty()) {
    int64_t slices = std::max<int32_t>(devices[0].count, 1);
    int64_t mem_gb = std::max<int64_t>(devices[0].devmem / 1024, slices);
    int id = 0;
    for (int64_t s : {int64_t{1}, slices / 2, slices}) {
      if (s <= 0) continue;
      std::string name = std::to_string(s) + "g." + std::to_string(mem_gb * s / slices) + "gb";
      if (!profiles.contains(name)) profiles[name] = std::to_string(id++);
    }
  }
  out.annotations[info_.register_key] =
      nlohmann::json{{"devices", devs}, {"profiles", profiles}}.dump();
  out.capacity[config_.resource_name_drs_gcu] = std::to_string(devices.size());
  return out;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeEnflame(const YAML::Node& section,
                                                         const DeviceConfig& /*config*/) {
  auto config = ParseEnflameConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<GcuDevice>(*config));
  out.push_back(std::make_unique<DrsSliceDevice>(*config));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(enflame, "enflame", MakeEnflame);

}  // namespace hami::device::enflame
