#include "deviceplugin/plugin_config.h"

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace hami::deviceplugin {
namespace {

// Reads nvidia.<key> into *out with `parse`; absent or null leaves *out.
template <typename T, typename Parse>
Status ReadYaml(const YAML::Node& section, const char* key, const char* want, Parse parse, T* out) {
  const YAML::Node n = section[key];
  if (!n || n.IsNull()) return OkStatus();
  const std::string path = std::string("nvidia.") + key;
  if (!n.IsScalar()) return Error{path + ": want " + want};
  auto v = parse(n.Scalar());
  if (!v) return Error{path + ": want " + want + ", got " + Quote(n.Scalar())};
  *out = *v;
  return OkStatus();
}

std::optional<double> ParseDouble(std::string_view s) {
  std::string text(Trim(s));
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

std::optional<std::string> AnyString(std::string_view s) { return std::string(s); }

}  // namespace

Result<PluginConfig> ApplyDeviceConfigYaml(std::string_view yaml_text, PluginConfig base) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Error{"device config: invalid YAML: " + std::string(e.what())};
  }
  if (!root.IsMap()) return Error{"device config: want a mapping"};
  const YAML::Node nv = root["nvidia"];
  if (!nv || nv.IsNull()) return base;
  if (!nv.IsMap()) return Error{"nvidia: want a mapping"};
  PluginConfig c = std::move(base);
  Status s = ReadYaml(nv, "resourceCountName", "a string", AnyString, &c.resource_name);
  if (s)
    s = ReadYaml(nv, "deviceSplitCount", "a positive integer", ParseInt32, &c.device_split_count);
  if (s) s = ReadYaml(nv, "deviceMemoryScaling", "a number", ParseDouble, &c.device_memory_scaling);
  if (s) s = ReadYaml(nv, "deviceCoreScaling", "a number", ParseDouble, &c.device_core_scaling);
  if (s)
    s = ReadYaml(nv, "preConfiguredDeviceMemory", "an integer (MiB)", ParseInt64,
                 &c.pre_configured_device_memory);
  if (s) s = ReadYaml(nv, "libCudaLogLevel", "a string", AnyString, &c.lib_cuda_log_level);
  if (s) s = ReadYaml(nv, "enableNumaTopology", "a boolean", ParseBool, &c.enable_numa_topology);
  if (s) s = ReadYaml(nv, "disableCoreLimit", "a boolean", ParseBool, &c.disable_core_limit);
  if (!s) return std::move(s).take_error();
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
  Json root = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return Error{"node config: invalid JSON"};
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
  if (c.operating_mode != "hami-core" && c.operating_mode != "mps") {
    return Error{"operatingmode: want \"hami-core\" or \"mps\", got " + Quote(c.operating_mode)};
  }
  if (c.resource_name.empty()) return Error{"resourceCountName: must not be empty"};
  return OkStatus();
}

}  // namespace hami::deviceplugin
