#include "device/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <functional>

#include "common/strings.h"
#include "device/device.h"
#include "device/policy.h"
#include "device/yaml_error.h"

namespace hami::device {
namespace {

// HAMi's top-level sections; a file with none of them is rejected.
constexpr std::string_view kTopLevelSections[] = {
    "nvidia", "metax",     "hygon", "cambricon", "mthreads", "iluvatars", "enflame",
    "kunlun", "awsneuron", "amd",   "vastai",    "biren",    "vnpus"};

Status ReadString(const YAML::Node& node, const std::string& path, std::string* out) {
  if (!node.IsScalar()) return FieldError(path, "a string", Describe(node));
  *out = node.Scalar();
  return OkStatus();
}

Status ReadInt(const YAML::Node& node, const std::string& path, int64_t min, int64_t max,
               std::string_view want, int64_t* out) {
  std::optional<int64_t> v;
  if (node.IsScalar()) {
    std::string_view text = node.Scalar();
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    v = ParseInt64(text);
  }
  if (!v || *v < min || *v > max) return FieldError(path, want, Describe(node));
  *out = *v;
  return OkStatus();
}

template <typename T>
Status ReadIntAs(const YAML::Node& node, const std::string& path, int64_t min, int64_t max,
                 std::string_view want, T* out) {
  int64_t v = 0;
  if (auto s = ReadInt(node, path, min, max, want, &v); !s) return s;
  *out = static_cast<T>(v);
  return OkStatus();
}

Status ReadPositiveDouble(const YAML::Node& node, const std::string& path, double* out) {
  constexpr std::string_view kWant = "a positive number";
  if (!node.IsScalar() || node.Scalar().empty()) return FieldError(path, kWant, Describe(node));
  const std::string& text = node.Scalar();
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0) {
    return FieldError(path, kWant, text);
  }
  *out = v;
  return OkStatus();
}

// YAML 1.1 booleans, which HAMi's loader (sigs.k8s.io/yaml) accepts.
Status ReadBool(const YAML::Node& node, const std::string& path, bool* out) {
  if (node.IsScalar()) {
    std::string v = ToLower(node.Scalar());
    if (v == "true" || v == "yes" || v == "on" || v == "y") return *out = true, OkStatus();
    if (v == "false" || v == "no" || v == "off" || v == "n") return *out = false, OkStatus();
  }
  return FieldError(path, "a boolean", Describe(node));
}

Status ReadStringList(const YAML::Node& node, const std::string& path,
                      std::vector<std::string>* out) {
  if (!node || node.IsNull()) return out->clear(), OkStatus();
  if (!node.IsSequence()) return FieldError(path, "a list of strings", Describe(node));
  out->clear();
  for (size_t i = 0; i < node.size(); ++i) {
    std::string item;
    if (auto s = ReadString(node[i], path + "[" + std::to_string(i) + "]", &item); !s) return s;
    out->push_back(std::move(item));
  }
  return OkStatus();
}

// "<N>g.<rest>" with N a positive integer and a non-empty rest, e.g. "1g.5gb".
bool ValidMigProfile(std::string_view p) {
  size_t g = p.find('g');
  if (g == std::string_view::npos || g == 0 || p.size() < g + 3 || p[g + 1] != '.') return false;
  auto n = ParseInt32(p.substr(0, g));
  return n && *n > 0;
}

Status ReadMigAllowlist(const YAML::Node& node, const std::string& path,
                        std::vector<MigAllowlistEntry>* out) {
  if (!node || node.IsNull()) return out->clear(), OkStatus();
  if (!node.IsSequence()) return FieldError(path, "a list", Describe(node));
  out->clear();
  for (size_t i = 0; i < node.size(); ++i) {
    std::string item_path = path + "[" + std::to_string(i) + "]";
    if (!node[i].IsMap()) return FieldError(item_path, "a map", Describe(node[i]));
    MigAllowlistEntry entry;
    if (auto s = ReadStringList(node[i]["models"], item_path + ".models", &entry.models); !s) {
      return s;
    }
    if (auto s = ReadStringList(node[i]["profiles"], item_path + ".profiles", &entry.profiles);
        !s) {
      return s;
    }
    out->push_back(std::move(entry));
  }
  return OkStatus();
}

using FieldReader = std::function<Status(const YAML::Node&, const std::string&, NvidiaConfig*)>;

const std::map<std::string, FieldReader>& NvidiaFields() {
  constexpr int64_t kI32 = 2147483647;
  static const auto* fields = new std::map<std::string, FieldReader>{
      {"resourceCountName",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadString(n, p, &c->resource_count_name); }},
      {"resourceMemoryName",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadString(n, p, &c->resource_memory_name);
       }},
      {"resourceMemoryPercentageName",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadString(n, p, &c->resource_memory_percentage_name);
       }},
      {"resourceCoreName",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadString(n, p, &c->resource_core_name); }},
      {"resourcePriorityName",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadString(n, p, &c->resource_priority_name);
       }},
      {"overwriteEnv",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadBool(n, p, &c->overwrite_env); }},
      {"defaultMemory",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadIntAs(n, p, 0, kI32, "a non-negative integer", &c->default_memory);
       }},
      {"defaultCores",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadIntAs(n, p, 0, 100, "an integer 0..100", &c->default_cores);
       }},
      {"defaultGPUNum",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadIntAs(n, p, 0, kI32, "a non-negative integer", &c->default_gpu_num);
       }},
      {"memoryFactor",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadIntAs(n, p, 1, kI32, "a positive integer", &c->memory_factor);
       }},
      {"disableCoreLimit",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadBool(n, p, &c->disable_core_limit); }},
      {"gpuCorePolicy",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadString(n, p, &c->gpu_core_policy); }},
      {"runtimeClassName",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadString(n, p, &c->runtime_class_name); }},
      {"migProfileAllowlist",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadMigAllowlist(n, p, &c->mig_profile_allowlist);
       }},
      {"deviceSplitCount",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadIntAs(n, p, 1, kI32, "a positive integer", &c->device_split_count);
       }},
      {"deviceMemoryScaling",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadPositiveDouble(n, p, &c->device_memory_scaling);
       }},
      {"deviceCoreScaling",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadPositiveDouble(n, p, &c->device_core_scaling);
       }},
      {"preConfiguredDeviceMemory",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadIntAs(n, p, 0, INT64_MAX, "a non-negative integer",
                          &c->pre_configured_device_memory);
       }},
      {"libCudaLogLevel",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadString(n, p, &c->lib_cuda_log_level); }},
      {"enableNumaTopology",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadBool(n, p, &c->enable_numa_topology); }},
  };
  return *fields;
}

