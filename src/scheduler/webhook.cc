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
#include "k8s/base64.h"
#include "scheduler/admission_review.h"
#include "scheduler/json_patch.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

// The edits a backend makes to one container, recorded as JSON Patch operations.
class PatchEdit final : public device::AdmissionEdit {
 public:
  PatchEdit(json* pod, JsonPatchBuilder* patch, const char* list, size_t index)
      : pod_(pod), patch_(patch), list_(list), index_(index) {}
  const json& Pod() const override { return *pod_; }
  const json& Container() const override { return (*pod_)["spec"][list_][index_]; }
  bool IsInitContainer() const override { return std::string_view(list_) == "initContainers"; }
  void Set(const std::vector<std::string>& path, const json& value) override {
    patch_->Set(ContainerPath(path), value);
  }
  void Append(const std::vector<std::string>& path, const json& value) override {
    patch_->Append(ContainerPath(path), value);
  }
  void SetPod(const std::vector<std::string>& path, const json& value) override {
    std::vector<PathStep> steps;
    for (const auto& k : path) steps.push_back(PathStep::Key(k));
    patch_->Set(steps, value);
  }

 private:
  std::vector<PathStep> ContainerPath(const std::vector<std::string>& path) const {
    std::vector<PathStep> steps = {PathStep::Key("spec"), PathStep::Key(list_),
                                   PathStep::Index(static_cast<int>(index_))};
    for (const auto& k : path) steps.push_back(PathStep::Key(k));
    return steps;
  }

  json* pod_;
  JsonPatchBuilder* patch_;
  const char* list_;
  size_t index_;
};

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

}  // namespace

bool PodFitsQuota(const device::Registry& registry, const json& pod, const std::string& ns,
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

HttpReply HandleAdmissionReview(std::string_view body, const device::Registry& registry,
                                const WebhookOptions& options, const QuotaLookup& quota) {
  AdmissionEnvelope review = ReadAdmissionReview(body);
  if (!review.error.empty()) return AdmissionReply(review, AdmissionErrored(400, review.error));
  json& pod = review.object;
  const json* spec = pod.contains("spec") && pod["spec"].is_object() ? &pod["spec"] : nullptr;
  auto list_size = [&](const char* list) -> size_t {
    if (!spec || !spec->contains(list) || !(*spec)[list].is_array()) return 0;
    return (*spec)[list].size();
  };
  if (list_size("containers") == 0)
    return AdmissionReply(review, AdmissionDenied("pod has no containers"));
  std::string current = StringAt(pod, "spec", "schedulerName");
  if (!current.empty() &&
      (current != "default-scheduler" || !options.force_overwrite_default_scheduler) &&
      (options.scheduler_name.empty() || current != options.scheduler_name)) {
    return AdmissionReply(review, AdmissionAllowed("pod already has different scheduler assigned"));
  }
  JsonPatchBuilder patch(&pod);
  bool found = false;
  const std::vector<const device::Device*> backends = registry.All();
  // HAMi's order: init containers then containers, every backend on each (registry order).
  for (const char* list : {"initContainers", "containers"}) {
    for (size_t i = 0; i < list_size(list); ++i) {
      if (!pod["spec"][list][i].is_object()) continue;
      PatchEdit edit(&pod, &patch, list, i);
      for (const device::Device* backend : backends) {
        Result<bool> asks = backend->MutateAdmission(edit);
        if (!asks) return AdmissionReply(review, AdmissionErrored(500, asks.error()));
        found = found || *asks;
      }
    }
  }
  if (found) {
    for (const char* list : {"initContainers", "containers"}) {
      for (size_t i = 0; i < list_size(list); ++i) {
        const json& ctr = pod["spec"][list][i];
        if (ctr.is_object() && Privileged(ctr)) {
          std::string name =
              ctr.contains("name") && ctr["name"].is_string() ? ctr["name"].get<std::string>() : "";
          return AdmissionReply(review, AdmissionDenied("container " + name + " is privileged"));
        }
      }
    }
    if (!options.scheduler_name.empty()) {
      patch.Set({PathStep::Key("spec"), PathStep::Key("schedulerName")}, options.scheduler_name);
      if (!StringAt(pod, "spec", "nodeName").empty()) {
        return AdmissionReply(review, AdmissionDenied("pod has node assigned"));
      }
    }
    if (!PodFitsQuota(registry, pod, review.ns, quota)) {
      return AdmissionReply(review, AdmissionDenied("exceeding resource quota"));
    }
  }
  json fields = AdmissionAllowed("");
  if (!patch.Empty()) {
    fields["patch"] = k8s::Base64Encode(patch.Ops().dump());
    fields["patchType"] = "JSONPatch";
  }
  return AdmissionReply(review, std::move(fields));
}

}  // namespace hami::scheduler
