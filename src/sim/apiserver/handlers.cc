#include "sim/apiserver/handlers.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <variant>

#include <httplib.h>

#include "common/json.h"
#include "common/strings.h"
#include "k8s/object.h"
#include "sim/apiserver/patch.h"
#include "sim/apiserver/protobuf.h"
#include "sim/apiserver/table.h"

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

void ReplyJson(net::Response& res, int code, std::string body) {
  res = JsonResponse(code, std::move(body));
}
void ReplyError(net::Response& res, const ApiError& e) { res = ErrorResponse(e); }

ApiError BadRequest(std::string message) {
  return ApiError{400, k8s::kReasonBadRequest, std::move(message)};
}

ApiError PathNotFound(std::string_view path) {
  return ApiError{404, k8s::kReasonNotFound,
                  "the server could not find the requested resource (path " + Quote(path) + ")"};
}

ApiError MethodNotAllowed(const ApiRequest& req) {
  return ApiError{405, k8s::kReasonMethodNotAllowed,
                  "the server does not allow this method on the requested resource (" +
                      req.method() + " " + req.path() + ")"};
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

ApiResult<ListFilter> ParseFilter(const ApiRequest& req) {
  ListFilter f;
  auto labels = k8s::LabelSelector::Parse(req.Param("labelSelector"));
  if (!labels) return BadRequest("labelSelector: " + labels.error());
  auto fields = k8s::FieldSelector::Parse(req.Param("fieldSelector"));
  if (!fields) return BadRequest("fieldSelector: " + fields.error());
  f.labels = std::move(*labels);
  f.fields = std::move(*fields);
  return f;
}

Json ListMeta(const ListPage& page) {
  Json meta = {{"resourceVersion", std::to_string(page.rv)}};
  if (!page.continue_token.empty()) {
    meta["continue"] = page.continue_token;
    meta["remainingItemCount"] = page.remaining;
  }
  return meta;
}

// The Table version the request's Accept asks for, when `type` has printer columns.
std::optional<std::string> TableVersion(const ResourceType& type, const ApiRequest& req) {
  if (!HasTableColumns(type)) return std::nullopt;
  return WantedTableVersion(req.Header("accept"));
}

std::string ListBody(const ResourceType& type, const ListPage& page) {
  Json meta = ListMeta(page);
  std::string out = R"({"kind":")" + type.kind + R"(List","apiVersion":")" + type.ApiVersion() +
                    R"(","metadata":)" + meta.dump() + R"(,"items":[)";
  for (size_t i = 0; i < page.items.size(); ++i) {
    if (i) out += ',';
    out += page.items[i]->raw;
  }
  out += "]}";
  return out;
}

void List(Store& store, const Target& t, const ApiRequest& req, net::Response& res) {
  auto filter = ParseFilter(req);
  if (!filter) return ReplyError(res, filter.error());
  int64_t limit = 0;
  if (req.HasParam("limit")) {
    auto l = ParseInt64(req.Param("limit"));
    if (!l || *l < 0)
      return ReplyError(
          res, BadRequest("limit " + Quote(req.Param("limit")) + ": not a non-negative integer"));
    limit = *l;
  }
  auto page = store.List(*t.type, t.ns, *filter, limit, req.Param("continue"));
  if (!page) return ReplyError(res, page.error());
  if (auto version = TableVersion(*t.type, req)) {
    return ReplyJson(res, 200,
                     ToTable(*t.type, page->items, *version, req.Param("includeObject"),
                             store.clock().Now(), ListMeta(*page))
                         .dump());
  }
  ReplyJson(res, 200, ListBody(*t.type, *page));
}

bool IsDryRun(const ApiRequest& req) { return req.Param("dryRun") == "All"; }

void Get(Store& store, const Target& t, const ApiRequest& req, net::Response& res) {
  auto obj = store.Get(*t.type, t.ns, t.name);
  if (!obj) return ReplyError(res, obj.error());
  if (auto version = TableVersion(*t.type, req); version && t.subresource.empty()) {
    Json meta = {{"resourceVersion", std::to_string((*obj)->rv)}};
    return ReplyJson(
        res, 200,
        ToTable(*t.type, {*obj}, *version, req.Param("includeObject"), store.clock().Now(), meta)
            .dump());
  }
  ReplyJson(res, 200, (*obj)->raw);
}

