#include "scheduler/dra_webhook.h"

#include <cstdio>
#include <map>
#include <optional>

#include "common/json.h"
#include "common/strings.h"
#include "k8s/base64.h"
#include "protocol/quantity.h"
#include "scheduler/admission_review.h"
#include "scheduler/json_patch.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

constexpr std::string_view kDraLabel = "hami.io/dra";
constexpr std::string_view kAttributeDomain = "hami-core-gpu.project-hami.io";

// A container's value of `resource`: its limit, else its request; nullopt when neither.
std::optional<std::string> ResourceValue(const json& container, const std::string& resource) {
  for (const char* kind : {"limits", "requests"}) {
    const auto ptr =
        json::json_pointer("/resources/" + std::string(kind) + "/" + EscapeJsonPointer(resource));
    if (!container.contains(ptr)) continue;
    const json& v = container.at(ptr);
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    return v.dump();
  }
  return std::nullopt;
}

std::string Attribute(std::string_view name) {
  return "device.attributes[\"" + std::string(kAttributeDomain) + "\"]." + std::string(name);
}

// `annotation`'s comma-separated list as a CEL list literal; nullopt when the pod lacks it.
Result<std::optional<std::string>> ListFromAnnotation(const json& pod, const std::string& key) {
  const auto ptr = json::json_pointer("/metadata/annotations/" + EscapeJsonPointer(key));
  if (!pod.contains(ptr) || !pod.at(ptr).is_string()) return std::optional<std::string>();
  const std::string value = pod.at(ptr).get<std::string>();  // outlives the views below
  std::vector<std::string> items;
  for (std::string_view item : SplitNonEmpty(value, ',')) {
    items.push_back(json(std::string(item)).dump());
  }
  if (items.empty()) {
    return Error{key + ": empty, no GPU could match (remove the annotation to allow any)"};
  }
  return std::optional<std::string>("[" + Join(items, ", ") + "]");
}

// The CEL selectors of the pod's GPU selection annotations (HAMi-DRA's), in a fixed order.
Result<std::vector<std::string>> Selectors(const json& pod) {
  std::vector<std::string> out = {Attribute("type") + " == \"hami-gpu\""};
  struct Rule {
    const char* annotation;
    const char* attribute;
    bool negate;
  };
  static constexpr Rule kRules[] = {{"nvidia.com/use-gpuuuid", "uuid", false},
                                    {"nvidia.com/nouse-gpuuuid", "uuid", true},
                                    {"nvidia.com/use-gputype", "productName", false},
                                    {"nvidia.com/nouse-gputype", "productName", true}};
  for (const Rule& r : kRules) {
    auto list = ListFromAnnotation(pod, r.annotation);
    if (!list) return std::move(list).take_error();
    if (!*list) continue;
    std::string in = Attribute(r.attribute) + " in " + **list;
    out.push_back(r.negate ? "!(" + in + ")" : in);
  }
  return out;
}

std::string Hash8(std::string_view text) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(h ^ (h >> 32)));
  return buf;
}

struct Shape {
  int32_t count = 0;
  int64_t memory_mib = 0;  // 0: the whole GPU's
  int32_t cores = 0;
};

