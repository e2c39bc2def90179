#include "device/pod_view.h"

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace hami::device {
namespace {

using Json = nlohmann::json;

const Json* Child(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string StringAt(const Json& obj, const char* key) {
  const Json* v = Child(obj, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

StringMap StringMapAt(const Json& obj, const char* key) {
  StringMap out;
  const Json* m = Child(obj, key);
  if (!m || !m->is_object()) return out;
  for (auto it = m->begin(); it != m->end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

Status ReadQuantities(const Json& resources, const char* key, const std::string& path,
                      StringMap* out) {
  const Json* m = Child(resources, key);
  if (!m) return OkStatus();
  if (!m->is_object()) return Error{path + "." + key + ": want a map, got " + Quote(m->dump())};
  for (auto it = m->begin(); it != m->end(); ++it) {
    if (it->is_string()) {
      (*out)[it.key()] = it->get<std::string>();
    } else if (it->is_number_integer()) {
      (*out)[it.key()] = it->dump();
    } else {
      return Error{path + "." + key + "[" + Quote(it.key()) + "]: want a quantity, got " +
                   Quote(it->dump())};
    }
  }
  return OkStatus();
}

Status ReadContainers(const Json& spec, const char* key, std::vector<ContainerView>* out) {
  const Json* list = Child(spec, key);
  if (!list) return OkStatus();
  std::string base = std::string("spec.") + key;
  if (!list->is_array()) return Error{base + ": want a list, got " + Quote(list->dump())};
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& c = (*list)[i];
    std::string path = base + "[" + std::to_string(i) + "]";
    if (!c.is_object()) return Error{path + ": want an object, got " + Quote(c.dump())};
    ContainerView view;
    view.name = StringAt(c, "name");
    if (const Json* res = Child(c, "resources")) {
      std::string rpath = path + ".resources";
      if (!res->is_object()) return Error{rpath + ": want an object, got " + Quote(res->dump())};
      if (auto s = ReadQuantities(*res, "limits", rpath, &view.limits); !s) return s;
      if (auto s = ReadQuantities(*res, "requests", rpath, &view.requests); !s) return s;
    }
    out->push_back(std::move(view));
  }
  return OkStatus();
}

bool AllInitDone(const Json& status, size_t init_count) {
  if (init_count == 0) return false;
  const Json* list = Child(status, "initContainerStatuses");
  if (!list || !list->is_array() || list->size() < init_count) return false;
  for (const Json& s : *list) {
    const Json* state = Child(s, "state");
    const Json* term = state ? Child(*state, "terminated") : nullptr;
    const Json* code = term ? Child(*term, "exitCode") : nullptr;
    if (!code || !code->is_number_integer() || code->get<int64_t>() != 0) return false;
  }
  return true;
}

// Moves from[key] into to[key] when present (whatever its type).
void MoveKey(Json& from, Json& to, const char* key) {
  auto it = from.find(key);
  if (it != from.end()) to[key] = std::move(*it);
}

// A container keeps its name and resources.limits/requests; anything of another shape than
// ReadContainers reads is kept whole, so the same error names it.
Json ContainerFields(Json c) {
  if (!c.is_object()) return c;
  Json out = Json::object();
  MoveKey(c, out, "name");
  auto res = c.find("resources");
  if (res != c.end()) {
    if (res->is_object()) {
      Json kept = Json::object();
      MoveKey(*res, kept, "limits");
      MoveKey(*res, kept, "requests");
      out["resources"] = std::move(kept);
    } else {
      out["resources"] = std::move(*res);
    }
  }
  return out;
}

void ContainerListFields(Json& from, Json& to, const char* key) {
  auto it = from.find(key);
  if (it == from.end()) return;
  if (it->is_array()) {
    Json list = Json::array();
    for (Json& c : *it) list.push_back(ContainerFields(std::move(c)));
    to[key] = std::move(list);
  } else {
    to[key] = std::move(*it);
  }
}

// An init container status keeps state.terminated.exitCode, the only field AllInitDone reads
// (an entry without it still counts toward the list's length).
Json InitStatusFields(const Json& s) {
  const Json* state = Child(s, "state");
  const Json* term = state ? Child(*state, "terminated") : nullptr;
  const Json* code = term ? Child(*term, "exitCode") : nullptr;
  if (!code) return Json::object();
  return Json{{"state", {{"terminated", {{"exitCode", *code}}}}}};
}

}  // namespace

Json PodViewFields(Json pod) {
  if (!pod.is_object()) return pod;
  Json out = Json::object();
  auto meta = pod.find("metadata");
  if (meta != pod.end()) {
    if (meta->is_object()) {
      Json m = Json::object();
      for (const char* key : {"name", "namespace", "uid", "resourceVersion", "annotations",
                              "labels", "deletionTimestamp"}) {
        MoveKey(*meta, m, key);
      }
      out["metadata"] = std::move(m);
    } else {
      out["metadata"] = std::move(*meta);
    }
  }
  auto spec = pod.find("spec");
  if (spec != pod.end()) {
    if (spec->is_object()) {
      Json s = Json::object();
      MoveKey(*spec, s, "nodeName");
      ContainerListFields(*spec, s, "initContainers");
      ContainerListFields(*spec, s, "containers");
      out["spec"] = std::move(s);
    } else {
      out["spec"] = std::move(*spec);
    }
  }
  auto status = pod.find("status");
  if (status != pod.end()) {
    if (status->is_object()) {
      Json s = Json::object();
      MoveKey(*status, s, "phase");
      auto init = status->find("initContainerStatuses");
      if (init != status->end()) {
        if (init->is_array()) {
          Json list = Json::array();
          for (const Json& e : *init) list.push_back(InitStatusFields(e));
          s["initContainerStatuses"] = std::move(list);
        } else {
          s["initContainerStatuses"] = std::move(*init);
        }
      }
      out["status"] = std::move(s);
    } else {
      out["status"] = std::move(*status);
    }
  }
  return out;
}

std::vector<const ContainerView*> PodView::AllContainers() const {
  std::vector<const ContainerView*> out;
  out.reserve(init_containers.size() + containers.size());
  for (const auto& c : init_containers) out.push_back(&c);
  for (const auto& c : containers) out.push_back(&c);
  return out;
}

std::string PodView::Key() const { return namespace_name + "/" + name; }

std::string ObjectName(const nlohmann::json& obj) {
  const Json* meta = Child(obj, "metadata");
  return meta ? StringAt(*meta, "name") : std::string();
}

StringMap ObjectAnnotations(const nlohmann::json& obj) {
  const Json* meta = Child(obj, "metadata");
  return meta ? StringMapAt(*meta, "annotations") : StringMap{};
}

Result<PodView> ParsePodView(const nlohmann::json& pod) {
  if (!pod.is_object()) return Error{"pod: want an object, got " + Quote(pod.dump())};
  PodView view;
  if (const Json* meta = Child(pod, "metadata")) {
    view.name = StringAt(*meta, "name");
    view.namespace_name = StringAt(*meta, "namespace");
    view.uid = StringAt(*meta, "uid");
    view.annotations = StringMapAt(*meta, "annotations");
    view.labels = StringMapAt(*meta, "labels");
    view.deleting = Child(*meta, "deletionTimestamp") != nullptr;
  }
  if (const Json* spec = Child(pod, "spec")) {
    view.node_name = StringAt(*spec, "nodeName");
    if (auto s = ReadContainers(*spec, "initContainers", &view.init_containers); !s) {
      return std::move(s).take_error();
    }
    if (auto s = ReadContainers(*spec, "containers", &view.containers); !s) {
      return std::move(s).take_error();
    }
  }
  if (const Json* status = Child(pod, "status")) {
    view.phase = StringAt(*status, "phase");
    view.init_done = AllInitDone(*status, view.init_containers.size());
  }
  return view;
}

}  // namespace hami::device
