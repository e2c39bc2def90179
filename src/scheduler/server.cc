#include "scheduler/server.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <set>
#include <utility>

#include "common/log.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "device/pod_view.h"
#include "k8s/object.h"
#include "protocol/keys.h"
#include "scheduler/cert_reloader.h"
#include "scheduler/scheduler_role.h"

namespace hami::scheduler {

using nlohmann::json;

ServerOptions::ServerOptions() = default;

bool LeaseHeldBy(const json& lease, const std::string& identity, SystemTime now) {
  if (!lease.is_object() || !lease.contains("spec") || !lease["spec"].is_object()) return false;
  const json& spec = lease["spec"];
  std::string holder = spec.value("holderIdentity", "");
  if (identity.empty() || holder.rfind(identity, 0) != 0) return false;
  if (!spec.contains("renewTime") || !spec["renewTime"].is_string()) return false;
  std::string renew = spec["renewTime"].get<std::string>();
  Result<ZonedTime> t = ParseRfc3339(renew);
  if (!t) return false;
  int64_t seconds = spec.value("leaseDurationSeconds", 0);
  return t->instant + std::chrono::seconds(seconds) > now;
}

namespace {

// Replies `r` and records the latency since `start` in `h`.
void Reply(const net::Responder& responder, const HttpReply& r, LatencyHistogram& h,
           std::chrono::steady_clock::time_point start) {
  h.Observe(std::chrono::steady_clock::now() - start);
  responder.Send(net::Response{r.status, "application/json", r.body});
}

void RouteHealth(net::HttpServer& server, std::function<bool()> ready) {
  net::RouteOptions inline_route;
  inline_route.max_body = 0;
  inline_route.inline_handler = true;
  server.Route("GET", "/healthz", inline_route, [](net::Request, net::Responder r) {
    r.Send(net::Response{200, "text/plain", "ok"});
  });
  server.Route("GET", "/readyz", inline_route, [ready](net::Request, net::Responder r) {
    if (ready()) {
      r.Send(net::Response{200, "text/plain", "ok"});
    } else {
      r.Send(net::Response{503, "text/plain", "not ready: no registration pass yet\n"});
    }
  });
}

}  // namespace

class Server::Http {
 public:
  struct ParkedFilter {
    std::string body;
    net::Responder responder;
    std::chrono::steady_clock::time_point start;
    std::chrono::steady_clock::time_point deadline;
  };
  std::unique_ptr<net::HttpServer> api;
  std::unique_ptr<net::HttpServer> metrics;
  std::deque<ParkedFilter> parked;  // guarded by Server::mu_
  std::thread waiter;
};

Server::Server(k8s::Client& client, device::DeviceConfig config, ServerOptions options,
               const Clock& clock)
    : Server(client, client, std::move(config), std::move(options), clock) {}

Server::Server(k8s::Client& client, k8s::Client& registration_client, device::DeviceConfig config,
               ServerOptions options, const Clock& clock)
    : client_(client),
      config_(std::move(config)),
      options_(std::move(options)),
      clock_(clock),
      registry_(device::MakeRegistry(config_)) {
  registrar_ = std::make_unique<Registrar>(registry_, index_, registration_client, clock_,
                                           options_.registration);
  ExtenderOptions extender_options = options_.extender;
  extender_options.seen_node = [this](std::string_view node) { return SeenNode(node); };
  extender_ = std::make_unique<Extender>(registry_, index_, client_, clock_, extender_options,
                                         [this](const std::string& ns) { return Quota(ns); });
}

Status Server::EnsureClaimTemplate(const json& claim_template) {
  const std::string ns = claim_template.value("/metadata/namespace"_json_pointer, std::string());
  const std::string name = claim_template.value("/metadata/name"_json_pointer, std::string());
  const std::string key = ns + "/" + name;
  {
    std::lock_guard<std::mutex> lock(templates_mu_);
    if (ensured_templates_.count(key) != 0) return OkStatus();  // no API call per admission
  }
  auto created = client_.Create(k8s::resources::kResourceClaimTemplates, ns, claim_template);
  if (created || k8s::IsAlreadyExists(created.error())) {
    std::lock_guard<std::mutex> lock(templates_mu_);
    ensured_templates_.insert(key);
    return OkStatus();
  }
  return Error{"create resourceclaimtemplate " + ns + "/" + name + ": " +
               created.error().ToString()};
}

device::NamespaceQuota Server::Quota(const std::string& ns) {
  std::vector<std::string> tracked;
  for (const device::Device* dev : registry_.All()) {
    if (!dev->Info().memory_resource.empty()) tracked.push_back(dev->Info().memory_resource);
    if (!dev->Info().core_resource.empty()) tracked.push_back(dev->Info().core_resource);
  }
  std::map<std::string, int64_t> limits;
  if (quotas_ != nullptr) {
    for (const k8s::ObjectRef& q : quotas_->List()) {
      if (k8s::Namespace(*q) != ns || !q->contains("spec") || !(*q)["spec"].is_object()) continue;
      std::map<std::string, std::string> hard;
      const json& spec = (*q)["spec"];
      if (spec.contains("hard") && spec["hard"].is_object()) {
        for (auto& [k, v] : spec["hard"].items()) {
          if (v.is_string()) hard[k] = v.get<std::string>();
          if (v.is_number_integer()) hard[k] = std::to_string(v.get<int64_t>());
        }
      }
      auto parsed = device::QuotaLimitsFromHard(hard, tracked);
      if (!parsed) continue;
      // Several quotas in one namespace: the tightest limit wins.
      for (const auto& [k, v] : *parsed) {
        auto it = limits.find(k);
        if (it == limits.end() || v < it->second) limits[k] = v;
      }
    }
  }
  return device::NamespaceQuotaFor(registry_, limits, index_.NamespaceUsage(ns));
}

Server::~Server() { Stop(); }

std::optional<nodelock::SeenNode> Server::SeenNode(std::string_view node) const {
  const k8s::Informer* nodes = seen_nodes_.load();
  if (nodes == nullptr) return std::nullopt;
  k8s::ObjectRef n = nodes->Get(std::string(node));
  if (!n) return std::nullopt;
  return nodelock::SeenNode{k8s::ResourceVersion(*n), k8s::Annotation(*n, protocol::kNodeLockKey)};
}

Status Server::Start() {
  std::string host, mhost;
  int port = 0, mport = 0;
  if (!net::SplitHostPort(options_.http_bind, &host, &port)) {
    return Error{"--http_bind: want host:port, got " + Quote(options_.http_bind)};
  }
  const bool with_metrics = !options_.metrics_bind.empty();
  if (with_metrics && !net::SplitHostPort(options_.metrics_bind, &mhost, &mport)) {
    return Error{"--metrics-bind-address: want host:port, got " + Quote(options_.metrics_bind)};
  }
  http_ = std::make_unique<Http>();
  if (Status s = ServeApi(host, port); !s) return s;
  if (with_metrics) {
    if (Status s = ServeMetrics(mhost, mport); !s) return s;
  }
  StartInformers();
  started_ = true;
  loop_ = std::thread([this] { Loop(); });
  return OkStatus();
}

Status Server::ServeApi(const std::string& host, int port) {
  net::HttpServerOptions api_options;
  api_options.name = "--http_bind";
  api_options.workers = options_.http_workers;
  api_options.max_connections = options_.max_connections;
  api_options.max_connections_per_peer = options_.max_connections_per_peer;
  api_options.max_pending_bytes = options_.max_pending_body_bytes;
  if (!options_.cert_file.empty() && !options_.key_file.empty()) {
    auto certs = CertReloader::Create(options_.cert_file, options_.key_file);
    if (!certs) return std::move(certs).take_error();
    certs_ = std::move(*certs);
    CertReloader* reloader = certs_.get();
    api_options.tls_setup = [reloader](SSL_CTX* ctx) {
      reloader->Install(ctx);
      return OkStatus();
    };
  }
  http_->api = std::make_unique<net::HttpServer>(api_options);
  RouteApi(*http_->api);
  http_->waiter = std::thread([this] { FilterWaiter(); });
  auto bound = http_->api->Listen(host, port);
  if (!bound) return Error{"--http_bind: " + bound.error()};
  port_ = *bound;
  return OkStatus();
}

void Server::RouteApi(net::HttpServer& api) {
  net::RouteOptions filter_route, other_route;
  filter_route.max_body = options_.filter_max_body;
  other_route.max_body = options_.max_body;
  // With the decision written in the background a filter waits for nothing: the event loop
  // answers it itself (no hand-off to a worker and back), unless it would wait after all
  // (Extender::FilterWithoutWaiting), which a worker then does.
  filter_route.inline_handler = options_.extender.async_decision_write;
  const bool on_loop = filter_route.inline_handler;
  api.Route("POST", "/filter", filter_route, [this, on_loop](net::Request req, net::Responder r) {
    Filter(std::move(req.body), std::move(r), on_loop);
  });
  // A bind waiting for the node lock holds no worker: its attempts are posted to the pool.
  extender_->SetExecutor([&api](std::function<void()> task) { api.Post(std::move(task)); });
  api.Route("POST", "/bind", other_route, [this](net::Request req, net::Responder r) {
    auto start = std::chrono::steady_clock::now();
    extender_->BindAsync(std::move(req.body), [this, r, start](HttpReply reply) {
      Reply(r, reply, request_metrics_.bind, start);
    });
  });
  api.Route("POST", "/webhook", other_route, [this](net::Request req, net::Responder r) {
    auto start = std::chrono::steady_clock::now();
    if (options_.dra) {
      Reply(r,
            HandleDraAdmissionReview(
                req.body, options_.dra_webhook,
                [this](const json& t) { return EnsureClaimTemplate(t); },
                [this](const json& pod, const std::string& ns) {
                  return PodFitsQuota(registry_, pod, ns,
                                      [this](const std::string& n) { return Quota(n); });
                }),
            request_metrics_.webhook, start);
      return;
    }
    Reply(r,
          HandleAdmissionReview(req.body, registry_, options_.webhook,
                                [this](const std::string& ns) { return Quota(ns); }),
          request_metrics_.webhook, start);
  });
  RouteHealth(api, [this] { return ready(); });
}

Status Server::ServeMetrics(const std::string& host, int port) {
  net::HttpServerOptions metrics_options;
  metrics_options.name = "--metrics-bind-address";
  metrics_options.workers = 2;
  metrics_options.max_connections = 256;
  metrics_options.max_connections_per_peer = 128;
  metrics_options.max_pending_bytes = 1 << 20;  // its routes take no body
  http_->metrics = std::make_unique<net::HttpServer>(metrics_options);
  net::RouteOptions metrics_route;
  metrics_route.max_body = 0;
  http_->metrics->Route("GET", "/metrics", metrics_route, [this](net::Request, net::Responder r) {
    r.Send(net::Response{200, "text/plain; version=0.0.4", Metrics()});
  });
  RouteHealth(*http_->metrics, [this] { return ready(); });
  auto bound = http_->metrics->Listen(host, port);
  if (!bound) return Error{"--metrics-bind-address: " + bound.error()};
  metrics_port_ = *bound;
  return OkStatus();
}

k8s::Json NodeNameFields(k8s::Json node) {
  if (!node.is_object() || !node.contains("metadata") || !node["metadata"].is_object()) {
    return node;
  }
  k8s::Json& meta = node["metadata"];
  k8s::Json kept = k8s::Json::object();
  for (const char* key : {"name", "namespace", "uid", "resourceVersion"}) {
    if (auto it = meta.find(key); it != meta.end()) kept[key] = std::move(*it);
  }
  if (auto a = meta.find("annotations"); a != meta.end() && a->is_object()) {
    if (auto lock = a->find(protocol::kNodeLockKey); lock != a->end()) {
      kept["annotations"][std::string(protocol::kNodeLockKey)] = std::move(*lock);
    }
  }
  return k8s::Json{{"metadata", std::move(kept)}};
}

void Server::StartInformers() {
  k8s::InformerHandlers pod_handlers;
  pod_handlers.on_add = [this](const k8s::ObjectRef& p) { registrar_->OnPod(*p); };
  pod_handlers.on_update = [this](const k8s::ObjectRef&, const k8s::ObjectRef& p) {
    registrar_->OnPod(*p);
  };
  pod_handlers.on_delete = [this](const k8s::ObjectRef& p) { registrar_->OnPodDeleted(*p); };
  // Nothing reads the pod cache (the handlers feed the usage index): it keeps only what the
  // handlers read (device::PodViewFields), as compact text.
  k8s::InformerOptions pod_options;
  pod_options.compact = true;
  pod_options.transform = device::PodViewFields;
  pod_options.nice = options_.extender.background_nice;
  pods_ =
      std::make_unique<k8s::Informer>(client_, k8s::resources::kPods, pod_options, pod_handlers);
  k8s::InformerHandlers node_handlers;
  // A new node is registered by the loop's next pass (passes never overlap), started at once.
  node_handlers.on_add = [this](const k8s::ObjectRef&) {
    if (!synced_) return;  // the first pass is still to come
    std::lock_guard<std::mutex> lock(mu_);
    pass_requested_ = true;
    cv_.notify_all();
  };
  node_handlers.on_delete = [this](const k8s::ObjectRef& n) {
    registrar_->ForgetNode(k8s::Name(*n));
  };
  // The registration pass lists the nodes itself; the informer only tells of adds and deletes,
  // so its cache keeps each node's name and version.
  k8s::InformerOptions node_options;
  node_options.label_selector = options_.registration.node_label_selector;
  node_options.transform = NodeNameFields;
  node_options.nice = options_.extender.background_nice;
  nodes_ =
      std::make_unique<k8s::Informer>(client_, k8s::resources::kNodes, node_options, node_handlers);
  seen_nodes_ = nodes_.get();
  k8s::InformerOptions quota_options;
  quota_options.nice = options_.extender.background_nice;
  quotas_ = std::make_unique<k8s::Informer>(client_, k8s::resources::kResourceQuotas, quota_options,
                                            k8s::InformerHandlers{});
  quotas_->Start();
  if (options_.leader_elect) WatchLease();
  pods_->Start();
  nodes_->Start();
}

void Server::Filter(std::string body, net::Responder responder, bool on_loop) {
  const auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!synced_ && !stopping_) {
      http_->parked.push_back(Http::ParkedFilter{std::move(body), std::move(responder), start,
                                                 start + options_.sync_timeout});
      cv_.notify_all();
      return;
    }
  }
  if (!synced_) {
    FilterResult cancelled;
    cancelled.error = "context cancelled";
    Reply(responder, HttpReply{200, EncodeFilterResult(cancelled)}, request_metrics_.filter, start);
    return;
  }
  // The loop parses at most this much itself (kube-scheduler's NodeNames for 20,000 nodes are
  // about 400 KiB): a larger body, up to --filter-max-body-bytes, would hold it that long.
  constexpr size_t kLoopMaxBody = 1 << 20;
  if (on_loop) {
    if (body.size() <= kLoopMaxBody) {
      if (std::optional<HttpReply> reply = extender_->FilterWithoutWaiting(body)) {
        Reply(responder, *reply, request_metrics_.filter, start);
        return;
      }
    }
    http_->api->Post([this, body = std::move(body), responder, start] {
      Reply(responder, extender_->Filter(body), request_metrics_.filter, start);
    });
    return;
  }
  Reply(responder, extender_->Filter(body), request_metrics_.filter, start);
}

