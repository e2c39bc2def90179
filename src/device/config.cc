#include "device/config.h"

#include <yaml-cpp/yaml.h>

#include <exception>
#include <set>
#include <string>

#include "common/strings.h"
#include "common/utf8.h"
#include "device/device.h"
#include "device/policy.h"
#include "device/yaml_error.h"

namespace hami::device {
namespace {

// The scheduler's own section (not a vendor's).
constexpr std::string_view kSchedulerSection = "scheduler";

Status ReadPolicy(const YAML::Node& section, const char* key, std::string* out) {
  YAML::Node node = section[key];
  if (!node || node.IsNull()) return OkStatus();
  const std::string path = std::string(kSchedulerSection) + "." + key;
  if (!node.IsScalar()) return FieldError(path, "a string", Describe(node));
  *out = node.Scalar();
  return OkStatus();
}

Status ReadScheduler(const YAML::Node& node, SchedulerPolicyConfig* out) {
  if (!node || node.IsNull()) return OkStatus();
  if (!node.IsMap()) return FieldError(std::string(kSchedulerSection), "a map", Describe(node));
  if (auto s = ReadPolicy(node, "nodeSchedulerPolicy", &out->node_scheduler_policy); !s) return s;
  return ReadPolicy(node, "gpuSchedulerPolicy", &out->gpu_scheduler_policy);
}

Status ValidateScheduler(const SchedulerPolicyConfig& scheduler) {
  if (!ParseNodePolicy(scheduler.node_scheduler_policy)) {
    return FieldError("scheduler.nodeSchedulerPolicy", "binpack or spread",
                      scheduler.node_scheduler_policy);
  }
  if (auto p = ParseGpuPolicy(scheduler.gpu_scheduler_policy, /*strict=*/true); !p) {
    return Error{"scheduler.gpuSchedulerPolicy: " + p.error()};
  }
  return OkStatus();
}

Result<DeviceConfig> Parse(const YAML::Node& root) {
  if (!root || root.IsNull()) return Error{"device config: all configurations are empty"};
  if (!root.IsMap())
    return Error{"device config: want a map at the top level, got " + Quote(Describe(root))};
  DeviceConfig config;
  bool any = false;  // a section some vendor registered
  std::set<std::string> keys;
  for (const auto& kv : root) {
    // yaml-cpp keeps a repeated key; which one wins would differ between readers.
    if (kv.first.IsScalar() && !keys.insert(kv.first.Scalar()).second) {
      return Error{"device config: section " + Quote(kv.first.Scalar()) + " given twice"};
    }
    if (!kv.first.IsScalar() || kv.first.Scalar() == kSchedulerSection) continue;
    if (!kv.second || kv.second.IsNull()) continue;
    YAML::Emitter out;
    out << kv.second;
    config.sections[kv.first.Scalar()] = out.c_str();
    if (FindVendorFactory(kv.first.Scalar())) any = true;
  }
  if (!any) return Error{"device config: all configurations are empty"};
  if (auto s = ReadScheduler(root[std::string(kSchedulerSection)], &config.scheduler); !s)
    return std::move(s).take_error();
  if (auto s = ValidateScheduler(config.scheduler); !s) return std::move(s).take_error();
  // Each present vendor section is parsed by its own backend (device.h self-registration), from
  // the text kept in `sections`, the form every reader of the config gets: what loads here is
  // what they build.
  if (auto built = BuildRegistry(config); !built) return std::move(built).take_error();
  return config;
}

}  // namespace

DeviceConfig DefaultDeviceConfig() {
  DeviceConfig config;
  for (const std::string& section : RegisteredVendorSections()) config.sections[section] = "";
  return config;
}

Status ValidateDeviceConfig(const DeviceConfig& config) {
  if (auto s = ValidateScheduler(config.scheduler); !s) return s;
  if (auto built = BuildRegistry(config); !built) return std::move(built).take_error();
  return OkStatus();
}

Result<DeviceConfig> LoadDeviceConfig(std::string_view yaml_text) {
  // YAML is Unicode text. yaml-cpp takes other bytes as they come, and some of them (FE FF, a
  // UTF-16 byte order mark) change how a section reads once it is written out again.
  if (auto bad = FirstNonUtf8(yaml_text)) {
    return Error{"device config: not UTF-8 text: byte " + std::to_string(*bad) + " is " +
                 Quote(yaml_text.substr(*bad, 1))};
  }
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
