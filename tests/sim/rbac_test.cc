// Kubernetes RBAC semantics of the sim's authorizer (docs/RBAC.md): request attributes from
// paths, rule matching, resolution through bindings, bootstrap roles, and the 403/401 bodies.
#include "sim/apiserver/rbac.h"

#include <gtest/gtest.h>

namespace hami::sim::rbac {
namespace {

const UserInfo kAlice{"alice", {"system:authenticated"}};

Attributes Req(std::string_view method, std::string_view path, QueryParams params = {}) {
  return RequestAttributes(kAlice, method, path, params);
}

PolicyRule R(std::vector<std::string> verbs, std::vector<std::string> groups,
             std::vector<std::string> resources, std::vector<std::string> names = {}) {
  PolicyRule r;
  r.verbs = std::move(verbs);
  r.api_groups = std::move(groups);
  r.resources = std::move(resources);
  r.resource_names = std::move(names);
  return r;
}

TEST(RbacAttributes, ResourcePathsAndVerbs) {
  Attributes a = Req("GET", "/api/v1/namespaces/default/pods/p1");
  EXPECT_TRUE(a.resource_request);
  EXPECT_EQ(a.verb, "get");
  EXPECT_EQ(a.api_group, "");
  EXPECT_EQ(a.api_version, "v1");
  EXPECT_EQ(a.ns, "default");
  EXPECT_EQ(a.resource, "pods");
  EXPECT_EQ(a.subresource, "");
  EXPECT_EQ(a.name, "p1");

  EXPECT_EQ(Req("HEAD", "/api/v1/nodes/n1").verb, "get");
  EXPECT_EQ(Req("GET", "/api/v1/pods").verb, "list");
  EXPECT_EQ(Req("GET", "/api/v1/pods").ns, "");
  EXPECT_EQ(Req("POST", "/api/v1/namespaces/default/pods").verb, "create");
  EXPECT_EQ(Req("PUT", "/api/v1/nodes/n1").verb, "update");
  EXPECT_EQ(Req("PATCH", "/api/v1/nodes/n1").verb, "patch");
  EXPECT_EQ(Req("DELETE", "/api/v1/namespaces/default/pods/p1").verb, "delete");
  EXPECT_EQ(Req("DELETE", "/api/v1/namespaces/default/pods").verb, "deletecollection");

  Attributes lease = Req("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l");
  EXPECT_EQ(lease.api_group, "coordination.k8s.io");
  EXPECT_EQ(lease.api_version, "v1");
  EXPECT_EQ(lease.resource, "leases");
  EXPECT_EQ(lease.name, "l");
  EXPECT_EQ(lease.ns, "kube-system");
}

TEST(RbacAttributes, WatchParameterAndOldWatchPath) {
  EXPECT_EQ(Req("GET", "/api/v1/pods", {{"watch", "true"}}).verb, "watch");
  EXPECT_EQ(Req("GET", "/api/v1/pods", {{"watch", "1"}}).verb, "watch");
  EXPECT_EQ(Req("GET", "/api/v1/pods", {{"watch", ""}}).verb, "watch");
  EXPECT_EQ(Req("GET", "/api/v1/pods", {{"watch", "false"}}).verb, "list");
  EXPECT_EQ(Req("GET", "/api/v1/pods", {{"watch", "False"}}).verb, "list");
  EXPECT_EQ(Req("GET", "/api/v1/pods", {{"watch", "0"}}).verb, "list");

  Attributes old = Req("GET", "/api/v1/watch/namespaces/default/pods");
  EXPECT_TRUE(old.resource_request);
  EXPECT_EQ(old.verb, "watch");
  EXPECT_EQ(old.ns, "default");
  EXPECT_EQ(old.resource, "pods");
  EXPECT_EQ(old.name, "");
  Attributes one = Req("GET", "/api/v1/watch/nodes/n1");
  EXPECT_EQ(one.verb, "watch");
  EXPECT_EQ(one.name, "n1");
}

TEST(RbacAttributes, FieldSelectorOnMetadataNameNamesTheRequest) {
  auto lease = [](QueryParams p) {
    return Req("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", std::move(p));
  };
  EXPECT_EQ(lease({{"fieldSelector", "metadata.name=hami"}}).name, "hami");
  EXPECT_EQ(lease({{"fieldSelector", "metadata.name==hami"}}).name, "hami");
  EXPECT_EQ(lease({{"fieldSelector", "spec.x=1,metadata.name=hami"}}).name, "hami");
  Attributes w = lease({{"fieldSelector", "metadata.name=hami"}, {"watch", "true"}});
  EXPECT_EQ(w.verb, "watch");
  EXPECT_EQ(w.name, "hami");
  EXPECT_EQ(lease({{"fieldSelector", "metadata.name!=hami"}}).name, "");
  EXPECT_EQ(lease({{"fieldSelector", "spec.nodeName=n1"}}).name, "");
  EXPECT_EQ(lease({{"fieldSelector", "metadata.name=a/b"}}).name, "");
  // A delete of the collection stays deletecollection whatever the selector.
  EXPECT_EQ(Req("DELETE", "/api/v1/namespaces/d/pods", {{"fieldSelector", "metadata.name=x"}}).verb,
            "deletecollection");
}

TEST(RbacAttributes, SubresourcesAndNamespaces) {
  Attributes b = Req("POST", "/api/v1/namespaces/default/pods/p1/binding");
  EXPECT_EQ(b.verb, "create");
  EXPECT_EQ(b.resource, "pods");
  EXPECT_EQ(b.subresource, "binding");
  EXPECT_EQ(b.name, "p1");
  Attributes st = Req("PATCH", "/api/v1/namespaces/default/pods/p1/status");
  EXPECT_EQ(st.subresource, "status");

  Attributes ns = Req("GET", "/api/v1/namespaces/team-a");
  EXPECT_EQ(ns.resource, "namespaces");
  EXPECT_EQ(ns.name, "team-a");
  EXPECT_EQ(ns.ns, "team-a");
  Attributes fin = Req("PUT", "/api/v1/namespaces/team-a/finalize");
  EXPECT_EQ(fin.resource, "namespaces");
  EXPECT_EQ(fin.subresource, "finalize");
  Attributes all = Req("GET", "/api/v1/namespaces");
  EXPECT_EQ(all.verb, "list");
  EXPECT_EQ(all.ns, "");
  EXPECT_EQ(all.resource, "namespaces");
}

TEST(RbacAttributes, NonResourceRequests) {
  for (const char* path : {"/version", "/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1",
                           "/healthz", "/openapi/v3"}) {
    Attributes a = Req("GET", path);
    EXPECT_FALSE(a.resource_request) << path;
    EXPECT_EQ(a.verb, "get") << path;
    EXPECT_EQ(a.path, path);
  }
  EXPECT_EQ(Req("POST", "/logs").verb, "post");
}

TEST(RbacRules, VerbsGroupsAndResources) {
  Attributes get = Req("GET", "/api/v1/namespaces/d/pods/p");
  EXPECT_TRUE(RuleAllows(get, R({"get"}, {""}, {"pods"})));
  EXPECT_TRUE(RuleAllows(get, R({"*"}, {""}, {"pods"})));
  EXPECT_FALSE(RuleAllows(get, R({"list"}, {""}, {"pods"})));
  EXPECT_FALSE(RuleAllows(get, R({"get"}, {"apps"}, {"pods"})));
  EXPECT_TRUE(RuleAllows(get, R({"get"}, {"*"}, {"pods"})));
  EXPECT_FALSE(RuleAllows(get, R({"get"}, {""}, {"nodes"})));
  EXPECT_TRUE(RuleAllows(get, R({"get"}, {""}, {"*"})));

  Attributes watch = Req("GET", "/api/v1/pods", {{"watch", "true"}});
  EXPECT_FALSE(RuleAllows(watch, R({"get", "list"}, {""}, {"pods"})));
  EXPECT_TRUE(RuleAllows(watch, R({"watch"}, {""}, {"pods"})));
  Attributes del = Req("DELETE", "/api/v1/namespaces/d/pods");
  EXPECT_FALSE(RuleAllows(del, R({"delete"}, {""}, {"pods"})));
  EXPECT_TRUE(RuleAllows(del, R({"deletecollection"}, {""}, {"pods"})));
}

TEST(RbacRules, Subresources) {
  Attributes status = Req("PATCH", "/api/v1/namespaces/d/pods/p/status");
  EXPECT_FALSE(RuleAllows(status, R({"patch"}, {""}, {"pods"})));
  EXPECT_TRUE(RuleAllows(status, R({"patch"}, {""}, {"pods/status"})));
  EXPECT_TRUE(RuleAllows(status, R({"patch"}, {""}, {"*"})));
  EXPECT_TRUE(RuleAllows(status, R({"patch"}, {""}, {"*/status"})));
  EXPECT_FALSE(RuleAllows(status, R({"patch"}, {""}, {"*/scale"})));
  EXPECT_FALSE(RuleAllows(status, R({"patch"}, {""}, {"pods/*"})));
  Attributes pod = Req("PATCH", "/api/v1/namespaces/d/pods/p");
  EXPECT_FALSE(RuleAllows(pod, R({"patch"}, {""}, {"pods/status"})));
  EXPECT_FALSE(RuleAllows(pod, R({"patch"}, {""}, {"*/status"})));
  Attributes scale = Req("PUT", "/apis/apps/v1/namespaces/d/deployments/x/scale");
  EXPECT_TRUE(RuleAllows(scale, R({"update"}, {"apps"}, {"*/scale"})));
  Attributes bind = Req("POST", "/api/v1/namespaces/d/pods/p/binding");
  EXPECT_TRUE(RuleAllows(bind, R({"create"}, {""}, {"pods/binding"})));
  EXPECT_FALSE(RuleAllows(bind, R({"create"}, {""}, {"pods"})));
}

TEST(RbacRules, ResourceNames) {
  PolicyRule named = R({"get", "list", "watch", "update", "create", "deletecollection"},
                       {"coordination.k8s.io"}, {"leases"}, {"hami-scheduler"});
  const std::string base = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
  EXPECT_TRUE(RuleAllows(Req("GET", base + "/hami-scheduler"), named));
  EXPECT_FALSE(RuleAllows(Req("GET", base + "/other"), named));
  EXPECT_TRUE(RuleAllows(Req("PUT", base + "/hami-scheduler"), named));
  // A list or watch is named only by a metadata.name field selector.
  EXPECT_FALSE(RuleAllows(Req("GET", base), named));
  EXPECT_TRUE(
      RuleAllows(Req("GET", base, {{"fieldSelector", "metadata.name=hami-scheduler"}}), named));
  EXPECT_TRUE(RuleAllows(
      Req("GET", base, {{"fieldSelector", "metadata.name=hami-scheduler"}, {"watch", "1"}}),
      named));
  EXPECT_FALSE(RuleAllows(Req("GET", base, {{"fieldSelector", "metadata.name=other"}}), named));
  // A create carries no name; a deletecollection neither.
  EXPECT_FALSE(RuleAllows(Req("POST", base), named));
  EXPECT_FALSE(RuleAllows(Req("DELETE", base), named));
}

TEST(RbacRules, NonResourceUrls) {
  PolicyRule r;
  r.verbs = {"get"};
  r.non_resource_urls = {"/version", "/apis/*", "/healthz"};
  EXPECT_TRUE(RuleAllows(Req("GET", "/version"), r));
  EXPECT_FALSE(RuleAllows(Req("GET", "/version/"), r));
  EXPECT_TRUE(RuleAllows(Req("GET", "/apis/apps/v1"), r));
  EXPECT_TRUE(RuleAllows(Req("GET", "/apis/"), r));
  EXPECT_FALSE(RuleAllows(Req("GET", "/apis"), r));
  EXPECT_FALSE(RuleAllows(Req("POST", "/healthz"), r));
  r.non_resource_urls = {"*"};
  EXPECT_TRUE(RuleAllows(Req("GET", "/anything"), r));
  // A resource rule never allows a non-resource request, nor the reverse.
  EXPECT_FALSE(RuleAllows(Req("GET", "/version"), R({"get"}, {"*"}, {"*"})));
  EXPECT_FALSE(RuleAllows(Req("GET", "/api/v1/nodes/n"), r));
}

// A ClusterRole, Role, or binding as the API objects helm renders.
Json ClusterRoleObj(const std::string& name, Json rules) {
  return Json{{"kind", "ClusterRole"}, {"metadata", {{"name", name}}}, {"rules", rules}};
}
Json RoleObj(const std::string& ns, const std::string& name, Json rules) {
  return Json{
      {"kind", "Role"}, {"metadata", {{"name", name}, {"namespace", ns}}}, {"rules", rules}};
}
// `subjects` as a vector: a braced single object would be an object, not a list, under clang.
Json BindingObj(const std::string& kind, const std::string& ns, const std::string& name,
                const std::string& role_kind, const std::string& role, std::vector<Json> subjects) {
  Json meta = {{"name", name}};
  if (!ns.empty()) meta["namespace"] = ns;
  return Json{
      {"kind", kind},
      {"metadata", meta},
      {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role}}},
      {"subjects", subjects}};
}
Json Subj(const std::string& kind, const std::string& name) {
  return Json{{"kind", kind}, {"name", name}};
}
Json Sa(const std::string& name, const std::string& ns = "") {
  Json s = {{"kind", "ServiceAccount"}, {"name", name}};
  if (!ns.empty()) s["namespace"] = ns;
  return s;
}

