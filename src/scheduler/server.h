// scheduler::Server: the hami-scheduler process minus flag parsing. It serves /filter, /bind,
// /webhook, /healthz and /readyz on --http_bind (HTTPS when a certificate and key are given; a
// replaced certificate is served from the next handshake on, see CertReloader), /metrics on
// --metrics-bind-address, both on net::HttpServer (caps, deadlines, health answered on the event
// loop: docs/SECURITY.md); /readyz answers 503 until the first registration pass succeeded; keeps
// the usage index fed from a pod informer, and runs the registration pass at start, on node add and
// every register_period of the injected clock. With leader election it follows the co-located
// kube-scheduler's Lease (docs/protocol.md#leader-election): only the leader registers, handshakes
// and labels the scheduler pods (hami.io/scheduler-role).
#ifndef HAMI_SCHEDULER_SERVER_H_
#define HAMI_SCHEDULER_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "device/config.h"
#include "device/device.h"
#include "device/usage_index.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "net/http_server.h"
#include "scheduler/dra_webhook.h"
#include "scheduler/extender.h"
#include "scheduler/metrics.h"
#include "scheduler/registration.h"
#include "scheduler/webhook.h"

namespace hami::scheduler {

class CertReloader;

struct ServerOptions {
  // Out of line: g++ 12 -O3 reports a false maybe-uninitialized for the inlined default
  // constructor of this aggregate of aggregates.
  ServerOptions();
  std::string http_bind = "127.0.0.1:8080";  // host:port; port 0 = ephemeral
  std::string cert_file{};                   // both set => HTTPS
  std::string key_file{};
  std::string metrics_bind = ":9395";  // "" = no metrics listener
  bool legacy_metrics = false;
  WebhookOptions webhook{};
  // --dra (docs/DRA.md "Webhook, DRA mode"): /webhook turns HAMi's resources into claims from
  // ResourceClaimTemplates (dra_webhook.h) instead of sending the pod to the extender.
  bool dra = false;
  DraWebhookOptions dra_webhook{};
  ExtenderOptions extender{};
  RegistrationOptions registration{};
  std::chrono::seconds register_period{15};
  bool leader_elect = false;
  std::string lease_name{};
  std::string lease_namespace{};
  std::string identity{};  // leader iff the Lease holder starts with it (default: hostname)
  // How long /filter waits for the first registration pass (parked: it holds no thread).
  std::chrono::seconds sync_timeout{30};
  // HTTP limits of --http_bind (docs/SECURITY.md). /filter's cap fits the `Nodes` form, which
  // carries every candidate Node object (about 5 KiB each: 32 MiB is ~6,000 nodes); /bind and
  // /webhook are capped like kube-apiserver's request bodies (3 MiB).
  size_t filter_max_body = 32 << 20;
  size_t max_body = 3 << 20;
  size_t http_workers = 16;  // no request waits on one: lock and sync waits are parked
  size_t max_connections = 1024;
  size_t max_connections_per_peer = 512;  // 0: no per-peer limit
  // Bytes of unfinished requests held across --http_bind's connections; past it 503.
  size_t max_pending_body_bytes = 256 << 20;
  // $POD_NAME / $POD_NAMESPACE: with both set, the leader labels the scheduler pods of that
  // namespace with hami.io/scheduler-role (LabelSchedulerPods).
  std::string pod_name{};
  std::string pod_namespace{};
};

// A node's metadata name, namespace, uid, resourceVersion and node lock annotation
// (hami.io/mutex.lock), the rest dropped: the node informer's transform (its handlers read only
// the name; the bind's lock reads the lock and the version). A node without a metadata object is
// kept as it is.
k8s::Json NodeNameFields(k8s::Json node);

// Leader test of docs/protocol.md#leader-election: holderIdentity starts with `identity` and
// renewTime + leaseDurationSeconds is after `now`.
bool LeaseHeldBy(const nlohmann::json& lease, const std::string& identity, SystemTime now);

class Server {
 public:
  // `client` and `clock` must outlive the server.
  Server(k8s::Client& client, device::DeviceConfig config, ServerOptions options,
         const Clock& clock = RealClock());
  // The same, with the registration pass's handshake writes on `registration_client` (which must
  // outlive the server): its own rate limiter, so that 5,000 Requesting writes never hold back a
  // filter's decision patch (client-go gives each clientset its own --kube-qps budget too).
  Server(k8s::Client& client, k8s::Client& registration_client, device::DeviceConfig config,
         ServerOptions options, const Clock& clock = RealClock());
  ~Server();  // Stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds both listeners, starts the informers and the registration loop. Returns once the
  // listeners accept connections.
  Status Start();
  // Graceful: stops accepting, wakes waiting binds, ends the loop and informers. Idempotent.
  void Stop();
  // Blocks until Stop() is called.
  void Wait();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  bool synced() const { return synced_.load(); }
  // What /readyz answers. The leader (or a scheduler without leader election) is ready once its
  // first registration pass is made; a follower once its pod informer has synced, since its
  // kube-scheduler sends it nothing until it leads (so a rolling update of a replicated
  // scheduler is not stuck on a new pod that never leads).
  bool ready() const;

