#include "scheduler/extender_args.h"

#include <unordered_set>

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

namespace {

// Builds the DOM of an ExtenderArgs body except its top-level NodeNames list, whose strings go
// straight into a bounded, de-duplicated list: a hostile body of millions of names costs no
// value, string or map node per name past the cap (the lexer's token buffer is reused).
class ArgsSax {
 public:
  ArgsSax(json* root, size_t max_names) : dom_(*root, false), max_names_(max_names) {}

  bool null() {
    return Value([&] { return dom_.null(); }, "null");
  }
  bool boolean(bool v) {
    return Value([&] { return dom_.boolean(v); }, v ? "true" : "false");
  }
  bool number_integer(json::number_integer_t v) {
    return Value([&] { return dom_.number_integer(v); }, std::to_string(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return Value([&] { return dom_.number_unsigned(v); }, std::to_string(v));
  }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    return Value([&] { return dom_.number_float(v, text); }, text);
  }
  bool binary(json::binary_t& v) {
    return Value([&] { return dom_.binary(v); }, "binary");
  }
  bool string(json::string_t& v) {
    if (in_names_) {
      if (names_.size() < max_names_) {
        if (seen_.insert(v).second) names_.push_back(v);
      } else if (seen_.count(v) == 0) {
        ++dropped_;
      }
      return true;
    }
    return Value([&] { return dom_.string(v); }, "");
  }
  bool start_object(std::size_t n) {
    if (in_names_) return Fail("an object");
    pending_names_ = false;
    ++depth_;
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    if (depth_ == 1) pending_names_ = ToLower(k) == "nodenames";
    return dom_.key(k);
  }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (in_names_) return Fail("a list");
    if (depth_ == 1 && pending_names_) {
      // The DOM gets null in its place; the names are kept here.
      pending_names_ = false;
      in_names_ = true;
      has_names_ = true;
      names_.clear();
      seen_.clear();
      dropped_ = 0;
      return dom_.null();
    }
    ++depth_;
    return dom_.start_array(n);
  }
  bool end_array() {
    if (in_names_) {
      in_names_ = false;
      return true;
    }
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

  bool has_names() const { return has_names_; }
  std::vector<std::string>& names() { return names_; }
  size_t dropped() const { return dropped_; }
  const std::string& error() const { return error_; }

 private:
  template <typename F>
  bool Value(F forward, const std::string& text) {
    if (in_names_) return Fail(text.empty() ? "a string" : text);
    pending_names_ = false;
    return forward();
  }
  bool Fail(const std::string& got) {
    error_ = "ExtenderArgs.NodeNames: want strings, got " + got;
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  size_t max_names_;
  int depth_ = 0;
  bool pending_names_ = false;
  bool in_names_ = false;
  bool has_names_ = false;
  std::vector<std::string> names_;
  std::unordered_set<std::string> seen_;
  size_t dropped_ = 0;
  std::string error_;
};

}  // namespace

Result<ExtenderArgs> ParseExtenderArgs(std::string_view body, size_t max_node_names) {
  if (Status depth = CheckJsonDepth(body); !depth) {
    return Error{"ExtenderArgs: body is " + depth.error()};
  }
  json root;
  ArgsSax sax(&root, max_node_names);
  bool ok = json::sax_parse(body.begin(), body.end(), &sax, json::input_format_t::json, false);
  if (!sax.error().empty()) return Error{sax.error()};
  if (!ok || root.is_discarded()) return Error{"ExtenderArgs: body is not valid JSON"};
  if (!root.is_object()) return Error{"ExtenderArgs: want a JSON object"};
  ExtenderArgs args;
  if (const json* pod = FindKeyInsensitive(root, "Pod")) {
    if (!pod->is_object()) return Error{"ExtenderArgs.Pod: want an object"};
    args.pod = *pod;
  }
  if (const json* nodes = FindKeyInsensitive(root, "Nodes")) {
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
  if (sax.has_names()) {
    args.node_names = std::move(sax.names());
    args.node_names_dropped = sax.dropped();
  } else if (FindKeyInsensitive(root, "NodeNames") != nullptr) {
    return Error{"ExtenderArgs.NodeNames: want a list of strings"};
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