// What container `ctr` asks; nullopt when it asks none of the resources.
Result<std::optional<Shape>> ContainerShape(const json& ctr, const DraWebhookOptions& o) {
  const std::string name = ctr.value("name", std::string());
  const std::string where = "container " + Quote(name) + ": ";
  auto count = ResourceValue(ctr, o.count_resource);
  auto memory = ResourceValue(ctr, o.memory_resource);
  auto percentage = ResourceValue(ctr, o.memory_percentage_resource);
  auto cores = ResourceValue(ctr, o.cores_resource);
  if (!count && !memory && !percentage && !cores) return std::optional<Shape>();
  Shape s;
  s.count = o.default_gpu_num;
  if (count) {
    auto n = protocol::ParseDeviceCount(o.count_resource, *count);
    if (!n) return Error{where + n.error()};
    s.count = *n;
  }
  if (s.count == 0) return std::optional<Shape>();
  s.memory_mib = o.default_memory;
  if (memory) {
    auto mib = protocol::ParseMemoryMiB(o.memory_resource, *memory);
    if (!mib) return Error{where + mib.error()};
    s.memory_mib = *mib;
  }
  if (percentage) {
    auto pct = protocol::ParseDeviceCount(o.memory_percentage_resource, *percentage);
    if (!pct) return Error{where + pct.error()};
    if (*pct != 100) {
      return Error{where + o.memory_percentage_resource + ": " + Quote(*percentage) +
                   ": not supported in DRA mode (a claim asks for bytes); use " +
                   o.memory_resource};
    }
    if (!memory) s.memory_mib = 0;
  }
  s.cores = o.default_cores;
  if (cores) {
    auto c = protocol::ParseDeviceCount(o.cores_resource, *cores);
    if (!c) return Error{where + c.error()};
    if (*c > 100) return Error{where + o.cores_resource + ": want 0..100, got " + Quote(*cores)};
    s.cores = *c;
  }
  return std::optional<Shape>(s);
}

