#include "sim/handlers.h"

#include <algorithm>
#include <thread>
#include <variant>

#include "common/json.h"
#include "common/strings.h"
#include "k8s/object.h"
#include "sim/patch.h"
#include "sim/protobuf.h"

namespace hami::sim {
namespace {

using k8s::ApiError;
using k8s::ApiResult;

// Which object or collection a request addresses.
struct Target {
  const ResourceType* type = nullptr;
  std::string ns;
  std::string name;         // "" for the collection
  std::string subresource;  // "", "status", "binding"
};

ApiError BadRequest(std::string message) {
  return ApiError{400, k8s::kReasonBadRequest, std::move(message)};
}

ApiError PathNotFound(std::string_view path) {
  return ApiError{404, k8s::kReasonNotFound,
                  "the server could not find the requested resource (path " + Quote(path) + ")"};
}

ApiError MethodNotAllowed(const httplib::Request& req) {
  return ApiError{405, k8s::kReasonMethodNotAllowed,
                  "the server does not allow this method on the requested resource (" + req.method +
                      " " + req.path + ")"};
}

ApiResult<Target> ParseTarget(std::string_view path) {
  std::vector<std::string_view> seg = Split(path, '/');
  // seg[0] is "" (path starts with '/').
  std::string group;
  std::string version;
  size_t i;
  if (seg.size() >= 3 && seg[1] == "api") {
    version = std::string(seg[2]);
    i = 3;
  } else if (seg.size() >= 4 && seg[1] == "apis") {
    group = std::string(seg[2]);
    version = std::string(seg[3]);
    i = 4;
  } else {
    return PathNotFound(path);
  }
  std::vector<std::string> rest(seg.begin() + static_cast<std::ptrdiff_t>(i), seg.end());
  if (!rest.empty() && rest.back().empty()) rest.pop_back();
  Target t;
  if (rest.size() >= 3 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize") {
    t.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
    if (t.ns.empty()) return PathNotFound(path);
  }
  if (rest.empty() || rest.size() > 3) return PathNotFound(path);
  t.type = FindResourceType(group, version, rest[0]);
  if (t.type == nullptr || (t.type->namespaced == false && !t.ns.empty())) {
    return PathNotFound(path);
  }
  if (rest.size() >= 2) t.name = rest[1];
  if (rest.size() == 3) t.subresource = rest[2];
  bool sub_ok = t.subresource.empty() || (t.subresource == "status" && t.type->has_status) ||
                (t.subresource == "binding" && t.type->plural == "pods" && t.type->group.empty());
  if (!sub_ok || (rest.size() >= 2 && t.name.empty())) return PathNotFound(path);
  return t;
}

// Shape checks a decoder would make: wrong JSON types are a 400, not a crash or a 500. Reads
// `obj` in place, so a patched object is checked without a serialise + parse round trip.
ApiResult<std::monostate> ValidateBody(const ResourceType& type, const Json& obj) {
  if (!obj.is_object()) return BadRequest("the request body must be a JSON object");
  for (const char* key : {"kind", "apiVersion"}) {
    if (obj.contains(key) && !obj[key].is_string()) {
      return BadRequest(std::string(key) + " must be a string");
    }
  }
  if (obj.contains("kind") && obj["kind"] != type.kind) {
    return BadRequest("kind " + Quote(obj["kind"].get<std::string>()) +
                      " does not match the expected kind " + Quote(type.kind));
  }
  if (obj.contains("apiVersion") && obj["apiVersion"] != type.ApiVersion()) {
    return BadRequest("the API version in the data (" + obj["apiVersion"].get<std::string>() +
                      ") does not match the expected API version (" + type.ApiVersion() + ")");
  }
  for (const char* key : {"spec", "status"}) {
    if (obj.contains(key) && !obj[key].is_null() && !obj[key].is_object()) {
      return BadRequest(std::string(key) + " must be an object");
    }
  }
  if (type.kind == "ConfigMap" || type.kind == "Secret") {
    for (const char* key : {"data", "stringData", "binaryData"}) {
      if (!obj.contains(key) || obj[key].is_null()) continue;
      if (!obj[key].is_object()) return BadRequest(std::string(key) + " must be a map");
      for (const auto& [k, v] : obj[key].items()) {
        if (!v.is_string())
          return BadRequest(std::string(key) + "[" + Quote(k) + "] must be a string");
      }
    }
  }
  if (type.kind == "Pod" && obj.contains("spec") && obj["spec"].is_object()) {
    for (const char* key : {"containers", "initContainers"}) {
      const Json& spec = obj["spec"];
      if (!spec.contains(key) || spec[key].is_null()) continue;
      if (!spec[key].is_array()) return BadRequest("spec." + std::string(key) + " must be a list");
      for (const auto& c : spec[key]) {
        if (!c.is_object() || (c.contains("name") && !c["name"].is_string())) {
          return BadRequest("spec." + std::string(key) +
                            "[]: each must be an object with a string name");
        }
      }
    }
    if (obj["spec"].contains("nodeName") && !obj["spec"]["nodeName"].is_string() &&
        !obj["spec"]["nodeName"].is_null()) {
      return BadRequest("spec.nodeName must be a string");
    }
  }
  if (!obj.contains("metadata")) return std::monostate{};
  const Json& meta = obj["metadata"];
  if (!meta.is_object()) return BadRequest("metadata must be an object");
  for (const char* key : {"name", "namespace", "generateName", "resourceVersion", "uid"}) {
    if (meta.contains(key) && !meta[key].is_string()) {
      return BadRequest("metadata." + std::string(key) + " must be a string");
    }
  }
  for (const char* key : {"labels", "annotations"}) {
    if (!meta.contains(key) || meta[key].is_null()) continue;
    if (!meta[key].is_object())
      return BadRequest("metadata." + std::string(key) + " must be a map");
    for (const auto& [k, v] : meta[key].items()) {
      if (!v.is_string()) {
        return BadRequest("metadata." + std::string(key) + "[" + Quote(k) + "] must be a string");
      }
    }
  }
  return std::monostate{};
}

ApiResult<Json> ParseBody(const ResourceType& type, const std::string& body) {
  Result<Json> parsed = ParseJson<Json>(body);
  if (!parsed) return BadRequest("the request body is " + parsed.error());
  Json& obj = *parsed;
  if (auto ok = ValidateBody(type, obj); !ok) return std::move(ok).take_error();
  return obj;
}

ApiResult<ListFilter> ParseFilter(const httplib::Request& req) {
  ListFilter f;
  auto labels = k8s::LabelSelector::Parse(req.get_param_value("labelSelector"));
  if (!labels) return BadRequest("labelSelector: " + labels.error());
  auto fields = k8s::FieldSelector::Parse(req.get_param_value("fieldSelector"));
  if (!fields) return BadRequest("fieldSelector: " + fields.error());
  f.labels = std::move(*labels);
  f.fields = std::move(*fields);
  return f;
}

std::string ListBody(const ResourceType& type, const ListPage& page) {
  Json meta = {{"resourceVersion", std::to_string(page.rv)}};
  if (!page.continue_token.empty()) {
    meta["continue"] = page.continue_token;
    meta["remainingItemCount"] = page.remaining;
  }
  std::string out = R"({"kind":")" + type.kind + R"(List","apiVersion":")" + type.ApiVersion() +
                    R"(","metadata":)" + meta.dump() + R"(,"items":[)";
  for (size_t i = 0; i < page.items.size(); ++i) {
    if (i) out += ',';
    out += page.items[i]->raw;
  }
  out += "]}";
  return out;
}

void List(Store& store, const Target& t, const httplib::Request& req, httplib::Response& res) {
  auto filter = ParseFilter(req);
  if (!filter) return ReplyError(res, filter.error());
  int64_t limit = 0;
  if (req.has_param("limit")) {
    auto l = ParseInt64(req.get_param_value("limit"));
    if (!l || *l < 0)
      return ReplyError(res, BadRequest("limit " + Quote(req.get_param_value("limit")) +
                                        ": not a non-negative integer"));
    limit = *l;
  }
  auto page = store.List(*t.type, t.ns, *filter, limit, req.get_param_value("continue"));
  if (!page) return ReplyError(res, page.error());
  ReplyJson(res, 200, ListBody(*t.type, *page));
}

bool IsDryRun(const httplib::Request& req) { return req.get_param_value("dryRun") == "All"; }

void Get(Store& store, const Target& t, httplib::Response& res) {
  auto obj = store.Get(*t.type, t.ns, t.name);
  if (!obj) return ReplyError(res, obj.error());
  ReplyJson(res, 200, (*obj)->raw);
}

void Create(Store& store, const Target& t, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseBody(*t.type, req.body);
  if (!body) return ReplyError(res, body.error());
  if (IsDryRun(req)) {
    return ReplyJson(res, 201, body->dump());
  }
  auto obj = store.Create(*t.type, t.ns, std::move(*body));
  if (!obj) return ReplyError(res, obj.error());
  ReplyJson(res, 201, (*obj)->raw);
}

// The object to store for a write of `next` over `current` at `subresource`: a status write
// changes only status; a main-resource write of a type with a status subresource keeps status.
Json MergeSubresource(const ResourceType& type, const std::string& subresource, const Json& current,
                      Json next) {
  if (subresource == "status") {
    Json out = current;
    out["status"] = next.contains("status") ? next["status"] : Json::object();
    if (next.contains("metadata") && next["metadata"].contains("resourceVersion")) {
      out["metadata"]["resourceVersion"] = next["metadata"]["resourceVersion"];
    }
    return out;
  }
  if (type.has_status) {
    if (current.contains("status")) {
      next["status"] = current["status"];
    } else {
      next.erase("status");
    }
  }
  return next;
}

// Store::Update, or under dryRun=All the object the update would store, not stored.
void UpdateAndReply(Store& store, const Target& t, const httplib::Request& req,
                    httplib::Response& res, const Store::Mutation& mutate) {
  if (IsDryRun(req)) {
    auto cur = store.Get(*t.type, t.ns, t.name);
    if (!cur) return ReplyError(res, cur.error());
    auto next = mutate((*cur)->json);
    if (!next) return ReplyError(res, next.error());
    return ReplyJson(res, 200, next->dump());
  }
  auto obj = store.Update(*t.type, t.ns, t.name, mutate);
  if (!obj) return ReplyError(res, obj.error());
  ReplyJson(res, 200, (*obj)->raw);
}

void Replace(Store& store, const Target& t, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseBody(*t.type, req.body);
  if (!body) return ReplyError(res, body.error());
  std::string name = k8s::Name(*body);
  if (name != t.name) {
    return ReplyError(res, BadRequest("the name of the object (" + name +
                                      ") does not match the name on the URL (" + t.name + ")"));
  }
  std::string ns = k8s::Namespace(*body);
  if (!ns.empty() && ns != t.ns) {
    return ReplyError(res, BadRequest("the namespace of the provided object does not match the "
                                      "namespace sent on the request"));
  }
  Json next = std::move(*body);
  UpdateAndReply(store, t, req, res, [&](const Json& cur) -> ApiResult<Json> {
    return MergeSubresource(*t.type, t.subresource, cur, next);
  });
}

void Patch(Store& store, const Target& t, const httplib::Request& req, httplib::Response& res) {
  auto type = PatchTypeFromContentType(req.get_header_value("Content-Type"));
  if (!type) return ReplyError(res, type.error());
  UpdateAndReply(store, t, req, res, [&](const Json& cur) -> ApiResult<Json> {
    auto patched = ApplyPatch(cur, *type, req.body);
    if (!patched) return patched;
    if (!patched->is_object()) return BadRequest("the patched object is not a JSON object");
    auto checked = ValidateBody(*t.type, *patched);
    if (!checked) {
      const ApiError& e = checked.error();
      return ApiError{422, k8s::kReasonInvalid, "the patched object is invalid: " + e.message};
    }
    return MergeSubresource(*t.type, t.subresource, cur, std::move(*patched));
  });
}

ApiResult<DeletePreconditions> ParseDeleteOptions(const std::string& body) {
  DeletePreconditions pre;
  if (Trim(body).empty()) return pre;
  Json opts = ParseJsonOrNull<Json>(body);
  if (!opts.is_object()) {
    return BadRequest("the DeleteOptions body is not a JSON object");
  }
  auto it = opts.find("preconditions");
  if (it == opts.end() || it->is_null()) return pre;
  if (!it->is_object()) return BadRequest("preconditions must be an object");
  for (auto [key, field] :
       {std::pair{"uid", &pre.uid}, {"resourceVersion", &pre.resource_version}}) {
    auto v = it->find(key);
    if (v == it->end() || v->is_null()) continue;
    if (!v->is_string())
      return BadRequest(std::string("preconditions.") + key + " must be a string");
    *field = v->get<std::string>();
  }
  return pre;
}

void Delete(Store& store, const Target& t, const httplib::Request& req, httplib::Response& res) {
  auto pre = ParseDeleteOptions(req.body);
  if (!pre) return ReplyError(res, pre.error());
  auto obj =
      IsDryRun(req) ? store.Get(*t.type, t.ns, t.name) : store.Delete(*t.type, t.ns, t.name, *pre);
  if (!obj) return ReplyError(res, obj.error());
  ReplyJson(res, 200, (*obj)->raw);
}

void DeleteCollection(Store& store, const Target& t, const httplib::Request& req,
                      httplib::Response& res) {
  auto filter = ParseFilter(req);
  if (!filter) return ReplyError(res, filter.error());
  auto page = store.List(*t.type, t.ns, *filter, 0, "");
  if (!page) return ReplyError(res, page.error());
  ListPage deleted;
  for (const auto& item : page->items) {
    auto gone = store.Delete(*t.type, k8s::Namespace(item->json), k8s::Name(item->json), {});
    if (gone) deleted.items.push_back(*gone);
  }
  deleted.rv = store.resource_version();
  ReplyJson(res, 200, ListBody(*t.type, deleted));
}

// POST pods/<name>/binding: sets spec.nodeName once; a bound pod gets 409.
void Bind(Store& store, const Target& t, const httplib::Request& req, httplib::Response& res) {
  Json binding = ParseJsonOrNull<Json>(req.body);
  if (!binding.is_object()) {
    return ReplyError(res, BadRequest("the Binding body is not a JSON object"));
  }
  auto target = binding.find("target");
  if (target == binding.end() || !target->is_object() || !target->contains("name") ||
      !(*target)["name"].is_string() || (*target)["name"].get<std::string>().empty()) {
    return ReplyError(
        res, ApiError{422, k8s::kReasonInvalid,
                      "Binding " + Quote(t.name) + " is invalid: target.name: Required value"});
  }
  std::string node = (*target)["name"].get<std::string>();
  // metadata.uid and resourceVersion of a Binding are preconditions on the pod, as in
  // kube-apiserver: a bind meant for a deleted pod must not bind its same-named successor.
  const std::string want_uid = k8s::FieldString(binding, "metadata.uid");
  const std::string want_rv = k8s::FieldString(binding, "metadata.resourceVersion");
  auto obj = store.Update(*t.type, t.ns, t.name, [&](const Json& cur) -> ApiResult<Json> {
    auto precondition = [&](const char* what, const std::string& want, const std::string& have) {
      return ApiError{409, k8s::kReasonConflict,
                      "Operation cannot be fulfilled on pods/binding " + Quote(t.name) +
                          ": Precondition failed: " + what + " in precondition: " + want + ", " +
                          what + " in object meta: " + have};
    };
    if (!want_uid.empty() && want_uid != k8s::Uid(cur)) {
      return precondition("UID", want_uid, k8s::Uid(cur));
    }
    if (!want_rv.empty() && want_rv != k8s::ResourceVersion(cur)) {
      return precondition("ResourceVersion", want_rv, k8s::ResourceVersion(cur));
    }
    std::string bound = k8s::FieldString(cur, "spec.nodeName");
    if (!bound.empty()) {
      return ApiError{409, k8s::kReasonConflict,
                      "Operation cannot be fulfilled on pods/binding " + Quote(t.name) + ": pod " +
                          t.name + " is already assigned to node " + Quote(bound)};
    }
    Json next = cur;
    if (!next["spec"].is_object()) next["spec"] = Json::object();
    next["spec"]["nodeName"] = node;
    Json& conditions = next["status"]["conditions"];
    if (!conditions.is_array()) conditions = Json::array();
    conditions.push_back(Json{{"type", "PodScheduled"}, {"status", "True"}});
    return next;
  });
  if (!obj) return ReplyError(res, obj.error());
  ReplyJson(res, 201,
            Json{{"kind", "Status"},
                 {"apiVersion", "v1"},
                 {"metadata", Json::object()},
                 {"status", "Success"},
                 {"code", 201}}
                .dump());
}

bool IsWatch(const httplib::Request& req) {
  std::string w = req.get_param_value("watch");
  return w == "true" || w == "1";
}

void Dispatch(Store& store, const HandlerConfig& config, const Target& t,
              const httplib::Request& req, httplib::Response& res) {
  const std::string& m = req.method;
  bool collection = t.name.empty();
  if (collection) {
    if (m == "GET" && IsWatch(req)) {
      auto filter = ParseFilter(req);
      if (!filter) return ReplyError(res, filter.error());
      return ServeWatch(store, config, *t.type, t.ns, std::move(*filter), req, res);
    }
    if (m == "GET") return List(store, t, req, res);
    if (m == "POST" && (t.ns.empty() == !t.type->namespaced)) return Create(store, t, req, res);
    if (m == "DELETE") return DeleteCollection(store, t, req, res);
    return ReplyError(res, MethodNotAllowed(req));
  }
  if (t.subresource == "binding") {
    if (m == "POST") return Bind(store, t, req, res);
    return ReplyError(res, MethodNotAllowed(req));
  }
  if (m == "GET") return Get(store, t, res);
  if (m == "PUT") return Replace(store, t, req, res);
  if (m == "PATCH") return Patch(store, t, req, res);
  if (m == "DELETE" && t.subresource.empty()) return Delete(store, t, req, res);
  ReplyError(res, MethodNotAllowed(req));
}

}  // namespace