Status ReadNvidia(const YAML::Node& node, NvidiaConfig* out) {
  if (!node || node.IsNull()) return OkStatus();
  if (!node.IsMap()) return FieldError("nvidia", "a map", Describe(node));
  const auto& fields = NvidiaFields();
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;
    auto it = fields.find(kv.first.Scalar());
    if (it == fields.end() || kv.second.IsNull()) continue;  // unknown keys are ignored
    if (auto s = it->second(kv.second, "nvidia." + kv.first.Scalar(), out); !s) return s;
  }
  return OkStatus();
}

// Scalars of a map section; nested values are skipped.
VendorSection ReadSection(const YAML::Node& node) {
  VendorSection section;
  if (!node.IsMap()) return section;
  for (const auto& kv : node) {
    if (kv.first.IsScalar() && kv.second.IsScalar()) {
      section.values[kv.first.Scalar()] = kv.second.Scalar();
    }
  }
  return section;
}

Status ReadOthers(const YAML::Node& root, DeviceConfig* config) {
  for (std::string_view key : kTopLevelSections) {
    if (key == "nvidia") continue;
    YAML::Node node = root[std::string(key)];
    if (!node || node.IsNull()) continue;
    std::string k(key);
    YAML::Node list = node;
    if (key == "vnpus") {
      config->others[k] = ReadSection(node);
      list.reset(node["configs"]);  // `list = ...` would overwrite the vnpus node itself
      k = "vnpus.configs";
      if (!list || list.IsNull()) continue;
    }
    if (key == "iluvatars" || key == "vnpus") {
      if (!list.IsSequence()) return FieldError(k, "a list", Describe(list));
      for (size_t i = 0; i < list.size(); ++i) {
        config->others[k + "[" + std::to_string(i) + "]"] = ReadSection(list[i]);
      }
      continue;
    }
    if (!node.IsMap()) return FieldError(k, "a map", Describe(node));
    config->others[k] = ReadSection(node);
  }
  return OkStatus();
}

