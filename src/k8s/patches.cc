#include "k8s/patches.h"

namespace hami::k8s {
namespace {

nlohmann::json MetadataMapPatch(const char* field, const MapEdit& edit) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [k, v] : edit) values[k] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  return {{"metadata", {{field, values}}}};
}

}  // namespace

nlohmann::json AnnotationsMergePatch(const MapEdit& edit) {
  return MetadataMapPatch("annotations", edit);
}

nlohmann::json LabelsMergePatch(const MapEdit& edit) { return MetadataMapPatch("labels", edit); }

std::string JsonPointerEscape(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

nlohmann::json AddAnnotationsJsonPatch(const nlohmann::json& obj,
                                       const std::map<std::string, std::string>& annotations) {
  nlohmann::json ops = nlohmann::json::array();
  if (annotations.empty()) return ops;
  bool has = obj.is_object() && obj.contains("metadata") && obj["metadata"].is_object() &&
             obj["metadata"].contains("annotations") && obj["metadata"]["annotations"].is_object();
  if (!has) {
    ops.push_back(
        {{"op", "add"}, {"path", "/metadata/annotations"}, {"value", nlohmann::json::object()}});
  }
  for (const auto& [k, v] : annotations) {
    ops.push_back(
        {{"op", "add"}, {"path", "/metadata/annotations/" + JsonPointerEscape(k)}, {"value", v}});
  }
  return ops;
}

}  // namespace hami::k8s
