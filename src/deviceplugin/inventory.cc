#include "deviceplugin/inventory.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>

#include "common/strings.h"

namespace hami::deviceplugin {
namespace {

// What the register annotation can carry: `index` and the MiB of `devmem` are Go int32 there.
constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxMemoryMib = std::numeric_limits<int32_t>::max();
constexpr const char* kEntryFields[] = {"index", "uuid", "model", "memory", "numa", "health"};

std::string Path(size_t i, const char* field) {
  return "devices[" + std::to_string(i) + "]." + field;
}

// A scalar as text; "" for a missing node. Errors for maps and sequences.
Result<std::string> Scalar(const YAML::Node& entry, size_t i, const char* field) {
  const YAML::Node n = entry[field];
  if (!n || n.IsNull()) return std::string();
  if (!n.IsScalar()) return Error{Path(i, field) + ": want a scalar"};
  return n.Scalar();
}

Result<GpuDevice> ParseEntry(const YAML::Node& entry, size_t i) {
  if (!entry.IsMap()) return Error{"devices[" + std::to_string(i) + "]: want a mapping"};
  for (const auto& kv : entry) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (std::find(std::begin(kEntryFields), std::end(kEntryFields), key) ==
        std::end(kEntryFields)) {
      return Error{"devices[" + std::to_string(i) + "]: unknown field " + Quote(key) +
                   " (want index, uuid, model, memory, numa or health)"};
    }
  }
  GpuDevice d;
  d.index = i;
  auto index = Scalar(entry, i, "index");
  if (!index) return std::move(index).take_error();
  if (!index->empty()) {
    auto v = ParseUint64(*index);
    if (!v || *v > static_cast<uint64_t>(kMaxIndex)) {
      return Error{Path(i, "index") + ": want an integer from 0 to " + std::to_string(kMaxIndex) +
                   ", got " + Quote(*index)};
    }
    d.index = *v;
  }
  auto uuid = Scalar(entry, i, "uuid");
  if (!uuid) return std::move(uuid).take_error();
  if (uuid->empty()) return Error{Path(i, "uuid") + ": required"};
  // The pod annotation hami.io/vgpu-devices-allocated separates fields with these.
  if (uuid->find_first_of(",:;") != std::string::npos) {
    return Error{Path(i, "uuid") + ": must not contain ',', ':' or ';', got " + Quote(*uuid)};
  }
  d.uuid = *uuid;
  auto model = Scalar(entry, i, "model");
  if (!model) return std::move(model).take_error();
  if (model->empty()) return Error{Path(i, "model") + ": required"};
  d.model = *model;
  auto memory = Scalar(entry, i, "memory");
  if (!memory) return std::move(memory).take_error();
  auto mib = ParseInt64(*memory);
  if (!mib || *mib <= 0 || *mib > kMaxMemoryMib) {
    return Error{Path(i, "memory") + ": want an integer from 1 to " +
                 std::to_string(kMaxMemoryMib) + " (MiB), got " + Quote(*memory)};
  }
  d.memory_mib = *mib;
  auto numa = Scalar(entry, i, "numa");
  if (!numa) return std::move(numa).take_error();
  if (!numa->empty()) {
    auto v = ParseInt64(*numa);
    if (!v || *v < 0) {
      return Error{Path(i, "numa") + ": want a non-negative integer, got " + Quote(*numa)};
    }
    d.numa = *v;
  }
  auto health = Scalar(entry, i, "health");
  if (!health) return std::move(health).take_error();
  if (!health->empty()) {
    auto v = ParseBool(*health);
    if (!v) return Error{Path(i, "health") + ": want a boolean, got " + Quote(*health)};
    d.healthy = *v;
  }
  return d;
}

}  // namespace

Result<std::vector<GpuDevice>> ParseInventory(std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Error{"inventory: invalid YAML: " + std::string(e.what())};
  }
  if (!root.IsMap()) return Error{"inventory: want a mapping with a `devices` list"};
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (key != "devices") {
      return Error{"inventory: unknown key " + Quote(key) + " (the only key is `devices`)"};
    }
  }
  const YAML::Node list = root["devices"];
  if (!list || list.IsNull()) return std::vector<GpuDevice>{};
  if (!list.IsSequence()) return Error{"devices: want a list"};
  std::vector<GpuDevice> out;
  std::set<std::string> seen;
  std::set<uint64_t> seen_index;
  for (size_t i = 0; i < list.size(); ++i) {
    auto d = ParseEntry(list[i], i);
    if (!d) return std::move(d).take_error();
    if (!seen.insert(d->uuid).second) {
      return Error{Path(i, "uuid") + ": duplicate " + Quote(d->uuid)};
    }
    if (!seen_index.insert(d->index).second) {
      return Error{Path(i, "index") + ": duplicate " + std::to_string(d->index)};
    }
    out.push_back(std::move(*d));
  }
  return out;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot open " + Quote(path)};
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Error{"cannot read " + Quote(path)};
  return ss.str();
}

Result<std::vector<GpuDevice>> InventoryDiscovery::Discover() {
  auto text = ReadFile(path_);
  if (!text) return std::move(text).take_error();
  auto devices = ParseInventory(*text);
  if (!devices) return Error{path_ + ": " + devices.error()};
  return devices;
}

}  // namespace hami::deviceplugin
