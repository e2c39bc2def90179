#include "sim/apiserver/discovery.h"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/apiserver/resources.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;

const std::vector<std::string>& AllVerbs() {
  static const std::vector<std::string> verbs = {"create", "delete", "deletecollection", "get",
                                                 "list",   "patch",  "update",           "watch"};
  return verbs;
}

std::vector<std::string> GroupsServed() {
  std::vector<std::string> groups;
  for (const auto& t : ResourceTypes()) {
    if (!t.group.empty() && std::find(groups.begin(), groups.end(), t.group) == groups.end()) {
      groups.push_back(t.group);
    }
  }
  return groups;
}

// The versions `group` serves, in table order; the first is the preferred one.
std::vector<std::string> VersionsOf(const std::string& group) {
  std::vector<std::string> versions;
  for (const auto& t : ResourceTypes()) {
    if (t.group == group &&
        std::find(versions.begin(), versions.end(), t.version) == versions.end()) {
      versions.push_back(t.version);
    }
  }
  return versions;
}

Json GroupJson(const std::string& group) {
  Json versions = Json::array();
  for (const auto& v : VersionsOf(group)) {
    versions.push_back(Json{{"groupVersion", group + "/" + v}, {"version", v}});
  }
  return Json{{"name", group}, {"versions", versions}, {"preferredVersion", versions.at(0)}};
}

// `kubectl get all` lists these, as upstream's "all" category does.
bool IsInCategoryAll(const ResourceType& t) {
  if (t.group.empty()) return t.plural == "pods" || t.plural == "services";
  return t.group == "apps" || (t.group == "autoscaling" && t.plural == "horizontalpodautoscalers");
}

Json ResourceList(const std::string& group, const std::string& version) {
  Json resources = Json::array();
  for (const auto& t : ResourceTypes()) {
    if (t.group != group || t.version != version) continue;
    resources.push_back(Json{{"name", t.plural},
                             {"singularName", t.singular},
                             {"namespaced", t.namespaced},
                             {"kind", t.kind},
                             {"verbs", AllVerbs()},
                             {"shortNames", t.short_names}});
    if (IsInCategoryAll(t)) {
      resources.back()["categories"] = {"all"};  // `kubectl get all`
    }
    if (t.has_status) {
      resources.push_back(Json{{"name", t.plural + "/status"},
                               {"singularName", ""},
                               {"namespaced", t.namespaced},
                               {"kind", t.kind},
                               {"verbs", {"get", "patch", "update"}}});
    }
    if (t.plural == "pods" && group.empty()) {
      resources.push_back(Json{{"name", "pods/binding"},
                               {"singularName", ""},
                               {"namespaced", true},
                               {"kind", "Binding"},
                               {"verbs", {"create"}}});
    }
  }
  std::string gv = group.empty() ? version : group + "/" + version;
  return Json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", gv},
              {"resources", resources}};
}

// An OpenAPI v3 document with just enough for kubectl: every object path has a PATCH operation
// tagged with its group/version/kind that accepts the fieldValidation query parameter, so
// kubectl leaves validation to the server instead of fetching the protobuf OpenAPI v2.
Json PatchOperation(const std::string& group, const std::string& version, const std::string& kind) {
  return Json{
      {"x-kubernetes-group-version-kind", {{"group", group}, {"version", version}, {"kind", kind}}},
      {"x-kubernetes-action", "patch"},
      {"parameters",
       Json::array(
           {{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}}})},
      {"responses", {{"200", {{"description", "OK"}}}}}};
}

Json OpenApiV3(const std::string& group, const std::string& version) {
  Json paths = Json::object();
  for (const auto& t : ResourceTypes()) {
    if (t.group != group || t.version != version) continue;
    std::string base =
        t.PathPrefix() + (t.namespaced ? "/namespaces/{namespace}/" : "/") + t.plural + "/{name}";
    paths[base] = Json{{"patch", PatchOperation(t.group, t.version, t.kind)}};
  }
  return Json{{"openapi", "3.0.0"},
              {"info", {{"title", "Kubernetes"}, {"version", "v1.30.0"}}},
              {"paths", paths},
              {"components", {{"schemas", Json::object()}}}};
}

std::string OpenApiV3Root() {
  Json paths = Json::object();
  paths["api/v1"] = {{"serverRelativeURL", "/openapi/v3/api/v1?hash=1"}};
  for (const auto& g : GroupsServed()) {
    for (const auto& v : VersionsOf(g)) {
      std::string gv = "apis/" + g + "/" + v;
      paths[gv] = {{"serverRelativeURL", "/openapi/v3/" + gv + "?hash=1"}};
    }
  }
  return Json{{"paths", paths}}.dump();
}

}  // namespace

std::string OpenApiV2Protobuf() {
  // gnostic's openapi_v2.Document {1 swagger: "2.0", 2 info {1 title, 2 version}} and no
  // definitions: clients find no schema for any kind, so they skip client-side validation (the
  // server validates), as they do for kinds a real server has no schema for.
  auto field = [](int number, const std::string& payload) {
    return std::string(1, static_cast<char>(number << 3 | 2)) +
           std::string(1, static_cast<char>(payload.size())) + payload;
  };
  return field(1, "2.0") + field(2, field(1, "Kubernetes") + field(2, "v1.30.0"));
}

std::optional<std::string> DiscoveryDocument(std::string_view path,
                                             std::string_view server_address) {
  if (path == "/version") {
    return Json{{"major", "1"},
                {"minor", std::string(kServedMinorVersion)},
                {"gitVersion", "v1." + std::string(kServedMinorVersion) + ".0"},
                {"gitCommit", "hami-sim"},
                {"gitTreeState", "clean"},
                {"buildDate", "2026-01-01T00:00:00Z"},
                {"goVersion", "go1.22.0"},
                {"compiler", "gc"},
                {"platform", "linux/amd64"}}
        .dump();
  }
  if (path == "/api") {
    return Json{{"kind", "APIVersions"},
                {"versions", {"v1"}},
                {"serverAddressByClientCIDRs",
                 {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", std::string(server_address)}}}}}
        .dump();
  }
  if (path == "/apis") {
    Json groups = Json::array();
    for (const auto& g : GroupsServed()) groups.push_back(GroupJson(g));
    return Json{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}}.dump();
  }
  if (path == "/api/v1") return ResourceList("", "v1").dump();
  if (path == "/openapi/v3") return OpenApiV3Root();
  if (path == "/openapi/v3/api/v1") return OpenApiV3("", "v1").dump();
  for (const auto& g : GroupsServed()) {
    if (path == "/apis/" + g) {
      Json out = GroupJson(g);
      out["kind"] = "APIGroup";
      out["apiVersion"] = "v1";
      return out.dump();
    }
    for (const auto& v : VersionsOf(g)) {
      if (path == "/apis/" + g + "/" + v) return ResourceList(g, v).dump();
      if (path == "/openapi/v3/apis/" + g + "/" + v) return OpenApiV3(g, v).dump();
    }
  }
  return std::nullopt;
}

}  // namespace hami::sim
