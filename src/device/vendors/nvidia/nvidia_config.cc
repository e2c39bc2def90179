#include "device/vendors/nvidia/nvidia_config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>

#include "common/strings.h"
#include "device/vendors/nvidia/mig.h"
#include "device/yaml_error.h"

namespace hami::device::nvidia {
namespace {

Status ReadString(const YAML::Node& node, const std::string& path, std::string* out) {
  if (!node.IsScalar()) return FieldError(path, "a string", Describe(node));
  *out = node.Scalar();
  return OkStatus();
}

template <typename T>
Status ReadInt(const YAML::Node& node, const std::string& path, int64_t min, int64_t max,
               std::string_view want, T* out) {
  std::optional<int64_t> v;
  if (node.IsScalar()) {
    std::string_view text = node.Scalar();
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    v = ParseInt64(text);
  }
  if (!v || *v < min || *v > max) return FieldError(path, want, Describe(node));
  *out = static_cast<T>(*v);
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
  out->clear();
  if (!node || node.IsNull()) return OkStatus();
  if (!node.IsSequence()) return FieldError(path, "a list of strings", Describe(node));
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
  out->clear();
  if (!node || node.IsNull()) return OkStatus();
  if (!node.IsSequence()) return FieldError(path, "a list", Describe(node));
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
    for (size_t j = 0; j < entry.profiles.size(); ++j) {
      if (!ValidMigProfile(entry.profiles[j])) {
        return FieldError(item_path + ".profiles[" + std::to_string(j) + "]",
                          "a MIG profile like 1g.5gb", entry.profiles[j]);
      }
    }
    out->push_back(std::move(entry));
  }
  // HAMi's own rules over the whole list (an entry without models or profiles is refused).
  if (Status s = ValidateMigProfileAllowlist(*out); !s) {
    return Error{std::string(kSection) + "." + s.error()};
  }
  return OkStatus();
}

Status ReadCorePolicy(const YAML::Node& node, const std::string& path, std::string* out) {
  if (auto s = ReadString(node, path, out); !s) return s;
  if (*out != "default" && *out != "force" && *out != "disable") {
    return FieldError(path, "one of default, force, disable", *out);
  }
  return OkStatus();
}

using FieldReader = std::function<Status(const YAML::Node&, const std::string&, NvidiaConfig*)>;

const std::map<std::string, FieldReader, std::less<>>& Fields() {
  constexpr int64_t kI32 = 2147483647;
  auto str = [](std::string NvidiaConfig::*field) -> FieldReader {
    return [field](auto& n, auto& p, NvidiaConfig* c) { return ReadString(n, p, &(c->*field)); };
  };
  auto boolean = [](bool NvidiaConfig::*field) -> FieldReader {
    return [field](auto& n, auto& p, NvidiaConfig* c) { return ReadBool(n, p, &(c->*field)); };
  };
  auto number = [](auto NvidiaConfig::*field, int64_t min, int64_t max,
                   std::string_view want) -> FieldReader {
    return [=](auto& n, auto& p, NvidiaConfig* c) {
      return ReadInt(n, p, min, max, want, &(c->*field));
    };
  };
  auto scaling = [](double NvidiaConfig::*field) -> FieldReader {
    return [field](auto& n, auto& p, NvidiaConfig* c) {
      return ReadPositiveDouble(n, p, &(c->*field));
    };
  };
  static const auto* fields = new std::map<std::string, FieldReader, std::less<>>{
      {"resourceCountName", str(&NvidiaConfig::resource_count_name)},
      {"resourceMemoryName", str(&NvidiaConfig::resource_memory_name)},
      {"resourceMemoryPercentageName", str(&NvidiaConfig::resource_memory_percentage_name)},
      {"resourceCoreName", str(&NvidiaConfig::resource_core_name)},
      {"resourcePriorityName", str(&NvidiaConfig::resource_priority_name)},
      {"overwriteEnv", boolean(&NvidiaConfig::overwrite_env)},
      {"defaultMemory", number(&NvidiaConfig::default_memory, 0, kI32, "a non-negative integer")},
      {"defaultCores", number(&NvidiaConfig::default_cores, 0, 100, "an integer 0..100")},
      {"defaultGPUNum", number(&NvidiaConfig::default_gpu_num, 0, kI32, "a non-negative integer")},
      {"memoryFactor", number(&NvidiaConfig::memory_factor, 1, kI32, "a positive integer")},
      {"disableCoreLimit", boolean(&NvidiaConfig::disable_core_limit)},
      {"gpuCorePolicy",
       [](auto& n, auto& p, NvidiaConfig* c) { return ReadCorePolicy(n, p, &c->gpu_core_policy); }},
      {"runtimeClassName", str(&NvidiaConfig::runtime_class_name)},
      {"migProfileAllowlist",
       [](auto& n, auto& p, NvidiaConfig* c) {
         return ReadMigAllowlist(n, p, &c->mig_profile_allowlist);
       }},
      {"deviceSplitCount",
       number(&NvidiaConfig::device_split_count, 1, kI32, "a positive integer")},
      {"deviceMemoryScaling", scaling(&NvidiaConfig::device_memory_scaling)},
      {"deviceCoreScaling", scaling(&NvidiaConfig::device_core_scaling)},
      {"preConfiguredDeviceMemory",
       number(&NvidiaConfig::pre_configured_device_memory, 0, INT64_MAX, "a non-negative integer")},
      {"libCudaLogLevel", str(&NvidiaConfig::lib_cuda_log_level)},
      {"enableNumaTopology", boolean(&NvidiaConfig::enable_numa_topology)},
  };
  return *fields;
}

}  // namespace

std::vector<MigAllowlistEntry> DefaultMigProfileAllowlist() {
  return {
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
}

Result<NvidiaConfig> ParseNvidiaConfig(const YAML::Node& section) {
  NvidiaConfig config;
  if (!section || section.IsNull()) return config;
  if (!section.IsMap()) return FieldError(std::string(kSection), "a map", Describe(section));
  const auto& fields = Fields();
  for (const auto& kv : section) {
    if (!kv.first.IsScalar()) continue;
    auto it = fields.find(kv.first.Scalar());
    if (it == fields.end() || kv.second.IsNull()) continue;  // unknown keys are ignored
    const std::string path = std::string(kSection) + "." + kv.first.Scalar();
    if (Status s = it->second(kv.second, path, &config); !s) return std::move(s).take_error();
  }
  return config;
}

bool HasNvidiaSection(const DeviceConfig& config) {
  return config.sections.find(std::string(kSection)) != config.sections.end();
}

Result<NvidiaConfig> NvidiaConfigOf(const DeviceConfig& config) {
  auto it = config.sections.find(std::string(kSection));
  if (it == config.sections.end()) return NvidiaConfig{};
  // yaml-cpp reports syntax errors by exception; they stop here.
  try {
    return ParseNvidiaConfig(YAML::Load(it->second));
  } catch (const std::exception& e) {
    return Error{"device config: " + std::string(kSection) + ": " + e.what()};
  }
}

NvidiaConfig NvidiaSectionOrDefaults(const DeviceConfig& config) {
  auto parsed = NvidiaConfigOf(config);
  return parsed ? std::move(*parsed) : NvidiaConfig{};
}

}  // namespace hami::device::nvidia
