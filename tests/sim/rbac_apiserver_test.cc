// The sim apiserver with RBAC on: token authentication (401 for an unknown token), authorisation
// of every request against the RBAC objects in its store (403 with kube-apiserver's body), the
// preloaded bootstrap roles, policy changes taking effect, and the record of denials.
#include <httplib.h>

#include <gtest/gtest.h>

#include "k8s/client.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/rbac.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/store.h"

namespace hami::sim {
namespace {

class RbacApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ApiServerOptions options;
    options.rbac = true;
    server_ = std::make_unique<ApiServer>(options);
    auto started = server_->Start();
    ASSERT_TRUE(started) << started.error();
  }

  k8s::Client ClientWithToken(const std::string& token) {
    k8s::RestConfig cfg;
    cfg.server = server_->url();
    cfg.token = token;
    cfg.qps = 0;
    return k8s::Client(cfg);
  }

  httplib::Result Get(const std::string& path, const std::string& token) {
    httplib::Client http("127.0.0.1", server_->port());
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    return http.Get(path, headers);
  }

  void Create(const std::string& plural, const std::string& ns, Json obj) {
    const ResourceType* type = FindResourceType("rbac.authorization.k8s.io", "v1", plural);
    ASSERT_NE(type, nullptr);
    ASSERT_TRUE(server_->store().Create(*type, ns, std::move(obj)));
  }

  std::unique_ptr<ApiServer> server_;
};

TEST_F(RbacApiServerTest, ServiceAccountNeedsABindingAndGetsKubernetes403) {
  const std::string token =
      server_->IssueToken(rbac::ServiceAccountUser("kube-system", "hami-device-plugin"));
  auto denied = Get("/api/v1/nodes/n1", token);
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403);
  EXPECT_EQ(denied->body,
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
            R"("nodes \"n1\" is forbidden: User )"
            R"(\"system:serviceaccount:kube-system:hami-device-plugin\" cannot get resource )"
            R"(\"nodes\" in API group \"\" at the cluster scope","reason":"Forbidden",)"
            R"("details":{"name":"n1","kind":"nodes"},"code":403})");
  EXPECT_EQ(server_->forbidden_count(), 1u);

  Create("clusterroles", "",
         Json{{"kind", "ClusterRole"},
              {"metadata", {{"name", "dp"}}},
              {"rules", {{{"verbs", {"get"}}, {"apiGroups", {""}}, {"resources", {"nodes"}}}}}});
  Json subject = {
      {"kind", "ServiceAccount"}, {"name", "hami-device-plugin"}, {"namespace", "kube-system"}};
  Create("clusterrolebindings", "",
         Json{{"kind", "ClusterRoleBinding"},
              {"metadata", {{"name", "dp"}}},
              {"roleRef", {{"kind", "ClusterRole"}, {"name", "dp"}}},
              {"subjects", Json::array({subject})}});
  // The binding takes effect at once: the object is not there (404), but may be read.
  auto allowed = Get("/api/v1/nodes/n1", token);
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->status, 404);
  // Still nothing beyond the rule: a list, a patch through the client.
  k8s::Client client = ClientWithToken(token);
  auto list = client.List(k8s::resources::kNodes, "", {});
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().code, 403);
  EXPECT_EQ(list.error().reason, "Forbidden");
  auto patch = client.Patch(k8s::resources::kPods, "default", "p", k8s::PatchType::kMerge,
                            Json{{"metadata", {{"labels", {{"a", "b"}}}}}});
  ASSERT_FALSE(patch);
  EXPECT_EQ(patch.error().code, 403);
  EXPECT_EQ(server_->forbidden_count(), 3u);
  std::vector<ForbiddenRequest> want = {
      {"system:serviceaccount:kube-system:hami-device-plugin", "get", "nodes", "", ""},
      {"system:serviceaccount:kube-system:hami-device-plugin", "list", "nodes", "", ""},
      {"system:serviceaccount:kube-system:hami-device-plugin", "patch", "pods", "", "default"}};
  EXPECT_EQ(server_->ForbiddenRequests(), want);
  // A repeated denial counts again but is listed once.
  ASSERT_FALSE(client.List(k8s::resources::kNodes, "", {}));
  EXPECT_EQ(server_->forbidden_count(), 4u);
  EXPECT_EQ(server_->ForbiddenRequests().size(), 3u);
}

