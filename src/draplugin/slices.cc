#include "draplugin/slices.h"

#include <algorithm>
#include <set>

#include "common/strings.h"

namespace hami::draplugin {
namespace {

constexpr int64_t kMiB = 1 << 20;
// MIG memory slices per GPU (A100/H100/H200: 8, of which 7 hold compute): one counter each.
constexpr uint32_t kMigMemorySlices = 8;

Json StringAttr(const std::string& v) { return Json{{"string", v}}; }
Json IntAttr(int64_t v) { return Json{{"int", v}}; }
Json VersionAttr(const std::string& v) { return Json{{"version", v}}; }

std::string SliceName(const std::string& node, size_t i) {
  return node + "-hami-core-gpu-" + std::to_string(i);
}

std::string MemorySliceCounter(uint32_t i) { return "memory-slice-" + std::to_string(i); }

// Attributes shared by a GPU and its MIG devices; versions only when discovery knew them.
void CommonAttributes(const GpuFacts& g, Json* attrs) {
  (*attrs)["uuid"] = StringAttr(g.gpu.uuid);
  (*attrs)["minor"] = IntAttr(g.minor());
  (*attrs)["productName"] = StringAttr(g.gpu.model);
  if (!g.attributes.brand.empty()) (*attrs)["brand"] = StringAttr(g.attributes.brand);
  if (!g.attributes.architecture.empty())
    (*attrs)["architecture"] = StringAttr(g.attributes.architecture);
  if (!g.attributes.cuda_compute_capability.empty()) {
    (*attrs)["cudaComputeCapability"] = VersionAttr(g.attributes.cuda_compute_capability);
  }
  if (!g.attributes.driver_version.empty())
    (*attrs)["driverVersion"] = VersionAttr(g.attributes.driver_version);
  if (!g.attributes.cuda_driver_version.empty()) {
    (*attrs)["cudaDriverVersion"] = VersionAttr(g.attributes.cuda_driver_version);
  }
  if (!g.attributes.pcie_bus_id.empty())
    (*attrs)["pcieBusID"] = StringAttr(g.attributes.pcie_bus_id);
}

void AddUnhealthyTaint(const GpuFacts& g, Json* device) {
  if (g.gpu.healthy) return;
  (*device)["taints"] = Json::array({{{"key", "hami.io/unhealthy"}, {"effect", "NoSchedule"}}});
}

std::vector<Json> MigDevices(const GpuFacts& g) {
  std::vector<Json> out;
  for (const auto& capacity : g.gpu.mig_profiles) {
    const auto& profile = capacity.profile;
    for (const auto& placement : profile.placements) {
      Json attrs = Json::object();
      attrs["type"] = StringAttr(std::string(kMigType));
      CommonAttributes(g, &attrs);
      attrs["profile"] = StringAttr(profile.name);
      Json counters = Json::object();
      for (uint32_t s = placement.start; s < placement.start + placement.size; ++s) {
        counters[MemorySliceCounter(s)] = {{"value", "1"}};
      }
      Json device = {
          {"name", MigDeviceName(g.minor(), profile.name, placement.start)},
          {"attributes", attrs},
          {"capacity",
           {{"memory", {{"value", FormatBinaryBytes(profile.memory_mb * kMiB)}}},
            {"cores", {{"value", std::to_string(profile.core)}}}}},
          {"consumesCounters",
           Json::array({{{"counterSet", CounterSetName(g.minor())}, {"counters", counters}}})}};
      AddUnhealthyTaint(g, &device);
      out.push_back(std::move(device));
    }
  }
  return out;
}

Json CounterSet(const GpuFacts& g) {
  Json counters = Json::object();
  for (uint32_t s = 0; s < kMigMemorySlices; ++s)
    counters[MemorySliceCounter(s)] = {{"value", "1"}};
  return {{"name", CounterSetName(g.minor())}, {"counters", counters}};
}

Json Slice(const SliceOptions& o, size_t index, int64_t generation) {
  return {{"apiVersion", kResourceApiVersion},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", SliceName(o.node_name, index)}}},
          {"spec",
           {{"driver", kDriverName},
            {"nodeName", o.node_name},
            {"pool", {{"name", o.node_name}, {"generation", generation}}}}}};
}

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-'; });
}

// The spec of a slice without what changes on every write.
Json Comparable(const Json& slice) {
  Json spec = slice.value("spec", Json::object());
  if (spec.contains("pool")) spec["pool"].erase("generation");
  return spec;
}

}  // namespace

