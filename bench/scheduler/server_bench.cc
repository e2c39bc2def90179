// The API-facing figures: /filter over loopback HTTP against a running scheduler (in-process, or
// the real hami-scheduler binary), the registration pass, and filling an external sim apiserver.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <httplib.h>

#include "device/config.h"
#include "k8s/client.h"
#include "scheduler/registration.h"
#include "scheduler/server.h"
#include "server_bench.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/store.h"
#include "sim/percentile.h"
#include "sim/synthetic/cluster.h"

namespace hami::bench {

using namespace hami::sim::synthetic;  // NOLINT: the cluster the benches run on
using sim::Percentile;

namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

double MsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

constexpr int kPendingPods = 500;  // pods the filter loops schedule (one filter each)

std::string PendingName(int i) { return "pending-" + std::to_string(i); }

std::vector<std::string> AllNames(int nodes) {
  std::vector<std::string> names;
  for (int n = 0; n < nodes; ++n) names.push_back(NodeName(n));
  return names;
}

void PrintLatency(const char* what, const std::vector<double>& ms) {
  std::printf("  %-34s n=%zu p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", what, ms.size(),
              Percentile(ms, 50), Percentile(ms, 99), Percentile(ms, 100));
}

// POSTs /filter with NodeNames = `names` for pending pods 0..iters-1 (each filter persists its
// decision with a patch). False on a failed or empty answer.
bool FilterLoop(httplib::Client& http, const std::vector<std::string>& names, int iters,
                std::vector<double>* out) {
  for (int i = 0; i < iters; ++i) {
    std::string body = json{{"Pod", MakePendingPod(PendingName(i))}, {"NodeNames", names}}.dump();
    auto start = SteadyClock::now();
    auto res = http.Post("/filter", body, "application/json");
    double ms = MsSince(start);
    if (!res || res->status != 200) return std::fprintf(stderr, "filter %d: no answer\n", i), false;
    json got = json::parse(res->body, nullptr, false);
    if (!got.is_object() || !got["NodeNames"].is_array() || got["NodeNames"].size() != 1) {
      return std::fprintf(stderr, "filter %d: %s\n", i, res->body.substr(0, 300).c_str()), false;
    }
    if (i >= 5) out->push_back(ms);  // the first calls warm the connection and caches
  }
  return true;
}

// The simulation form: the full node objects in the body, zero usage, no patch. False when the
// server refuses the body.
bool SimulationLoop(httplib::Client& http, const std::vector<json>& node_objs, int iters) {
  json body = {{"Pod", MakePendingPod("simulated")}, {"Nodes", {{"items", node_objs}}}};
  std::string text = body.dump();
  std::vector<double> ms;
  int status = 0;
  for (int i = 0; i < iters + 5; ++i) {
    auto start = SteadyClock::now();
    auto res = http.Post("/filter", text, "application/json");
    double took = MsSince(start);
    status = res ? res->status : -1;
    if (!res || res->status != 200) break;
    if (i >= 5) ms.push_back(took);
  }
  std::printf("  simulation body: %zu nodes, %.2f MiB; HTTP status %d\n", node_objs.size(),
              static_cast<double>(text.size()) / (1 << 20), status);
  if (!ms.empty()) PrintLatency("POST /filter (Nodes, simulation)", ms);
  return !ms.empty();
}

Status CreateDirect(sim::Store& store, const char* plural, const json& obj) {
  const sim::ResourceType* type = sim::FindResourceType("", "v1", plural);
  std::string ns = obj["metadata"].value("namespace", "");
  auto r = store.Create(*type, ns, obj);
  if (!r) return Error{std::string("create ") + plural + ": " + r.error().ToString()};
  return OkStatus();
}

}  // namespace

