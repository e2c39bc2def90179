// hami-scheduler: parses HAMi's scheduler flags (HAMi v2.10 cmd/scheduler/main.go) and runs
// scheduler::Server until SIGTERM or SIGINT.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "common/flags.h"
#include "common/log.h"
#include "device/config.h"
#include "device/policy.h"
#include "device/vendors/nvidia/nvidia_config.h"
#include "k8s/client.h"
#include "k8s/client_flags.h"
#include "scheduler/server.h"

namespace {

struct Flags {
  hami::scheduler::ServerOptions server;
  hami::k8s::ClientFlags client;
  std::string node_policy = "binpack";
  std::string gpu_policy = "spread";
  std::string device_config_file;
  std::string node_lock_timeout = "5m";
  std::string node_lock_retry_timeout = "25s";
  int verbosity = 0;
};

void AddFlags(CLI::App& app, Flags& f) {
  auto& s = f.server;
  app.add_option("--http_bind", s.http_bind, "extender and webhook listener (host:port)");
  app.add_option("--cert_file", s.cert_file, "TLS certificate; with --key_file serves HTTPS");
  app.add_option("--key_file", s.key_file, "TLS private key; with --cert_file serves HTTPS");
  app.add_option("--scheduler-name", s.webhook.scheduler_name,
                 "schedulerName the webhook writes into GPU pods (empty: never rewritten); "
                 "also the event source");
  app.add_option("--node-scheduler-policy", f.node_policy, "node policy: binpack or spread");
  app.add_option("--gpu-scheduler-policy", f.gpu_policy,
                 "GPU policy: binpack, spread, topology-aware, mutex, numa or a comma chain");
  app.add_option("--metrics-bind-address", s.metrics_bind, "metrics listener (host:port)");
  app.add_option("--filter-max-body-bytes", s.filter_max_body,
                 "largest /filter body (413 past it); the Nodes form carries ~5 KiB per node");
  app.add_option("--max-pending-body-bytes", s.max_pending_body_bytes,
                 "bytes of unfinished request bodies --http_bind holds across its connections "
                 "(503 with Retry-After past it)");
  app.add_option("--max-connections-per-peer", s.max_connections_per_peer,
                 "--http_bind connections one client address may hold (0: no limit); at the "
                 "limit its oldest connection that has sent nothing makes room");
  app.add_option("--device-config-file", f.device_config_file,
                 "device-config.yaml (optional: the built-in defaults equal HAMi's chart)");
  app.add_option("--node-label-selector", s.registration.node_label_selector,
                 "only nodes matching this label selector (k=v,k2=v2) are registered");
  app.add_option("--node-lock-timeout", f.node_lock_timeout,
                 "age after which a node lock is taken over (Go duration)");
  app.add_option("--node-lock-retry-timeout", f.node_lock_retry_timeout,
                 "how long a bind waits in the node's queue for a contended lock (0: no wait)");
  // On by default (docs/PERFORMANCE.md): the API round trip off kube-scheduler's serial cycle.
  s.extender.async_decision_write = true;
  app.add_flag("--async-decision-write", s.extender.async_decision_write,
               "answer /filter once the decision is counted and write it to the pod in the "
               "background; the pod's bind waits for the write and fails if it failed (default "
               "true; =false: the filter answers after the write, as HAMi)");
  app.add_option("--decision-writers", s.extender.decision_writers,
                 "with --async-decision-write: decision writes in flight at once (threads)")
      ->check(CLI::Range(1, 64));
  app.add_option("--background-nice", s.extender.background_nice,
                 "how much nicer than the /filter loop the informers and decision writers run "
                 "(the Event sender twice as nice): they wait while a filter runs on a busy node "
                 "(0: all at the process's priority)")
      ->check(CLI::Range(0, 19));
  app.add_flag("--force-overwrite-default-scheduler", s.webhook.force_overwrite_default_scheduler,
               "the webhook may replace schedulerName default-scheduler");
  app.add_flag("--leader-elect", s.leader_elect,
               "follow the co-located kube-scheduler's Lease; only the leader registers");
  app.add_option("--leader-elect-resource-name", s.lease_name, "name of that Lease");
  app.add_option("--leader-elect-resource-namespace", s.lease_namespace, "namespace of that Lease");
  app.add_flag("--legacy-metrics", s.legacy_metrics, "also emit the pre-2.9 metric names");
  app.add_flag("--dra", s.dra,
               "DRA mode (docs/DRA.md): /webhook gives pods asking nvidia.com/gpu, gpumem or "
               "gpucores claims from ResourceClaimTemplates (created in the pod's namespace) "
               "for hami-dra-plugin's devices, instead of sending them to this extender");
  hami::k8s::AddClientFlags(app, f.client);
  app.add_option("-v,--v", f.verbosity, "log verbosity (klog -v)");
}

// HAMi v2.10.0's scheduler flags (its chart renders --debug, --enable-ascend, --enable-iluvatar)
// that mean nothing here: accepted, listed in --help, logged when given.
void AddIgnoredFlags(CLI::App& app, hami::flags::IgnoredFlags& ignored) {
  ignored.Add(
      app, {{"debug", false, "HAMi's debug mode (HAMi parses it and never reads it)"},
            {"profiling", false, "HAMi's pprof endpoints (none here)"},
            {"enable-ascend", false, "HAMi's Ascend switch (here: its device-config.yaml section)"},
            {"enable-iluvatar", false,
             "HAMi's Iluvatar switch (here: its device-config.yaml section)"}});
  ignored.Add(app, hami::flags::KlogFlags());
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "hami-scheduler: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hami-scheduler: HAMi scheduler extender, admission webhook and node registration"};
  // On the heap: g++ 12 -O3 reports a false maybe-uninitialized for this aggregate on the stack.
  auto flags = std::make_unique<Flags>();
  Flags& f = *flags;
  f.server.webhook.force_overwrite_default_scheduler = true;
  AddFlags(app, f);
  hami::flags::IgnoredFlags ignored;
  AddIgnoredFlags(app, ignored);
  // Go-style command lines (-v=4, -http_bind=...) as HAMi's chart and users write them.
  hami::flags::GoStyleArgs args(app, argc, argv);
  CLI11_PARSE(app, args.argc(), args.argv());
  hami::log::SetVerbosity(f.verbosity);
  for (const std::string& m : ignored.Messages()) HAMI_INFO("hami-scheduler: {}", m);
  // One without the other used to serve plain HTTP silently.
  if (f.server.cert_file.empty() != f.server.key_file.empty()) {
    return Fail(f.server.cert_file.empty() ? "--key_file needs --cert_file (HTTPS takes both)"
                                           : "--cert_file needs --key_file (HTTPS takes both)");
  }

