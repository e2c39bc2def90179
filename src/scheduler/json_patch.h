// A minimal RFC 6902 JSON Patch builder: the webhook mutates a copy of the pod through it, and it
// records exactly the operations that turn the original into the copy. Paths are RFC 6901 JSON
// Pointers ('~' -> "~0", '/' -> "~1"); a missing parent object is created by its own "add" first,
// because an "add" whose parent does not exist is rejected by the API server.
#ifndef HAMI_SCHEDULER_JSON_PATCH_H_
#define HAMI_SCHEDULER_JSON_PATCH_H_

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hami::scheduler {

// "hami.io/vgpu-node" -> "hami.io~1vgpu-node" (k8s::JsonPointerEscape; kept for callers here).
std::string EscapeJsonPointer(std::string_view token);

// A path step: an object key or an array index.
struct PathStep {
  std::string key{};
  int index = -1;  // >= 0: array element
  static PathStep Key(std::string k) { return PathStep{std::move(k), -1}; }
  static PathStep Index(int i) { return PathStep{"", i}; }
};

class JsonPatchBuilder {
 public:
  // `doc` is the document being mutated; it must outlive the builder.
  explicit JsonPatchBuilder(nlohmann::json* doc) : doc_(doc) {}

  // Sets doc[path] = value, creating missing parent objects (each with an "add" of {}). The
  // array steps of `path` must exist. Nothing is recorded when the value is already equal.
  void Set(const std::vector<PathStep>& path, const nlohmann::json& value);
  // Appends to the array at `path` ("/-"), creating it (as [value]) when absent.
  void Append(const std::vector<PathStep>& path, const nlohmann::json& value);

  // Removes doc[path] (recorded as a "remove"); nothing when it is absent.
  void Remove(const std::vector<PathStep>& path);
  bool Empty() const { return ops_.empty(); }
  // The operations in order, as a JSON array.
  const nlohmann::json& Ops() const { return ops_; }

 private:
  // Walks to the parent of the last step, creating objects; returns it and its pointer text.
  nlohmann::json* Parent(const std::vector<PathStep>& path, std::string* pointer);

  nlohmann::json* doc_;
  nlohmann::json ops_ = nlohmann::json::array();
};

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_JSON_PATCH_H_