int RunHttp(int nodes, int pods, int iters, bool events, int candidates, bool async_write,
            bool simulation, int api_latency_ms) {
  sim::ApiServerOptions api_options;
  api_options.latency = std::chrono::milliseconds(api_latency_ms);
  sim::ApiServer api(api_options);
  if (!api.Start()) return 1;
  auto t = SteadyClock::now();
  std::vector<json> node_objs;
  for (int n = 0; n < nodes; ++n) {
    node_objs.push_back(MakeNode(n, "Reported_2026-11-29 12:00:00"));
    if (!CreateDirect(api.store(), "nodes", node_objs.back())) return 1;
  }
  for (int p = 0; p < pods; ++p) {
    if (!CreateDirect(api.store(), "pods", MakeBoundPod(p, nodes))) return 1;
  }
  for (int i = 0; i < iters + 5; ++i) {
    if (!CreateDirect(api.store(), "pods", MakePendingPod(PendingName(i)))) return 1;
  }
  std::printf("http: sim apiserver holds %d nodes, %d bound pods (%.0f ms)\n", nodes, pods,
              MsSince(t));
  k8s::RestConfig cfg;
  cfg.server = api.url();
  cfg.qps = 0;
  k8s::Client client(cfg);
  scheduler::ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "";
  opts.extender.zone = Zone::Utc();
  opts.registration.zone = Zone::Utc();
  opts.register_period = std::chrono::hours(1);  // keep the 15 s pass out of the latencies
  opts.extender.record_events = events;
  opts.extender.async_decision_write = async_write;
  scheduler::Server server(client, device::DefaultDeviceConfig(), opts);
  t = SteadyClock::now();
  if (!server.Start()) return 1;
  while (!server.synced()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::printf("http: scheduler synced in %.0f ms%s\n", MsSince(t), events ? "" : " (events off)");
  // The first pass's handshake writes (one per node) run after the sync: measure the filters
  // of a scheduler at work, not beside its start-up storm.
  if (!server.WaitForPass(0, std::chrono::minutes(5))) return 1;
  std::printf("http: first registration pass (handshake writes) done at %.0f ms\n", MsSince(t));
  httplib::Client http("127.0.0.1", server.port());
  http.set_keep_alive(true);
  http.set_tcp_nodelay(true);  // as kube-scheduler's Go client (Nagle off)
  http.set_read_timeout(std::chrono::seconds(60));
  std::vector<double> ms;
  if (candidates == 0)
    candidates = static_cast<int>(KubeSchedulerCandidates(static_cast<size_t>(nodes)));
  std::vector<std::string> names = CandidateNames(nodes, candidates);
  std::printf("http: %zu candidates a filter; API server latency %d ms a request\n", names.size(),
              api_latency_ms);
  auto loop_start = SteadyClock::now();
  if (!FilterLoop(http, names, iters + 5, &ms)) return 1;
  PrintLatency(
      async_write ? "POST /filter (NodeNames, async patch)" : "POST /filter (NodeNames, patch)",
      ms);
  if (async_write) {
    // Every decision must reach its pod: read each back (a write still queued is waited for,
    // up to 5 s a pod).
    int written = 0;
    for (int i = 0; i < iters + 5; ++i) {
      for (int tries = 0; tries < 500; ++tries) {
        auto pod = client.Get(k8s::resources::kPods, kNamespace, PendingName(i));
        if (pod && k8s::Annotation(*pod, "hami.io/vgpu-node")) {
          ++written;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    std::printf("  decisions written (after the loop, %.0f ms from its start): %d of %d\n",
                MsSince(loop_start), written, iters + 5);
  }
  if (!simulation) {
    server.Stop();
    return 0;
  }
  // The server caps bodies at 1 MiB; 1,000 of these nodes do not fit, 400 do.
  if (!SimulationLoop(http, node_objs, iters)) {
    node_objs.resize(std::min<size_t>(node_objs.size(), 400));
    SimulationLoop(http, node_objs, iters);
  }
  server.Stop();
  return 0;
}

int RunRegister(int nodes, int passes) {
  sim::ApiServer api(sim::ApiServerOptions{});
  if (!api.Start()) return 1;
  const sim::ResourceType* type = sim::FindResourceType("", "v1", "nodes");
  for (int n = 0; n < nodes; ++n) {
    if (!CreateDirect(api.store(), "nodes", MakeNode(n, "Reported_2026-11-29 12:00:00"))) return 1;
  }
  k8s::RestConfig cfg;
  cfg.server = api.url();
  cfg.qps = 0;
  k8s::Client client(cfg);
  device::Registry registry = device::MakeRegistry(device::DefaultDeviceConfig());
  device::UsageIndex index;
  scheduler::RegistrationOptions ro;
  ro.zone = Zone::Utc();
  scheduler::Registrar registrar(registry, index, client, RealClock(), ro);
  std::vector<double> writing, quiet, writes;
  for (int pass = 0; pass < passes; ++pass) {
    // Every node answered (Reported): the pass writes Requesting on each, as it does every 15 s
    // in a live cluster. The pass right after finds Requesting pending and writes nothing.
    for (int n = 0; n < nodes; ++n) {
      auto r = api.store().Update(*type, "", NodeName(n), [](const json& cur) {
        json next = cur;
        next["metadata"]["annotations"]["hami.io/node-handshake"] = "Reported_2026-11-29 12:00:00";
        return k8s::ApiResult<json>(next);
      });
      if (!r) return 1;
    }
    const int64_t rv0 = api.store().resource_version();
    auto t = SteadyClock::now();
    auto n1 = registrar.RunOnce();
    writing.push_back(MsSince(t));
    writes.push_back(static_cast<double>(api.store().resource_version() - rv0));
    t = SteadyClock::now();
    auto n2 = registrar.RunOnce();
    quiet.push_back(MsSince(t));
    if (!n1 || !n2 || *n1 != static_cast<size_t>(nodes) || *n2 != static_cast<size_t>(nodes)) {
      return std::fprintf(stderr, "registration pass failed\n"), 1;
    }
  }
  std::printf("register: %d nodes, %d passes of each kind\n", nodes, passes);
  std::printf("  pass writing Requesting on every node  median %.0f ms  min %.0f  max %.0f\n",
              Percentile(writing, 50), Percentile(writing, 0), Percentile(writing, 100));
  std::printf("  node writes per writing pass           median %.0f  min %.0f  max %.0f\n",
              Percentile(writes, 50), Percentile(writes, 0), Percentile(writes, 100));
  std::printf("  pass with Requesting pending (no write) median %.0f ms  min %.0f  max %.0f\n",
              Percentile(quiet, 50), Percentile(quiet, 0), Percentile(quiet, 100));
  return 0;
}

int RunPopulate(const std::string& server, int nodes, int pods, int threads) {
  auto start = SteadyClock::now();
  std::vector<json> objs;
  for (int n = 0; n < nodes; ++n) objs.push_back(MakeNode(n, "Reported_2026-11-29 12:00:00"));
  for (int p = 0; p < pods; ++p) objs.push_back(MakeBoundPod(p, nodes));
  for (int i = 0; i < kPendingPods; ++i) objs.push_back(MakePendingPod(PendingName(i)));
  std::atomic<int> failures{0};
  auto work = [&](int shard) {
    k8s::RestConfig cfg;
    cfg.server = server;
    cfg.qps = 0;
    k8s::Client client(cfg);
    for (size_t i = static_cast<size_t>(shard); i < objs.size(); i += threads) {
      bool node = i < static_cast<size_t>(nodes);
      auto r = node ? client.Create(k8s::resources::kNodes, "", objs[i])
                    : client.Create(k8s::resources::kPods, "default", objs[i]);
      if (!r && failures++ == 0) {
        std::fprintf(stderr, "populate: first failure: %s\n", r.error().ToString().c_str());
      }
    }
  };
  std::vector<std::thread> workers;
  for (int s = 0; s < threads; ++s) workers.emplace_back(work, s);
  for (auto& w : workers) w.join();
  std::printf("populate: %zu objects in %.0f ms, %d failures\n", objs.size(), MsSince(start),
              failures.load());
  return failures == 0 ? 0 : 1;
}

int RunProbe(int port, int nodes, int timeout_s, int filters) {
  httplib::Client http("127.0.0.1", port);
  http.set_keep_alive(true);
  http.set_tcp_nodelay(true);  // as kube-scheduler's Go client (Nagle off)
  http.set_read_timeout(std::chrono::seconds(timeout_s));
  auto deadline = SteadyClock::now() + std::chrono::seconds(timeout_s);
  std::string body = json{{"Pod", MakePlainPod("probe")}, {"NodeNames", {NodeName(0)}}}.dump();
  // /filter waits for the scheduler's first sync, so an answer means it has synced.
  while (true) {
    auto res = http.Post("/filter", body, "application/json");
    if (res && res->status == 200 && res->body.find("\"Error\":\"\"") != std::string::npos) break;
    if (SteadyClock::now() > deadline) return std::fprintf(stderr, "probe: no sync\n"), 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (filters <= 0) return 0;
  // Each of these filters patches its pod and records an Event: two API calls, paced by the
  // scheduler's --kube-qps once its burst is spent (50 qps: ~40 ms a filter).
  std::vector<double> ms;
  if (!FilterLoop(http, AllNames(nodes), filters + 5, &ms)) return 1;
  PrintLatency("POST /filter (NodeNames, patch)", ms);
  return 0;
}

}  // namespace hami::bench
