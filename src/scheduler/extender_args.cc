#include "scheduler/extender_args.h"

#include "common/json.h"
#include "common/strings.h"

namespace hami::scheduler {

using nlohmann::json;

const json* FindKeyInsensitive(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto exact = obj.find(std::string(key));
  if (exact != obj.end()) return exact->is_null() ? nullptr : &*exact;
  std::string want = ToLower(key);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (ToLower(it.key()) == want) return it->is_null() ? nullptr : &*it;
  }
  return nullptr;
}

namespace {

Result<json> ParseObject(std::string_view body, std::string_view what) {
  Result<json> doc = ParseJson(body);
  if (!doc) return Error{std::string(what) + ": body is " + doc.error()};
  if (!doc->is_object()) return Error{std::string(what) + ": want a JSON object"};
  return doc;
}

}  // namespace

Result<ExtenderArgs> ParseExtenderArgs(std::string_view body) {
  Result<json> doc = ParseObject(body, "ExtenderArgs");
  if (!doc) return std::move(doc).take_error();
  ExtenderArgs args;
  if (const json* pod = FindKeyInsensitive(*doc, "Pod")) {
    if (!pod->is_object()) return Error{"ExtenderArgs.Pod: want an object"};
    args.pod = *pod;
  }
  if (const json* nodes = FindKeyInsensitive(*doc, "Nodes")) {
    if (!nodes->is_object()) return Error{"ExtenderArgs.Nodes: want a NodeList object"};
    std::vector<json> items;
    if (const json* list = FindKeyInsensitive(*nodes, "items")) {
      if (!list->is_array()) return Error{"ExtenderArgs.Nodes.items: want a list"};
      for (const json& n : *list) {
        if (!n.is_object()) return Error{"ExtenderArgs.Nodes.items: want objects"};
        items.push_back(n);
      }
    }
    args.nodes = std::move(items);
  }
  if (const json* names = FindKeyInsensitive(*doc, "NodeNames")) {
    if (!names->is_array()) return Error{"ExtenderArgs.NodeNames: want a list of strings"};
    std::vector<std::string> out;
    for (const json& n : *names) {
      if (!n.is_string()) {
        return Error{"ExtenderArgs.NodeNames: want strings, got " + Quote(n.dump())};
      }
      out.push_back(n.get<std::string>());
    }
    args.node_names = std::move(out);
  }
  return args;
}

Result<BindingArgs> ParseBindingArgs(std::string_view body) {
  Result<json> doc = ParseObject(body, "ExtenderBindingArgs");
  if (!doc) return std::move(doc).take_error();
  BindingArgs args;
  for (auto [key, field] : {std::pair{"PodName", &args.pod_name},
                            {"PodNamespace", &args.pod_namespace},
                            {"PodUID", &args.pod_uid},
                            {"Node", &args.node}}) {
    const json* v = FindKeyInsensitive(*doc, key);
    if (v == nullptr) continue;
    if (!v->is_string()) {
      return Error{std::string("ExtenderBindingArgs.") + key + ": want a string, got " +
                   Quote(v->dump())};
    }
    *field = v->get<std::string>();
  }
  if (args.pod_name.empty()) return Error{"ExtenderBindingArgs.PodName: missing"};
  if (args.node.empty()) return Error{"ExtenderBindingArgs.Node: missing"};
  return args;
}

std::string EncodeFilterResult(const FilterResult& result) {
  json out = json::object();
  if (result.nodes) {
    out["Nodes"] = {{"metadata", json::object()}, {"items", *result.nodes}};
  } else {
    out["Nodes"] = nullptr;
  }
  out["NodeNames"] = result.node_names ? json(*result.node_names) : json(nullptr);
  out["FailedNodes"] = result.failed_nodes ? json(*result.failed_nodes) : json(nullptr);
  out["FailedAndUnresolvableNodes"] = nullptr;
  out["Error"] = result.error;
  return out.dump();
}

std::string EncodeBindingResult(std::string_view error) {
  return json{{"Error", std::string(error)}}.dump();
}

}  // namespace hami::scheduler
