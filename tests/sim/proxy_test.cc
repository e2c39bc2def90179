// The API server's proxy subresource (what `kubectl hami top` reads the monitors' /metrics
// through): pods/{name}[:{port}]/proxy/{path} and services/{name}[:{port}]/proxy/{path}
// forwarded to the pod's IP and port, status and body passed back; 503 when nothing answers;
// RBAC verb get on pods/proxy.
#include <httplib.h>

#include <gtest/gtest.h>

#include "net/http_server.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/rbac.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/store.h"

namespace hami::sim {
namespace {

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override { StartApi(ApiServerOptions{}); }

  void StartApi(ApiServerOptions options) {
    api_ = std::make_unique<ApiServer>(options);
    auto started = api_->Start();
    ASSERT_TRUE(started) << started.error();
    // The "pod": a tiny HTTP server on loopback.
    backend_ = std::make_unique<net::HttpServer>(net::HttpServerOptions{});
    backend_->Route("GET", "/metrics", net::RouteOptions{}, [](net::Request q, net::Responder r) {
      r.Send(net::Response{200, "text/plain; version=0.0.4",
                           "hami_up 1\n# target " + q.target + "\n"});
    });
    backend_->Route("POST", "/echo", net::RouteOptions{}, [](net::Request q, net::Responder r) {
      r.Send(net::Response{202, "application/json", q.body});
    });
    auto port = backend_->Listen("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    backend_port_ = *port;
  }

  // A pod with a container port named "metrics" on the backend's port, and (unless `ip` is
  // empty) status.podIP.
  void CreatePod(const std::string& name, const std::string& ip, int port) {
    const ResourceType& pods = *FindResourceType("", "v1", "pods");
    Json pod = {{"metadata", {{"name", name}, {"labels", {{"app", "monitor"}}}}},
                {"spec",
                 {{"containers",
                   {{{"name", "c"},
                     {"image", "i"},
                     {"ports",
                      {{{"name", "other"}, {"containerPort", 1}},
                       {{"name", "metrics"}, {"containerPort", port}}}}}}}}}};
    ASSERT_TRUE(api_->store().Create(pods, "default", pod));
    if (ip.empty()) return;
    ASSERT_TRUE(api_->store().Update(pods, "default", name, [&](const Json& cur) {
      Json next = cur;
      next["status"]["podIP"] = ip;
      return k8s::ApiResult<Json>(next);
    }));
  }

  httplib::Result Get(const std::string& path, const std::string& token = "") {
    httplib::Client http("127.0.0.1", api_->port());
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    return http.Get(path, headers);
  }

  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<net::HttpServer> backend_;
  int backend_port_ = 0;
};

TEST_F(ProxyTest, ForwardsToThePodsIpAndNamedOrNumberedPort) {
  CreatePod("mon", "127.0.0.1", backend_port_);
  const std::string base = "/api/v1/namespaces/default/pods/";
  for (const std::string& name :
       {std::string("mon:metrics"), "mon:" + std::to_string(backend_port_),
        "http:mon:" + std::to_string(backend_port_)}) {
    auto r = Get(base + name + "/proxy/metrics?x=1");
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(r->status, 200) << name << ": " << r->body;
    EXPECT_EQ(r->body, "hami_up 1\n# target /metrics?x=1\n") << name;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  }
  // The upstream's status passes through: 404 for a path it does not serve, 202 for a POST.
  auto missing = Get(base + "mon:metrics/proxy/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  httplib::Client http("127.0.0.1", api_->port());
  auto posted = http.Post(base + "mon:metrics/proxy/echo", "{\"a\":1}", "application/json");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 202);
  EXPECT_EQ(posted->body, "{\"a\":1}");
}

TEST_F(ProxyTest, WithoutAPortTheFirstContainerPortIsUsed) {
  CreatePod("first", "127.0.0.1", backend_port_);  // its first port is 1: nothing listens
  auto r = Get("/api/v1/namespaces/default/pods/first/proxy/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(r->body.find("127.0.0.1:1"), std::string::npos) << r->body;
}

TEST_F(ProxyTest, NothingAnsweringIs503AndAMissingPodIs404) {
  CreatePod("no-ip", "", backend_port_);
  auto r = Get("/api/v1/namespaces/default/pods/no-ip:metrics/proxy/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("has no IP"), std::string::npos) << r->body;
  r = Get("/api/v1/namespaces/default/pods/ghost/proxy/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  CreatePod("mon", "127.0.0.1", backend_port_);
  r = Get("/api/v1/namespaces/default/pods/mon:nope/proxy/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  backend_->Stop();
  r = Get("/api/v1/namespaces/default/pods/mon:metrics/proxy/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("error trying to reach pod \\\"mon\\\""), std::string::npos) << r->body;
}

TEST_F(ProxyTest, ServiceProxyGoesToASelectedPod) {
  CreatePod("mon", "127.0.0.1", backend_port_);
  const ResourceType& services = *FindResourceType("", "v1", "services");
  ASSERT_TRUE(api_->store().Create(
      services, "default",
      Json{{"metadata", {{"name", "hami-monitor"}}},
           {"spec",
            {{"selector", {{"app", "monitor"}}},
             {"ports", {{{"name", "http"}, {"port", 9394}, {"targetPort", "metrics"}}}}}}}));
  for (const char* name : {"hami-monitor", "hami-monitor:http", "hami-monitor:9394"}) {
    auto r = Get(std::string("/api/v1/namespaces/default/services/") + name + "/proxy/metrics");
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(r->status, 200) << name << ": " << r->body;
  }
  auto r = Get("/api/v1/namespaces/default/services/hami-monitor:nope/proxy/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
}

TEST(ProxyRbacTest, NeedsGetOnPodsProxy) {
  ApiServerOptions options;
  options.rbac = true;
  ApiServer api(options);
  ASSERT_TRUE(api.Start());
  net::HttpServer backend(net::HttpServerOptions{});
  backend.Route("GET", "/metrics", net::RouteOptions{}, [](net::Request, net::Responder r) {
    r.Send(net::Response{200, "text/plain", "ok"});
  });
  auto port = backend.Listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  const ResourceType& pods = *FindResourceType("", "v1", "pods");
  ASSERT_TRUE(api.store().Create(
      pods, "default",
      Json{{"metadata", {{"name", "mon"}}},
           {"spec",
            {{"containers",
              {{{"name", "c"}, {"ports", {{{"name", "metrics"}, {"containerPort", *port}}}}}}}}},
           {"status", {{"podIP", "127.0.0.1"}}}}));
  ASSERT_TRUE(api.store().Update(pods, "default", "mon", [](const Json& cur) {
    Json next = cur;
    next["status"]["podIP"] = "127.0.0.1";
    return k8s::ApiResult<Json>(next);
  }));
  auto rbac_type = [](const char* plural) {
    return FindResourceType("rbac.authorization.k8s.io", "v1", plural);
  };
  ASSERT_TRUE(api.store().Create(
      *rbac_type("clusterroles"), "",
      Json{{"metadata", {{"name", "pods-only"}}},
           {"rules", {{{"apiGroups", {""}}, {"resources", {"pods"}}, {"verbs", {"get"}}}}}}));
  ASSERT_TRUE(api.store().Create(
      *rbac_type("clusterroles"), "",
      Json{{"metadata", {{"name", "proxy"}}},
           {"rules", {{{"apiGroups", {""}}, {"resources", {"pods/proxy"}}, {"verbs", {"get"}}}}}}));
  for (const char* user : {"pods-only", "proxy"}) {
    ASSERT_TRUE(api.store().Create(
        *rbac_type("clusterrolebindings"), "",
        Json{{"metadata", {{"name", user}}},
             {"roleRef",
              {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", user}}},
             {"subjects", {{{"kind", "User"}, {"name", user}}}}}));
  }
  auto get = [&](const std::string& user) {
    httplib::Client http("127.0.0.1", api.port());
    std::string token = api.IssueToken(rbac::UserInfo{user, {"system:authenticated"}});
    return http.Get("/api/v1/namespaces/default/pods/mon:metrics/proxy/metrics",
                    httplib::Headers{{"Authorization", "Bearer " + token}});
  };
  auto denied = get("pods-only");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403);
  EXPECT_NE(denied->body.find("cannot get resource \\\"pods/proxy\\\""), std::string::npos)
      << denied->body;
  auto allowed = get("proxy");
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->status, 200) << allowed->body;
  EXPECT_EQ(allowed->body, "ok");
}

}  // namespace
}  // namespace hami::sim
