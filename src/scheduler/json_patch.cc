#include "scheduler/json_patch.h"

#include "k8s/patches.h"

namespace hami::scheduler {

std::string EscapeJsonPointer(std::string_view token) { return k8s::JsonPointerEscape(token); }

namespace {

std::string StepText(const PathStep& step) {
  return step.index >= 0 ? std::to_string(step.index) : EscapeJsonPointer(step.key);
}

}  // namespace

nlohmann::json* JsonPatchBuilder::Parent(const std::vector<PathStep>& path, std::string* pointer) {
  nlohmann::json* cur = doc_;
  pointer->clear();
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const PathStep& step = path[i];
    *pointer += "/" + StepText(step);
    if (step.index >= 0) {
      cur = &(*cur)[static_cast<size_t>(step.index)];
      continue;
    }
    if (!cur->is_object()) *cur = nlohmann::json::object();
    auto it = cur->find(step.key);
    bool next_is_index = path[i + 1].index >= 0;
    if (it == cur->end() || (!next_is_index && !it->is_object())) {
      (*cur)[step.key] = nlohmann::json::object();
      ops_.push_back({{"op", "add"}, {"path", *pointer}, {"value", nlohmann::json::object()}});
    }
    cur = &(*cur)[step.key];
  }
  return cur;
}

void JsonPatchBuilder::Set(const std::vector<PathStep>& path, const nlohmann::json& value) {
  if (path.empty()) return;
  std::string pointer;
  nlohmann::json* parent = Parent(path, &pointer);
  const PathStep& last = path.back();
  if (!parent->is_object()) *parent = nlohmann::json::object();
  auto it = parent->find(last.key);
  if (it != parent->end() && *it == value) return;
  (*parent)[last.key] = value;
  // "add" on an existing member replaces it, so one op covers both cases.
  ops_.push_back({{"op", "add"}, {"path", pointer + "/" + StepText(last)}, {"value", value}});
}

void JsonPatchBuilder::Append(const std::vector<PathStep>& path, const nlohmann::json& value) {
  if (path.empty()) return;
  std::string pointer;
  nlohmann::json* parent = Parent(path, &pointer);
  const PathStep& last = path.back();
  if (!parent->is_object()) *parent = nlohmann::json::object();
  auto it = parent->find(last.key);
  std::string target = pointer + "/" + StepText(last);
  if (it == parent->end() || !it->is_array()) {
    (*parent)[last.key] = nlohmann::json::array({value});
    ops_.push_back({{"op", "add"}, {"path", target}, {"value", nlohmann::json::array({value})}});
    return;
  }
  it->push_back(value);
  ops_.push_back({{"op", "add"}, {"path", target + "/-"}, {"value", value}});
}

void JsonPatchBuilder::Remove(const std::vector<PathStep>& path) {
  if (path.empty()) return;
  // Walk without creating anything: a path that is not there is nothing to remove.
  nlohmann::json* cur = doc_;
  std::string pointer;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const PathStep& step = path[i];
    pointer += "/" + StepText(step);
    if (step.index >= 0) {
      if (!cur->is_array() || static_cast<size_t>(step.index) >= cur->size()) return;
      cur = &(*cur)[static_cast<size_t>(step.index)];
    } else {
      if (!cur->is_object() || !cur->contains(step.key)) return;
      cur = &(*cur)[step.key];
    }
  }
  const PathStep& last = path.back();
  if (last.index >= 0 || !cur->is_object() || !cur->contains(last.key)) return;
  cur->erase(last.key);
  ops_.push_back({{"op", "remove"}, {"path", pointer + "/" + StepText(last)}});
}

}  // namespace hami::scheduler