  // The registration loop sleeps until clock.Now() reaches the next pass. A real clock wakes it
  // by itself; whoever moves a FakeClock calls Kick() so the loop reads the clock again (a kick
  // alone never starts a pass early).
  void Kick();
  // Registration loop iterations completed so far (leader or not).
  uint64_t passes() const;
  // Blocks until passes() > `after` or `timeout` (real time) passes; false on timeout.
  bool WaitForPass(uint64_t after, std::chrono::milliseconds timeout);
  // Certificate reloads so far (0 without TLS).
  uint64_t cert_reloads() const;
  // /filter requests parked until the first registration pass (they hold no thread).
  size_t parked_filters() const;
  // /filter requests waiting for an earlier filter of their pod, or its decision write.
  size_t filters_waiting_for_their_pod() const;
  // Stop() has begun.
  bool stopping() const;
  // The node as the node informer last saw it (resourceVersion, lock): the bind's first lock
  // attempt reads it. nullopt before the informers start or for a node it has not seen.
  std::optional<nodelock::SeenNode> SeenNode(std::string_view node) const;

 private:
  class Http;
  // Start's steps: the --http_bind listener with its routes, the metrics listener, and the
  // pod, node, quota (and Lease) informers.
  Status ServeApi(const std::string& host, int port);
  void RouteApi(net::HttpServer& api);
  Status ServeMetrics(const std::string& host, int port);
  void StartInformers();
  void Loop();
  // Answers /filter now when synced, else parks it until the first pass or sync_timeout.
  // `on_loop`: called on the HTTP event loop (the route is inline), which must not block.
  void Filter(std::string body, net::Responder responder, bool on_loop);
  // Hands parked filters to the pool once synced, answers the expired ones (one thread for all).
  void FilterWaiter();
  bool IsLeader();
  std::string Identity() const;  // options_.identity, else the hostname
  // Follows the Lease so a change of leadership starts a pass at once.
  void WatchLease();
  bool RegisterAll();  // false when the pass could not run (nodes not listed)
  // Filters wait for the first pass's rows (idempotent; wakes whoever waits on cv_).
  void MarkSynced();
  // Sleeps until the next pass is due, a pass is requested, or Stop(); false on Stop().
  bool WaitForNextPass(SystemTime due);
  std::string Metrics();
  // The namespace's ResourceQuota limits (from the quota informer) and usage (from the index).
  device::NamespaceQuota Quota(const std::string& ns);
  // DRA mode: creates a ResourceClaimTemplate unless this process already saw it exist (the
  // names are their request shapes: one API call per shape and namespace, not per pod).
  Status EnsureClaimTemplate(const k8s::Json& claim_template);
  std::mutex templates_mu_;
  std::set<std::string> ensured_templates_;  // "<namespace>/<name>"

  k8s::Client& client_;
  device::DeviceConfig config_;
  const ServerOptions options_;
  const Clock& clock_;
  device::Registry registry_;
  device::UsageIndex index_;
  RequestMetrics request_metrics_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<Extender> extender_;
  std::unique_ptr<k8s::Informer> pods_;
  std::unique_ptr<k8s::Informer> nodes_;
  std::atomic<const k8s::Informer*> seen_nodes_{nullptr};  // nodes_ once started (the lock's)
  std::unique_ptr<k8s::Informer> quotas_;
  std::unique_ptr<k8s::Informer> lease_;  // with leader_elect only
  std::unique_ptr<Http> http_;
  std::unique_ptr<CertReloader> certs_;
  const BuildInfo build_ = ThisBuild();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool pass_requested_ = false;  // a node was added
  uint64_t passes_ = 0;
  std::atomic<bool> synced_{false};
  std::atomic<bool> leader_{false};  // as of the last pass
  std::atomic<bool> pods_synced_{false};
  std::atomic<bool> started_{false};
  std::thread loop_;
  int port_ = 0;
  int metrics_port_ = 0;
};

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_SERVER_H_
