// NVIDIA's admission mutation (docs/protocol.md#webhook, step 4), moved
// here from the webhook so the webhook knows no vendor (issue 15).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendors/nvidia/nvidia.h"

namespace hami::device::nvidia {
namespace {

using nlohmann::json;

bool HasKey(const json& container, const char* section, const std::string& name) {
  if (name.empty() || !container.is_object()) return false;
  auto res = container.find("resources");
  if (res == container.end() || !res->is_object()) return false;
  auto sec = res->find(section);
  return sec != res->end() && sec->is_object() && sec->contains(name);
}

// limits[name] as text: a string as is, an integer in decimal, anything else "".
std::optional<std::string> LimitText(const json& container, const std::string& name) {
  if (!HasKey(container, "limits", name)) return std::nullopt;
  const json& v = container["resources"]["limits"][name];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return std::string();
}

json Env(const char* name, const std::string& value) { return {{"name", name}, {"value", value}}; }

}  // namespace

Result<bool> NvidiaDevice::MutateAdmission(AdmissionEdit& edit) const {
  const NvidiaConfig& cfg = config_;
  if (auto pct = LimitText(edit.Container(), cfg.resource_memory_percentage_name)) {
    std::optional<int64_t> v = ParseInt64(*pct);
    if (!v || *v < 0 || *v > 100) {
      return Error{"gpumem-percentage must be between 0 and 100, got " + Quote(*pct)};
    }
  }
  if (auto prio = LimitText(edit.Container(), cfg.resource_priority_name)) {
    edit.Append({"env"}, Env("CUDA_TASK_PRIORITY", *prio));
  }
  if (!cfg.gpu_core_policy.empty() && cfg.gpu_core_policy != "default") {
    edit.Append({"env"}, Env("GPU_CORE_UTILIZATION_POLICY", cfg.gpu_core_policy));
  }
  bool has_resource = false;
  const json& ctr = edit.Container();
  if (HasKey(ctr, "limits", cfg.resource_count_name)) {
    has_resource = true;
  } else if ((HasKey(ctr, "limits", cfg.resource_core_name) ||
              HasKey(ctr, "limits", cfg.resource_memory_name) ||
              HasKey(ctr, "limits", cfg.resource_memory_percentage_name)) &&
             cfg.default_gpu_num > 0) {
    edit.Set({"resources", "limits", cfg.resource_count_name}, std::to_string(cfg.default_gpu_num));
    has_resource = true;
  }
  const json& now = edit.Container();
  auto present = [&](const std::string& name) {
    return HasKey(now, "limits", name) || HasKey(now, "requests", name);
  };
  if (present(cfg.resource_count_name) && !present(cfg.resource_core_name)) {
    std::optional<std::string> pct = LimitText(now, cfg.resource_memory_percentage_name);
    // A percentage decides alone (only 100 % is a whole card); without one, a missing memory
    // request means the whole card (vector 7: gpu + 50 % stays shared).
    bool whole = pct ? *pct == "100"
                     : cfg.resource_memory_name.empty() || !present(cfg.resource_memory_name);
    if (whole) edit.Set({"resources", "limits", cfg.resource_core_name}, "100");
  }
  const json& pod = edit.Pod();
  if (has_resource && !cfg.runtime_class_name.empty() &&
      (!pod.contains("spec") || !pod["spec"].contains("runtimeClassName") ||
       pod["spec"]["runtimeClassName"].is_null())) {
    edit.SetPod({"spec", "runtimeClassName"}, cfg.runtime_class_name);
  }
  if (!has_resource && cfg.overwrite_env) {
    edit.Append({"env"}, Env("NVIDIA_VISIBLE_DEVICES", "none"));
  }
  return has_resource;
}

}  // namespace hami::device::nvidia
