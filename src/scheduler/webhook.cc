#include "scheduler/webhook.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/strings.h"
#include "device/pod_view.h"
#include "device/schedule.h"
#include "device/vendors/nvidia/nvidia.h"
#include "k8s/base64.h"
#include "scheduler/json_patch.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

// The reply envelope in the review's own version.
HttpReply Reply(int http_status, const std::string& api_version, const std::string& uid,
                json response_fields) {
  json response = {{"uid", uid}};
  for (auto& [k, v] : response_fields.items()) response[k] = v;
  json review = {{"apiVersion", api_version.empty() ? "admission.k8s.io/v1" : api_version},
                 {"kind", "AdmissionReview"},
                 {"response", std::move(response)}};
  return HttpReply{http_status, review.dump()};
}

json Denied(const std::string& message) {
  return {{"allowed", false},
          {"status", {{"code", 403}, {"reason", "Forbidden"}, {"message", message}}}};
}

json Allowed(const std::string& message) {
  json status = {{"code", 200}};
  if (!message.empty()) status["message"] = message;
  return {{"allowed", true}, {"status", status}};
}

json Errored(int code, const std::string& message) {
  return {{"allowed", false}, {"status", {{"code", code}, {"message", message}}}};
}

bool HasKey(const json& container, const char* section, const std::string& name) {
  if (name.empty()) return false;
  auto res = container.find("resources");
  if (res == container.end() || !res->is_object()) return false;
  auto sec = res->find(section);
  return sec != res->end() && sec->is_object() && sec->contains(name);
}

std::optional<std::string> LimitText(const json& container, const std::string& name) {
  if (!HasKey(container, "limits", name)) return std::nullopt;
  const json& v = container["resources"]["limits"][name];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return std::string();
}

struct ContainerOutcome {
  bool has_resource = false;
  std::optional<std::string> error;  // -> code 500
};

// NVIDIA MutateAdmission for one container (spec §3, "NVIDIA MutateAdmission per container").
ContainerOutcome MutateNvidia(const device::NvidiaConfig& cfg, json* pod, JsonPatchBuilder* patch,
                              const char* list, int index) {
  ContainerOutcome out;
  json& ctr = (*pod)["spec"][list][static_cast<size_t>(index)];
  const std::vector<PathStep> base = {PathStep::Key("spec"), PathStep::Key(list),
                                      PathStep::Index(index)};
  auto path = [&](std::initializer_list<std::string> keys) {
    std::vector<PathStep> p = base;
    for (const auto& k : keys) p.push_back(PathStep::Key(k));
    return p;
  };
  if (auto pct = LimitText(ctr, cfg.resource_memory_percentage_name)) {
    std::optional<int64_t> v = ParseInt64(*pct);
    if (!v || *v < 0 || *v > 100) {
      out.error = "gpumem-percentage must be between 0 and 100, got " + Quote(*pct);
      return out;
    }
  }
  if (auto prio = LimitText(ctr, cfg.resource_priority_name)) {
    patch->Append(path({"env"}), {{"name", "CUDA_TASK_PRIORITY"}, {"value", *prio}});
  }
  if (!cfg.gpu_core_policy.empty() && cfg.gpu_core_policy != "default") {
    patch->Append(path({"env"}),
                  {{"name", "GPU_CORE_UTILIZATION_POLICY"}, {"value", cfg.gpu_core_policy}});
  }
  if (HasKey(ctr, "limits", cfg.resource_count_name)) {
    out.has_resource = true;
  } else if ((HasKey(ctr, "limits", cfg.resource_core_name) ||
              HasKey(ctr, "limits", cfg.resource_memory_name) ||
              HasKey(ctr, "limits", cfg.resource_memory_percentage_name)) &&
             cfg.default_gpu_num > 0) {
    patch->Set(path({"resources", "limits", cfg.resource_count_name}),
               std::to_string(cfg.default_gpu_num));
    out.has_resource = true;
  }
  const json& now = (*pod)["spec"][list][static_cast<size_t>(index)];
  auto present = [&](const std::string& name) {
    return HasKey(now, "limits", name) || HasKey(now, "requests", name);
  };
  if (present(cfg.resource_count_name) && !present(cfg.resource_core_name)) {
    std::optional<std::string> pct = LimitText(now, cfg.resource_memory_percentage_name);
    // A percentage decides alone (only 100 % is a whole card); without one, a missing memory
    // request means the whole card (vector 7: gpu + 50 % stays shared).
    bool whole = pct ? *pct == "100"
                     : cfg.resource_memory_name.empty() || !present(cfg.resource_memory_name);
    if (whole) {
      patch->Set(path({"resources", "limits", cfg.resource_core_name}), "100");
    }
  }
  if (out.has_resource && !cfg.runtime_class_name.empty() &&
      (!pod->contains("spec") || !(*pod)["spec"].contains("runtimeClassName") ||
       (*pod)["spec"]["runtimeClassName"].is_null())) {
    patch->Set({PathStep::Key("spec"), PathStep::Key("runtimeClassName")}, cfg.runtime_class_name);
  }
  if (!out.has_resource && cfg.overwrite_env) {
    patch->Append(path({"env"}), {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "none"}});
  }
  return out;
}

bool Privileged(const json& ctr) {
  auto sc = ctr.find("securityContext");
  if (sc == ctr.end() || !sc->is_object()) return false;
  auto p = sc->find("privileged");
  return p != sc->end() && p->is_boolean() && p->get<bool>();
}

std::string StringAt(const json& obj, const char* a, const char* b) {
  auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return "";
  auto y = x->find(b);
  return y != x->end() && y->is_string() ? y->get<std::string>() : "";
}

