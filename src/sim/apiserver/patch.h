// The three patch flavours the apiserver accepts, applied to a JSON object.
#ifndef HAMI_SIM_PATCH_H_
#define HAMI_SIM_PATCH_H_

#include <string_view>

#include <nlohmann/json.hpp>

#include "k8s/api_error.h"

namespace hami::sim {

enum class PatchType { kMerge, kStrategicMerge, kJsonPatch };

// Maps a PATCH Content-Type to its type; 415 UnsupportedMediaType for anything else
// (server-side apply included).
k8s::ApiResult<PatchType> PatchTypeFromContentType(std::string_view content_type);

// Applies `patch_body` (unparsed) to `target`. Malformed patch documents are 400 BadRequest; a
// JSON patch whose operations cannot apply (missing path, failed test) is 422 Invalid.
k8s::ApiResult<nlohmann::json> ApplyPatch(const nlohmann::json& target, PatchType type,
                                          std::string_view patch_body);

// Strategic merge patch, as kubectl and helm send it for built-in kinds: like RFC 7386 merge,
// except that lists with a merge key (containers, env, volumes, webhooks by "name"; volumeMounts
// by "mountPath"; ports by "containerPort" or "port"; conditions by "type"; ...) merge item by
// item, finalizers merge as a set, and the directives `$patch` (merge, replace, delete; on maps
// and list items), `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>` and
// `$retainKeys` are honoured. Lists without a merge key (args, command, rules) are replaced.
nlohmann::json StrategicMerge(const nlohmann::json& target, const nlohmann::json& patch);

}  // namespace hami::sim

#endif  // HAMI_SIM_PATCH_H_