std::string GpuDeviceName(int minor) { return "hami-gpu-" + std::to_string(minor); }

std::string CounterSetName(int minor) { return GpuDeviceName(minor) + "-counters"; }

std::string MigDeviceName(int minor, std::string_view profile, uint32_t start) {
  std::string p(profile);
  std::replace(p.begin(), p.end(), '.', '-');
  return GpuDeviceName(minor) + "-mig-" + p + "-" + std::to_string(start);
}

int DeviceNameMinor(std::string_view name) {
  static constexpr std::string_view kPrefix = "hami-gpu-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  std::string_view rest = name.substr(kPrefix.size());
  std::string_view digits = rest.substr(0, rest.find('-'));  // a MIG device goes on after "-"
  std::optional<uint64_t> minor = ParseUint64(digits);
  if (!minor || *minor >= (1u << 20)) return -1;
  return static_cast<int>(*minor);
}

std::string FormatBinaryBytes(int64_t bytes) {
  static constexpr const char* kSuffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (bytes == 0) return "0";
  int64_t value = bytes;
  int suffix = -1;
  while (suffix < 5 && value % 1024 == 0) {
    value /= 1024;
    ++suffix;
  }
  return std::to_string(value) + (suffix >= 0 ? kSuffixes[suffix] : "");
}

Json ShareableGpuDevice(const GpuFacts& g, double memory_scaling) {
  Json attrs = Json::object();
  attrs["type"] = StringAttr(std::string(kGpuType));
  CommonAttributes(g, &attrs);
  const int64_t mib = static_cast<int64_t>(static_cast<double>(g.gpu.memory_mib) *
                                           (memory_scaling > 0 ? memory_scaling : 1.0));
  const std::string memory = FormatBinaryBytes(mib * kMiB);
  Json device = {
      {"name", GpuDeviceName(g.minor())},
      {"attributes", attrs},
      {"capacity",
       {{"cores",
         {{"value", "100"},
          {"requestPolicy",
           {{"default", "100"}, {"validRange", {{"min", "0"}, {"max", "100"}, {"step", "1"}}}}}}},
        {"memory",
         {{"value", memory},
          {"requestPolicy",
           {{"default", memory},
            {"validRange", {{"min", "1Mi"}, {"max", memory}, {"step", "1Mi"}}}}}}}}},
      {"allowMultipleAllocations", true}};
  AddUnhealthyTaint(g, &device);
  return device;
}

Result<std::vector<Json>> BuildSlices(const std::vector<GpuFacts>& gpus,
                                      const SliceOptions& options, int64_t generation) {
  if (options.node_name.empty()) return Error{"ResourceSlice: the node name is empty"};
  std::vector<Json> devices;
  std::vector<Json> counter_sets;
  std::set<std::string> names;
  for (const GpuFacts& g : gpus) {
    if (!names.insert(GpuDeviceName(g.minor())).second) {
      return Error{"ResourceSlice: two GPUs with minor " + std::to_string(g.minor()) + " (" +
                   Quote(g.gpu.uuid) + ")"};
    }
    if (g.gpu.mig_profiles.empty()) {
      devices.push_back(ShareableGpuDevice(g, options.memory_scaling));
      continue;
    }
    counter_sets.push_back(CounterSet(g));
    for (Json& d : MigDevices(g)) devices.push_back(std::move(d));
  }
  // Counter sets first: the API server checks a device's consumesCounters against the sets
  // already stored in the pool, and the publisher writes slices in this order.
  std::vector<Json> slices;
  for (size_t i = 0; i < counter_sets.size(); i += kMaxCounterSetsPerSlice) {
    Json slice = Slice(options, slices.size(), generation);
    auto end = counter_sets.begin() + static_cast<std::ptrdiff_t>(std::min(
                                          counter_sets.size(), i + kMaxCounterSetsPerSlice));
    slice["spec"]["sharedCounters"] =
        Json(std::vector<Json>(counter_sets.begin() + static_cast<std::ptrdiff_t>(i), end));
    slices.push_back(std::move(slice));
  }
  for (size_t i = 0; i < devices.size(); i += kMaxDevicesPerSlice) {
    Json slice = Slice(options, slices.size(), generation);
    auto end = devices.begin() +
               static_cast<std::ptrdiff_t>(std::min(devices.size(), i + kMaxDevicesPerSlice));
    slice["spec"]["devices"] =
        Json(std::vector<Json>(devices.begin() + static_cast<std::ptrdiff_t>(i), end));
    slices.push_back(std::move(slice));
  }
  std::vector<std::string> set_names;
  for (const Json& set : counter_sets) set_names.push_back(set["name"].get<std::string>());
  for (Json& slice : slices) {
    slice["spec"]["pool"]["resourceSliceCount"] = static_cast<int64_t>(slices.size());
  }
  for (const Json& slice : slices) {
    if (auto valid = ValidateSlice(slice, set_names); !valid) return std::move(valid).take_error();
  }
  return slices;
}

