#include "device/vendors/ascend/ascend_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <set>

#include "common/strings.h"
#include "device/yaml_error.h"

namespace hami::device::ascend {
namespace {

// Reads node[key] into *out when present and not null.
class Reader {
 public:
  Reader(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {}

  Status String(const char* key, std::string* out) const {
    YAML::Node v = node_[key];
    if (!v || v.IsNull()) return OkStatus();
    if (!v.IsScalar()) return FieldError(Path(key), "a string", Describe(v));
    *out = v.Scalar();
    return OkStatus();
  }

  template <typename T>
  Status Int(const char* key, T* out) const {
    YAML::Node v = node_[key];
    if (!v || v.IsNull()) return OkStatus();
    std::optional<int64_t> n;
    if (v.IsScalar()) {
      std::string_view text = v.Scalar();
      if (!text.empty() && text[0] == '+') text.remove_prefix(1);
      n = ParseInt64(text);
    }
    if (!n || *n < std::numeric_limits<T>::min() || *n > std::numeric_limits<T>::max()) {
      return FieldError(Path(key), "an integer", Describe(v));
    }
    *out = static_cast<T>(*n);
    return OkStatus();
  }

  Status Bool(const char* key, bool* out) const {
    YAML::Node v = node_[key];
    if (!v || v.IsNull()) return OkStatus();
    if (v.IsScalar()) {
      std::string s = ToLower(v.Scalar());
      if (s == "true" || s == "yes" || s == "on" || s == "y") return *out = true, OkStatus();
      if (s == "false" || s == "no" || s == "off" || s == "n") return *out = false, OkStatus();
    }
    return FieldError(Path(key), "a boolean", Describe(v));
  }

  std::string Path(const char* key) const { return path_ + "." + key; }

 private:
  const YAML::Node& node_;
  std::string path_;
};

// Runs each step until one fails.
template <typename... Steps>
Status All(Steps&&... steps) {
  Status s = OkStatus();
  ((s ? (s = steps()) : s), ...);
  return s;
}

Result<Template> ParseTemplate(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return FieldError(path, "a map", Describe(node));
  Template t;
  Reader r(node, path);
  if (Status s = All(
          [&] { return r.String("name", &t.name); }, [&] { return r.Int("memory", &t.memory); },
          [&] { return r.Int("aiCore", &t.ai_core); }, [&] { return r.Int("aiCPU", &t.ai_cpu); });
      !s) {
    return std::move(s).take_error();
  }
  return t;
}

Result<VnpuConfig> ParseConfig(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return FieldError(path, "a map", Describe(node));
  VnpuConfig c;
  Reader r(node, path);
  Status s =
      All([&] { return r.String("commonWord", &c.common_word); },
          [&] { return r.String("chipName", &c.chip_name); },
          [&] { return r.String("resourceName", &c.resource_name); },
          [&] { return r.String("resourceMemoryName", &c.resource_memory_name); },
          [&] { return r.String("resourceCoreName", &c.resource_core_name); },
          [&] { return r.Int("memoryAllocatable", &c.memory_allocatable); },
          [&] { return r.Int("memoryCapacity", &c.memory_capacity); },
          [&] { return r.Int("memoryFactor", &c.memory_factor); },
          [&] { return r.Int("aiCore", &c.ai_core); }, [&] { return r.Int("aiCPU", &c.ai_cpu); },
          [&] { return r.String("runtimeClassName", &c.runtime_class_name); },
          [&] { return r.Bool("overwriteEnv", &c.overwrite_env); },
          [&] { return r.Bool("superPod", &c.super_pod); });
  if (!s) return std::move(s).take_error();
  if (c.common_word.empty()) return FieldError(path + ".commonWord", "a non-empty string", "");
  YAML::Node templates = node["templates"];
  if (templates && !templates.IsNull()) {
    if (!templates.IsSequence()) {
      return FieldError(path + ".templates", "a list", Describe(templates));
    }
    for (size_t i = 0; i < templates.size(); ++i) {
      auto t = ParseTemplate(templates[i], path + ".templates[" + std::to_string(i) + "]");
      if (!t) return std::move(t).take_error();
      c.templates.push_back(std::move(*t));
    }
  }
  std::stable_sort(c.templates.begin(), c.templates.end(),
                   [](const Template& a, const Template& b) { return a.memory < b.memory; });
  return c;
}

VnpuConfig Chip(std::string chip, std::string word, int64_t allocatable, int64_t capacity,
                int32_t factor, int32_t ai_core, int32_t ai_cpu, std::vector<Template> templates) {
  VnpuConfig c;
  c.chip_name = std::move(chip);
  c.common_word = std::move(word);
  c.resource_name = "huawei.com/" + c.common_word;
  c.resource_memory_name = c.resource_name + "-memory";
  c.resource_core_name = c.resource_name + "-core";
  c.memory_allocatable = allocatable;
  c.memory_capacity = capacity;
  c.memory_factor = factor;
  c.ai_core = ai_core;
  c.ai_cpu = ai_cpu;
  c.templates = std::move(templates);
  return c;
}

}  // namespace

Vnpus DefaultVnpus() {
  Vnpus v;
  v.configs = {
      Chip("910A", "Ascend910A", 32768, 32768, 1, 30, 0,
           {{"vir02", 2184, 2, 0},
            {"vir04", 4369, 4, 0},
            {"vir08", 8738, 8, 0},
            {"vir16", 17476, 16, 0}}),
      Chip("910B2", "Ascend910B2", 65536, 65536, 1, 24, 6,
           {{"vir03_1c_8g", 8192, 3, 1},
            {"vir06_1c_16g", 16384, 6, 1},
            {"vir12_3c_32g", 32768, 12, 3}}),
      Chip("910B3", "Ascend910B3", 65536, 65536, 1, 20, 7,
           {{"vir05_1c_16g", 16384, 5, 1}, {"vir10_3c_32g", 32768, 10, 3}}),
      Chip("910B4-1", "Ascend910B4-1", 65536, 65536, 1, 20, 7,
           {{"vir05_1c_16g", 16384, 5, 1}, {"vir10_3c_32g", 32768, 10, 3}}),
      Chip("910B4", "Ascend910B4", 32768, 32768, 1, 20, 7,
           {{"vir05_1c_8g", 8192, 5, 1}, {"vir10_3c_16g", 16384, 10, 3}}),
      Chip("310P3", "Ascend310P", 21527, 24576, 1, 8, 7,
           {{"vir01", 3072, 1, 1}, {"vir02", 6144, 2, 2}, {"vir04", 12288, 4, 4}}),
      // The chart sets no memoryFactor for 910C (0: requests are not scaled).
      Chip("Ascend910", "Ascend910C", 65536, 65536, 0, 20, 7,
           {{"vir05_1c_16g", 16384, 5, 1}, {"vir10_3c_32g", 32768, 10, 3}}),
  };
  v.configs.back().super_pod = true;
  return v;
}

Result<Vnpus> ParseVnpus(const YAML::Node& node) {
  Vnpus v;
  if (!node || node.IsNull()) return DefaultVnpus();
  if (!node.IsMap()) return FieldError("vnpus", "a map", Describe(node));
  Reader r(node, "vnpus");
  if (Status s = r.Bool("hamiVnpuCore", &v.hami_vnpu_core); !s) return std::move(s).take_error();
  YAML::Node configs = node["configs"];
  if (!configs || configs.IsNull()) {
    v.configs = DefaultVnpus().configs;  // the chart's families
    return v;
  }
  if (!configs.IsSequence()) return FieldError("vnpus.configs", "a list", Describe(configs));
  std::set<std::string> seen;
  for (size_t i = 0; i < configs.size(); ++i) {
    std::string path = "vnpus.configs[" + std::to_string(i) + "]";
    auto c = ParseConfig(configs[i], path);
    if (!c) return std::move(c).take_error();
    if (!seen.insert(c->common_word).second) {
      return Error{path + ".commonWord: " + Quote(c->common_word) + " is listed twice"};
    }
    v.configs.push_back(std::move(*c));
  }
  return v;
}

Result<Vnpus> ParseVnpusText(const std::string& yaml_text) {
  try {
    return ParseVnpus(YAML::Load(yaml_text));
  } catch (const std::exception& e) {
    return Error{std::string("vnpus: not valid YAML: ") + e.what()};
  }
}

}  // namespace hami::device::ascend
