#include "deviceplugin/plugin_config.h"

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/strings.h"
#include "device/config.h"
#include "device/vendors/nvidia/nvidia_config.h"

namespace hami::deviceplugin {
Result<PluginConfig> ApplyDeviceConfigYaml(std::string_view yaml_text, PluginConfig base) {
  auto loaded = device::LoadDeviceConfig(yaml_text);
  if (!loaded) return Error{"device config: " + loaded.error()};
  if (!device::nvidia::HasNvidiaSection(*loaded)) return base;
  auto parsed = device::nvidia::NvidiaConfigOf(*loaded);
  if (!parsed) return Error{"device config: " + parsed.error()};
  const device::nvidia::NvidiaConfig& nv = *parsed;
  PluginConfig c = std::move(base);
  c.resource_name = nv.resource_count_name;
  c.device_split_count = nv.device_split_count;
  c.device_memory_scaling = nv.device_memory_scaling;
  c.device_core_scaling = nv.device_core_scaling;
  c.pre_configured_device_memory = nv.pre_configured_device_memory;
  c.lib_cuda_log_level = nv.lib_cuda_log_level;
  c.enable_numa_topology = nv.enable_numa_topology;
  c.disable_core_limit = nv.disable_core_limit;
  c.mig_profile_allowlist = nv.mig_profile_allowlist;
  c.memory_factor = nv.memory_factor;
  c.default_memory = nv.default_memory;
  c.default_cores = nv.default_cores;
  if (Status v = ValidatePluginConfig(c); !v) return std::move(v).take_error();
  return c;
}

namespace {

using Json = nlohmann::json;

template <typename T>
Status ReadJson(const Json& entry, const char* key, T* out) {
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return OkStatus();
  try {
    *out = it->get<T>();
  } catch (const Json::exception&) {
    return Error{std::string("nodeconfig.") + key + ": wrong type, got " + it->dump()};
  }
  return OkStatus();
}

Status ReadFilter(const Json& entry, PluginConfig* c) {
  auto it = entry.find("filterdevices");
  if (it == entry.end() || it->is_null()) return OkStatus();
  if (!it->is_object()) return Error{"nodeconfig.filterdevices: want an object"};
  Status s = ReadJson(*it, "uuid", &c->filter_uuids);
  if (s) s = ReadJson(*it, "index", &c->filter_indices);
  return s;
}

}  // namespace

Result<PluginConfig> ApplyNodeConfigJson(std::string_view json_text, std::string_view node_name,
                                         PluginConfig base) {
  Result<Json> parsed = ParseJson<Json>(json_text);
  if (!parsed) return Error{"node config: " + parsed.error()};
  Json& root = *parsed;
  if (!root.is_object()) return Error{"node config: want a JSON object"};
  auto list = root.find("nodeconfig");
  if (list == root.end() || list->is_null()) return base;
  if (!list->is_array()) return Error{"nodeconfig: want a list"};
  for (const Json& entry : *list) {
    if (!entry.is_object() || entry.value("name", Json()) != Json(node_name)) continue;
    PluginConfig c = std::move(base);
    Status s = ReadJson(entry, "operatingmode", &c.operating_mode);
    if (s) s = ReadJson(entry, "devicesplitcount", &c.device_split_count);
    if (s) s = ReadJson(entry, "devicememoryscaling", &c.device_memory_scaling);
    if (s) s = ReadJson(entry, "devicecorescaling", &c.device_core_scaling);
    if (s) s = ReadJson(entry, "preconfigureddevicememory", &c.pre_configured_device_memory);
    if (s) s = ReadJson(entry, "libcudaloglevel", &c.lib_cuda_log_level);
    if (s) s = ReadJson(entry, "enablenumatopology", &c.enable_numa_topology);
    if (s) s = ReadJson(entry, "enablegetpreferredallocation", &c.enable_preferred_allocation);
    if (s) s = ReadFilter(entry, &c);
    if (!s) return std::move(s).take_error();
    if (Status v = ValidatePluginConfig(c); !v) return std::move(v).take_error();
    return c;
  }
  return base;
}

Status ValidatePluginConfig(const PluginConfig& c) {
  if (c.device_split_count < 1) {
    return Error{"deviceSplitCount: want a positive integer, got " +
                 Quote(std::to_string(c.device_split_count))};
  }
  if (!(c.device_memory_scaling > 0)) {
    return Error{"deviceMemoryScaling: want a positive number, got " +
                 Quote(std::to_string(c.device_memory_scaling))};
  }
  if (!(c.device_core_scaling > 0)) {
    return Error{"deviceCoreScaling: want a positive number, got " +
                 Quote(std::to_string(c.device_core_scaling))};
  }
  if (c.operating_mode != "hami-core" && c.operating_mode != "mps" &&
      c.operating_mode != kMigOperatingMode) {
    return Error{"operatingmode: want \"hami-core\", \"mps\" or \"mig\", got " +
                 Quote(c.operating_mode)};
  }
  if (c.resource_name.empty()) return Error{"resourceCountName: must not be empty"};
  return OkStatus();
}

}  // namespace hami::deviceplugin