Status ReadScheduler(const YAML::Node& node, SchedulerPolicyConfig* out) {
  if (!node || node.IsNull()) return OkStatus();
  if (!node.IsMap()) return FieldError("scheduler", "a map", Describe(node));
  if (auto n = node["nodeSchedulerPolicy"]; n && !n.IsNull()) {
    if (auto s = ReadString(n, "scheduler.nodeSchedulerPolicy", &out->node_scheduler_policy); !s) {
      return s;
    }
  }
  if (auto n = node["gpuSchedulerPolicy"]; n && !n.IsNull()) {
    if (auto s = ReadString(n, "scheduler.gpuSchedulerPolicy", &out->gpu_scheduler_policy); !s) {
      return s;
    }
  }
  return OkStatus();
}

Result<DeviceConfig> Parse(const YAML::Node& root) {
  if (!root || root.IsNull()) return Error{"device config: all configurations are empty"};
  if (!root.IsMap())
    return Error{"device config: want a map at the top level, got " + Quote(Describe(root))};
  bool any = false;
  for (std::string_view key : kTopLevelSections) {
    auto n = root[std::string(key)];
    if (n && !n.IsNull()) any = true;
  }
  if (!any) return Error{"device config: all configurations are empty"};
  DeviceConfig config = DefaultDeviceConfig();
  config.has_nvidia = root["nvidia"] && !root["nvidia"].IsNull();
  config.sections.clear();
  for (const auto& kv : root) {
    if (!kv.first.IsScalar() || kv.first.Scalar() == "scheduler") continue;
    if (!kv.second || kv.second.IsNull()) continue;
    YAML::Emitter out;
    out << kv.second;
    config.sections[kv.first.Scalar()] = out.c_str();
  }
  if (auto s = ReadNvidia(root["nvidia"], &config.nvidia); !s) return std::move(s).take_error();
  if (auto s = ReadOthers(root, &config); !s) return std::move(s).take_error();
  if (auto s = ReadScheduler(root["scheduler"], &config.scheduler); !s)
    return std::move(s).take_error();
  if (auto s = ValidateDeviceConfig(config); !s) return std::move(s).take_error();
  // Each present vendor section is parsed by its own backend (device.h self-registration).
  for (const auto& [name, text] : config.sections) {
    const VendorFactory* factory = FindVendorFactory(name);
    if (!factory) continue;
    auto made = (*factory)(root[name], config);
    if (!made) return std::move(made).take_error();
  }
  return config;
}

}  // namespace

DeviceConfig DefaultDeviceConfig() {
  DeviceConfig config;
  config.sections["nvidia"] = "";
  config.nvidia.mig_profile_allowlist = {
      {{"A30"}, {"1g.6gb", "2g.12gb", "4g.24gb"}},
      {{"A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"},
       {"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"}},
      {{"A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"},
       {"1g.10gb", "2g.20gb", "3g.40gb", "7g.79gb"}},
      {{"H100-PCIE-80GB", "H100-SXM5-80GB"}, {"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"}},
      {{"H100-PCIE-94GB", "H100-SXM5-94GB"}, {"1g.12gb", "2g.24gb", "3g.47gb", "7g.94gb"}},
      {{"H20", "H100 on GH200"}, {"1g.12gb", "2g.24gb", "3g.48gb", "7g.96gb"}},
      {{"H200 NVL", "H200-SXM5"}, {"1g.18gb", "2g.35gb", "3g.71gb", "7g.141gb"}},
      {{"B200"}, {"1g.23gb", "2g.45gb", "3g.90gb", "7g.180gb"}},
      {{"RTX PRO 6000 Blackwell Server Edition"}, {"1g.24gb", "2g.48gb", "4g.96gb"}},
  };
  return config;
}