void Server::FilterWaiter() {
  FilterResult cancelled;
  cancelled.error = "context cancelled";
  const HttpReply cancel{200, EncodeFilterResult(cancelled)};
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::deque<Http::ParkedFilter>& parked = http_->parked;
    if (stopping_) {
      for (Http::ParkedFilter& p : parked) {
        Reply(p.responder, cancel, request_metrics_.filter, p.start);
      }
      parked.clear();
      return;
    }
    if (synced_ && !parked.empty()) {
      std::deque<Http::ParkedFilter> ready;
      ready.swap(parked);
      lock.unlock();
      for (Http::ParkedFilter& p : ready) {
        http_->api->Post([this, p = std::move(p)]() mutable {
          Reply(p.responder, extender_->Filter(p.body), request_metrics_.filter, p.start);
        });
      }
      lock.lock();
      continue;
    }
    // Parked in arrival order with one timeout: the expired ones are at the front.
    const auto now = std::chrono::steady_clock::now();
    while (!parked.empty() && parked.front().deadline <= now) {
      Reply(parked.front().responder, cancel, request_metrics_.filter, parked.front().start);
      parked.pop_front();
    }
    if (parked.empty()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, parked.front().deadline);
    }
  }
}

std::string Server::Identity() const {
  if (!options_.identity.empty()) return options_.identity;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

bool Server::IsLeader() {
  if (!options_.leader_elect) return true;
  auto lease = client_.Get(k8s::resources::kLeases, options_.lease_namespace, options_.lease_name);
  if (!lease) return false;
  return LeaseHeldBy(*lease, Identity(), clock_.Now());
}

void Server::WatchLease() {
  // Renewals every few seconds change nothing; only a change of leadership starts a pass now
  // (becoming leader registers at once, losing it clears synced) instead of at the next period.
  auto changed = [this](const k8s::ObjectRef& lease) {
    if (LeaseHeldBy(*lease, Identity(), clock_.Now()) == leader_.load()) return;
    std::lock_guard<std::mutex> lock(mu_);
    pass_requested_ = true;
    cv_.notify_all();
  };
  k8s::InformerHandlers handlers;
  handlers.on_add = changed;
  handlers.on_update = [changed](const k8s::ObjectRef&, const k8s::ObjectRef& l) { changed(l); };
  k8s::InformerOptions opts;
  opts.ns = options_.lease_namespace;
  opts.field_selector = "metadata.name=" + options_.lease_name;
  lease_ = std::make_unique<k8s::Informer>(client_, k8s::resources::kLeases, opts, handlers);
  lease_->Start();
}

bool Server::RegisterAll() {
  // Filters are served once the rows are in the index, before the pass's handshake writes.
  Result<size_t> n = registrar_->RunOnce([this](size_t) { MarkSynced(); });
  if (!n) {
    HAMI_WARN("registration: {}", n.error().c_str());
    return false;
  }
  HAMI_VLOG(2, "registration: {} nodes", *n);
  if (!options_.pod_name.empty() && !options_.pod_namespace.empty()) {
    Result<size_t> labelled =
        LabelSchedulerPods(client_, options_.pod_namespace, options_.pod_name);
    if (!labelled) HAMI_WARN("scheduler role: {}", labelled.error().c_str());
  }
  return true;
}

bool Server::WaitForNextPass(SystemTime due) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (stopping_) return false;
    if (pass_requested_) {
      pass_requested_ = false;
      return true;
    }
    const SystemTime now = clock_.Now();
    if (now >= due) return true;
    // Real clock: wakes at the deadline. Fake clock: Kick() wakes it after a move.
    cv_.wait_for(lock, std::min<std::chrono::nanoseconds>(due - now, options_.register_period));
  }
}

