// Kubernetes RBAC for the sim apiserver (docs/RBAC.md): request attributes from an HTTP request,
// rule matching, resolution through ClusterRoleBindings and RoleBindings, the bootstrap
// ClusterRoles kube-apiserver creates, and the 403 Forbidden / 401 Unauthorized Status bodies,
// all with Kubernetes' semantics (kube-apiserver's RequestInfoFactory, the rbac authorizer's
// RuleAllows and VisitRulesFor, responsewriters.Forbidden).
//
// Everything here is a pure function of its arguments except TokenAuthenticator, which is
// thread-safe.
#ifndef HAMI_SIM_RBAC_H_
#define HAMI_SIM_RBAC_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hami::sim::rbac {

using Json = nlohmann::json;

struct UserInfo {
  std::string name;
  std::vector<std::string> groups;
};

// "system:serviceaccount:<ns>:<name>" in groups system:serviceaccounts,
// system:serviceaccounts:<ns> and system:authenticated.
UserInfo ServiceAccountUser(const std::string& ns, const std::string& name);

// A request RBAC denied, as the run report lists it: `resource` is the path for a non-resource
// request.
struct ForbiddenRequest {
  std::string user, verb, resource, subresource, ns;
  bool operator==(const ForbiddenRequest&) const = default;
};

// What an authorizer sees of a request.
struct Attributes {
  UserInfo user;
  std::string verb;
  bool resource_request = false;
  std::string api_group;  // "" = core
  std::string api_version;
  std::string ns;  // "" for cluster-scoped and all-namespace requests
  std::string resource;
  std::string subresource;
  std::string name;
  std::string path;  // the request path; non-resource requests are authorised by it
};

// The attributes of `method` `path` with query `params` (kube-apiserver's RequestInfoFactory):
// /api/v1/... and /apis/<g>/<v>/... with at least a resource are resource requests (an optional
// namespaces/<ns>/ and the old watch/ prefix included); anything else (/version, /apis/<g>) is a
// non-resource request whose verb is the lower-case method. A GET without a name is `list`, or
// `watch` when the watch parameter is present and not "false"/"0"; a list or watch selecting
// fieldSelector metadata.name=<x> carries the name <x>; a DELETE without a name is
// `deletecollection`.
using QueryParams = std::multimap<std::string, std::string>;
Attributes RequestAttributes(const UserInfo& user, std::string_view method, std::string_view path,
                             const QueryParams& params);

struct PolicyRule {
  std::vector<std::string> verbs;
  std::vector<std::string> api_groups;
  std::vector<std::string> resources;
  std::vector<std::string> resource_names;
  std::vector<std::string> non_resource_urls;
};

// A Role (ns set) or ClusterRole (ns empty).
struct Role {
  std::string ns;
  std::string name;
  std::vector<PolicyRule> rules;
};

struct Subject {
  std::string kind;  // User, Group or ServiceAccount
  std::string name;
  std::string ns;  // ServiceAccount only; "" = the binding's namespace
};

// A RoleBinding (ns set) or ClusterRoleBinding (ns empty).
struct Binding {
  std::string ns;
  std::string name;
  std::string role_kind;  // Role or ClusterRole
  std::string role_name;
  std::vector<Subject> subjects;
};

struct Policy {
  std::map<std::string, Role> cluster_roles;                  // by name
  std::map<std::pair<std::string, std::string>, Role> roles;  // by (ns, name)
  std::vector<Binding> cluster_role_bindings;                 // in name order
  std::vector<Binding> role_bindings;                         // in (ns, name) order
};

// Whether one rule allows the request (RuleAllows): verbs, apiGroups, resources ("*", the exact
// resource or resource/subresource, or "*/<subresource>"; "pods" does not cover "pods/status")
// and resourceNames (empty = any) for resource requests; verbs and nonResourceURLs ("*", exact,
// or a prefix ending in "*") otherwise.
bool RuleAllows(const Attributes& attrs, const PolicyRule& rule);

struct Decision {
  bool allowed = false;
  // Denied: "" or "RBAC: <errors>" (a binding to a missing role); allowed: which binding.
  std::string reason;
};

// Resolution (VisitRulesFor): the rules of every ClusterRoleBinding whose subjects include the
// user, then, for a request with a namespace, of that namespace's RoleBindings (a RoleBinding to
// a ClusterRole grants its rules in the binding's namespace only). The first allowing rule wins.
Decision Authorize(const Policy& policy, const Attributes& attrs);

// Does `subject` of a binding in `binding_ns` ("" for a ClusterRoleBinding) name `user`?
bool SubjectMatches(const Subject& subject, const std::string& binding_ns, const UserInfo& user);

// Parsers of the API objects (rbac.authorization.k8s.io/v1). Errors name the field.
Result<Role> RoleFromObject(const Json& obj);        // Role or ClusterRole
Result<Binding> BindingFromObject(const Json& obj);  // RoleBinding or ClusterRoleBinding
// Adds a parsed Role/ClusterRole/RoleBinding/ClusterRoleBinding object; other kinds are an error.
Status AddObject(Policy& policy, const Json& obj);

// The ClusterRoles and ClusterRoleBindings kube-apiserver creates that the chart binds or that
// every client needs (system:kube-scheduler, system:volume-scheduler, system:discovery,
// system:public-info-viewer, system:basic-user, cluster-admin, system:node), as API objects.
// The bindings: system:discovery, system:public-info-viewer and system:basic-user to
// system:authenticated (public-info-viewer also to system:unauthenticated), cluster-admin to
// system:masters, system:node to system:nodes (which Kubernetes leaves to its Node authorizer).
std::vector<Json> BootstrapObjects();

// The metav1.Status body of a 403 for `attrs` denied with `reason` (responsewriters.Forbidden +
// errors.NewForbidden), byte for byte as kube-apiserver writes it (without the final newline).
std::string ForbiddenBody(const Attributes& attrs, const std::string& reason);
// Its message: `pods "p1" is forbidden: User "u" cannot create resource "pods/binding" in API
// group "" in the namespace "default"`.
std::string ForbiddenMessage(const Attributes& attrs, const std::string& reason);
// The 401 body for a bad token.
std::string UnauthorizedBody();

// Bearer tokens the sim issues: one per identity, random, stable for the server's life.
class TokenAuthenticator {
 public:
  // Returns the identity's token, issuing one on the first call.
  std::string Issue(const UserInfo& user);
  // The identity of `token`, or nullopt when the sim never issued it.
  std::optional<UserInfo> Authenticate(std::string_view token) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, UserInfo> by_token_;
  std::map<std::string, std::string> token_of_;  // user name -> token
};

}  // namespace hami::sim::rbac

#endif  // HAMI_SIM_RBAC_H_
