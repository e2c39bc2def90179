#include "sim/apiserver/apiserver.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/base64.h"
#include "net/http_server.h"
#include "sim/apiserver/certs.h"
#include "sim/apiserver/discovery.h"
#include "sim/apiserver/handlers.h"
#include "sim/apiserver/rbac.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/store.h"

namespace hami::sim {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Go binaries raise their soft open-file limit to the hard one at start; so does the sim API
// server, whose watches each hold a connection (hundreds of them).
void RaiseOpenFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

bool IsApiPath(const std::string& path) {
  return path.rfind("/api/", 0) == 0 || path.rfind("/apis/", 0) == 0;
}

// Whether `path` (an /api or /apis path) names one object or a subresource of one, not a
// collection: after /api/v1 or /apis/<group>/<version>, [namespaces/<ns>/]<resource>/<name>[/...]
// (namespaces/<ns> itself is one object).
bool NamesOneObject(std::string_view path) {
  size_t skip = path.rfind("/apis/", 0) == 0 ? 3 : 2;  // "apis", group, version / "api", version
  size_t count = 0;
  bool namespaced = false;
  for (size_t start = 1; start <= path.size();) {
    size_t end = std::min(path.find('/', start), path.size());
    if (end > start) {
      if (skip > 0) {
        --skip;
      } else if (count++ == 0) {
        namespaced = path.substr(start, end - start) == "namespaces";
      }
    }
    start = end + 1;
  }
  if (namespaced) return count == 2 || count >= 4;
  return count >= 2;
}

// The requests the event loop answers itself, without the hand-off to a worker and back (two
// thread wake-ups): reads and writes of one object with a body up to 64 KiB. Lists, watches,
// proxies, discovery and pod creates that call the admission webhook go to a worker.
bool ShortRequest(const net::Request& r, bool pods_admitted) {
  if (r.body.size() > (64 << 10) || !IsApiPath(r.path) || IsProxyPath(r.path)) return false;
  if (r.target.find("watch=") != std::string::npos) return false;
  if (r.method == "GET" || r.method == "DELETE") return NamesOneObject(r.path);
  if (r.method == "PATCH" || r.method == "PUT") return true;
  if (r.method == "POST") {
    const bool pod_create =
        r.path.size() >= 5 && r.path.compare(r.path.size() - 5, 5, "/pods") == 0;
    return !(pods_admitted && pod_create);
  }
  return false;
}

const rbac::UserInfo& AdminUser() {
  static const rbac::UserInfo admin{"hami-sim:admin", {"system:masters", "system:authenticated"}};
  return admin;
}

// The RBAC kinds the authorizer reads, in the order the policy is built from.
std::vector<const ResourceType*> RbacTypes() {
  std::vector<const ResourceType*> out;
  for (const char* plural : {"clusterroles", "clusterrolebindings", "roles", "rolebindings"}) {
    if (const ResourceType* t = FindResourceType("rbac.authorization.k8s.io", "v1", plural)) {
      out.push_back(t);
    }
  }
  return out;
}

// Runs tasks after a delay on one thread (the injected latency holds no worker meanwhile).
class DelayQueue {
 public:
  DelayQueue() : thread_([this] { Run(); }) {}
  ~DelayQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }
  void After(std::chrono::milliseconds delay, std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    tasks_.emplace(std::chrono::steady_clock::now() + delay, std::move(task));
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopped_) {
      if (tasks_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = tasks_.begin();
      if (std::chrono::steady_clock::now() < first->first) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      std::function<void()> task = std::move(first->second);
      tasks_.erase(first);
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> tasks_;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace

class ApiServer::Impl {
 public:
  explicit Impl(ApiServerOptions options)
      : options_(std::move(options)),
        store_(*options_.clock, options_.event_window),
        hub_(store_, options_.bookmark_interval, options_.drop_watch_every),
        rng_(std::random_device{}()) {}

  Status Start();
  void Stop();
  // The HTTP server on options_.host, at `port` (0: any); its routes.
  Status Listen(int port);
  void StopServing();
  Status ResumeServing();
  bool Authorized(const ApiRequest& req) const;
  // RBAC mode: the request's identity, or nullopt for a token this server never issued.
  std::optional<rbac::UserInfo> Authenticate(const ApiRequest& req) const;
  // RBAC mode: authenticates and authorises; the 401 or 403 to answer, or nullopt.
  std::optional<net::Response> Admit(const ApiRequest& req);
  // The policy built from the RBAC objects in the store, rebuilt when any of them changed.
  std::shared_ptr<const rbac::Policy> CurrentPolicy();
  void RecordForbidden(const rbac::Attributes& attrs);
  // Authentication, authorisation and fault injection: the reply that ends the request, or
  // nullopt to serve it.
  std::optional<net::Response> PreRoute(const ApiRequest& req);
  void Serve(net::Request request, const net::Responder& reply);
  void Route(const ApiRequest& req, const net::Responder& reply);

  ApiServerOptions options_;
  Store store_;
  WatchHub hub_;
  TlsFiles tls_;
  net::HttpServerOptions http_;  // Start()'s, for a restart
  std::mutex serving_mu_;        // server_ across StopServing/ResumeServing/Stop
  std::unique_ptr<net::HttpServer> server_;
  bool serving_ = false;  // serving_mu_
  int restarts_ = 0;      // serving_mu_
  std::unique_ptr<DelayQueue> delays_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;

  rbac::TokenAuthenticator tokens_;
  std::mutex policy_mu_;
  std::string policy_fingerprint_;  // the rbac objects' keys and resourceVersions
  std::shared_ptr<const rbac::Policy> policy_;
  mutable std::mutex forbidden_mu_;
  uint64_t forbidden_count_ = 0;
  std::vector<ForbiddenRequest> forbidden_;
  std::mutex admit_mu_;
  std::function<k8s::ApiResult<nlohmann::json>(const nlohmann::json&)> admit_pod_;  // admit_mu_
};

bool ApiServer::Impl::Authorized(const ApiRequest& req) const {
  if (!options_.tls) return true;
  if (req.http.peer_verified) return true;
  return req.Header("authorization") == "Bearer " + options_.token;
}

std::optional<rbac::UserInfo> ApiServer::Impl::Authenticate(const ApiRequest& req) const {
  if (req.http.peer_verified) return AdminUser();
  const std::string header = req.Header("authorization");
  // As kube-apiserver's bearer token authenticator: another scheme, or no token, is no
  // credential at all (anonymous); a token nobody issued is a 401.
  if (header.size() < 7 || ToLower(header.substr(0, 7)) != "bearer ") {
    return rbac::UserInfo{"system:anonymous", {"system:unauthenticated"}};
  }
  std::string token(Trim(std::string_view(header).substr(7)));
  if (token.empty()) return rbac::UserInfo{"system:anonymous", {"system:unauthenticated"}};
  if (token == options_.token) return AdminUser();
  return tokens_.Authenticate(token);
}

std::shared_ptr<const rbac::Policy> ApiServer::Impl::CurrentPolicy() {
  std::vector<ObjectPtr> objects;
  std::string fingerprint;
  for (const ResourceType* type : RbacTypes()) {
    auto page = store_.List(*type, "", ListFilter{}, 0, "");
    if (!page) continue;
    for (ObjectPtr& obj : page->items) {
      fingerprint += std::to_string(obj->rv) + ",";
      objects.push_back(std::move(obj));
    }
    fingerprint += ";";
  }
  std::lock_guard<std::mutex> lock(policy_mu_);
  if (policy_ && fingerprint == policy_fingerprint_) return policy_;
  auto policy = std::make_shared<rbac::Policy>();
  for (const ObjectPtr& obj : objects) {
    // kube-apiserver validates RBAC objects on write; the sim stores them as given, so one it
    // cannot read grants nothing.
    if (Status st = rbac::AddObject(*policy, obj->json); !st) {
      HAMI_WARN("apiserver: RBAC object ignored: {}", st.error());
    }
  }
  policy_ = std::move(policy);
  policy_fingerprint_ = std::move(fingerprint);
  return policy_;
}

void ApiServer::Impl::RecordForbidden(const rbac::Attributes& attrs) {
  ForbiddenRequest f{attrs.user.name, attrs.verb,
                     attrs.resource_request ? attrs.resource : attrs.path, attrs.subresource,
                     attrs.ns};
  std::lock_guard<std::mutex> lock(forbidden_mu_);
  ++forbidden_count_;
  if (std::find(forbidden_.begin(), forbidden_.end(), f) == forbidden_.end()) {
    forbidden_.push_back(std::move(f));
  }
}

std::optional<net::Response> ApiServer::Impl::Admit(const ApiRequest& req) {
  std::optional<rbac::UserInfo> user = Authenticate(req);
  if (!user) return net::Response{401, "application/json", rbac::UnauthorizedBody()};
  rbac::Attributes attrs = rbac::RequestAttributes(*user, req.method(), req.path(), req.params);
  rbac::Decision decision = rbac::Authorize(*CurrentPolicy(), attrs);
  if (decision.allowed) return std::nullopt;
  RecordForbidden(attrs);
  std::string body = rbac::ForbiddenBody(attrs, decision.reason);
  HAMI_WARN("apiserver: {} {}: 403 {}", req.method(), req.path(), body);
  return net::Response{403, "application/json", std::move(body)};
}

std::optional<net::Response> ApiServer::Impl::PreRoute(const ApiRequest& req) {
  if (options_.rbac) {
    if (auto denied = Admit(req)) return denied;
  } else if (!Authorized(req)) {
    return ErrorResponse(k8s::ApiError{401, k8s::kReasonUnauthorized, "Unauthorized"});
  }
  if (!IsApiPath(req.path())) return std::nullopt;
  if (options_.fail_request && options_.fail_request(req.method(), req.path())) {
    return ErrorResponse(k8s::ApiError{500, k8s::kReasonInternalError, "injected failure"});
  }
  if (options_.fail_rate > 0) {
    double roll;
    {
      std::lock_guard<std::mutex> lock(rng_mu_);
      roll = std::uniform_real_distribution<double>(0, 1)(rng_);
    }
    if (roll < options_.fail_rate) {
      return ErrorResponse(k8s::ApiError{500, k8s::kReasonInternalError, "injected failure"});
    }
  }
  return std::nullopt;
}

void ApiServer::Impl::Serve(net::Request request, const net::Responder& reply) {
  auto req = std::make_shared<ApiRequest>(std::move(request));
  try {
    if (auto done = PreRoute(*req)) return reply.Send(std::move(*done));
    if (options_.latency.count() > 0 && IsApiPath(req->path()) && delays_) {
      // The injected latency: the request waits on the delay queue, then goes back to a worker.
      delays_->After(options_.latency, [this, req, reply] {
        server_->Post([this, req, reply] { Route(*req, reply); });
      });
      return;
    }
    Route(*req, reply);
  } catch (const std::exception& e) {
    HAMI_WARN("apiserver: {} {}: {}", req->method(), req->path(), e.what());
    reply.Send(ErrorResponse(k8s::ApiError{500, k8s::kReasonInternalError, "internal error"}));
  }
}

void ApiServer::Impl::Route(const ApiRequest& req, const net::Responder& reply) {
  if (req.method() == "GET") {
    if (req.path() == "/healthz" || req.path() == "/readyz" || req.path() == "/livez") {
      return reply.Send(net::Response{200, "text/plain", "ok"});
    }
    if (req.path() == "/openapi/v2") {
      return reply.Send(
          net::Response{200, std::string(kOpenApiV2ContentType), OpenApiV2Protobuf()});
    }
    auto doc = DiscoveryDocument(req.path(), options_.host + ":" + std::to_string(port_));
    if (doc) return reply.Send(JsonResponse(200, *doc));
  }
  if (IsProxyPath(req.path())) return reply.Send(HandleProxy(store_, req));
  if (IsApiPath(req.path())) {
    HandlerConfig config{options_.bookmark_interval, options_.drop_watch_every, &stopping_, &hub_,
                         nullptr};
    {
      std::lock_guard lock(admit_mu_);
      config.admit_pod = admit_pod_;
    }
    return HandleResourceRequest(store_, config, req, reply);
  }
  reply.Send(ErrorResponse(k8s::ApiError{404, k8s::kReasonNotFound,
                                         "the server could not find the requested resource"}));
}

Status ApiServer::Impl::Start() {
  net::HttpServerOptions http;
  http.name = "apiserver";
  http.workers = std::max<size_t>(1, options_.threads);
  http.max_connections = options_.max_connections;
  http.worker_stack_bytes = 64 << 20;  // JSON at the depth limit under ASan (docs/INPUT_LIMITS.md)
  http.idle_timeout = std::chrono::seconds(90);
  if (options_.tls) {
    auto files = GenerateTlsFiles(options_.cert_dir);
    if (!files) return std::move(files).take_error();
    tls_ = *files;
    std::string ca = tls_.ca_cert, crt = tls_.server_cert, key = tls_.server_key;
    // Client certificates are verified when sent but not required, so token auth also works.
    http.tls_setup = [ca, crt, key](SSL_CTX* ctx) -> Status {
      if (SSL_CTX_use_certificate_chain_file(ctx, crt.c_str()) != 1 ||
          SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1 ||
          SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1) {
        return Error{"apiserver: TLS setup failed"};
      }
      SSL_CTX_set_client_CA_list(ctx, SSL_load_client_CA_file(ca.c_str()));
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
      return OkStatus();
    };
  }
  RaiseOpenFileLimit();
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    (void)store_.Create(NamespaceType(), "", Json{{"metadata", {{"name", ns}}}});
  }
  if (options_.rbac) {
    for (const Json& obj : rbac::BootstrapObjects()) {
      const std::string plural =
          obj["kind"] == "ClusterRole" ? "clusterroles" : "clusterrolebindings";
      const ResourceType* type = FindResourceType("rbac.authorization.k8s.io", "v1", plural);
      if (type == nullptr) return Error{"apiserver: rbac needs " + plural + " served"};
      if (auto created = store_.Create(*type, "", obj); !created) {
        return Error{"apiserver: bootstrap " + plural + ": " + created.error().ToString()};
      }
    }
  }
  if (options_.latency.count() > 0) delays_ = std::make_unique<DelayQueue>();
  http_ = std::move(http);
  std::lock_guard<std::mutex> lock(serving_mu_);
  return Listen(options_.port);
}

Status ApiServer::Impl::Listen(int port) {
  auto server = std::make_unique<net::HttpServer>(http_);
  auto serve = [this](net::Request request, net::Responder reply) {
    Serve(std::move(request), reply);
  };
  // Health checks are answered on the event loop, whatever the workers are doing.
  for (const char* path : {"/healthz", "/readyz", "/livez"}) {
    server->Route("GET", path, net::RouteOptions{0, true}, serve);
  }
  // Without fault injection (whose hooks block or sleep) the loop answers short requests itself
  // and hands the rest to a worker.
  const bool on_loop =
      !options_.fail_request && options_.fail_rate <= 0 && options_.latency.count() == 0;
  net::HttpServer* raw = server.get();
  auto serve_or_post = [this, raw](net::Request request, net::Responder reply) {
    bool admitted = false;  // only a POST (a create) may go through the webhook
    if (request.method == "POST") {
      std::lock_guard lock(admit_mu_);
      admitted = static_cast<bool>(admit_pod_);
    }
    if (ShortRequest(request, admitted)) return Serve(std::move(request), reply);
    auto moved = std::make_shared<net::Request>(std::move(request));
    raw->Post([this, moved, reply] { Serve(std::move(*moved), reply); });
  };
  if (on_loop) {
    server->Fallback(net::RouteOptions{options_.max_body_bytes, true}, serve_or_post);
  } else {
    server->Fallback(net::RouteOptions{options_.max_body_bytes, false}, serve);
  }
  auto bound = server->Listen(options_.host, port);
  if (!bound) return std::move(bound).take_error();
  server_ = std::move(server);
  serving_ = true;
  if (port_ != *bound) port_ = *bound;  // a restart binds the same port
  HAMI_INFO("apiserver: serving on {}://{}:{}", options_.tls ? "https" : "http", options_.host,
            port_);
  return OkStatus();
}

void ApiServer::Impl::StopServing() {
  std::lock_guard<std::mutex> lock(serving_mu_);
  if (!serving_ || stopping_.load()) return;
  serving_ = false;
  if (server_) server_->Stop();  // the hub drops the watches whose streams it closed
  store_.CompactHistory();
  HAMI_INFO("apiserver: stopped serving (restart); watch history compacted at {}",
            store_.resource_version());
}

Status ApiServer::Impl::ResumeServing() {
  std::lock_guard<std::mutex> lock(serving_mu_);
  if (serving_ || stopping_.load()) return OkStatus();
  Status st = OkStatus();
  // The old listener's port may linger a moment; kube-apiserver's restart binds the same one.
  for (int attempt = 0; attempt < 50; ++attempt) {
    st = Listen(port_);
    if (st) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!st) return st;
  ++restarts_;
  return OkStatus();
}

void ApiServer::Impl::Stop() {
  if (stopping_.exchange(true)) return;
  store_.Shutdown();
  hub_.Stop();
  delays_.reset();
  std::lock_guard<std::mutex> lock(serving_mu_);
  if (server_) server_->Stop();
  serving_ = false;
}

ApiServer::ApiServer(ApiServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
ApiServer::~ApiServer() { Stop(); }
Status ApiServer::Start() { return impl_->Start(); }
void ApiServer::Stop() { impl_->Stop(); }
void ApiServer::SetPodAdmission(
    std::function<k8s::ApiResult<nlohmann::json>(const nlohmann::json&)> admit) {
  std::lock_guard lock(impl_->admit_mu_);
  impl_->admit_pod_ = std::move(admit);
}
void ApiServer::StopServing() { impl_->StopServing(); }
Status ApiServer::ResumeServing() { return impl_->ResumeServing(); }
int ApiServer::restarts() const {
  std::lock_guard<std::mutex> lock(impl_->serving_mu_);
  return impl_->restarts_;
}
int ApiServer::port() const { return impl_->port_; }
Store& ApiServer::store() { return impl_->store_; }
std::string ApiServer::IssueToken(const rbac::UserInfo& user) { return impl_->tokens_.Issue(user); }

uint64_t ApiServer::forbidden_count() const {
  std::lock_guard<std::mutex> lock(impl_->forbidden_mu_);
  return impl_->forbidden_count_;
}

std::vector<ForbiddenRequest> ApiServer::ForbiddenRequests() const {
  std::lock_guard<std::mutex> lock(impl_->forbidden_mu_);
  return impl_->forbidden_;
}
const std::string& ApiServer::token() const { return impl_->options_.token; }
std::string ApiServer::ca_file() const { return impl_->tls_.ca_cert; }
std::string ApiServer::client_cert_file() const { return impl_->tls_.client_cert; }
std::string ApiServer::client_key_file() const { return impl_->tls_.client_key; }

std::string ApiServer::url() const {
  return std::string(impl_->options_.tls ? "https://" : "http://") + impl_->options_.host + ":" +
         std::to_string(impl_->port_);
}

std::string ApiServer::Kubeconfig() const {
  std::string cluster = "    server: " + url() + "\n";
  std::string user = "  user: {}\n";
  if (impl_->options_.tls) {
    cluster +=
        "    certificate-authority-data: " + k8s::Base64Encode(ReadFile(impl_->tls_.ca_cert)) +
        "\n";
    user = "  user:\n    client-certificate-data: " +
           k8s::Base64Encode(ReadFile(impl_->tls_.client_cert)) +
           "\n    client-key-data: " + k8s::Base64Encode(ReadFile(impl_->tls_.client_key)) + "\n";
  } else if (impl_->options_.rbac) {
    user = "  user:\n    token: " + impl_->options_.token + "\n";  // the admin
  }
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: hami-sim\n  cluster:\n" + cluster +
         "users:\n- name: hami-sim\n" + user +
         "contexts:\n- name: hami-sim\n  context:\n    cluster: hami-sim\n    user: hami-sim\n"
         "    namespace: default\ncurrent-context: hami-sim\npreferences: {}\n";
}

Status ApiServer::WriteKubeconfig(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  out << Kubeconfig();
  out.close();
  if (!out) return Error{"kubeconfig-out " + Quote(path) + ": cannot write"};
  return OkStatus();
}

}  // namespace hami::sim
