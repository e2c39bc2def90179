// Builders for the patch documents components send: merge patches of annotations/labels
// (the common write of the scheduler and device plugin) and JSON Patch operations (what an
// admission webhook returns), with RFC 6901 escaping.
#ifndef HAMI_K8S_PATCHES_H_
#define HAMI_K8S_PATCHES_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hami::k8s {

// key -> new value, or nullopt to remove the key.
using MapEdit = std::map<std::string, std::optional<std::string>>;

// {"metadata":{"annotations":{k: v, gone: null}}} for PatchType::kMerge.
nlohmann::json AnnotationsMergePatch(const MapEdit& edit);
// {"metadata":{"labels":{...}}} likewise.
nlohmann::json LabelsMergePatch(const MapEdit& edit);

// RFC 6901: "~" -> "~0", "/" -> "~1". "hami.io/vgpu-node" -> "hami.io~1vgpu-node".
std::string JsonPointerEscape(std::string_view key);

// JSON Patch operations that set `annotations` on `obj`: first an add of an empty
// /metadata/annotations when `obj` has none (an add needs its parent), then one add per key
// (add replaces an existing key).
nlohmann::json AddAnnotationsJsonPatch(const nlohmann::json& obj,
                                       const std::map<std::string, std::string>& annotations);

}  // namespace hami::k8s

#endif  // HAMI_K8S_PATCHES_H_
