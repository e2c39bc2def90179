#include "sim/apiserver/patch.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/strings.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;

// The merge key of list `field` (patchMergeKey in the upstream types), or "" when the list is
// replaced as a whole (args, command, rules, tolerations, ...). `items` disambiguates `ports`:
// a container's merge by containerPort, a Service's by port.
std::string MergeKeyFor(std::string_view field, const Json& items) {
  if (field == "containers" || field == "initContainers" || field == "ephemeralContainers" ||
      field == "volumes" || field == "env" || field == "imagePullSecrets" ||
      field == "resourceClaims" || field == "webhooks") {
    return "name";
  }
  if (field == "conditions" || field == "addresses") return "type";
  if (field == "volumeMounts") return "mountPath";
  if (field == "volumeDevices") return "devicePath";
  if (field == "taints") return "key";
  if (field == "hostAliases") return "ip";
  if (field == "topologySpreadConstraints") return "topologyKey";
  if (field == "ownerReferences") return "uid";
  if (field == "ports") {
    bool container = items.is_array() && !items.empty() && items[0].is_object() &&
                     items[0].contains("containerPort");
    return container ? "containerPort" : "port";
  }
  return "";
}

// Lists of scalars merged as sets (patchStrategy merge without a key).
bool IsMergedScalarList(std::string_view field) { return field == "finalizers"; }

bool IsDirective(const Json& item, std::string_view value) {
  auto it = item.is_object() ? item.find("$patch") : item.end();
  return item.is_object() && it != item.end() && *it == value;
}

Json MergeList(const Json& target, const Json& patch, const std::string& key) {
  Json out = target.is_array() ? target : Json::array();
  // [{"$patch": "replace"}, items...]: the items replace the list.
  if (std::any_of(patch.begin(), patch.end(),
                  [](const Json& i) { return IsDirective(i, "replace"); })) {
    out = Json::array();
  }
  for (const auto& item : patch) {
    if (IsDirective(item, "replace")) continue;
    if (!item.is_object() || !item.contains(key)) {
      return patch;  // not a keyed list after all: replace
    }
    auto match = std::find_if(out.begin(), out.end(), [&](const Json& e) {
      return e.is_object() && e.contains(key) && e[key] == item[key];
    });
    if (IsDirective(item, "delete")) {
      if (match != out.end()) out.erase(match);
    } else if (match != out.end()) {
      *match = StrategicMerge(*match, item);
    } else {
      out.push_back(StrategicMerge(Json::object(), item));
    }
  }
  return out;
}

Json MergeScalarList(const Json& target, const Json& patch) {
  Json out = target.is_array() ? target : Json::array();
  for (const auto& v : patch) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// $setElementOrder/<field>: the items named in `order` (by merge key, or by value for scalar
// lists) come first in that order; items the patch did not mention keep their relative order
// after them.
Json ApplyElementOrder(const Json& list, const Json& order, const std::string& key) {
  if (!list.is_array() || !order.is_array()) return list;
  auto id = [&](const Json& item) -> Json {
    if (key.empty()) return item;
    return item.is_object() && item.contains(key) ? item[key] : Json();
  };
  Json out = Json::array();
  std::vector<bool> used(list.size(), false);
  for (const auto& want : order) {
    Json wanted = id(want);
    for (size_t i = 0; i < list.size(); ++i) {
      if (!used[i] && !wanted.is_null() && id(list[i]) == wanted) {
        out.push_back(list[i]);
        used[i] = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (!used[i]) out.push_back(list[i]);
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
  if (IsDirective(patch, "replace")) {
    Json out = patch;
    out.erase("$patch");
    return out;
  }
  Json out = target.is_object() ? target : Json::object();
  constexpr std::string_view kOrder = "$setElementOrder/";
  constexpr std::string_view kDeleteFrom = "$deleteFromPrimitiveList/";
  for (const auto& [k, v] : patch.items()) {
    if (k.rfind(kDeleteFrom, 0) == 0) {
      std::string field = k.substr(kDeleteFrom.size());
      if (!v.is_array() || !out.contains(field) || !out[field].is_array()) continue;
      Json& list = out[field];
      for (const auto& gone : v)
        list.erase(std::remove(list.begin(), list.end(), gone), list.end());
      continue;
    }
    if (!k.empty() && k[0] == '$') continue;  // $setElementOrder and $retainKeys: below
    if (v.is_null()) {
      out.erase(k);
    } else if (v.is_object()) {
      if (IsDirective(v, "delete")) {
        out.erase(k);
      } else {
        out[k] = StrategicMerge(out.contains(k) ? out[k] : Json(), v);
      }
    } else if (v.is_array() && !MergeKeyFor(k, v).empty()) {
      out[k] = MergeList(out.contains(k) ? out[k] : Json(), v, MergeKeyFor(k, v));
    } else if (v.is_array() && IsMergedScalarList(k)) {
      out[k] = MergeScalarList(out.contains(k) ? out[k] : Json(), v);
    } else {
      out[k] = v;
    }
  }
  for (const auto& [k, v] : patch.items()) {
    if (k.rfind(kOrder, 0) != 0) continue;
    std::string field = k.substr(kOrder.size());
    if (out.contains(field)) out[field] = ApplyElementOrder(out[field], v, MergeKeyFor(field, v));
  }
  // $retainKeys: the fields of this map not listed are cleared (a union type switching member,
  // such as a Deployment strategy's type or a volume's source).
  auto retain = patch.find("$retainKeys");
  if (retain != patch.end() && retain->is_array()) {
    for (auto it = out.begin(); it != out.end();) {
      if (std::find(retain->begin(), retain->end(), it.key()) == retain->end()) {
        it = out.erase(it);
      } else {
        ++it;
      }
    }
  }
  return out;
}

k8s::ApiResult<nlohmann::json> ApplyPatch(const nlohmann::json& target, PatchType type,
                                          std::string_view patch_body) {
  Result<Json> parsed = ParseJson<Json>(patch_body);
  if (!parsed) {
    return k8s::ApiError{400, k8s::kReasonBadRequest, "the patch body is " + parsed.error()};
  }
  Json& patch = *parsed;
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