void Server::Loop() {
  // Usage comes from pods: wait for the informer's first list before the first filter, in short
  // slices so that SIGTERM is not held up while the API server refuses or cannot be reached.
  const SystemTime sync_deadline = clock_.Now() + std::chrono::seconds(60);
  while (!pods_->WaitForSync(std::chrono::milliseconds(100)) && clock_.Now() < sync_deadline) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
  }
  // The first LIST held every pod parsed at once; hand those pages back to the system.
  malloc_trim(0);
  bool was_leader = false;
  for (;;) {
    // The period runs from the start of a pass; fixed before passes_ moves so that a test which
    // sees the pass counted and then advances a fake clock cannot be missed.
    const SystemTime start = clock_.Now();
    SystemTime due = start + options_.register_period;
    bool leader = IsLeader();
    leader_ = leader;
    pods_synced_ = pods_->HasSynced();  // after leader_: ready() never sees a leader as follower
    if (leader) {
      if (!RegisterAll()) {
        // Nodes could not be listed: until a pass succeeds every node looks unregistered, so
        // try again in a second rather than a whole period.
        due = std::min(due, start + std::chrono::seconds(1));
      } else {
        MarkSynced();
      }
    } else if (was_leader) {
      synced_ = false;
    }
    was_leader = leader;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++passes_;
      cv_.notify_all();
    }
    if (!WaitForNextPass(due)) return;
  }
}

