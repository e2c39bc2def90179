#include "sim/apiserver/rbac.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <tuple>

#include "common/strings.h"

namespace hami::sim::rbac {
namespace {

bool Contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The escape both of Go's quotings give `c` ('"', '\\', '\n', '\r', '\t'), or nullptr.
const char* CommonEscape(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      return nullptr;
  }
}

// `s` in double quotes, each byte as `escape(c, buf)` spells it (nullptr: the byte itself) after
// CommonEscape; `buf` has room for a formatted escape.
template <typename Escape>
std::string QuoteWith(std::string_view s, Escape escape) {
  std::string out = "\"";
  for (unsigned char c : s) {
    char buf[8];
    const char* e = CommonEscape(c);
    if (e == nullptr) e = escape(c, buf);
    if (e != nullptr) {
      out += e;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Go's %q of a string (strconv.Quote) for the characters names and paths can hold.
std::string GoQuote(std::string_view s) {
  return QuoteWith(s, [](unsigned char c, char* buf) -> const char* {
    if (c >= 0x20 && c != 0x7f) return nullptr;
    std::snprintf(buf, 8, "\\x%02x", c);
    return buf;
  });
}

// A JSON string as Go's encoding/json writes it: HTML-significant characters escaped.
std::string GoJsonString(std::string_view s) {
  return QuoteWith(s, [](unsigned char c, char* buf) -> const char* {
    if (c == '<') return "\\u003c";
    if (c == '>') return "\\u003e";
    if (c == '&') return "\\u0026";
    if (c >= 0x20) return nullptr;
    std::snprintf(buf, 8, "\\u%04x", c);
    return buf;
  });
}

// responsewriters' sanitizer over the forbidden message.
std::string Sanitize(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
  return out;
}

// The name a field selector requires exactly for metadata.name ("metadata.name=x" or "==x",
// possibly among other terms), or "".
std::string ExactName(std::string_view selector) {
  for (std::string_view term : Split(selector, ',')) {
    term = Trim(term);
    size_t eq = term.find('=');
    if (eq == std::string_view::npos || eq == 0 || term[eq - 1] == '!') continue;
    if (Trim(term.substr(0, eq)) != "metadata.name") continue;
    std::string_view value = term.substr(eq + 1);
    if (!value.empty() && value[0] == '=') value.remove_prefix(1);
    return std::string(Trim(value));
  }
  return "";
}

// path.IsValidPathSegmentName.
bool ValidPathSegment(std::string_view name) {
  return name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('%') == std::string_view::npos;
}

const std::string* FindParam(const QueryParams& params, const std::string& key) {
  auto it = params.find(key);
  return it == params.end() ? nullptr : &it->second;
}

Result<std::vector<std::string>> StringList(const Json& obj, const char* key,
                                            const std::string& where) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array()) return Error{where + "." + key + ": want a list of strings"};
  for (const Json& v : *it) {
    if (!v.is_string()) {
      return Error{where + "." + key + ": want a list of strings, got " + Quote(v.dump())};
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<std::string> StringField(const Json& obj, const char* key, const std::string& where,
                                bool required) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return Error{where + "." + key + ": required"};
    return std::string();
  }
  if (!it->is_string()) return Error{where + "." + key + ": want a string, got " + it->dump()};
  return it->get<std::string>();
}

struct Meta {
  std::string kind, name, ns;
};

Result<Meta> ReadMeta(const Json& obj) {
  if (!obj.is_object()) return Error{"object: want a JSON object"};
  auto kind = StringField(obj, "kind", "object", true);
  if (!kind) return std::move(kind).take_error();
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return Error{*kind + ".metadata: required"};
  auto name = StringField(*meta, "name", *kind + ".metadata", true);
  if (!name) return std::move(name).take_error();
  auto ns = StringField(*meta, "namespace", *kind + ".metadata", false);
  if (!ns) return std::move(ns).take_error();
  return Meta{*kind, *name, *ns};
}

// The metadata of an object of the `namespaced` kind (Role, RoleBinding) or of its `cluster` kind
// (ClusterRole, ClusterRoleBinding); `where` names the object in messages. The namespace is
// required of, and kept for, the namespaced kind only.
struct Head {
  std::string name, ns, where;
};

Result<Head> ReadHead(const Json& obj, const std::string& namespaced, const std::string& cluster) {
  auto meta = ReadMeta(obj);
  if (!meta) return std::move(meta).take_error();
  if (meta->kind != namespaced && meta->kind != cluster) {
    return Error{"kind " + Quote(meta->kind) + ": want " + namespaced + " or " + cluster};
  }
  Head head{meta->name, "", meta->kind + " " + Quote(meta->name)};
  if (meta->kind == namespaced) {
    if (meta->ns.empty()) {
      return Error{head.where + ": metadata.namespace: required for a " + namespaced};
    }
    head.ns = meta->ns;
  }
  return head;
}

// Calls `each(item, at)` on every element of obj[key] (absent or null: none), which must be
// objects; `at` ("<where>.<key>[i]") names the element in messages. Stops at the first error.
template <typename Each>
Status ForEachObject(const Json& obj, const char* key, const std::string& where, Each each) {
  auto list = obj.find(key);
  if (list == obj.end() || list->is_null()) return OkStatus();
  if (!list->is_array()) return Error{where + "." + key + ": want a list"};
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& item = (*list)[i];
    const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
    if (!item.is_object()) return Error{at + ": want an object"};
    Status st = each(item, at);
    if (!st) return st;
  }
  return OkStatus();
}

Json Rule(std::vector<std::string> verbs, std::vector<std::string> groups,
          std::vector<std::string> resources, std::vector<std::string> names = {}) {
  Json r = {{"verbs", verbs}, {"apiGroups", groups}, {"resources", resources}};
  if (!names.empty()) r["resourceNames"] = names;
  return r;
}

Json UrlRule(std::vector<std::string> verbs, std::vector<std::string> urls) {
  return Json{{"verbs", verbs}, {"nonResourceURLs", urls}};
}

Json ClusterRole(const std::string& name, Json rules) {
  return Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
              {"kind", "ClusterRole"},
              {"metadata",
               {{"name", name}, {"labels", {{"kubernetes.io/bootstrapping", "rbac-defaults"}}}}},
              {"rules", std::move(rules)}};
}

Json ClusterRoleBinding(const std::string& name, const std::string& role,
                        const std::vector<std::string>& groups) {
  Json subjects = Json::array();
  for (const std::string& g : groups) {
    subjects.push_back({{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Group"}, {"name", g}});
  }
  return Json{
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "ClusterRoleBinding"},
      {"metadata",
       {{"name", name}, {"labels", {{"kubernetes.io/bootstrapping", "rbac-defaults"}}}}},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}},
      {"subjects", subjects}};
}

}  // namespace