Status ValidateSlice(const Json& slice, const std::vector<std::string>& pool_counter_sets) {
  const std::string name = slice.value("/metadata/name"_json_pointer, std::string());
  const std::string at = "ResourceSlice " + Quote(name) + ": ";
  if (!slice.contains("spec") || !slice["spec"].is_object()) return Error{at + "spec: missing"};
  const Json& spec = slice["spec"];
  const Json devices = spec.value("devices", Json::array());
  const Json sets = spec.value("sharedCounters", Json::array());
  if (!devices.empty() && !sets.empty()) {
    return Error{at + "spec.sharedCounters: only in a slice without devices"};
  }
  if (devices.size() > kMaxDevicesPerSlice) {
    return Error{at + "spec.devices: " + std::to_string(devices.size()) + " devices, at most " +
                 std::to_string(kMaxDevicesPerSlice)};
  }
  if (sets.size() > kMaxCounterSetsPerSlice) {
    return Error{at + "spec.sharedCounters: " + std::to_string(sets.size()) + " sets, at most " +
                 std::to_string(kMaxCounterSetsPerSlice)};
  }
  for (size_t i = 0; i < sets.size(); ++i) {
    const std::string path = "spec.sharedCounters[" + std::to_string(i) + "]";
    const std::string set_name = sets[i].value("name", std::string());
    if (!IsDnsLabel(set_name))
      return Error{at + path + ".name: not a DNS label: " + Quote(set_name)};
    const Json counters = sets[i].value("counters", Json::object());
    if (counters.size() > kMaxCountersPerSet) {
      return Error{at + path + ".counters: " + std::to_string(counters.size()) +
                   " counters, at most " + std::to_string(kMaxCountersPerSet)};
    }
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < devices.size(); ++i) {
    const Json& d = devices[i];
    const std::string path = "spec.devices[" + std::to_string(i) + "]";
    const std::string device = d.value("name", std::string());
    if (!IsDnsLabel(device)) return Error{at + path + ".name: not a DNS label: " + Quote(device)};
    if (!seen.insert(device).second) return Error{at + path + ".name: duplicate " + Quote(device)};
    const Json attrs = d.value("attributes", Json::object());
    const Json capacity = d.value("capacity", Json::object());
    if (attrs.size() + capacity.size() > kMaxAttributesAndCapacities) {
      return Error{at + path + ": " + std::to_string(attrs.size() + capacity.size()) +
                   " attributes and capacities, at most " +
                   std::to_string(kMaxAttributesAndCapacities)};
    }
    const bool multiple = d.value("allowMultipleAllocations", false);
    for (const auto& [cap_name, cap] : capacity.items()) {
      if (cap.contains("requestPolicy") && !multiple) {
        return Error{at + path + ".capacity." + cap_name +
                     ".requestPolicy: only with allowMultipleAllocations"};
      }
    }
    const Json consumes = d.value("consumesCounters", Json::array());
    if (consumes.size() > kMaxConsumesCountersPerDevice) {
      return Error{at + path + ".consumesCounters: " + std::to_string(consumes.size()) +
                   " entries, at most " + std::to_string(kMaxConsumesCountersPerDevice)};
    }
    for (size_t c = 0; c < consumes.size(); ++c) {
      const std::string set = consumes[c].value("counterSet", std::string());
      if (std::find(pool_counter_sets.begin(), pool_counter_sets.end(), set) ==
          pool_counter_sets.end()) {
        return Error{at + path + ".consumesCounters[" + std::to_string(c) +
                     "].counterSet: no counter set " + Quote(set) + " in the pool"};
      }
    }
  }
  return OkStatus();
}

bool PoolChanged(const std::vector<Json>& published, const std::vector<Json>& desired) {
  if (published.size() != desired.size()) return true;
  auto by_name = [](const std::vector<Json>& slices) {
    std::vector<std::pair<std::string, Json>> out;
    for (const Json& s : slices) {
      out.emplace_back(s.value("/metadata/name"_json_pointer, std::string()), Comparable(s));
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return out;
  };
  return by_name(published) != by_name(desired);
}

}  // namespace hami::draplugin
