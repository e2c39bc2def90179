// The exact messages with which the sim's RBAC reader refuses a Role, ClusterRole, RoleBinding or
// ClusterRoleBinding object (src/sim/apiserver/rbac.cc): each names the object and the field.
#include <gtest/gtest.h>

#include "sim/apiserver/rbac.h"

namespace hami::sim::rbac {
namespace {

Json Obj(const std::string& kind, const std::string& ns, Json extra = Json::object()) {
  Json o = {{"kind", kind}, {"metadata", {{"name", "x"}}}};
  if (!ns.empty()) o["metadata"]["namespace"] = ns;
  for (auto& [k, v] : extra.items()) o[k] = v;
  return o;
}

const Json kRef = {{"roleRef", {{"kind", "ClusterRole"}, {"name", "r"}}}};

Json Ref(Json extra) {
  Json o = kRef;
  for (auto& [k, v] : extra.items()) o[k] = v;
  return o;
}

TEST(RbacObjectMessages, Roles) {
  EXPECT_EQ(RoleFromObject(Obj("RoleBinding", "ns")).error(),
            "kind \"RoleBinding\": want Role or ClusterRole");
  EXPECT_EQ(RoleFromObject(Obj("Role", "")).error(),
            "Role \"x\": metadata.namespace: required for a Role");
  EXPECT_EQ(RoleFromObject(Obj("ClusterRole", "", {{"rules", "get"}})).error(),
            "ClusterRole \"x\".rules: want a list");
  EXPECT_EQ(RoleFromObject(Obj("Role", "ns", {{"rules", {{{"verbs", {"get"}}}, 3}}})).error(),
            "Role \"x\".rules[1]: want an object");
  EXPECT_EQ(RoleFromObject(Obj("ClusterRole", "", {{"rules", {Json::object()}}})).error(),
            "ClusterRole \"x\".rules[0].verbs: required");
}

TEST(RbacObjectMessages, RolesRead) {
  auto cluster = RoleFromObject(Obj("ClusterRole", "ignored", {{"rules", nullptr}}));
  ASSERT_TRUE(cluster) << cluster.error();
  EXPECT_EQ(cluster->name, "x");
  EXPECT_EQ(cluster->ns, "");
  EXPECT_TRUE(cluster->rules.empty());
  auto role = RoleFromObject(
      Obj("Role", "ns", {{"rules", {{{"verbs", {"get"}}}, {{"verbs", {"list", "watch"}}}}}}));
  ASSERT_TRUE(role) << role.error();
  EXPECT_EQ(role->ns, "ns");
  ASSERT_EQ(role->rules.size(), 2u);
  EXPECT_EQ(role->rules[1].verbs, (std::vector<std::string>{"list", "watch"}));
}

TEST(RbacObjectMessages, Bindings) {
  EXPECT_EQ(BindingFromObject(Obj("Role", "ns", kRef)).error(),
            "kind \"Role\": want RoleBinding or ClusterRoleBinding");
  EXPECT_EQ(BindingFromObject(Obj("RoleBinding", "", kRef)).error(),
            "RoleBinding \"x\": metadata.namespace: required for a RoleBinding");
  EXPECT_EQ(BindingFromObject(Obj("ClusterRoleBinding", "")).error(),
            "ClusterRoleBinding \"x\".roleRef: required");
  EXPECT_EQ(BindingFromObject(Obj("ClusterRoleBinding", "", Ref({{"subjects", 1}}))).error(),
            "ClusterRoleBinding \"x\".subjects: want a list");
  EXPECT_EQ(BindingFromObject(Obj("RoleBinding", "ns", Ref({{"subjects", {"u"}}}))).error(),
            "RoleBinding \"x\".subjects[0]: want an object");
  EXPECT_EQ(BindingFromObject(Obj("RoleBinding", "ns", Ref({{"subjects", {{{"kind", "User"}}}}})))
                .error(),
            "RoleBinding \"x\".subjects[0].name: required");
}

TEST(RbacObjectMessages, BindingsRead) {
  auto cluster = BindingFromObject(Obj("ClusterRoleBinding", "ignored", kRef));
  ASSERT_TRUE(cluster) << cluster.error();
  EXPECT_EQ(cluster->ns, "");
  EXPECT_TRUE(cluster->subjects.empty());
  auto b = BindingFromObject(
      Obj("RoleBinding", "ns",
          Ref({{"subjects",
                {{{"kind", "User"}, {"name", "alice"}},
                 {{"kind", "ServiceAccount"}, {"name", "sa"}, {"namespace", "kube-system"}}}}})));
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->name, "x");
  EXPECT_EQ(b->ns, "ns");
  EXPECT_EQ(b->role_kind, "ClusterRole");
  ASSERT_EQ(b->subjects.size(), 2u);
  EXPECT_EQ(b->subjects[1].ns, "kube-system");
}

// Names are quoted as Go's %q writes them in the message, and the body's strings as Go's
// encoding/json writes them (control characters, quotes, backslashes, HTML characters).
TEST(RbacQuoting, MessageAndBodyEscapeAsGoDoes) {
  const std::string odd = std::string("q\"b\\ n\nt\tr\r") + '\x01' + '\x7f';
  Attributes path = RequestAttributes({odd, {}}, "GET", "/x", {});
  EXPECT_EQ(ForbiddenMessage(path, ""),
            R"(forbidden: User "q\"b\\ n\nt\tr\r\x01\x7f" cannot get path "/x")");
  EXPECT_NE(ForbiddenBody(path, "").find(
                R"("message":"forbidden: User \"q\\\"b\\\\ n\\nt\\tr\\r\\x01\\x7f\" cannot)"),
            std::string::npos)
      << ForbiddenBody(path, "");
  Attributes pod = RequestAttributes({"u", {}}, "GET", "/api/v1/namespaces/d/pods/p", {});
  pod.name = std::string("n\n\t\r\"\\<>&") + '\x01' + '\x1f';
  EXPECT_NE(ForbiddenBody(pod, "").find(
                R"("details":{"name":"n\n\t\r\"\\\u003c\u003e\u0026\u0001\u001f",)"),
            std::string::npos)
      << ForbiddenBody(pod, "");
}

}  // namespace
}  // namespace hami::sim::rbac
