// hami-sim: the embedded cluster. Subcommands:
//   apiserver --listen HOST:PORT --kubeconfig-out FILE [--tls --cert-dir DIR] [fault injection]
//   run SCENARIO.yaml [--report FILE] [--serve] [--manifests FILE] (needs the hami_sim_run
//   library)
//   loadgen --nodes N --bound-pods M --pods P [--report FILE] (sim/loadgen.h; hami_sim_run too)
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "common/flags.h"
#include "common/log.h"
#include "common/strings.h"
#include "k8s/client_flags.h"
#include "sim/apiserver/apiserver.h"
#ifdef HAMI_SIM_HAS_RUN
#include <nlohmann/json.hpp>

#include "sim/loadgen.h"
#include "sim/runner.h"
#endif

namespace {

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view s) {
  auto d = hami::k8s::ParseGoDuration(s);
  if (!d) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

int RunApiserver(hami::sim::ApiServerOptions options, const std::string& listen,
                 const std::string& kubeconfig_out) {
  size_t colon = listen.rfind(':');
  auto port =
      colon == std::string::npos ? std::nullopt : hami::ParseInt32(listen.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    std::cerr << "--listen " << hami::Quote(listen) << ": want HOST:PORT\n";
    return 2;
  }
  options.host = listen.substr(0, colon);
  options.port = *port;
  // Block the stop signals before any thread starts so that only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  hami::sim::ApiServer server(options);
  if (auto st = server.Start(); !st) {
    std::cerr << st.error() << "\n";
    return 1;
  }
  if (!kubeconfig_out.empty()) {
    if (auto st = server.WriteKubeconfig(kubeconfig_out); !st) {
      std::cerr << st.error() << "\n";
      return 1;
    }
  }
  std::cout << "hami-sim apiserver listening on " << server.url() << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  HAMI_INFO("apiserver: signal {}, stopping", sig);
  server.Stop();
  return 0;
}

#ifdef HAMI_SIM_HAS_RUN
struct RunFlags {
  std::string scenario;
  std::string report;
  bool serve = false;
  int port = 0;
  std::string kubeconfig_out;  // empty: <mkdtemp dir>/kubeconfig
  std::string kubelet_latency;
  std::string log_file;
  std::string manifests;
  bool no_color = false;
};

FILE* g_log_file = nullptr;

// `run` keeps the terminal for the report: component logs go to --log-file, or only warnings
// and errors to stderr (every line at -v 1 and above).
void RunLogSink(std::string_view line) {
  if (g_log_file) {
    std::fwrite(line.data(), 1, line.size(), g_log_file);
    std::fputc('\n', g_log_file);
    return;
  }
  if (!line.empty() && line[0] == 'I' && hami::log::Verbosity() == 0) return;
  std::cerr << line << "\n";
}

int RunScenario(const RunFlags& f) {
  if (!f.log_file.empty()) {
    g_log_file = std::fopen(f.log_file.c_str(), "w");
    if (!g_log_file) {
      std::cerr << "--log-file " << hami::Quote(f.log_file) << ": cannot write\n";
      return 2;
    }
  }
  hami::log::SetSink(RunLogSink);
  auto scenario = hami::sim::LoadScenarioFile(f.scenario);
  if (!scenario) {
    std::cerr << scenario.error() << "\n";
    return 2;
  }
  hami::sim::RunOptions options;
  options.api_port = f.port;
  if (!f.manifests.empty()) {
    auto manifests = hami::sim::LoadManifestsFile(f.manifests);
    if (!manifests) {
      std::cerr << manifests.error() << "\n";
      return 2;
    }
    options.manifests = std::move(*manifests);
  }
  if (!f.kubelet_latency.empty()) {
    options.kubelet_latency = ParseDuration(f.kubelet_latency);
    if (!options.kubelet_latency) {
      std::cerr << "--kubelet-latency: want a duration like 20ms\n";
      return 2;
    }
  }
  const bool color = !f.no_color && isatty(STDOUT_FILENO);
  options.progress = [color](const std::string& line) {
    std::cout << (color ? "\033[2m" : "") << "... " << line << (color ? "\033[0m" : "")
              << std::endl;
  };
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  options.serving = f.serve;
  if (f.serve) pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (!scenario->description.empty()) std::cout << scenario->description << "\n";
  hami::sim::Runner runner(std::move(*scenario), options);
  auto report = runner.Run();
  if (!report) {
    std::cerr << "hami-sim run: " << report.error() << "\n";
    return 1;
  }
  std::cout << hami::sim::RenderText(*report, color) << std::flush;
  if (!f.report.empty()) {
    std::ofstream out(f.report);
    out << hami::sim::ReportToJson(*report).dump(2) << "\n";
    if (!out) {
      std::cerr << "--report " << hami::Quote(f.report) << ": cannot write\n";
      return 1;
    }
    std::cout << "\nJSON report written to " << f.report << "\n";
  }
  if (f.serve) {
    runner.AdmitApiPods();  // kubectl's pods meet the webhook, as the scenario's did
    // The kubeconfig goes to a fresh temporary directory (not the current one) unless
    // --kubeconfig-out names a file; either way its absolute path is printed.
    std::string kubeconfig = f.kubeconfig_out;
    if (kubeconfig.empty()) {
      std::error_code ec;
      std::string tmpl = (std::filesystem::temp_directory_path(ec) / "hami-sim-XXXXXX").string();
      if (ec || !mkdtemp(tmpl.data())) {
        std::cerr << "hami-sim run --serve: cannot create a temporary directory "
                  << hami::Quote(tmpl) << "\n";
        return 1;
      }
      kubeconfig = tmpl + "/kubeconfig";
    }
    kubeconfig = std::filesystem::absolute(kubeconfig).string();
    if (auto st = runner.api()->WriteKubeconfig(kubeconfig); !st) {
      std::cerr << st.error() << "\n";
      return 1;
    }
    std::cout << "\nThe cluster keeps running. Its kubeconfig is " << kubeconfig << "\n"
              << "  export KUBECONFIG=" << kubeconfig << "\n"
              << "  kubectl get pods -o wide\n"
              << "  kubectl get nodes -o yaml\n";
    std::cout << "hami-scheduler metrics: http://127.0.0.1:" << runner.scheduler_metrics_port()
              << "/metrics\n";
    for (const hami::sim::MonitorAddress& m : runner.monitors()) {
      std::cout << "hami-vgpu-monitor of node " << m.node << " (pod " << m.pod
                << "): http://127.0.0.1:" << m.port << "/metrics\n";
    }
    std::cout << "Ctrl-C stops it." << std::endl;
    int sig = 0;
    sigwait(&signals, &sig);
  }
  runner.Stop();
  if (g_log_file) std::fclose(g_log_file);
  if (report->overcommitted_devices > 0 || report->unknown_device_allocations > 0) return 3;
  return report->timed_out ? 4 : 0;
}

// `loadgen`: SIGINT/SIGTERM kill the children (and end loadgen) from a sigwait thread; the
// signals are blocked before any thread starts, the children unblock them.
int RunLoadgenCommand(hami::sim::LoadgenOptions options, const std::string& report_file) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    hami::sim::KillLoadgenChildren();
    _exit(128 + sig);
  }).detach();
  options.progress = [](const std::string& line) { std::cout << "... " << line << std::endl; };
  auto report = hami::sim::RunLoadgen(options);
  if (!report) {
    std::cerr << "hami-sim loadgen: " << report.error() << "\n";
    return 1;
  }
  const std::string text = hami::sim::LoadgenReportToJson(*report).dump(2);
  std::cout << text << std::endl;
  if (!report_file.empty()) {
    std::ofstream out(report_file);
    out << text << "\n";
    if (!out) {
      std::cerr << "--report " << hami::Quote(report_file) << ": cannot write\n";
      return 1;
    }
  }
  if (report->overcommitted_devices > 0 || report->unknown_device_allocations > 0) return 3;
  return report->pods_failed > 0 ? 4 : 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hami-sim: an embedded Kubernetes cluster for HAMi"};
  app.require_subcommand(1);
  int verbosity = 0;
  app.add_option("-v,--v", verbosity, "log verbosity");

  CLI::App* apiserver = app.add_subcommand("apiserver", "in-memory Kubernetes API server");
  hami::sim::ApiServerOptions options;
  std::string listen = "127.0.0.1:6443";
  std::string kubeconfig_out;
  std::string latency = "0ms";
  std::string bookmark = "1s";
  apiserver->add_option("--listen", listen, "HOST:PORT (port 0 picks a free one)");
  apiserver->add_option("--kubeconfig-out", kubeconfig_out, "write a kubeconfig for this server");
  apiserver->add_flag("--tls", options.tls, "serve HTTPS with generated certificates");
  apiserver->add_option("--cert-dir", options.cert_dir, "where --tls writes its certificates");
  apiserver->add_option("--token", options.token, "bearer token accepted under --tls");
  apiserver->add_option("--event-window", options.event_window, "events a watch can resume from");
  apiserver->add_option("--bookmark-interval", bookmark, "watch bookmark period (e.g. 1s)");
  apiserver->add_option("--fail-rate", options.fail_rate, "fraction of API requests failing 500")
      ->check(CLI::Range(0.0, 1.0));
  apiserver->add_option("--latency", latency, "delay added to each API request (e.g. 50ms)");
  apiserver->add_option("--drop-watch-every", options.drop_watch_every,
                        "close each watch after N events (0: never)");
