#include "sim/apiserver.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/base64.h"
#include "sim/certs.h"
#include "sim/discovery.h"
#include "sim/handlers.h"
#include "sim/rbac.h"
#include "sim/resources.h"
#include "sim/store.h"

namespace hami::sim {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool IsApiPath(const std::string& path) {
  return path.rfind("/api/", 0) == 0 || path.rfind("/apis/", 0) == 0;
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

}  // namespace

class ApiServer::Impl {
 public:
  explicit Impl(ApiServerOptions options)
      : options_(std::move(options)),
        store_(*options_.clock, options_.event_window),
        rng_(std::random_device{}()) {}

  Status Start();
  void Stop();
  bool ClientCertVerified(const httplib::Request& req) const;
  bool Authorized(const httplib::Request& req) const;
  // RBAC mode: the request's identity, or nullopt for a token this server never issued.
  std::optional<rbac::UserInfo> Authenticate(const httplib::Request& req) const;
  // RBAC mode: authenticates and authorises; false when `res` already holds the 401 or 403.
  bool Admit(const httplib::Request& req, httplib::Response& res);
  // The policy built from the RBAC objects in the store, rebuilt when any of them changed.
  std::shared_ptr<const rbac::Policy> CurrentPolicy();
  void RecordForbidden(const rbac::Attributes& attrs);
  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res);
  void Route(const httplib::Request& req, httplib::Response& res);

  ApiServerOptions options_;
  Store store_;
  TlsFiles tls_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
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
};

bool ApiServer::Impl::ClientCertVerified(const httplib::Request& req) const {
  if (req.ssl == nullptr) return false;
  X509* peer = SSL_get_peer_certificate(req.ssl);
  bool verified = peer != nullptr && SSL_get_verify_result(req.ssl) == X509_V_OK;
  X509_free(peer);
  return verified;
}

bool ApiServer::Impl::Authorized(const httplib::Request& req) const {
  if (!options_.tls) return true;
  if (ClientCertVerified(req)) return true;
  return req.get_header_value("Authorization") == "Bearer " + options_.token;
}

std::optional<rbac::UserInfo> ApiServer::Impl::Authenticate(const httplib::Request& req) const {
  if (ClientCertVerified(req)) return AdminUser();
  const std::string header = req.get_header_value("Authorization");
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

bool ApiServer::Impl::Admit(const httplib::Request& req, httplib::Response& res) {
  std::optional<rbac::UserInfo> user = Authenticate(req);
  if (!user) {
    res.status = 401;
    res.set_content(rbac::UnauthorizedBody(), "application/json");
    return false;
  }
  rbac::Attributes attrs = rbac::RequestAttributes(*user, req.method, req.path, req.params);
  rbac::Decision decision = rbac::Authorize(*CurrentPolicy(), attrs);
  if (decision.allowed) return true;
  RecordForbidden(attrs);
  std::string body = rbac::ForbiddenBody(attrs, decision.reason);
  HAMI_WARN("apiserver: {} {}: 403 {}", req.method, req.path, body);
  res.status = 403;
  res.set_content(body, "application/json");
  return false;
}

httplib::Server::HandlerResponse ApiServer::Impl::PreRoute(const httplib::Request& req,
                                                           httplib::Response& res) {
  if (options_.rbac) {
    if (!Admit(req, res)) return httplib::Server::HandlerResponse::Handled;
  } else if (!Authorized(req)) {
    ReplyError(res, k8s::ApiError{401, k8s::kReasonUnauthorized, "Unauthorized"});
    return httplib::Server::HandlerResponse::Handled;
  }
  if (!IsApiPath(req.path)) return httplib::Server::HandlerResponse::Unhandled;
  if (options_.latency.count() > 0) std::this_thread::sleep_for(options_.latency);
  if (options_.fail_request && options_.fail_request(req.method, req.path)) {
    ReplyError(res, k8s::ApiError{500, k8s::kReasonInternalError, "injected failure"});
    return httplib::Server::HandlerResponse::Handled;
  }
  if (options_.fail_rate > 0) {
    double roll;
    {
      std::lock_guard<std::mutex> lock(rng_mu_);
      roll = std::uniform_real_distribution<double>(0, 1)(rng_);
    }
    if (roll < options_.fail_rate) {
      ReplyError(res, k8s::ApiError{500, k8s::kReasonInternalError, "injected failure"});
      return httplib::Server::HandlerResponse::Handled;
    }
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

void ApiServer::Impl::Route(const httplib::Request& req, httplib::Response& res) {
  if (req.method == "GET") {
    if (req.path == "/healthz" || req.path == "/readyz" || req.path == "/livez") {
      res.set_content("ok", "text/plain");
      return;
    }
    if (req.path == "/openapi/v2") {
      res.set_content(OpenApiV2Protobuf(), std::string(kOpenApiV2ContentType));
      return;
    }
    auto doc = DiscoveryDocument(req.path, options_.host + ":" + std::to_string(port_));
    if (doc) return ReplyJson(res, 200, *doc);
  }
  if (IsApiPath(req.path)) {
    HandlerConfig config{options_.bookmark_interval, options_.drop_watch_every, &stopping_};
    return HandleResourceRequest(store_, config, req, res);
  }
  ReplyError(res, k8s::ApiError{404, k8s::kReasonNotFound,
                                "the server could not find the requested resource"});
}

Status ApiServer::Impl::Start() {
  if (options_.tls) {
    auto files = GenerateTlsFiles(options_.cert_dir);
    if (!files) return std::move(files).take_error();
    tls_ = *files;
    std::string ca = tls_.ca_cert, crt = tls_.server_cert, key = tls_.server_key;
    // Client certificates are verified when sent but not required, so token auth also works.
    server_ = std::make_unique<httplib::SSLServer>([ca, crt, key](SSL_CTX& ctx) {
      if (SSL_CTX_use_certificate_chain_file(&ctx, crt.c_str()) != 1) return false;
      if (SSL_CTX_use_PrivateKey_file(&ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) return false;
      if (SSL_CTX_load_verify_locations(&ctx, ca.c_str(), nullptr) != 1) return false;
      SSL_CTX_set_client_CA_list(&ctx, SSL_load_client_CA_file(ca.c_str()));
      SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
      return true;
    });
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) return Error{"apiserver: TLS setup failed"};
  size_t threads = options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(64 << 20);
  server_->set_keep_alive_timeout(2);
  server_->set_tcp_nodelay(true);  // else Nagle + delayed ACKs add 40 ms to small replies
  server_->set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return PreRoute(req, res); });
  auto route = [this](const httplib::Request& req, httplib::Response& res) { Route(req, res); };
  server_->Get(".*", route).Post(".*", route).Put(".*", route).Patch(".*", route);
  server_->Delete(".*", route);
  server_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        ReplyError(res, k8s::ApiError{500, k8s::kReasonInternalError, "internal error"});
      });
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
  } else {
    port_ = server_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    return Error{"apiserver: cannot listen on " +
                 Quote(options_.host + ":" + std::to_string(options_.port))};
  }
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
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_->is_running()) {
    if (std::chrono::steady_clock::now() > give_up) return Error{"apiserver: did not start"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  HAMI_INFO("apiserver: serving on {}://{}:{}", options_.tls ? "https" : "http", options_.host,
            port_);
  return OkStatus();
}

void ApiServer::Impl::Stop() {
  if (stopping_.exchange(true)) return;
  store_.Shutdown();
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

ApiServer::ApiServer(ApiServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
ApiServer::~ApiServer() { Stop(); }
Status ApiServer::Start() { return impl_->Start(); }
void ApiServer::Stop() { impl_->Stop(); }
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
