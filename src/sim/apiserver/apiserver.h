// `hami-sim apiserver`: an in-memory Kubernetes API server over HTTP(S) that kubectl and our
// client speak to, on net::HttpServer (docs/SIM_APISERVER.md, docs/SECURITY.md). Start() binds
// (port 0 = ephemeral) and serves on background threads until Stop() or destruction.
#ifndef HAMI_SIM_APISERVER_H_
#define HAMI_SIM_APISERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "k8s/api_error.h"
#include "sim/apiserver/rbac.h"

namespace hami::sim {

class Store;

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: pick a free port
  // Serve HTTPS with a CA, server and client certificate generated at Start() into `cert_dir`
  // (must be writable). Clients authenticate with the client certificate or `token`.
  bool tls = false;
  std::string cert_dir;
  std::string token = "hami-sim-token";
  // Watches can resume from this many most recent events; older resourceVersions get 410.
  size_t event_window = 10000;
  // How often watches that asked for bookmarks get one.
  std::chrono::milliseconds bookmark_interval{1000};
  // Worker threads for lists, gets and writes (net::HttpServer). Open watches hold none: each
  // is a stream fed by one thread per watched resource type (WatchHub).
  size_t threads = 16;
  // Connections open at once; past it new ones are closed at once (the open-file limit, raised
  // to its hard limit at Start(), caps it too).
  size_t max_connections = 4096;
  // A request body's cap after chunked decoding, kube-apiserver's default (3 MiB): 413 past it.
  size_t max_body_bytes = 3 << 20;
  // Fault injection: fraction of API requests (not watches' events) answered 500; latency added
  // to every API request; close each watch stream after this many events (0 = never).
  double fail_rate = 0;
  std::chrono::milliseconds latency{0};
  int drop_watch_every = 0;
  // Fault injection for tests: a request (method, path) it returns true for is answered 500.
  std::function<bool(const std::string& method, const std::string& path)> fail_request{};
  const Clock* clock = &RealClock();
  // Kubernetes RBAC (docs/RBAC.md, sim/apiserver/rbac.h). Every request is authenticated: `token`
  // or a verified client certificate is the admin (group system:masters), a token from IssueToken()
  // is its identity, no credentials is system:anonymous, any other token gets 401. Then it is
  // authorised against the ClusterRoles, Roles and bindings in the store; Start() creates the
  // bootstrap ones kube-apiserver creates. A denial gets kube-apiserver's 403 and is counted.
  bool rbac = false;
};

using rbac::ForbiddenRequest;

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and starts serving; returns once the server accepts connections. Creates the
  // namespaces default, kube-system, kube-public and kube-node-lease.
  Status Start();
  // Ends open watches and stops serving. Idempotent.
  void Stop();
  // From now on every pod create goes through `admit` first (HandlerConfig::admit_pod): what
  // `hami-sim run --serve` installs so that kubectl's pods meet HAMi's webhook.
  void SetPodAdmission(std::function<k8s::ApiResult<nlohmann::json>(const nlohmann::json&)> admit);

  // A restart (hami-sim's restartApiServer, docs/RELIABILITY.md): StopServing closes the
  // listener and every connection as a killed kube-apiserver leaves them (requests in flight get
  // no answer, watch streams break without their end) and forgets the watch history
  // (Store::CompactHistory: a watch from an older resourceVersion gets 410, so clients relist);
  // the objects stay. ResumeServing serves again on the same port. No-ops when already so.
  void StopServing();
  Status ResumeServing();
  // Times ResumeServing served again.
  int restarts() const;

  int port() const;
  // "http://127.0.0.1:<port>" (https under tls).
  std::string url() const;
  // A kubeconfig (YAML) that points at this server with its credentials inlined.
  std::string Kubeconfig() const;
  Status WriteKubeconfig(const std::string& path) const;
  // PEM paths under cert_dir; empty without tls.
  std::string ca_file() const;
  std::string client_cert_file() const;
  std::string client_key_file() const;
  const std::string& token() const;

  // Direct access to the storage, for tests and for hami-sim's in-process components.
  Store& store();

  // Under rbac: the bearer token of `user`, issued on the first call, the same one afterwards.
  std::string IssueToken(const rbac::UserInfo& user);
  // Under rbac: how many requests were denied, and the distinct denials (user, verb, resource,
  // subresource, namespace) in the order first seen.
  uint64_t forbidden_count() const;
  std::vector<ForbiddenRequest> ForbiddenRequests() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_APISERVER_H_