  hami::device::DeviceConfig config = hami::device::DefaultDeviceConfig();
  if (!f.device_config_file.empty()) {
    std::ifstream in(f.device_config_file);
    if (!in) return Fail("--device-config-file: cannot read " + f.device_config_file);
    std::stringstream text;
    text << in.rdbuf();
    auto loaded = hami::device::LoadDeviceConfig(text.str());
    if (!loaded) return Fail("--device-config-file: " + loaded.error());
    config = *loaded;
  }
  if (f.server.dra) {
    // The resource names and defaults of the device config's nvidia section.
    auto nvidia = hami::device::nvidia::NvidiaConfigOf(config);
    if (!nvidia) return Fail("--device-config-file: " + nvidia.error());
    auto& d = f.server.dra_webhook;
    d.count_resource = nvidia->resource_count_name;
    d.memory_resource = nvidia->resource_memory_name;
    d.memory_percentage_resource = nvidia->resource_memory_percentage_name;
    d.cores_resource = nvidia->resource_core_name;
    d.default_memory = nvidia->default_memory;
    d.default_cores = nvidia->default_cores;
    d.default_gpu_num = nvidia->default_gpu_num;
  }
  auto node_policy = hami::device::ParseNodePolicy(f.node_policy);
  if (!node_policy) return Fail("--node-scheduler-policy: unknown policy " + f.node_policy);
  auto gpu_policy = hami::device::ParseGpuPolicy(f.gpu_policy, /*strict=*/true);
  if (!gpu_policy) return Fail("--gpu-scheduler-policy: " + gpu_policy.error());
  auto lock_timeout = hami::k8s::ParseGoDuration(f.node_lock_timeout);
  if (!lock_timeout) return Fail("--node-lock-timeout: not a duration: " + f.node_lock_timeout);
  auto retry = hami::k8s::ParseGoDuration(f.node_lock_retry_timeout);
  if (!retry)
    return Fail("--node-lock-retry-timeout: not a duration: " + f.node_lock_retry_timeout);
  auto& ext = f.server.extender;
  ext.node_policy = *node_policy;
  ext.gpu_policy = *gpu_policy;
  ext.node_lock_timeout = *lock_timeout;
  ext.node_lock_retry_timeout = *retry;
  if (!f.server.webhook.scheduler_name.empty()) {
    ext.scheduler_name = f.server.webhook.scheduler_name;
    f.server.registration.component = f.server.webhook.scheduler_name;
  }

  // Scheduler-role labelling needs the pod's own name and namespace (downward API in the chart).
  if (const char* v = std::getenv("POD_NAME")) f.server.pod_name = v;
  if (const char* v = std::getenv("POD_NAMESPACE")) f.server.pod_namespace = v;

  auto rest = f.client.Load();
  if (!rest) return Fail(rest.error());
  // Signals are taken synchronously by this thread; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  hami::k8s::Client client(*rest);
  // The registration pass's handshake writes get their own --kube-qps budget (Server).
  hami::k8s::Client registration_client(*rest);
  hami::scheduler::Server server(client, registration_client, config, f.server);
  auto started = server.Start();
  if (!started) return Fail(started.error());
  HAMI_INFO("hami-scheduler: serving on port {}, metrics on port {}", server.port(),
            server.metrics_port());
  if (f.server.extender.async_decision_write) {
    HAMI_INFO("hami-scheduler: decisions written in the background ({} writers)",
              f.server.extender.decision_writers);
  } else {
    HAMI_INFO("hami-scheduler: decisions written before /filter answers (HAMi's order)");
  }
  int sig = 0;
  sigwait(&signals, &sig);
  HAMI_INFO("hami-scheduler: signal {}, shutting down", sig);
  server.Stop();
  return 0;
}