// Quota pre-check (§3 step 7) over the mutated pod; true when it fits or cannot be judged.
bool QuotaFits(const device::Registry& registry, const json& pod, const std::string& ns,
               const QuotaLookup& quota) {
  if (!quota) return true;
  Result<device::PodView> view = device::ParsePodView(pod);
  if (!view.ok()) return true;
  Result<device::PodRequests> reqs = device::NormalizePodRequests(registry, *view);
  if (!reqs.ok()) return true;
  device::NamespaceQuota ns_quota = quota(view->namespace_name.empty() ? ns : view->namespace_name);
  for (const device::Device* dev : registry.All()) {
    const protocol::VendorInfo& info = dev->Info();
    if (info.memory_resource.empty() && info.core_resource.empty()) continue;
    int64_t app_mem = 0, app_cores = 0, init_mem = 0, init_cores = 0;
    for (size_t i = 0; i < reqs->containers.size(); ++i) {
      auto it = reqs->containers[i].find(info.vendor_key);
      if (it == reqs->containers[i].end()) continue;
      int64_t mem = int64_t{it->second.memreq} * it->second.nums;
      int64_t cores = int64_t{it->second.coresreq} * it->second.nums;
      if (i < reqs->init_count) {
        init_mem = std::max(init_mem, mem);
        init_cores = std::max(init_cores, cores);
      } else {
        app_mem += mem;
        app_cores += cores;
      }
    }
    if (!device::FitQuota(ns_quota, info.memory_resource, std::max(app_mem, init_mem),
                          info.core_resource, std::max(app_cores, init_cores),
                          dev->MemoryFactor())) {
      return false;
    }
  }
  return true;
}

}  // namespace

HttpReply HandleAdmissionReview(std::string_view body, const device::Registry& registry,
                                const WebhookOptions& options, const QuotaLookup& quota) {
  // A review that cannot be read is answered as webhook servers (controller-runtime) do: HTTP 200
  // with an AdmissionReview whose status carries code 400, so kube-apiserver logs the reason.
  // Without a readable request.uid the reply's uid is "": kube-apiserver rejects a uid that does
  // not match its request and applies the webhook's failurePolicy (docs/INPUT_LIMITS.md).
  Result<json> parsed = ParseJson(body);
  if (!parsed) return Reply(200, "", "", Errored(400, "admission review: " + parsed.error()));
  json& review = *parsed;
  std::string api_version =
      review.is_object() && review.contains("apiVersion") && review["apiVersion"].is_string()
          ? review["apiVersion"].get<std::string>()
          : "";
  const json* request_field =
      review.is_object() && review.contains("request") && review["request"].is_object()
          ? &review["request"]
          : nullptr;
  std::string uid =
      request_field && request_field->contains("uid") && (*request_field)["uid"].is_string()
          ? (*request_field)["uid"].get<std::string>()
          : "";
  if (!request_field || !request_field->contains("object") ||
      !(*request_field)["object"].is_object()) {
    return Reply(200, api_version, uid,
                 Errored(400, "admission review: want an object with request.object"));
  }
  const json& request = *request_field;
  json pod = request["object"];
  const json* spec = pod.contains("spec") && pod["spec"].is_object() ? &pod["spec"] : nullptr;
  auto list_size = [&](const char* list) -> size_t {
    if (!spec || !spec->contains(list) || !(*spec)[list].is_array()) return 0;
    return (*spec)[list].size();
  };
  if (list_size("containers") == 0)
    return Reply(200, api_version, uid, Denied("pod has no containers"));
  std::string current = StringAt(pod, "spec", "schedulerName");
  if (!current.empty() &&
      (current != "default-scheduler" || !options.force_overwrite_default_scheduler) &&
      (options.scheduler_name.empty() || current != options.scheduler_name)) {
    return Reply(200, api_version, uid, Allowed("pod already has different scheduler assigned"));
  }
  JsonPatchBuilder patch(&pod);
  bool found = false;
  const auto* nvidia =
      dynamic_cast<const device::nvidia::NvidiaDevice*>(registry.Find(device::nvidia::kVendorKey));
  for (const char* list : {"initContainers", "containers"}) {
    for (size_t i = 0; i < list_size(list); ++i) {
      if (!pod["spec"][list][i].is_object()) continue;
      if (nvidia == nullptr) continue;
      ContainerOutcome out =
          MutateNvidia(nvidia->config(), &pod, &patch, list, static_cast<int>(i));
      if (out.error) return Reply(200, api_version, uid, Errored(500, *out.error));
      found = found || out.has_resource;
    }
  }
  if (found) {
    for (const char* list : {"initContainers", "containers"}) {
      for (size_t i = 0; i < list_size(list); ++i) {
        const json& ctr = pod["spec"][list][i];
        if (ctr.is_object() && Privileged(ctr)) {
          std::string name =
              ctr.contains("name") && ctr["name"].is_string() ? ctr["name"].get<std::string>() : "";
          return Reply(200, api_version, uid, Denied("container " + name + " is privileged"));
        }
      }
    }
    if (!options.scheduler_name.empty()) {
      patch.Set({PathStep::Key("spec"), PathStep::Key("schedulerName")}, options.scheduler_name);
      if (!StringAt(pod, "spec", "nodeName").empty()) {
        return Reply(200, api_version, uid, Denied("pod has node assigned"));
      }
    }
    if (!QuotaFits(registry, pod, StringAt(review, "request", "namespace"), quota)) {
      return Reply(200, api_version, uid, Denied("exceeding resource quota"));
    }
  }
  json fields = Allowed("");
  if (!patch.Empty()) {
    fields["patch"] = k8s::Base64Encode(patch.Ops().dump());
    fields["patchType"] = "JSONPatch";
  }
  return Reply(200, api_version, uid, std::move(fields));
}

}  // namespace hami::scheduler