void HandleResourceRequest(Store& store, const HandlerConfig& config, const httplib::Request& req,
                           httplib::Response& res) {
  auto target = ParseTarget(req.path);
  if (!target) return ReplyError(res, target.error());
  bool writes_body = req.method == "POST" || req.method == "PUT" || req.method == "DELETE";
  if (writes_body && !req.body.empty() &&
      IsProtobufContentType(req.get_header_value("Content-Type"))) {
    // helm writes its release Secrets, and deletes old ones, in protobuf: serve its JSON twin.
    auto decoded = DecodeProtobuf(req.body);
    if (!decoded) return ReplyError(res, decoded.error());
    httplib::Request json_req = req;
    json_req.body = decoded->dump();
    json_req.headers.erase("Content-Type");
    json_req.set_header("Content-Type", "application/json");
    return HandleResourceRequest(store, config, json_req, res);
  }
  try {
    Dispatch(store, config, *target, req, res);
  } catch (const Json::exception& e) {
    // A body of an unexpected shape that slipped past ParseBody: the client's fault, and the
    // server keeps serving.
    ReplyError(res, BadRequest(std::string("malformed object: ") + e.what()));
  }
}

void ReplyJson(httplib::Response& res, int code, const std::string& body) {
  res.status = code;
  res.set_content(body, "application/json");
}

void ReplyError(httplib::Response& res, const ApiError& e) {
  ReplyJson(res, e.code, StatusJson(e).dump());
}

}  // namespace hami::sim
