// hami-vgpu-monitor: parses HAMi's flags and environment
// (docs/MONITOR.md#command-line-and-environment) and runs monitor::Monitor until SIGTERM or SIGINT.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <string>

#include "common/flags.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "k8s/client.h"
#include "k8s/client_flags.h"
#include "k8s/kubeconfig.h"
#include "monitor/monitor.h"

namespace hami::monitor {
namespace {

struct Flags {
  std::string kubeconfig;
  std::string node_name;
  std::string hook_path = "/usr/local/vgpu";
  std::string metrics_bind = ":9394";
  std::string resync_interval = "5m";
  std::string feedback_period = "5s";
  std::string mig_apply_lock = "/tmp/hami/hami-mig-apply.lock";
  std::string nvml_library = "libnvidia-ml.so.1";
  bool legacy_metrics = false;
  int verbosity = 0;
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--metrics-bind-address", f.metrics_bind, "metrics listener (host:port)");
  app.add_flag("--legacy-metrics", f.legacy_metrics,
               "also export the pre-v2.8 metric names (vGPU_device_memory_usage_in_bytes, ...)");
  app.add_option("--kubeconfig", f.kubeconfig,
                 "kubeconfig file; empty: $KUBECONFIG, in-cluster, then ~/.kube/config");
  app.add_option("--node-name", f.node_name, "this node's name (required)")->envname("NODE_NAME");
  app.add_option("--hook-path", f.hook_path,
                 "directory holding containers/<podUID>_<container>/ with the region files")
      ->envname("HOOK_PATH");
  app.add_option("--resync-interval", f.resync_interval,
                 "Go duration: the directories and limits files of pods gone from the node are "
                 "removed after it")
      ->envname("HAMI_RESYNC_INTERVAL");
  app.add_option("--feedback-period", f.feedback_period,
                 "Go duration: how often the priority feedback and the housekeeping (clean-up, "
                 "over-limit Events) run; HAMi's is 5s");
  app.add_option("--mig-apply-lock", f.mig_apply_lock,
                 "the priority feedback pauses while this file exists (the device plugin's MIG "
                 "apply lock)");
  app.add_option("--nvml-library", f.nvml_library,
                 "NVML library to dlopen for the host GPU series (empty: leave them out)")
      ->envname("HAMI_NVML_LIBRARY");
  app.add_option("-v,--v", f.verbosity, "log verbosity (klog -v)");
}

int Run(const Flags& f, const flags::IgnoredFlags& ignored) {
  log::SetVerbosity(f.verbosity);
  for (const std::string& m : ignored.Messages()) HAMI_INFO("hami-vgpu-monitor: {}", m);
  if (f.node_name.empty()) {
    std::cerr << "NODE_NAME (or --node-name) is required\n";
    return 2;
  }
  const auto resync = k8s::ParseGoDuration(f.resync_interval);
  if (!resync || *resync < std::chrono::nanoseconds(0)) {
    std::cerr << "HAMI_RESYNC_INTERVAL: want a duration such as 5m, got \"" << f.resync_interval
              << "\"\n";
    return 2;
  }
  const auto period = k8s::ParseGoDuration(f.feedback_period);
  if (!period || *period < std::chrono::milliseconds(1)) {
    std::cerr << "--feedback-period: want a duration of at least 1ms such as 5s, got \""
              << f.feedback_period << "\"\n";
    return 2;
  }
  auto rest = k8s::LoadConfig(f.kubeconfig);
  if (!rest) return std::cerr << "kubeconfig: " << rest.error() << "\n", 1;

  const sigset_t stop_signals = BlockStopSignals();  // before any thread starts

  k8s::Client client(*rest);
  MonitorOptions options;
  options.node_name = f.node_name;
  options.hook_path = f.hook_path;
  options.metrics_bind = f.metrics_bind;
  options.legacy_metrics = f.legacy_metrics;
  options.feedback_period = std::chrono::duration_cast<std::chrono::milliseconds>(*period);
  options.housekeeping_period = options.feedback_period;
  options.mig_apply_lock = f.mig_apply_lock;
  options.resync_interval = *resync;
  options.nvml_library = f.nvml_library;
  Monitor monitor(client, options);
  auto port = monitor.Start();
  if (!port) return std::cerr << port.error() << "\n", 1;
  HAMI_INFO("hami-vgpu-monitor: node {}, scanning {}/containers, serving on port {}", f.node_name,
            f.hook_path, *port);
  HAMI_INFO("signal {}: shutting down", WaitForStopSignal(stop_signals));
  monitor.Stop();
  return 0;
}

}  // namespace
}  // namespace hami::monitor

int main(int argc, char** argv) {
  CLI::App app{
      "hami-vgpu-monitor: exports what each vGPU container uses, read from its shared region "
      "file, under HAMi's metric names on /metrics (and /healthz)."};
  hami::monitor::Flags flags;
  hami::monitor::AddFlags(app, flags);
  hami::flags::IgnoredFlags ignored;
  ignored.Add(app, hami::flags::KlogFlags());
  hami::flags::GoStyleArgs args(app, argc, argv);
  CLI11_PARSE(app, args.argc(), args.argv());
  return hami::monitor::Run(flags, ignored);
}