json Template(const std::string& name, const std::string& ns, const Shape& s,
              const std::vector<std::string>& selectors, const DraWebhookOptions& o) {
  json cel = json::array();
  for (const std::string& e : selectors) cel.push_back({{"cel", {{"expression", e}}}});
  json requests = {{"cores", std::to_string(s.cores)}};
  if (s.memory_mib > 0) requests["memory"] = std::to_string(s.memory_mib) + "Mi";
  json devices = {{"requests", json::array({{{"name", "gpu"},
                                             {"exactly",
                                              {{"deviceClassName", o.device_class},
                                               {"allocationMode", "ExactCount"},
                                               {"count", s.count},
                                               {"selectors", cel},
                                               {"capacity", {{"requests", requests}}}}}}})}};
  if (s.count > 1) {  // HAMi's nvidia.com/gpu: 2 means two GPUs, not two shares of one
    devices["constraints"] = json::array(
        {{{"requests", {"gpu"}}, {"distinctAttribute", std::string(kAttributeDomain) + "/uuid"}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaimTemplate"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{kDraLabel, "true"}}}}},
          {"spec", {{"spec", {{"devices", devices}}}}}};
}

// `pod` with nvidia.com/gpu: <default_gpu_num> in the limits of each container that asks
// memory or cores without a count, as the device-plugin mode's webhook adds it: the quota check
// counts requests per GPU.
json WithGpuCounts(json pod, const DraWebhookOptions& o) {
  for (const char* list : {"initContainers", "containers"}) {
    if (!pod.contains("spec") || !pod["spec"].contains(list) || !pod["spec"][list].is_array()) {
      continue;
    }
    for (json& ctr : pod["spec"][list]) {
      if (!ctr.is_object() || ResourceValue(ctr, o.count_resource)) continue;
      if (!ResourceValue(ctr, o.memory_resource) && !ResourceValue(ctr, o.cores_resource) &&
          !ResourceValue(ctr, o.memory_percentage_resource)) {
        continue;
      }
      json& limits = ctr["resources"]["limits"];
      if (!limits.is_object()) limits = json::object();
      limits[o.count_resource] = std::to_string(o.default_gpu_num);
    }
  }
  return pod;
}

}  // namespace

std::string DraTemplateName(int32_t count, int64_t memory_mib, int32_t cores,
                            std::string_view selectors_key) {
  std::string name = "hami-gpu-" + std::to_string(count) + "x" +
                     (memory_mib > 0 ? std::to_string(memory_mib) + "mi" : "all") + "-" +
                     std::to_string(cores) + "c";
  if (!selectors_key.empty()) name += "-" + Hash8(selectors_key);
  return name;
}

Result<DraPlan> PlanDraAdmission(const json& pod, const std::string& ns,
                                 const DraWebhookOptions& options) {
  DraPlan plan;
  if (!pod.is_object() || !pod.contains("spec") || !pod["spec"].is_object()) return plan;
  const json& spec = pod["spec"];
  if (spec.contains("resourceClaims") && spec["resourceClaims"].is_array() &&
      !spec["resourceClaims"].empty()) {
    return plan;  // claims written by hand (or a second admission): left as they are
  }
  const std::string pod_ns = pod.value("/metadata/namespace"_json_pointer, ns);
  json copy = pod;
  JsonPatchBuilder patch(&copy);
  std::optional<std::vector<std::string>> selectors;
  std::map<std::string, json> templates;
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (size_t i = 0; i < spec[list].size(); ++i) {
      const json& ctr = spec[list][i];
      if (!ctr.is_object()) continue;
      auto shape = ContainerShape(ctr, options);
      if (!shape) return std::move(shape).take_error();
      if (!*shape) continue;
      if (!selectors) {
        auto made = Selectors(pod);
        if (!made) return std::move(made).take_error();
        selectors = std::move(*made);
      }
      const std::string key = selectors->size() > 1 ? Join(*selectors, " && ") : "";
      const std::string name =
          DraTemplateName((*shape)->count, (*shape)->memory_mib, (*shape)->cores, key);
      templates.emplace(name, Template(name, pod_ns, **shape, *selectors, options));
      const std::string claim = std::string("hami-") +
                                (std::string_view(list) == "containers" ? "c" : "i") +
                                std::to_string(i);
      patch.Append({PathStep::Key("spec"), PathStep::Key("resourceClaims")},
                   {{"name", claim}, {"resourceClaimTemplateName", name}});
      const std::vector<PathStep> resources = {PathStep::Key("spec"), PathStep::Key(list),
                                               PathStep::Index(static_cast<int>(i)),
                                               PathStep::Key("resources")};
      for (const std::string& r : {options.count_resource, options.memory_resource,
                                   options.memory_percentage_resource, options.cores_resource}) {
        for (const char* kind : {"limits", "requests"}) {
          auto path = resources;
          path.push_back(PathStep::Key(kind));
          path.push_back(PathStep::Key(r));
          patch.Remove(path);
        }
      }
      auto claims = resources;
      claims.push_back(PathStep::Key("claims"));
      patch.Append(claims, {{"name", claim}});
    }
  }
  if (templates.empty()) return plan;
  patch.Set(
      {PathStep::Key("metadata"), PathStep::Key("labels"), PathStep::Key(std::string(kDraLabel))},
      "true");
  for (auto& [name, t] : templates) plan.templates.push_back(std::move(t));
  plan.patch = patch.Ops();
  return plan;
}

HttpReply HandleDraAdmissionReview(std::string_view body, const DraWebhookOptions& options,
                                   const EnsureTemplate& ensure, const FitsQuota& fits_quota) {
  AdmissionEnvelope review = ReadAdmissionReview(body);
  if (!review.error.empty()) return AdmissionReply(review, AdmissionErrored(400, review.error));
  auto plan = PlanDraAdmission(review.object, review.ns, options);
  if (!plan) return AdmissionReply(review, AdmissionErrored(400, plan.error()));
  if (!plan->templates.empty() && fits_quota &&
      !fits_quota(WithGpuCounts(review.object, options), review.ns)) {
    return AdmissionReply(review, AdmissionDenied("exceeding resource quota"));
  }
  for (const json& t : plan->templates) {
    if (auto s = ensure(t); !s) return AdmissionReply(review, AdmissionErrored(500, s.error()));
  }
  json fields = AdmissionAllowed("");
  if (!plan->patch.empty()) {
    fields["patch"] = k8s::Base64Encode(plan->patch.dump());
    fields["patchType"] = "JSONPatch";
  }
  return AdmissionReply(review, std::move(fields));
}

}  // namespace hami::scheduler