Status ValidateDeviceConfig(const DeviceConfig& config) {
  const NvidiaConfig& n = config.nvidia;
  auto bad_int = [](const char* path, std::string_view want, int64_t v) {
    return FieldError(path, want, std::to_string(v));
  };
  if (n.default_memory < 0)
    return bad_int("nvidia.defaultMemory", "a non-negative integer", n.default_memory);
  if (n.default_cores < 0 || n.default_cores > 100) {
    return bad_int("nvidia.defaultCores", "an integer 0..100", n.default_cores);
  }
  if (n.default_gpu_num < 0) {
    return bad_int("nvidia.defaultGPUNum", "a non-negative integer", n.default_gpu_num);
  }
  if (n.memory_factor < 1) {
    return bad_int("nvidia.memoryFactor", "a positive integer", n.memory_factor);
  }
  if (n.device_split_count < 1) {
    return bad_int("nvidia.deviceSplitCount", "a positive integer", n.device_split_count);
  }
  if (!(n.device_memory_scaling > 0) || !std::isfinite(n.device_memory_scaling)) {
    return FieldError("nvidia.deviceMemoryScaling", "a positive number",
                      std::to_string(n.device_memory_scaling));
  }
  if (!(n.device_core_scaling > 0) || !std::isfinite(n.device_core_scaling)) {
    return FieldError("nvidia.deviceCoreScaling", "a positive number",
                      std::to_string(n.device_core_scaling));
  }
  if (n.pre_configured_device_memory < 0) {
    return bad_int("nvidia.preConfiguredDeviceMemory", "a non-negative integer",
                   n.pre_configured_device_memory);
  }
  if (n.gpu_core_policy != "default" && n.gpu_core_policy != "force" &&
      n.gpu_core_policy != "disable") {
    return FieldError("nvidia.gpuCorePolicy", "one of default, force, disable", n.gpu_core_policy);
  }
  for (size_t i = 0; i < n.mig_profile_allowlist.size(); ++i) {
    const auto& profiles = n.mig_profile_allowlist[i].profiles;
    for (size_t j = 0; j < profiles.size(); ++j) {
      if (!ValidMigProfile(profiles[j])) {
        return FieldError("nvidia.migProfileAllowlist[" + std::to_string(i) + "].profiles[" +
                              std::to_string(j) + "]",
                          "a MIG profile like 1g.5gb", profiles[j]);
      }
    }
  }
  if (!ParseNodePolicy(config.scheduler.node_scheduler_policy)) {
    return FieldError("scheduler.nodeSchedulerPolicy", "binpack or spread",
                      config.scheduler.node_scheduler_policy);
  }
  if (auto p = ParseGpuPolicy(config.scheduler.gpu_scheduler_policy, /*strict=*/true); !p) {
    return Error{"scheduler.gpuSchedulerPolicy: " + p.error()};
  }
  return OkStatus();
}

Result<DeviceConfig> LoadDeviceConfig(std::string_view yaml_text) {
  // yaml-cpp reports syntax errors (and a few access errors) by exception; they stop here.
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    return Parse(root);
  } catch (const YAML::Exception& e) {
    return Error{"device config: invalid YAML: " + std::string(e.what())};
  } catch (const std::exception& e) {
    return Error{"device config: " + std::string(e.what())};
  }
}

}  // namespace hami::device