TEST_F(RbacApiServerTest, UnknownTokenIs401AndNoTokenIsAnonymous) {
  auto bad = Get("/api/v1/pods", "not-issued");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
  EXPECT_EQ(bad->body, rbac::UnauthorizedBody());
  auto anonymous = Get("/api/v1/pods", "");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 403);
  EXPECT_NE(anonymous->body.find(R"(User \"system:anonymous\" cannot list resource \"pods\")"),
            std::string::npos)
      << anonymous->body;
  // system:public-info-viewer is bound to system:unauthenticated too.
  auto version = Get("/version", "");
  ASSERT_TRUE(version);
  EXPECT_EQ(version->status, 200);
  EXPECT_EQ(server_->ForbiddenRequests().size(), 1u);
}

TEST_F(RbacApiServerTest, AdminTokenAndBootstrapDiscovery) {
  k8s::Client admin = ClientWithToken(server_->token());
  auto roles = admin.Request("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles");
  ASSERT_TRUE(roles) << roles.error().ToString();
  for (const char* name : {"system:kube-scheduler", "system:volume-scheduler", "system:discovery",
                           "system:public-info-viewer", "system:basic-user", "cluster-admin"}) {
    EXPECT_NE(roles->find(std::string("\"") + name + "\""), std::string::npos) << name;
  }
  // Any ServiceAccount may read discovery (system:discovery to system:authenticated).
  const std::string token = server_->IssueToken(rbac::ServiceAccountUser("ns", "nobody"));
  for (const char* path : {"/api", "/apis", "/version", "/api/v1"}) {
    auto r = Get(path, token);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
  }
  EXPECT_EQ(server_->forbidden_count(), 0u);
  // The kubeconfig carries the admin token.
  EXPECT_NE(server_->Kubeconfig().find("token: " + server_->token()), std::string::npos);
}

TEST_F(RbacApiServerTest, RoleBindingGrantsInItsNamespaceOnlyAndWatchByName) {
  Create("roles", "kube-system",
         Json{{"kind", "Role"},
              {"metadata", {{"name", "lease"}, {"namespace", "kube-system"}}},
              {"rules",
               {{{"verbs", {"get", "list", "watch"}},
                 {"apiGroups", {"coordination.k8s.io"}},
                 {"resources", {"leases"}},
                 {"resourceNames", {"hami-scheduler"}}}}}});
  Json subject = {{"kind", "ServiceAccount"}, {"name", "hami-scheduler"}};
  Create("rolebindings", "kube-system",
         Json{{"kind", "RoleBinding"},
              {"metadata", {{"name", "lease"}, {"namespace", "kube-system"}}},
              {"roleRef", {{"kind", "Role"}, {"name", "lease"}}},
              {"subjects", Json::array({subject})}});
  const std::string token =
      server_->IssueToken(rbac::ServiceAccountUser("kube-system", "hami-scheduler"));
  const std::string base = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
  auto by_name = Get(base + "?fieldSelector=metadata.name%3Dhami-scheduler", token);
  ASSERT_TRUE(by_name);
  EXPECT_EQ(by_name->status, 200) << by_name->body;
  auto all = Get(base, token);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 403);
  auto other_ns =
      Get("/apis/coordination.k8s.io/v1/namespaces/default/leases/hami-scheduler", token);
  ASSERT_TRUE(other_ns);
  EXPECT_EQ(other_ns->status, 403);
  std::vector<ForbiddenRequest> want = {
      {"system:serviceaccount:kube-system:hami-scheduler", "list", "leases", "", "kube-system"},
      {"system:serviceaccount:kube-system:hami-scheduler", "get", "leases", "", "default"}};
  EXPECT_EQ(server_->ForbiddenRequests(), want);
}

}  // namespace
}  // namespace hami::sim