void Server::MarkSynced() {
  if (synced_) return;
  std::lock_guard<std::mutex> lock(mu_);
  synced_ = true;
  cv_.notify_all();
}

bool Server::ready() const {
  if (synced_) return true;
  return options_.leader_elect && pods_synced_ && !leader_;
}

void Server::Kick() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

uint64_t Server::passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passes_;
}

bool Server::WaitForPass(uint64_t after, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return passes_ > after; });
}

uint64_t Server::cert_reloads() const { return certs_ ? certs_->reloads() : 0; }

size_t Server::parked_filters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return http_ ? http_->parked.size() : 0;
}

size_t Server::filters_waiting_for_their_pod() const {
  return extender_ ? extender_->FiltersWaitingForTheirPod() : 0;
}

bool Server::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

std::string Server::Metrics() {
  MetricsInput input;
  input.index = &index_;
  input.legacy = options_.legacy_metrics;
  input.requests = &request_metrics_;
  input.pod_keys = registrar_->PodKeys();
  input.build = &build_;
  std::set<std::string> namespaces;
  if (quotas_ != nullptr) {
    for (const k8s::ObjectRef& q : quotas_->List()) namespaces.insert(k8s::Namespace(*q));
  }
  for (const std::string& ns : namespaces) {
    for (const auto& [resource, entry] : Quota(ns)) {
      input.quotas.push_back(QuotaMetric{ns, resource, entry.used, entry.limit, entry.limit_set});
    }
  }
  return RenderMetrics(input);
}

void Server::Stop() {
  if (registrar_) registrar_->Cancel();  // before stopping() reads true
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (extender_) extender_->Stop();
  if (http_) {
    if (http_->waiter.joinable()) http_->waiter.join();  // answers the parked filters
    if (http_->api) http_->api->Stop();
    if (http_->metrics) http_->metrics->Stop();
  }
  if (loop_.joinable()) loop_.join();
  if (lease_) lease_->Stop();
  if (quotas_) quotas_->Stop();
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
}

void Server::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stopping_; });
}

}  // namespace hami::scheduler