Attributes As(const UserInfo& user, std::string_view method, std::string_view path,
              QueryParams params = {}) {
  return RequestAttributes(user, method, path, params);
}

TEST(RbacAuthorize, ClusterRoleBindingToServiceAccount) {
  Policy p;
  ASSERT_TRUE(AddObject(
      p,
      ClusterRoleObj(
          "reader", {{{"verbs", {"get", "list"}}, {"apiGroups", {""}}, {"resources", {"pods"}}}})));
  ASSERT_TRUE(AddObject(p, BindingObj("ClusterRoleBinding", "", "reader", "ClusterRole", "reader",
                                      {Sa("sched", "kube-system")})));
  UserInfo sched = ServiceAccountUser("kube-system", "sched");
  EXPECT_EQ(sched.name, "system:serviceaccount:kube-system:sched");
  EXPECT_EQ(sched.groups, (std::vector<std::string>{"system:serviceaccounts",
                                                    "system:serviceaccounts:kube-system",
                                                    "system:authenticated"}));
  EXPECT_TRUE(Authorize(p, As(sched, "GET", "/api/v1/pods")).allowed);
  EXPECT_TRUE(Authorize(p, As(sched, "GET", "/api/v1/namespaces/x/pods/p")).allowed);
  EXPECT_FALSE(Authorize(p, As(sched, "PATCH", "/api/v1/namespaces/x/pods/p")).allowed);
  EXPECT_FALSE(
      Authorize(p, As(ServiceAccountUser("default", "sched"), "GET", "/api/v1/pods")).allowed);
  // A ServiceAccount subject without a namespace in a ClusterRoleBinding matches nobody.
  ASSERT_TRUE(AddObject(
      p, BindingObj("ClusterRoleBinding", "", "reader", "ClusterRole", "reader", {Sa("sched")})));
  EXPECT_FALSE(Authorize(p, As(sched, "GET", "/api/v1/pods")).allowed);
}

