#include "sim/patch.h"

#include <algorithm>
#include <string>

#include "common/strings.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;

// The merge key of list `field`, or "" when the list is replaced as a whole.
std::string MergeKeyFor(std::string_view field) {
  if (field == "containers" || field == "initContainers" || field == "ephemeralContainers" ||
      field == "volumes" || field == "env" || field == "imagePullSecrets" ||
      field == "resourceClaims") {
    return "name";
  }
  if (field == "conditions") return "type";
  if (field == "volumeMounts") return "mountPath";
  if (field == "volumeDevices") return "devicePath";
  if (field == "addresses") return "type";
  if (field == "taints") return "key";
  return "";
}

Json MergeList(const Json& target, const Json& patch, const std::string& key) {
  Json out = target.is_array() ? target : Json::array();
  for (const auto& item : patch) {
    if (!item.is_object() || !item.contains(key)) {
      return patch;  // not a keyed list after all: replace
    }
    auto directive = item.find("$patch");
    bool remove = directive != item.end() && *directive == "delete";
    auto match = std::find_if(out.begin(), out.end(), [&](const Json& e) {
      return e.is_object() && e.contains(key) && e[key] == item[key];
    });
    if (remove) {
      if (match != out.end()) out.erase(match);
    } else if (match != out.end()) {
      *match = StrategicMerge(*match, item);
    } else {
      out.push_back(StrategicMerge(Json::object(), item));
    }
  }
  return out;
}

}  // namespace

k8s::ApiResult<PatchType> PatchTypeFromContentType(std::string_view content_type) {
  std::string_view base = Trim(content_type.substr(0, content_type.find(';')));
  if (base == "application/merge-patch+json") return PatchType::kMerge;
  if (base == "application/strategic-merge-patch+json") return PatchType::kStrategicMerge;
  if (base == "application/json-patch+json") return PatchType::kJsonPatch;
  return k8s::ApiError{415, k8s::kReasonUnsupportedMediaType,
                       "the body of the request was in an unknown format - accepted media types "
                       "include: application/json-patch+json, application/merge-patch+json, "
                       "application/strategic-merge-patch+json (got " +
                           Quote(content_type) + ")"};
}

Json StrategicMerge(const Json& target, const Json& patch) {
  if (!patch.is_object()) return patch;
  auto directive = patch.find("$patch");
  if (directive != patch.end() && *directive == "replace") {
    Json out = patch;
    out.erase("$patch");
    return out;
  }
  Json out = target.is_object() ? target : Json::object();
  for (const auto& [k, v] : patch.items()) {
    if (!k.empty() && k[0] == '$') continue;  // $setElementOrder, $retainKeys, $patch, ...
    if (v.is_null()) {
      out.erase(k);
    } else if (v.is_object()) {
      auto inner = v.find("$patch");
      if (inner != v.end() && *inner == "delete") {
        out.erase(k);
      } else {
        out[k] = StrategicMerge(out.contains(k) ? out[k] : Json(), v);
      }
    } else if (v.is_array() && !MergeKeyFor(k).empty()) {
      out[k] = MergeList(out.contains(k) ? out[k] : Json(), v, MergeKeyFor(k));
    } else {
      out[k] = v;
    }
  }
  return out;
}

k8s::ApiResult<nlohmann::json> ApplyPatch(const nlohmann::json& target, PatchType type,
                                          std::string_view patch_body) {
  Json patch = Json::parse(patch_body, nullptr, /*allow_exceptions=*/false);
  if (patch.is_discarded()) {
    return k8s::ApiError{400, k8s::kReasonBadRequest, "the patch body is not valid JSON"};
  }
  switch (type) {
    case PatchType::kMerge: {
      if (!patch.is_object()) {
        return k8s::ApiError{400, k8s::kReasonBadRequest, "a merge patch must be a JSON object"};
      }
      Json out = target;
      out.merge_patch(patch);
      return out;
    }
    case PatchType::kStrategicMerge:
      if (!patch.is_object()) {
        return k8s::ApiError{400, k8s::kReasonBadRequest,
                             "a strategic merge patch must be a JSON object"};
      }
      return StrategicMerge(target, patch);
    case PatchType::kJsonPatch:
      if (!patch.is_array()) {
        return k8s::ApiError{400, k8s::kReasonBadRequest, "a JSON patch must be a JSON array"};
      }
      try {
        return target.patch(patch);
      } catch (const Json::exception& e) {
        // nlohmann reports both malformed operations and failed ones as exceptions; both are
        // the caller's fault.
        return k8s::ApiError{422, k8s::kReasonInvalid,
                             std::string("the JSON patch cannot be applied: ") + e.what()};
      }
  }
  return k8s::ApiError{415, k8s::kReasonUnsupportedMediaType, "unknown patch type"};
}

}  // namespace hami::sim
