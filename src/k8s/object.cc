#include "k8s/object.h"

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace hami::k8s {
namespace {

const Json* Metadata(const Json& obj) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find("metadata");
  if (it == obj.end() || !it->is_object()) return nullptr;
  return &*it;
}

std::string MetaString(const Json& obj, const char* key) {
  const Json* meta = Metadata(obj);
  if (meta == nullptr) return "";
  auto it = meta->find(key);
  if (it == meta->end() || !it->is_string()) return "";
  return it->get<std::string>();
}

StringMap MetaMap(const Json& obj, const char* key) {
  StringMap out;
  const Json* meta = Metadata(obj);
  if (meta == nullptr) return out;
  auto it = meta->find(key);
  if (it == meta->end() || !it->is_object()) return out;
  for (const auto& [k, v] : it->items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

}  // namespace

std::string Name(const Json& obj) { return MetaString(obj, "name"); }
std::string Namespace(const Json& obj) { return MetaString(obj, "namespace"); }
std::string Uid(const Json& obj) { return MetaString(obj, "uid"); }
std::string ResourceVersion(const Json& obj) { return MetaString(obj, "resourceVersion"); }

std::string ObjectKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string key(ns);
  key += '/';
  key += name;
  return key;
}

std::string ObjectKey(const Json& obj) { return ObjectKey(Namespace(obj), Name(obj)); }

StringMap Labels(const Json& obj) { return MetaMap(obj, "labels"); }
StringMap Annotations(const Json& obj) { return MetaMap(obj, "annotations"); }

std::optional<std::string> Annotation(const Json& obj, std::string_view key) {
  const Json* meta = Metadata(obj);
  if (meta == nullptr) return std::nullopt;
  auto it = meta->find("annotations");
  if (it == meta->end() || !it->is_object()) return std::nullopt;
  auto v = it->find(std::string(key));
  if (v == it->end() || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

std::string FieldString(const Json& obj, std::string_view dotted_path) {
  const Json* cur = &obj;
  for (std::string_view part : Split(dotted_path, '.')) {
    if (!cur->is_object()) return "";
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return "";
    cur = &*it;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean() || cur->is_number()) return cur->dump();
  return "";
}

std::optional<int64_t> ParseResourceVersion(std::string_view rv) {
  auto v = ParseInt64(rv);
  if (!v || *v < 0) return std::nullopt;
  return v;
}

uint64_t ResourceVersionNumber(const Json& obj) {
  return static_cast<uint64_t>(ParseResourceVersion(ResourceVersion(obj)).value_or(0));
}

}  // namespace hami::k8s