TEST(RbacAuthorize, RoleBindingsAreScopedToTheirNamespace) {
  Policy p;
  Json rules = {{{"verbs", {"get"}}, {"apiGroups", {""}}, {"resources", {"pods"}}}};
  ASSERT_TRUE(AddObject(p, ClusterRoleObj("pod-get", rules)));
  ASSERT_TRUE(AddObject(p, RoleObj("team-a", "pod-get-role", rules)));
  // A RoleBinding to a ClusterRole, and one to a Role; the ServiceAccount subject defaults to
  // the binding's namespace.
  ASSERT_TRUE(AddObject(
      p, BindingObj("RoleBinding", "team-a", "b1", "ClusterRole", "pod-get", {Sa("app")})));
  ASSERT_TRUE(AddObject(
      p, BindingObj("RoleBinding", "team-b", "b2", "Role", "pod-get-role", {Sa("app", "team-a")})));
  UserInfo app = ServiceAccountUser("team-a", "app");
  EXPECT_TRUE(Authorize(p, As(app, "GET", "/api/v1/namespaces/team-a/pods/p")).allowed);
  // team-b's binding refers to a Role that exists only in team-a: it grants nothing.
  Decision d = Authorize(p, As(app, "GET", "/api/v1/namespaces/team-b/pods/p"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "RBAC: role.rbac.authorization.k8s.io \"pod-get-role\" not found");
  EXPECT_FALSE(Authorize(p, As(app, "GET", "/api/v1/namespaces/team-c/pods/p")).allowed);
  // All-namespace requests and cluster-scoped resources see ClusterRoleBindings only.
  EXPECT_FALSE(Authorize(p, As(app, "GET", "/api/v1/pods")).allowed);
}

TEST(RbacAuthorize, UsersGroupsAndMissingRoles) {
  Policy p;
  Json rules = {{{"verbs", {"list"}}, {"apiGroups", {""}}, {"resources", {"nodes"}}}};
  ASSERT_TRUE(AddObject(p, ClusterRoleObj("nodes", rules)));
  ASSERT_TRUE(AddObject(p, BindingObj("ClusterRoleBinding", "", "a", "ClusterRole", "nodes",
                                      {Subj("User", "alice")})));
  ASSERT_TRUE(AddObject(p, BindingObj("ClusterRoleBinding", "", "b", "ClusterRole", "nodes",
                                      {Subj("Group", "ops")})));
  ASSERT_TRUE(AddObject(p, BindingObj("ClusterRoleBinding", "", "c", "ClusterRole", "gone",
                                      {Subj("Group", "system:authenticated")})));
  EXPECT_TRUE(Authorize(p, As(kAlice, "GET", "/api/v1/nodes")).allowed);
  EXPECT_TRUE(Authorize(p, As({"bob", {"ops"}}, "GET", "/api/v1/nodes")).allowed);
  Decision d = Authorize(p, As({"carol", {"system:authenticated"}}, "GET", "/api/v1/nodes"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found");
  EXPECT_EQ(Authorize(p, As({"dave", {}}, "GET", "/api/v1/nodes")).reason, "");
}

TEST(RbacAuthorize, BootstrapRoles) {
  Policy p;
  for (const Json& obj : BootstrapObjects()) ASSERT_TRUE(AddObject(p, obj)) << obj.dump();
  UserInfo anyone{"x", {"system:authenticated"}};
  UserInfo anonymous{"system:anonymous", {"system:unauthenticated"}};
  for (const char* path : {"/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/openapi/v3",
                           "/healthz", "/readyz", "/livez"}) {
    EXPECT_TRUE(Authorize(p, As(anyone, "GET", path)).allowed) << path;
  }
  EXPECT_TRUE(Authorize(p, As(anonymous, "GET", "/version")).allowed);
  EXPECT_FALSE(Authorize(p, As(anonymous, "GET", "/api")).allowed);
  EXPECT_FALSE(Authorize(p, As(anyone, "GET", "/api/v1/pods")).allowed);
  EXPECT_TRUE(
      Authorize(p, As(anyone, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"))
          .allowed);
  UserInfo admin{"admin", {"system:masters", "system:authenticated"}};
  EXPECT_TRUE(Authorize(p, As(admin, "DELETE", "/api/v1/namespaces/x/secrets")).allowed);
  EXPECT_TRUE(Authorize(p, As(admin, "GET", "/metrics")).allowed);
  UserInfo kubelet{"system:node:n1", {"system:nodes", "system:authenticated"}};
  EXPECT_TRUE(Authorize(p, As(kubelet, "PATCH", "/api/v1/nodes/n1/status")).allowed);
  EXPECT_TRUE(Authorize(p, As(kubelet, "PATCH", "/api/v1/namespaces/d/pods/p/status")).allowed);
  EXPECT_FALSE(Authorize(p, As(kubelet, "PATCH", "/api/v1/namespaces/d/pods/p")).allowed);

  // system:kube-scheduler bound to a ServiceAccount, as the chart does.
  ASSERT_TRUE(
      AddObject(p, BindingObj("ClusterRoleBinding", "", "hami-scheduler-kube", "ClusterRole",
                              "system:kube-scheduler", {Sa("hami-scheduler", "kube-system")})));
  UserInfo sched = ServiceAccountUser("kube-system", "hami-scheduler");
  EXPECT_TRUE(Authorize(p, As(sched, "POST", "/api/v1/namespaces/d/pods/p/binding")).allowed);
  EXPECT_TRUE(Authorize(p, As(sched, "PATCH", "/api/v1/namespaces/d/pods/p/status")).allowed);
  EXPECT_TRUE(
      Authorize(p, As(sched, "POST", "/apis/events.k8s.io/v1/namespaces/d/events")).allowed);
  EXPECT_FALSE(Authorize(p, As(sched, "PATCH", "/api/v1/namespaces/d/pods/p")).allowed);
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/";
  EXPECT_TRUE(Authorize(p, As(sched, "PUT", leases + "kube-scheduler")).allowed);
  EXPECT_FALSE(Authorize(p, As(sched, "PUT", leases + "hami-scheduler")).allowed);
  EXPECT_FALSE(Authorize(p, As(sched, "GET", "/api/v1/namespaces/d/secrets/s")).allowed);
}

TEST(RbacObjects, ParseErrorsNameTheField) {
  auto bad_rule = RoleFromObject(ClusterRoleObj("r", {{{"verbs", {"get", 3}}}}));
  ASSERT_FALSE(bad_rule);
  EXPECT_NE(bad_rule.error().find("ClusterRole \"r\".rules[0].verbs"), std::string::npos)
      << bad_rule.error();
  auto no_verbs = RoleFromObject(ClusterRoleObj("r", {{{"resources", {"pods"}}}}));
  ASSERT_FALSE(no_verbs);
  EXPECT_NE(no_verbs.error().find("verbs: required"), std::string::npos);
  auto role_no_ns = RoleFromObject(Json{{"kind", "Role"}, {"metadata", {{"name", "r"}}}});
  ASSERT_FALSE(role_no_ns);
  auto crb_to_role = BindingFromObject(BindingObj("ClusterRoleBinding", "", "b", "Role", "r", {}));
  ASSERT_FALSE(crb_to_role);
  auto bad_subject = BindingObj("RoleBinding", "ns", "b", "Role", "r", {Subj("Robot", "x")});
  auto parsed = BindingFromObject(bad_subject);
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().find("RoleBinding \"b\".subjects[0].kind \"Robot\""), std::string::npos)
      << parsed.error();
  Policy p;
  EXPECT_FALSE(AddObject(p, Json{{"kind", "ConfigMap"}, {"metadata", {{"name", "c"}}}}));
  EXPECT_FALSE(AddObject(p, Json::array()));
}

TEST(RbacBodies, ForbiddenAsKubeApiserverWritesIt) {
  UserInfo sched = ServiceAccountUser("kube-system", "hami-scheduler");
  Attributes bind = As(sched, "POST", "/api/v1/namespaces/default/pods/p1/binding");
  EXPECT_EQ(
      ForbiddenBody(bind, ""),
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
      R"("pods \"p1\" is forbidden: User \"system:serviceaccount:kube-system:hami-scheduler\")"
      R"( cannot create resource \"pods/binding\" in API group \"\" in the namespace )"
      R"(\"default\"","reason":"Forbidden","details":{"name":"p1","kind":"pods"},"code":403})");
  Attributes list = As(sched, "GET", "/apis/coordination.k8s.io/v1/leases");
  EXPECT_EQ(ForbiddenBody(list, "RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found"),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
            R"("leases.coordination.k8s.io is forbidden: User )"
            R"(\"system:serviceaccount:kube-system:hami-scheduler\" cannot list resource )"
            R"(\"leases\" in API group \"coordination.k8s.io\" at the cluster scope: RBAC: )"
            R"(clusterrole.rbac.authorization.k8s.io \"x\" not found","reason":"Forbidden",)"
            R"("details":{"group":"coordination.k8s.io","kind":"leases"},"code":403})");
  Attributes path = As({"bob", {}}, "GET", "/metrics");
  EXPECT_EQ(ForbiddenBody(path, ""),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
            R"("forbidden: User \"bob\" cannot get path \"/metrics\"","reason":"Forbidden",)"
            R"("details":{},"code":403})");
  // HTML-significant characters: sanitized in the message, then escaped as Go's JSON does.
  Attributes odd = As({"a<b>&c", {}}, "GET", "/x");
  EXPECT_EQ(ForbiddenMessage(odd, ""),
            "forbidden: User \"a&lt;b&gt;&amp;c\" cannot get path \"/x\"");
  EXPECT_NE(ForbiddenBody(odd, "").find(R"(a\u0026lt;b\u0026gt;\u0026amp;c)"), std::string::npos);
}

TEST(RbacBodies, Unauthorized) {
  EXPECT_EQ(UnauthorizedBody(),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"Unauthorized","reason":"Unauthorized","code":401})");
}

TEST(RbacTokens, IssuedTokensAuthenticateTheirIdentity) {
  TokenAuthenticator auth;
  UserInfo sa = ServiceAccountUser("kube-system", "hami-device-plugin");
  std::string token = auth.Issue(sa);
  EXPECT_EQ(auth.Issue(sa), token);
  std::string other = auth.Issue(ServiceAccountUser("kube-system", "hami-scheduler"));
  EXPECT_NE(other, token);
  auto who = auth.Authenticate(token);
  ASSERT_TRUE(who);
  EXPECT_EQ(who->name, sa.name);
  EXPECT_EQ(who->groups, sa.groups);
  EXPECT_FALSE(auth.Authenticate("not-a-token"));
  EXPECT_FALSE(auth.Authenticate(""));
}

}  // namespace
}  // namespace hami::sim::rbac
