#include "device/vendors/ascend/ascend.h"

#include <algorithm>
#include <limits>

#include "common/json.h"
#include "common/strings.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::ascend {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Each 910C card carries two NPUs: devices 2k and 2k+1 form one module.
constexpr uint64_t kNpusPerModule = 2;

// Go's resource.Quantity.Value(): the value rounded up to an integer (toward +inf for positive
// values), saturating at int64 bounds. nullopt when `text` is not a quantity.
std::optional<int64_t> QuantityValue(std::string_view text) {
  auto q = protocol::ParseQuantity(text);
  if (!q) return std::nullopt;
  unsigned __int128 v = q->mantissa;
  const unsigned __int128 cap = static_cast<unsigned __int128>(kInt64Max) + 1;
  for (int i = 0; i < q->exp2 && v < cap; ++i) v *= 2;
  for (int i = 0; i < q->exp10 && v < cap; ++i) v *= 10;
  bool inexact = false;
  for (int i = 0; i > q->exp10 && v != 0; --i) {
    inexact = inexact || v % 10 != 0;
    v /= 10;
  }
  if (v >= cap) return q->negative ? std::numeric_limits<int64_t>::min() : kInt64Max;
  auto out = static_cast<int64_t>(v);
  // Positive values round up; negative ones toward zero (Go's ceiling of the negative value).
  if (inexact && !q->negative) ++out;
  return q->negative ? -out : out;
}

const std::string* Lookup(const ContainerView& c, const std::string& resource) {
  if (resource.empty()) return nullptr;
  if (const std::string* v = FindValue(c.limits, resource)) return v;
  return FindValue(c.requests, resource);
}

// HAMi CheckUUID: a non-blank use list must contain the id; a non-blank no-use list must not.
// Items are trimmed; matching is exact.
bool CheckUuid(const StringMap* annos, const std::string& use_key, const std::string& nouse_key,
               std::string_view id) {
  if (!annos) return true;
  auto listed = [&](const std::string& list) {
    for (std::string_view item : Split(list, ',')) {
      if (Trim(item) == id) return true;
    }
    return false;
  };
  if (const std::string* use = FindValue(*annos, use_key); use && !Trim(*use).empty()) {
    if (!listed(*use)) return false;
  }
  if (const std::string* nouse = FindValue(*annos, nouse_key); nouse && !Trim(*nouse).empty()) {
    if (listed(*nouse)) return false;
  }
  return true;
}

bool SoftSplit(const StringMap* pod_annotations) {
  if (!pod_annotations) return false;
  const std::string* mode = FindValue(*pod_annotations, kVnpuModeKey);
  return mode && *mode == kVnpuModeHamiCore;
}

// One device that passed every check, in scan order.
struct Pick {
  protocol::ContainerDevice device{};
  uint64_t index = 0;
  std::optional<int64_t> network_id{};
};

protocol::ContainerDevices Devices(const std::vector<Pick>& picks) {
  protocol::ContainerDevices out;
  for (const auto& p : picks) out.push_back(p.device);
  return out;
}