void Create(Store& store, const HandlerConfig& config, const Target& t, const ApiRequest& req,
            net::Response& res) {
  auto body = ParseBody(*t.type, req.body());
  if (!body) return ReplyError(res, body.error());
  if (config.admit_pod && t.type->group.empty() && t.type->plural == "pods") {
    if (!(*body)["metadata"].contains("namespace")) (*body)["metadata"]["namespace"] = t.ns;
    auto admitted = config.admit_pod(*body);
    if (!admitted) return ReplyError(res, admitted.error());
    *body = std::move(*admitted);
  }
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
void UpdateAndReply(Store& store, const Target& t, const ApiRequest& req, net::Response& res,
                    const Store::Mutation& mutate) {
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

void Replace(Store& store, const Target& t, const ApiRequest& req, net::Response& res) {
  auto body = ParseBody(*t.type, req.body());
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

void Patch(Store& store, const Target& t, const ApiRequest& req, net::Response& res) {
  auto type = PatchTypeFromContentType(req.Header("Content-Type"));
  if (!type) return ReplyError(res, type.error());
  UpdateAndReply(store, t, req, res, [&](const Json& cur) -> ApiResult<Json> {
    auto patched = ApplyPatch(cur, *type, req.body());
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

void Delete(Store& store, const Target& t, const ApiRequest& req, net::Response& res) {
  auto pre = ParseDeleteOptions(req.body());
  if (!pre) return ReplyError(res, pre.error());
  auto obj =
      IsDryRun(req) ? store.Get(*t.type, t.ns, t.name) : store.Delete(*t.type, t.ns, t.name, *pre);
  if (!obj) return ReplyError(res, obj.error());
  ReplyJson(res, 200, (*obj)->raw);
}

void DeleteCollection(Store& store, const Target& t, const ApiRequest& req, net::Response& res) {
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
void Bind(Store& store, const Target& t, const ApiRequest& req, net::Response& res) {
  Json binding = ParseJsonOrNull<Json>(req.body());
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

bool IsWatch(const ApiRequest& req) {
  std::string w = req.Param("watch");
  return w == "true" || w == "1";
}

// Answers every request but a watch into `res`; a watch is handed to the hub (or gets 503
// without one) and returns true with `res` untouched.
bool Dispatch(Store& store, const HandlerConfig& config, const Target& t, const ApiRequest& req,
              net::Response& res, const net::Responder* reply) {
  const std::string& m = req.method();
  bool collection = t.name.empty();
  if (collection) {
    if (m == "GET" && IsWatch(req)) {
      auto filter = ParseFilter(req);
      if (!filter) {
        ReplyError(res, filter.error());
        return false;
      }
      if (config.watches == nullptr || reply == nullptr ||
          (config.stopping != nullptr && config.stopping->load())) {
        ReplyError(res, ApiError{503, "ServiceUnavailable", "watches are not served"});
        return false;
      }
      config.watches->Serve(*t.type, t.ns, std::move(*filter), req, *reply);
      return true;
    }
    if (m == "GET") {
      List(store, t, req, res);
    } else if (m == "POST" && (t.ns.empty() == !t.type->namespaced)) {
      Create(store, config, t, req, res);
    } else if (m == "DELETE") {
      DeleteCollection(store, t, req, res);
    } else {
      ReplyError(res, MethodNotAllowed(req));
    }
    return false;
  }
  if (t.subresource == "binding") {
    if (m == "POST") {
      Bind(store, t, req, res);
    } else {
      ReplyError(res, MethodNotAllowed(req));
    }
    return false;
  }
  if (m == "GET") {
    Get(store, t, req, res);
  } else if (m == "PUT") {
    Replace(store, t, req, res);
  } else if (m == "PATCH") {
    Patch(store, t, req, res);
  } else if (m == "DELETE" && t.subresource.empty()) {
    Delete(store, t, req, res);
  } else {
    ReplyError(res, MethodNotAllowed(req));
  }
  return false;
}

// Returns true when the reply went out as a stream (a watch).
bool Handle(Store& store, const HandlerConfig& config, const ApiRequest& req, net::Response& res,
            const net::Responder* reply) {
  auto target = ParseTarget(req.path());
  if (!target) {
    ReplyError(res, target.error());
    return false;
  }
  bool writes_body = req.method() == "POST" || req.method() == "PUT" || req.method() == "DELETE";
  if (writes_body && !req.body().empty() && IsProtobufContentType(req.Header("content-type"))) {
    // helm writes its release Secrets, and deletes old ones, in protobuf: serve its JSON twin.
    auto decoded = DecodeProtobuf(req.body());
    if (!decoded) {
      ReplyError(res, decoded.error());
      return false;
    }
    ApiRequest json_req = req;
    json_req.http.body = decoded->dump();
    for (auto& [name, value] : json_req.http.headers) {
      if (name == "content-type") value = "application/json";
    }
    return Handle(store, config, json_req, res, reply);
  }
  try {
    return Dispatch(store, config, *target, req, res, reply);
  } catch (const Json::exception& e) {
    // A body of an unexpected shape that slipped past ParseBody: the client's fault, and the
    // server keeps serving.
    ReplyError(res, BadRequest(std::string("malformed object: ") + e.what()));
  }
  return false;
}

}  // namespace

std::string ApiRequest::Header(std::string_view name) const {
  std::string lower = ToLower(std::string(name));
  std::optional<std::string_view> v = http.Header(lower);
  return v ? std::string(*v) : std::string();
}

void HandleResourceRequest(Store& store, const HandlerConfig& config, const ApiRequest& req,
                           const net::Responder& reply) {
  net::Response res;
  if (!Handle(store, config, req, res, &reply)) reply.Send(std::move(res));
}

net::Response HandleResourceRequest(Store& store, const HandlerConfig& config,
                                    const ApiRequest& req) {
  net::Response res;
  Handle(store, config, req, res, nullptr);
  return res;
}

namespace {

// Replies from a proxied pod are read up to this size (502 past it).
constexpr size_t kMaxProxyReply = 16 << 20;

struct ProxyTarget {
  std::string ns;
  std::string kind;  // "pods" or "services"
  std::string name;
  std::string port;  // "" = the default
  std::string path;  // "/..." forwarded
};

std::optional<ProxyTarget> ParseProxyPath(std::string_view path) {
  std::vector<std::string_view> seg = Split(path, '/');
  // "", "api", "v1", "namespaces", ns, kind, name[:port], "proxy", rest...
  if (seg.size() < 8 || !seg[0].empty() || seg[1] != "api" || seg[2] != "v1" ||
      seg[3] != "namespaces" || seg[4].empty() || (seg[5] != "pods" && seg[5] != "services") ||
      seg[6].empty() || seg[7] != "proxy") {
    return std::nullopt;
  }
  ProxyTarget t;
  t.ns = std::string(seg[4]);
  t.kind = std::string(seg[5]);
  std::vector<std::string_view> parts = Split(seg[6], ':');
  // name, name:port or scheme:name:port (kube-apiserver's form); only http is spoken.
  if (parts.size() == 3) {
    if (parts[0] != "http" && !parts[0].empty()) return std::nullopt;
    parts.erase(parts.begin());
  }
  if (parts.empty() || parts.size() > 2 || parts[0].empty()) return std::nullopt;
  t.name = std::string(parts[0]);
  if (parts.size() == 2) t.port = std::string(parts[1]);
  size_t at = 0;
  for (int i = 0; i < 8; ++i) at += seg[static_cast<size_t>(i)].size() + 1;
  t.path = at <= path.size() ? "/" + std::string(path.substr(at)) : "/";
  return t;
}

// The container port of `pod` named or numbered `port`; "" = the first one; 0 when none.
int ContainerPort(const Json& pod, const std::string& port) {
  if (!port.empty()) {
    if (auto n = ParseInt32(port); n && *n > 0 && *n < 65536) return *n;
  }
  const Json* containers = nullptr;
  if (pod.contains("spec") && pod["spec"].is_object() && pod["spec"].contains("containers")) {
    containers = &pod["spec"]["containers"];
  }
  if (containers == nullptr || !containers->is_array()) return 0;
  for (const Json& c : *containers) {
    if (!c.is_object() || !c.contains("ports") || !c["ports"].is_array()) continue;
    for (const Json& p : c["ports"]) {
      if (!p.is_object() || !p.contains("containerPort") || !p["containerPort"].is_number_integer())
        continue;
      int number = p["containerPort"].get<int>();
      std::string name = p.contains("name") && p["name"].is_string() ? p["name"].get<std::string>()
                                                                     : std::string();
      if (port.empty() || name == port) return number;
    }
  }
  return 0;
}

net::Response ProxyError(int code, const std::string& message) {
  const char* reason = code == 404   ? k8s::kReasonNotFound
                       : code == 400 ? k8s::kReasonBadRequest
                                     : "ServiceUnavailable";
  return ErrorResponse(ApiError{code, reason, message});
}

// The pod a service proxy goes to and the port on it, or the error to answer.
std::variant<std::pair<ObjectPtr, int>, net::Response> ServiceBackend(Store& store,
                                                                      const ProxyTarget& t) {
  const ResourceType* services = FindResourceType("", "v1", "services");
  if (services == nullptr) return ProxyError(404, "services are not served");
  auto svc = store.Get(*services, t.ns, t.name);
  if (!svc) return ErrorResponse(svc.error());
  const Json& spec = (*svc)->json.contains("spec") ? (*svc)->json["spec"] : Json::object();
  // The service port: by name or number, else the first; its targetPort on the pod.
  Json target_port;
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (const Json& p : spec["ports"]) {
      if (!p.is_object()) continue;
      std::string name = p.value("name", "");
      std::string number = p.contains("port") ? p["port"].dump() : "";
      if (t.port.empty() || t.port == name || t.port == number) {
        target_port = p.contains("targetPort") ? p["targetPort"] : p.value("port", Json());
        break;
      }
    }
  }
  if (target_port.is_null()) {
    return ProxyError(503, "no port " + Quote(t.port) + " on service " + Quote(t.name));
  }
  k8s::LabelSelector selector;
  if (spec.contains("selector") && spec["selector"].is_object()) {
    std::string text;
    for (const auto& [k, v] : spec["selector"].items()) {
      if (!v.is_string()) continue;
      if (!text.empty()) text += ",";
      text += k + "=" + v.get<std::string>();
    }
    auto parsed = k8s::LabelSelector::Parse(text);
    if (parsed) selector = std::move(*parsed);
  } else {
    return ProxyError(503, "service " + Quote(t.name) + " has no selector");
  }
  ListFilter filter;
  filter.labels = std::move(selector);
  auto pods = store.List(*FindResourceType("", "v1", "pods"), t.ns, filter, 0, "");
  if (!pods) return ErrorResponse(pods.error());
  for (const ObjectPtr& pod : pods->items) {
    if (k8s::FieldString(pod->json, "status.podIP").empty()) continue;
    int port =
        target_port.is_number_integer()
            ? target_port.get<int>()
            : ContainerPort(pod->json, target_port.is_string() ? target_port.get<std::string>()
                                                               : std::string("-"));
    if (port > 0) return std::pair<ObjectPtr, int>{pod, port};
  }
  return ProxyError(503, "no endpoints available for service " + Quote(t.name));
}

}  // namespace

bool IsProxyPath(std::string_view path) { return ParseProxyPath(path).has_value(); }

net::Response HandleProxy(Store& store, const ApiRequest& req) {
  std::optional<ProxyTarget> t = ParseProxyPath(req.path());
  if (!t) return ProxyError(404, "the server could not find the requested resource");
  ObjectPtr pod;
  int port = 0;
  if (t->kind == "services") {
    auto backend = ServiceBackend(store, *t);
    if (auto* error = std::get_if<net::Response>(&backend)) return std::move(*error);
    std::tie(pod, port) = std::get<std::pair<ObjectPtr, int>>(backend);
  } else {
    auto got = store.Get(*FindResourceType("", "v1", "pods"), t->ns, t->name);
    if (!got) return ErrorResponse(got.error());
    pod = *got;
    port = ContainerPort(pod->json, t->port);
    if (port == 0 && !t->port.empty()) {
      return ProxyError(400, "pod " + Quote(t->name) + " has no container port " + Quote(t->port));
    }
    if (port == 0) port = 80;  // no port given and none declared: HTTP's
  }
  const std::string ip = k8s::FieldString(pod->json, "status.podIP");
  if (ip.empty()) {
    return ProxyError(503, "pod " + Quote(k8s::Name(pod->json)) + " has no IP (status.podIP)");
  }
  std::string target = t->path;
  if (size_t q = req.http.target.find('?'); q != std::string::npos) {
    target += req.http.target.substr(q);
  }
  const std::string where = ip + ":" + std::to_string(port);
  httplib::Client client(ip, port);
  client.set_connection_timeout(std::chrono::seconds(2));
  client.set_read_timeout(std::chrono::seconds(10));
  client.set_write_timeout(std::chrono::seconds(10));
  httplib::Request out;
  out.method = req.method();
  out.path = target;
  out.body = req.body();
  for (const char* h : {"accept", "content-type"}) {
    std::string v = req.Header(h);
    if (!v.empty()) out.set_header(h, v);
  }
  std::string body;
  bool too_big = false;
  out.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (body.size() + len > kMaxProxyReply) {
      too_big = true;
      return false;
    }
    body.append(data, len);
    return true;
  };
  httplib::Result res = client.send(out);
  if (too_big) {
    return ProxyError(
        503, "the reply from " + where + " is over " + std::to_string(kMaxProxyReply) + " bytes");
  }
  if (!res) {
    return ProxyError(503, "error trying to reach pod " + Quote(k8s::Name(pod->json)) + " at " +
                               where + ": " + httplib::to_string(res.error()));
  }
  std::string content_type = res->get_header_value("Content-Type");
  return net::Response{res->status, content_type.empty() ? "text/plain" : content_type,
                       std::move(body)};
}

net::Response JsonResponse(int code, std::string body) {
  return net::Response{code, "application/json", std::move(body)};
}

net::Response ErrorResponse(const ApiError& e) {
  return JsonResponse(e.code, StatusJson(e).dump());
}

}  // namespace hami::sim
