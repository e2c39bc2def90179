// Kubernetes objects are nlohmann::json values here. These helpers read metadata without
// throwing: a missing or wrongly typed field reads as empty.
#ifndef HAMI_K8S_OBJECT_H_
#define HAMI_K8S_OBJECT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace hami::k8s {

using Json = nlohmann::json;
// Labels and annotations. The transparent comparator lets find/count take a std::string_view
// or a literal without building a std::string key. device::StringMap is the same type.
using StringMap = std::map<std::string, std::string, std::less<>>;

std::string Name(const Json& obj);
std::string Namespace(const Json& obj);
std::string Uid(const Json& obj);
std::string ResourceVersion(const Json& obj);
// The cache key client-go uses: "namespace/name", or "name" for cluster-scoped objects.
std::string ObjectKey(const Json& obj);
std::string ObjectKey(std::string_view ns, std::string_view name);

// metadata.labels / metadata.annotations; non-string values are skipped.
StringMap Labels(const Json& obj);
StringMap Annotations(const Json& obj);
std::optional<std::string> Annotation(const Json& obj, std::string_view key);

// A string field by dotted path ("spec.nodeName"); numbers and booleans are rendered as JSON
// ("true", "3"); absent or object/array fields read as "".
std::string FieldString(const Json& obj, std::string_view dotted_path);

// resourceVersion as a number; nullopt when absent or not a decimal number.
std::optional<int64_t> ParseResourceVersion(std::string_view rv);

// The object's metadata.resourceVersion as a number for ordering its events (the sim API server
// and kube-apiserver's etcd both count up); 0 when absent or not a number, which callers treat as
// "order unknown".
uint64_t ResourceVersionNumber(const Json& obj);

}  // namespace hami::k8s

#endif  // HAMI_K8S_OBJECT_H_