// HAMi computeBestCombination: fill `nums` from the ring holding the most passing devices first
// (ties: the ring met first), each ring's devices in scan order.
std::vector<Pick> ByRing(const std::vector<Pick>& picks, size_t nums) {
  std::vector<std::pair<int64_t, std::vector<const Pick*>>> rings;
  for (const auto& p : picks) {
    if (!p.network_id) continue;
    auto it = std::find_if(rings.begin(), rings.end(),
                           [&](const auto& r) { return r.first == *p.network_id; });
    if (it == rings.end()) it = rings.insert(rings.end(), {*p.network_id, {}});
    it->second.push_back(&p);
  }
  std::stable_sort(rings.begin(), rings.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::vector<Pick> out;
  for (const auto& ring : rings) {
    for (const Pick* p : ring.second) {
      out.push_back(*p);
      if (out.size() == nums) return out;
    }
  }
  return out;
}

// HAMi computeBestCombination910C: whole modules only, fullest first (ties: the module met
// first), until `nums` NPUs are covered (possibly overshooting on an odd request).
std::vector<Pick> ByModule(const std::vector<Pick>& picks, size_t nums) {
  std::vector<std::pair<uint64_t, std::vector<const Pick*>>> modules;
  for (const auto& p : picks) {
    uint64_t module = p.index / kNpusPerModule;
    auto it = std::find_if(modules.begin(), modules.end(),
                           [&](const auto& m) { return m.first == module; });
    if (it == modules.end()) it = modules.insert(modules.end(), {module, {}});
    it->second.push_back(&p);
  }
  std::stable_sort(modules.begin(), modules.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::vector<Pick> out;
  size_t covered = 0;
  for (const auto& module : modules) {
    if (covered >= nums) break;
    if (module.second.size() != kNpusPerModule) continue;
    for (const Pick* p : module.second) out.push_back(*p);
    covered += kNpusPerModule;
  }
  return out;
}

// The per-device checks after type and identity; nullopt when the device can take the request,
// with `*memreq` the memory it would hold.
std::optional<std::string_view> CheckCapacity(const DeviceUsage& dev, const DeviceRequest& req,
                                              bool mutex, bool soft, int32_t* memreq) {
  if (dev.count <= dev.used) return protocol::kCardTimeSlicingExhausted;
  if (mutex && dev.used > 0) return protocol::kExclusiveDeviceAllocateConflict;
  int32_t cores = std::min(req.coresreq, 100);
  *memreq = req.memreq > 0 ? req.memreq : 0;
  if (req.mem_percentage != kPercentUnset && req.memreq == 0) {
    *memreq = static_cast<int32_t>(static_cast<int64_t>(dev.totalmem) * req.mem_percentage / 100);
  }
  if (static_cast<int64_t>(dev.totalmem) - dev.usedmem < *memreq) {
    return protocol::kCardInsufficientMemory;
  }
  int32_t total_core = soft ? 100 : dev.totalcore;
  if (static_cast<int64_t>(total_core) - dev.usedcores < cores) {
    return protocol::kCardInsufficientCore;
  }
  if (total_core == 100 && cores == 100 && dev.used > 0) {
    return protocol::kExclusiveDeviceAllocateConflict;
  }
  if (total_core != 0 && dev.usedcores == total_core && cores == 0) {
    return protocol::kCardComputeUnitsExhausted;
  }
  return std::nullopt;
}

FitResult Success(std::vector<Pick> picks) {
  FitResult r;
  r.fit = true;
  r.devices = Devices(picks);
  return r;
}

void AppendField(std::string* out, bool* first, std::string_view key) {
  if (!*first) out->push_back(',');
  *first = false;
  protocol::AppendGoJsonString(out, key);
  out->push_back(':');
}

}  // namespace

protocol::VendorInfo AscendInfo(const VnpuConfig& config) {
  protocol::VendorInfo info = protocol::AscendVendor(config.common_word);
  info.count_resource = config.resource_name;
  info.memory_resource = config.resource_memory_name;
  info.core_resource = config.resource_core_name;
  return info;
}

std::pair<int64_t, std::string> TrimMemory(const VnpuConfig& config, int64_t memory) {
  for (const auto& t : config.templates) {
    if (memory <= t.memory) return {t.memory, t.name};
  }
  if (memory <= config.memory_capacity) return {config.memory_allocatable, ""};
  return {0, ""};
}

Result<std::vector<RegisteredDevice>> DecodeRegister(std::string_view value) {
  auto infos = protocol::DecodeNodeRegister(value, {.require_id = true});
  if (!infos) return std::move(infos).take_error();
  std::vector<RegisteredDevice> out;
  for (auto& info : *infos) out.push_back({std::move(info), std::nullopt});
  // The decoder accepted the text, so it is a JSON list (or null) of objects.
  auto doc = ParseJson(value);
  if (!doc || !doc->is_array()) return out;
  for (size_t i = 0; i < doc->size() && i < out.size(); ++i) {
    const auto& obj = (*doc)[i];
    if (!obj.is_object()) continue;
    // Go matches struct keys case-insensitively when no exact key exists.
    auto it = obj.find("customInfo");
    if (it == obj.end()) {
      for (auto j = obj.begin(); j != obj.end(); ++j) {
        if (ToLower(j.key()) == "custominfo") it = j;
      }
    }
    if (it == obj.end() || it->is_null()) continue;
    if (!it->is_object()) {
      return Error{"device " + std::to_string(i) + ": field \"customInfo\": want an object, got " +
                   Quote(it->dump())};
    }
    auto id = it->find("NetworkID");
    if (id == it->end() || !id->is_number()) continue;
    double v = id->get<double>();
    if (v > -9.2e18 && v < 9.2e18) out[i].network_id = static_cast<int64_t>(v);
  }
  return out;
}

Result<DeviceRequest> NormalizeRequest(const VnpuConfig& config, const ContainerView& container) {
  auto fail = [&](const std::string& resource, const std::string& value, const std::string& why) {
    return Error{"container " + Quote(container.name) + ": resource " + resource + " value " +
                 Quote(value) + ": " + why};
  };
  DeviceRequest req;
  const std::string* count = Lookup(container, config.resource_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config.resource_name, *count);
  if (!nums) return Error{"container " + Quote(container.name) + ": " + nums.error()};
  if (*nums == 0) return req;
  int64_t memory = 0;
  if (const std::string* mem = Lookup(container, config.resource_memory_name)) {
    auto q = protocol::ParseQuantity(*mem);
    std::optional<int64_t> v = QuantityValue(*mem);
    if (!q || !v) return fail(config.resource_memory_name, *mem, "not a quantity");
    if (q->negative && q->mantissa != 0) {
      return fail(config.resource_memory_name, *mem, "must not be negative");
    }
    if (*v > kInt32Max) {
      return fail(config.resource_memory_name, *mem,
                  "exceeds 2147483647; Ascend memory is counted in MiB, not bytes (ask 16384 "
                  "for 16 GiB)");
    }
    if (!protocol::ParseDeviceCount(config.resource_memory_name, *mem)) {
      return fail(config.resource_memory_name, *mem, "want a whole number of MiB");
    }
    memory = *v;
    if (config.memory_factor > 1) {
      memory *= config.memory_factor;
      if (memory > kInt32Max) {
        return fail(config.resource_memory_name, *mem,
                    "times memoryFactor " + std::to_string(config.memory_factor) +
                        " exceeds 2147483647 MiB");
      }
    }
  }
  int32_t cores = 0;
  if (const std::string* c = Lookup(container, config.resource_core_name)) {
    auto v = protocol::ParseDeviceCount(config.resource_core_name, *c);
    if (!v) return Error{"container " + Quote(container.name) + ": " + v.error()};
    cores = *v;
  }
  req.nums = *nums;
  req.type = config.common_word;
  req.memreq = static_cast<int32_t>(memory);
  req.mem_percentage = memory == 0 ? 100 : 0;
  req.coresreq = cores;
  return req;
}

Admission MutateAdmission(const VnpuConfig& config, const ContainerView& container,
                          const StringMap& pod_annotations, bool pod_has_runtime_class) {
  Admission out;
  const std::string* count_text = FindValue(container.limits, config.resource_name);
  if (config.resource_name.empty() || !count_text) {
    if (config.overwrite_env) out.env.emplace_back("ASCEND_VISIBLE_DEVICES", "");
    return out;
  }
  auto reject = [&](std::string message) {
    out.error = std::move(message);
    return out;
  };
  int64_t count = QuantityValue(*count_text).value_or(0);
  if (config.common_word == kAscend910C && config.super_pod) {
    if (count == 1) {
      // The smallest unit is one module (two NPUs).
      out.limits[config.resource_name] = "2";
      if (FindValue(container.requests, config.resource_name)) {
        out.requests[config.resource_name] = "2";
      }
    } else if (count % 2 != 0) {
      return reject("Ascend910C device request must be 1 or 2*n, got " + std::to_string(count));
    }
  }
  bool soft = SoftSplit(&pod_annotations);
  if (!soft && !config.resource_core_name.empty()) {
    const std::string* core = Lookup(container, config.resource_core_name);
    if (core && QuantityValue(*core).value_or(0) > 0) {
      return reject(config.resource_core_name +
                    " is only supported in hami-core (soft split) mode");
    }
  }
  int64_t memory = config.memory_allocatable;
  if (const std::string* mem = FindValue(container.limits, config.resource_memory_name);
      mem && !config.resource_memory_name.empty()) {
    int64_t asked = QuantityValue(*mem).value_or(0);
    memory = soft ? asked : TrimMemory(config, asked).first;
    if (!soft && memory <= 0) {
      return reject(config.resource_memory_name + " " + std::to_string(asked) + " is invalid");
    }
  }
  out.asks = true;
  if (count > 1 && !soft && memory != config.memory_allocatable) {
    return reject("vNPU not supported for multiple devices");
  }
  if (!config.resource_memory_name.empty()) {
    out.limits[config.resource_memory_name] = std::to_string(memory);
    out.requests[config.resource_memory_name] = std::to_string(memory);
  }
  if (!pod_has_runtime_class) out.runtime_class = config.runtime_class_name;
  return out;
}

FitResult Fit(const VnpuConfig& config, const std::vector<Candidate>& candidates,
              const DeviceRequest& request, const FitInput& input) {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  bool soft = SoftSplit(input.pod_annotations);
  bool node_soft = input.hami_vnpu_core;
  if (input.node_annotations) {
    if (const std::string* v = FindValue(*input.node_annotations, kNodeHamiCoreKey)) {
      node_soft = *v == "true";
    }
  }
  if (soft && !node_soft) {
    r.reasons[std::string(kModeNotFit)] = 1;
    return r;
  }
  const auto nums = static_cast<size_t>(request.nums);
  bool is_910 = config.common_word.starts_with(kAscend910Prefix);
  bool topology = is_910 && std::all_of(candidates.begin(), candidates.end(),
                                        [](const Candidate& c) { return c.network_id; });
  bool pairing = request.type == kAscend910C && nums > 1;
  bool collect_all = topology || pairing;  // else the first `nums` passing devices win
  protocol::VendorInfo info = protocol::AscendVendor(config.common_word);
  std::vector<Pick> picks;
  for (size_t k = candidates.size(); k-- > 0;) {
    const DeviceUsage& dev = *candidates[k].usage;
    std::optional<std::string_view> reason;
    int32_t memreq = 0;
    if (!dev.health) {
      reason = protocol::kCardNotHealth;
    } else if (request.type != config.common_word) {
      reason = protocol::kCardTypeMismatch;
    } else if (!CheckUuid(input.pod_annotations, info.use_uuid_key, info.nouse_uuid_key, dev.id)) {
      reason = protocol::kCardUuidMismatch;
    } else {
      reason = CheckCapacity(dev, request, input.mutex, soft, &memreq);
    }
    if (reason) {
      r.reasons[std::string(*reason)] += 1;
      continue;
    }
    picks.push_back(
        {protocol::ContainerDevice{dev.id, request.type, memreq, std::min(request.coresreq, 100)},
         dev.index, candidates[k].network_id});
    if (!collect_all && picks.size() == nums) return Success(std::move(picks));
  }
  const std::string shortfall(protocol::kAllocatedCardsInsufficientRequest);
  if (pairing) {
    std::vector<Pick> chosen = ByModule(picks, nums);
    if (chosen.size() == nums) return Success(std::move(chosen));
    // HAMi counts the paired NPUs, which may be none; a zero count would vanish from the reason
    // text, so then the unpaired ones that passed are counted.
    r.reasons[shortfall] = static_cast<int>(chosen.empty() ? picks.size() : chosen.size());
    r.devices_considered = request.nums;
    return r;
  }
  if (topology && picks.size() >= nums) {
    if (picks.size() == nums) return Success(std::move(picks));
    if (nums == 1) return Success({picks.front()});
    return Success(ByRing(picks, nums));
  }
  if (!picks.empty()) r.reasons[shortfall] = static_cast<int>(picks.size());
  return r;
}

double ScoreNode(const VnpuConfig& config, const protocol::PodDevices& pod_devices,
                 const std::map<std::string, int64_t>& network_ids) {
  if (!config.common_word.starts_with(kAscend910Prefix)) return 0;
  float score = 0;  // HAMi sums in float32
  for (const auto& container : pod_devices) {
    if (container.empty()) continue;
    std::map<int64_t, int> per_ring;
    for (const auto& d : container) {
      auto it = network_ids.find(d.uuid);
      if (it == network_ids.end()) return 0;
      per_ring[it->second] += 1;
    }
    int most = 0;
    for (const auto& [ring, n] : per_ring) most = std::max(most, n);
    score += static_cast<float>(most) / static_cast<float>(container.size());
  }
  return static_cast<double>(score * static_cast<float>(kNetworkWeight));
}

std::string EncodeRuntimeInfo(const VnpuConfig& config, bool soft_split,
                              const protocol::PodDevices& pod_devices) {
  std::vector<RuntimeEntry> entries;
  for (const auto& container : pod_devices) {
    for (const auto& d : container) {
      RuntimeEntry e{.uuid = d.uuid, .memory = d.usedmem, .core = d.usedcores};
      if (!soft_split) e.temp = TrimMemory(config, d.usedmem).second;
      entries.push_back(std::move(e));
    }
  }
  return EncodeRuntimeEntries(entries);
}

std::string EncodeRuntimeEntries(const std::vector<RuntimeEntry>& entries) {
  if (entries.empty()) return "null";
  std::string out;
  for (const auto& e : entries) {
    out += out.empty() ? "[{" : ",{";
    bool first = true;
    if (!e.uuid.empty()) {
      AppendField(&out, &first, "UUID");
      protocol::AppendGoJsonString(&out, e.uuid);
    }
    if (!e.temp.empty()) {
      AppendField(&out, &first, "temp");
      protocol::AppendGoJsonString(&out, e.temp);
    }
    if (e.memory != 0) {
      AppendField(&out, &first, "memory");
      out += std::to_string(e.memory);
    }
    if (e.core != 0) {
      AppendField(&out, &first, "core");
      out += std::to_string(e.core);
    }
    out += "}";
  }
  return out + "]";
}

Result<std::vector<RuntimeEntry>> DecodeRuntimeEntries(std::string_view value) {
  auto doc = ParseJson<nlohmann::ordered_json>(value);
  if (!doc) return std::move(doc).take_error();
  std::vector<RuntimeEntry> out;
  if (doc->is_null()) return out;
  if (!doc->is_array()) return Error{"want a JSON list, got " + Quote(doc->dump())};
  for (size_t i = 0; i < doc->size(); ++i) {
    const auto& item = (*doc)[i];
    std::string where = "entry " + std::to_string(i);
    if (!item.is_object()) return Error{where + ": want an object, got " + Quote(item.dump())};
    RuntimeEntry e;
    for (auto it = item.begin(); it != item.end(); ++it) {
      const auto& v = it.value();
      if (v.is_null()) continue;
      std::string key = it.key();
      std::string lower = ToLower(key);
      auto fail = [&](const char* field, std::string_view want) {
        return Error{where + ": field \"" + field + "\": want " + std::string(want) + ", got " +
                     Quote(v.dump())};
      };
      if (lower == "uuid" || lower == "temp") {
        if (!v.is_string()) return fail(lower == "uuid" ? "UUID" : "temp", "a string");
        (lower == "uuid" ? e.uuid : e.temp) = v.get<std::string>();
      } else if (lower == "memory") {
        if (!v.is_number_integer() ||
            (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kInt64Max))) {
          return fail("memory", "an int64");
        }
        e.memory = v.get<int64_t>();
      } else if (lower == "core") {
        if (!v.is_number_integer() || v.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
            v.get<int64_t>() > kInt32Max ||
            (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kInt32Max))) {
          return fail("core", "an int32");
        }
        e.core = static_cast<int32_t>(v.get<int64_t>());
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

StringMap PatchAnnotations(const VnpuConfig& config, const StringMap& pod_annotations,
                           const protocol::PodDevices& pod_devices) {
  StringMap out;
  if (pod_devices.empty()) return out;
  protocol::VendorInfo info = protocol::AscendVendor(config.common_word);
  std::string encoded = protocol::EncodePodDevices(pod_devices);
  out[info.to_allocate_key] = encoded;
  out[info.allocated_key] = encoded;
  out[info.extra_pod_keys.at(0)] =
      EncodeRuntimeInfo(config, SoftSplit(&pod_annotations), pod_devices);
  return out;
}

}  // namespace hami::device::ascend