#ifdef HAMI_SIM_HAS_RUN
  CLI::App* run = app.add_subcommand("run", "run a scenario on the embedded cluster and report");
  RunFlags run_flags;
  run->add_option("scenario", run_flags.scenario, "scenario YAML (see examples/)")->required();
  run->add_option("--report", run_flags.report, "also write the report as JSON to this file");
  run->add_flag("--serve", run_flags.serve,
                "keep the cluster up afterwards for kubectl, until Ctrl-C");
  run->add_option("--port", run_flags.port, "API server port (0: any free one)");
  run->add_option("--kubeconfig-out", run_flags.kubeconfig_out,
                  "kubeconfig --serve writes (default: a new temporary directory)");
  run->add_option("--kubelet-latency", run_flags.kubelet_latency,
                  "override the scenario's kubelet admission latency (e.g. 0ms)");
  run->add_option("--log-file", run_flags.log_file, "write component logs here");
  run->add_option("--manifests", run_flags.manifests,
                  "`helm template` output: enforce its RBAC on every component (docs/RBAC.md)");
  run->add_flag("--no-color", run_flags.no_color, "no ANSI colors");

  CLI::App* loadgen = app.add_subcommand(
      "loadgen", "hami-scheduler's throughput apart from the simulator (docs/PERFORMANCE.md)");
  hami::sim::LoadgenOptions lg;
  std::string lg_report;
  int lg_timeout_s = 900;
  loadgen->add_option("--nodes", lg.nodes, "nodes, 8 GPUs each");
  loadgen->add_option("--bound-pods", lg.bound_pods, "running pods holding a GPU slice");
  loadgen->add_option("--pods", lg.pods, "new pods to schedule");
  loadgen->add_option("--report", lg_report, "also write the JSON report to this file");
  loadgen->add_option("--bind-workers", lg.bind_workers, "concurrent /bind calls");
  loadgen->add_option("--bin-dir", lg.bin_dir,
                      "where hami-sim and hami-scheduler are (default: beside this binary)");
  loadgen->add_option("--work-dir", lg.work_dir,
                      "keep the kubeconfig and the children's logs here (default: a temp dir)");
  loadgen->add_option("--node-scheduler-policy", lg.node_policy, "the scheduler's node policy");
  loadgen->add_option("--scheduler-flag", lg.scheduler_flags, "one more hami-scheduler flag");
  loadgen->add_flag("--answer-handshakes", lg.answer_handshakes,
                    "nodes start Reported and a device plugin answers the scheduler's Requesting "
                    "every 10 s (the generic vendors' handshake); default: nodes stay Requesting, "
                    "as NVIDIA nodes do in HAMi v2.8+");
  loadgen->add_option("--timeout", lg_timeout_s, "seconds for the whole run");
#endif
  hami::flags::GoStyleArgs args(app, argc, argv);  // -v=4, -listen=... as Go flags read them
  CLI11_PARSE(app, args.argc(), args.argv());
  hami::log::SetVerbosity(verbosity);
#ifdef HAMI_SIM_HAS_RUN
  if (run->parsed()) return RunScenario(run_flags);
  if (loadgen->parsed()) {
    lg.timeout = std::chrono::seconds(lg_timeout_s);
    return RunLoadgenCommand(lg, lg_report);
  }
#endif

  if (apiserver->parsed()) {
    auto lat = ParseDuration(latency);
    auto bm = ParseDuration(bookmark);
    if (!lat || !bm) {
      std::cerr << "--latency/--bookmark-interval: want a duration like 250ms or 2s\n";
      return 2;
    }
    options.latency = *lat;
    options.bookmark_interval = *bm;
    if (options.tls && options.cert_dir.empty()) {
      options.cert_dir = kubeconfig_out.empty() ? "hami-sim-certs" : kubeconfig_out + ".certs";
    }
    return RunApiserver(options, listen, kubeconfig_out);
  }
  return 0;
}