UserInfo ServiceAccountUser(const std::string& ns, const std::string& name) {
  return UserInfo{
      "system:serviceaccount:" + ns + ":" + name,
      {"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}};
}

Attributes RequestAttributes(const UserInfo& user, std::string_view method, std::string_view path,
                             const QueryParams& params) {
  Attributes a;
  a.user = user;
  a.path = std::string(path);
  a.verb = ToLower(method);
  std::vector<std::string> parts;
  std::string_view trimmed = path;
  while (!trimmed.empty() && trimmed.front() == '/') trimmed.remove_prefix(1);
  while (!trimmed.empty() && trimmed.back() == '/') trimmed.remove_suffix(1);
  if (!trimmed.empty()) {
    for (std::string_view p : Split(trimmed, '/')) parts.emplace_back(p);
  }
  if (parts.size() < 3 || (parts[0] != "api" && parts[0] != "apis")) return a;
  size_t i = 1;
  if (parts[0] == "apis") {
    if (parts.size() < 4) return a;  // /apis/<g>/<v>: discovery, non-resource
    a.api_group = parts[i++];
  }
  a.api_version = parts[i++];
  std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(i), parts.end());
  if (rest[0] == "watch" || rest[0] == "proxy") {
    if (rest.size() < 2) return a;  // kube-apiserver: an error; here a non-resource request
    a.verb = rest[0];
    rest.erase(rest.begin());
  } else if (method == "POST") {
    a.verb = "create";
  } else if (method == "GET" || method == "HEAD") {
    a.verb = "get";
  } else if (method == "PUT") {
    a.verb = "update";
  } else if (method == "PATCH") {
    a.verb = "patch";
  } else if (method == "DELETE") {
    a.verb = "delete";
  } else {
    a.verb = "";
  }
  a.resource_request = true;
  if (rest[0] == "namespaces" && rest.size() > 1) {
    a.ns = rest[1];
    if (rest.size() > 2 && rest[2] != "status" && rest[2] != "finalize") {
      rest.erase(rest.begin(), rest.begin() + 2);
    }
  }
  if (rest.size() >= 3 && a.verb != "proxy") a.subresource = rest[2];
  if (rest.size() >= 2) a.name = rest[1];
  if (!rest.empty()) a.resource = rest[0];
  if (a.name.empty() && a.verb == "get") {
    const std::string* watch = FindParam(params, "watch");
    bool is_watch = watch != nullptr && *watch != "0" && ToLower(*watch) != "false";
    a.verb = is_watch ? "watch" : "list";
    if (const std::string* fs = FindParam(params, "fieldSelector")) {
      std::string name = ExactName(*fs);
      if (!name.empty() && ValidPathSegment(name)) a.name = name;
    }
  }
  if (a.name.empty() && a.verb == "delete") a.verb = "deletecollection";
  return a;
}

bool RuleAllows(const Attributes& attrs, const PolicyRule& rule) {
  const bool verb = Contains(rule.verbs, "*") || Contains(rule.verbs, attrs.verb);
  if (!verb) return false;
  if (!attrs.resource_request) {
    for (const std::string& url : rule.non_resource_urls) {
      if (url == "*" || url == attrs.path) return true;
      if (!url.empty() && url.back() == '*' &&
          StartsWith(attrs.path, std::string_view(url).substr(0, url.size() - 1))) {
        return true;
      }
    }
    return false;
  }
  if (!Contains(rule.api_groups, "*") && !Contains(rule.api_groups, attrs.api_group)) return false;
  const std::string combined =
      attrs.subresource.empty() ? attrs.resource : attrs.resource + "/" + attrs.subresource;
  bool resource = false;
  for (const std::string& r : rule.resources) {
    if (r == "*" || r == combined) {
      resource = true;
      break;
    }
    if (attrs.subresource.empty()) continue;
    if (r.size() == attrs.subresource.size() + 2 && StartsWith(r, "*/") &&
        r.compare(2, std::string::npos, attrs.subresource) == 0) {
      resource = true;
      break;
    }
  }
  if (!resource) return false;
  return rule.resource_names.empty() || Contains(rule.resource_names, attrs.name);
}

bool SubjectMatches(const Subject& subject, const std::string& binding_ns, const UserInfo& user) {
  if (subject.kind == "User") return subject.name == user.name;
  if (subject.kind == "Group") return Contains(user.groups, subject.name);
  if (subject.kind == "ServiceAccount") {
    const std::string& ns = subject.ns.empty() ? binding_ns : subject.ns;
    return user.name == "system:serviceaccount:" + ns + ":" + subject.name;
  }
  return false;
}

Decision Authorize(const Policy& policy, const Attributes& attrs) {
  std::vector<std::string> errors;
  // The rules a binding grants, or nullptr (with the error recorded) when its role is missing.
  auto rules_of = [&](const Binding& b) -> const std::vector<PolicyRule>* {
    if (b.role_kind == "ClusterRole") {
      auto it = policy.cluster_roles.find(b.role_name);
      if (it != policy.cluster_roles.end()) return &it->second.rules;
      errors.push_back("clusterrole.rbac.authorization.k8s.io " + GoQuote(b.role_name) +
                       " not found");
      return nullptr;
    }
    if (b.role_kind == "Role" && !b.ns.empty()) {
      auto it = policy.roles.find({b.ns, b.role_name});
      if (it != policy.roles.end()) return &it->second.rules;
      errors.push_back("role.rbac.authorization.k8s.io " + GoQuote(b.role_name) + " not found");
      return nullptr;
    }
    errors.push_back("unsupported role reference kind: " + GoQuote(b.role_kind));
    return nullptr;
  };
  auto visit = [&](const Binding& b, const char* what) -> std::optional<Decision> {
    bool applies = false;
    for (const Subject& s : b.subjects) applies = applies || SubjectMatches(s, b.ns, attrs.user);
    if (!applies) return std::nullopt;
    const std::vector<PolicyRule>* rules = rules_of(b);
    if (rules == nullptr) return std::nullopt;
    for (const PolicyRule& r : *rules) {
      if (RuleAllows(attrs, r)) {
        std::string where = b.ns.empty() ? "" : " in namespace " + GoQuote(b.ns);
        return Decision{true, std::string("RBAC: allowed by ") + what + " " + GoQuote(b.name) +
                                  " of " + b.role_kind + " " + GoQuote(b.role_name) + where};
      }
    }
    return std::nullopt;
  };
  for (const Binding& b : policy.cluster_role_bindings) {
    if (auto d = visit(b, "ClusterRoleBinding")) return *d;
  }
  if (!attrs.ns.empty()) {
    for (const Binding& b : policy.role_bindings) {
      if (b.ns != attrs.ns) continue;
      if (auto d = visit(b, "RoleBinding")) return *d;
    }
  }
  Decision denied;
  if (errors.size() == 1) denied.reason = "RBAC: " + errors[0];
  if (errors.size() > 1) denied.reason = "RBAC: [" + Join(errors, ", ") + "]";
  return denied;
}

Result<Role> RoleFromObject(const Json& obj) {
  auto head = ReadHead(obj, "Role", "ClusterRole");
  if (!head) return std::move(head).take_error();
  Role role;
  role.name = head->name;
  role.ns = head->ns;
  Status rules =
      ForEachObject(obj, "rules", head->where, [&](const Json& r, const std::string& at) -> Status {
        PolicyRule rule;
        std::pair<const char*, std::vector<std::string>*> fields[] = {
            {"verbs", &rule.verbs},
            {"apiGroups", &rule.api_groups},
            {"resources", &rule.resources},
            {"resourceNames", &rule.resource_names},
            {"nonResourceURLs", &rule.non_resource_urls}};
        for (auto& [key, out] : fields) {
          auto list = StringList(r, key, at);
          if (!list) return std::move(list).take_error();
          *out = std::move(*list);
        }
        if (rule.verbs.empty()) return Error{at + ".verbs: required"};
        role.rules.push_back(std::move(rule));
        return OkStatus();
      });
  if (!rules) return std::move(rules).take_error();
  return role;
}

Result<Binding> BindingFromObject(const Json& obj) {
  auto head = ReadHead(obj, "RoleBinding", "ClusterRoleBinding");
  if (!head) return std::move(head).take_error();
  const std::string& where = head->where;
  Binding b;
  b.name = head->name;
  b.ns = head->ns;
  auto ref = obj.find("roleRef");
  if (ref == obj.end() || !ref->is_object()) return Error{where + ".roleRef: required"};
  auto kind = StringField(*ref, "kind", where + ".roleRef", true);
  if (!kind) return std::move(kind).take_error();
  auto name = StringField(*ref, "name", where + ".roleRef", true);
  if (!name) return std::move(name).take_error();
  if (*kind != "Role" && *kind != "ClusterRole") {
    return Error{where + ".roleRef.kind " + Quote(*kind) + ": want Role or ClusterRole"};
  }
  if (*kind == "Role" && b.ns.empty()) {
    return Error{where + ".roleRef.kind: a ClusterRoleBinding can only refer to a ClusterRole"};
  }
  b.role_kind = *kind;
  b.role_name = *name;
  Status subjects =
      ForEachObject(obj, "subjects", where, [&](const Json& s, const std::string& at) -> Status {
        auto skind = StringField(s, "kind", at, true);
        if (!skind) return std::move(skind).take_error();
        auto sname = StringField(s, "name", at, true);
        if (!sname) return std::move(sname).take_error();
        auto sns = StringField(s, "namespace", at, false);
        if (!sns) return std::move(sns).take_error();
        if (*skind != "User" && *skind != "Group" && *skind != "ServiceAccount") {
          return Error{at + ".kind " + Quote(*skind) + ": want User, Group or ServiceAccount"};
        }
        b.subjects.push_back(Subject{*skind, *sname, *sns});
        return OkStatus();
      });
  if (!subjects) return std::move(subjects).take_error();
  return b;
}

Status AddObject(Policy& policy, const Json& obj) {
  auto meta = ReadMeta(obj);
  if (!meta) return std::move(meta).take_error();
  if (meta->kind == "Role" || meta->kind == "ClusterRole") {
    auto role = RoleFromObject(obj);
    if (!role) return std::move(role).take_error();
    if (role->ns.empty()) {
      policy.cluster_roles[role->name] = std::move(*role);
    } else {
      auto key = std::make_pair(role->ns, role->name);
      policy.roles[key] = std::move(*role);
    }
    return OkStatus();
  }
  auto b = BindingFromObject(obj);
  if (!b) return std::move(b).take_error();
  auto& list = b->ns.empty() ? policy.cluster_role_bindings : policy.role_bindings;
  auto pos = std::find_if(list.begin(), list.end(), [&](const Binding& x) {
    return std::tie(x.ns, x.name) >= std::tie(b->ns, b->name);
  });
  if (pos != list.end() && pos->ns == b->ns && pos->name == b->name) {
    *pos = std::move(*b);
  } else {
    list.insert(pos, std::move(*b));
  }
  return OkStatus();
}

std::vector<Json> BootstrapObjects() {
  const std::vector<std::string> read = {"get", "list", "watch"};
  const Json events = Rule({"create", "update", "patch"}, {"", "events.k8s.io"}, {"events"});
  std::vector<Json> out;
  out.push_back(ClusterRole(
      "system:kube-scheduler",
      Json::array(
          {events, Rule({"create"}, {"coordination.k8s.io"}, {"leases"}),
           Rule({"get", "update"}, {"coordination.k8s.io"}, {"leases"}, {"kube-scheduler"}),
           Rule(read, {""}, {"nodes"}), Rule({"get", "list", "watch", "delete"}, {""}, {"pods"}),
           Rule({"create"}, {""}, {"pods/binding", "bindings"}),
           Rule({"patch", "update"}, {""}, {"pods/status"}),
           Rule(read, {""}, {"services", "replicationcontrollers"}),
           Rule(read, {"apps", "extensions"}, {"replicasets"}),
           Rule(read, {"apps"}, {"statefulsets"}), Rule(read, {"policy"}, {"poddisruptionbudgets"}),
           Rule(read, {""}, {"persistentvolumeclaims", "persistentvolumes"}),
           Rule({"create"}, {"authentication.k8s.io"}, {"tokenreviews"}),
           Rule({"create"}, {"authorization.k8s.io"}, {"subjectaccessreviews"}),
           Rule(read, {"storage.k8s.io"}, {"csinodes"}), Rule(read, {""}, {"namespaces"}),
           Rule(read, {"storage.k8s.io"}, {"csidrivers"}),
           Rule(read, {"storage.k8s.io"}, {"csistoragecapacities"}),
           // DynamicResources (resource.k8s.io/v1): the allocator reads the cluster's devices
           // and claims and writes a claim's allocation and reservedFor.
           Rule(read, {"resource.k8s.io"}, {"resourceclaims", "deviceclasses", "resourceslices"}),
           Rule({"get", "list", "watch", "patch", "update"}, {"resource.k8s.io"},
                {"resourceclaims/status"})})));
  out.push_back(ClusterRole(
      "system:volume-scheduler",
      Json::array({Rule({"get", "list", "watch", "update"}, {""}, {"persistentvolumes"}),
                   Rule(read, {"storage.k8s.io"}, {"storageclasses"}),
                   Rule({"get", "list", "watch", "update"}, {""}, {"persistentvolumeclaims"})})));
  out.push_back(ClusterRole(
      "system:discovery",
      Json::array(
          {UrlRule({"get"}, {"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                             "/openapi/*", "/readyz", "/version", "/version/"})})));
  out.push_back(ClusterRole(
      "system:public-info-viewer",
      Json::array({UrlRule({"get"}, {"/healthz", "/livez", "/readyz", "/version", "/version/"})})));
  out.push_back(ClusterRole(
      "system:basic-user",
      Json::array({Rule({"create"}, {"authorization.k8s.io"},
                        {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}),
                   Rule({"create"}, {"authentication.k8s.io"}, {"selfsubjectreviews"})})));
  out.push_back(ClusterRole("cluster-admin",
                            Json::array({Rule({"*"}, {"*"}, {"*"}), UrlRule({"*"}, {"*"})})));
  out.push_back(ClusterRole(
      "system:node",
      Json::array(
          {events, Rule({"create", "get", "list", "watch"}, {""}, {"nodes"}),
           Rule({"update", "patch"}, {""}, {"nodes/status"}),
           Rule({"update", "patch"}, {""}, {"nodes"}), Rule(read, {""}, {"pods"}),
           Rule({"create", "delete"}, {""}, {"pods"}),
           Rule({"update", "patch"}, {""}, {"pods/status"}),
           Rule({"create"}, {""}, {"pods/eviction"}),
           // DRA: kubelet reads the claims of its pods and the slices of its node.
           Rule({"get"}, {"resource.k8s.io"}, {"resourceclaims"}),
           Rule({"get", "list", "watch", "delete"}, {"resource.k8s.io"}, {"resourceslices"})})));
  out.push_back(
      ClusterRoleBinding("system:discovery", "system:discovery", {"system:authenticated"}));
  out.push_back(ClusterRoleBinding("system:public-info-viewer", "system:public-info-viewer",
                                   {"system:authenticated", "system:unauthenticated"}));
  out.push_back(
      ClusterRoleBinding("system:basic-user", "system:basic-user", {"system:authenticated"}));
  out.push_back(ClusterRoleBinding("cluster-admin", "cluster-admin", {"system:masters"}));
  out.push_back(ClusterRoleBinding("system:node", "system:node", {"system:nodes"}));
  // The cluster's kube-scheduler runs as the user system:kube-scheduler.
  Json scheduler = ClusterRoleBinding("system:kube-scheduler", "system:kube-scheduler", {});
  scheduler["subjects"].push_back({{"apiGroup", "rbac.authorization.k8s.io"},
                                   {"kind", "User"},
                                   {"name", "system:kube-scheduler"}});
  out.push_back(std::move(scheduler));
  return out;
}

std::string ForbiddenMessage(const Attributes& attrs, const std::string& reason) {
  std::string inner;
  if (!attrs.resource_request) {
    inner = "User " + GoQuote(attrs.user.name) + " cannot " + attrs.verb + " path " +
            GoQuote(attrs.path);
  } else {
    std::string resource = attrs.resource;
    if (!attrs.subresource.empty()) resource += "/" + attrs.subresource;
    inner = "User " + GoQuote(attrs.user.name) + " cannot " + attrs.verb + " resource " +
            GoQuote(resource) + " in API group " + GoQuote(attrs.api_group);
    inner += attrs.ns.empty() ? " at the cluster scope" : " in the namespace " + GoQuote(attrs.ns);
  }
  inner = Sanitize(inner);
  if (!reason.empty()) inner += ": " + reason;
  const bool no_resource = attrs.api_group.empty() && attrs.resource.empty();
  if (no_resource) return "forbidden: " + inner;
  std::string qualified =
      attrs.api_group.empty() ? attrs.resource : attrs.resource + "." + attrs.api_group;
  if (attrs.name.empty()) return qualified + " is forbidden: " + inner;
  return qualified + " " + GoQuote(attrs.name) + " is forbidden: " + inner;
}

std::string ForbiddenBody(const Attributes& attrs, const std::string& reason) {
  std::string details;
  auto add = [&](const char* key, const std::string& value) {
    if (value.empty()) return;
    if (!details.empty()) details += ',';
    details += std::string("\"") + key + "\":" + GoJsonString(value);
  };
  add("name", attrs.name);
  add("group", attrs.api_group);
  add("kind", attrs.resource);
  return R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)" +
         GoJsonString(ForbiddenMessage(attrs, reason)) + R"(,"reason":"Forbidden","details":{)" +
         details + R"(},"code":403})";
}

std::string UnauthorizedBody() {
  return R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
         R"("message":"Unauthorized","reason":"Unauthorized","code":401})";
}

std::string TokenAuthenticator::Issue(const UserInfo& user) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = token_of_.find(user.name);
  if (it != token_of_.end()) return it->second;
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "sim-%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  std::string token = buf;
  by_token_[token] = user;
  token_of_[user.name] = token;
  return token;
}

std::optional<UserInfo> TokenAuthenticator::Authenticate(std::string_view token) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_token_.find(std::string(token));
  if (it == by_token_.end()) return std::nullopt;
  return it->second;
}

}  // namespace hami::sim::rbac
