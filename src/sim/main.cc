// hami-sim: the embedded cluster. Subcommands:
//   apiserver --listen HOST:PORT --kubeconfig-out FILE [--tls --cert-dir DIR] [fault injection]
#include <csignal>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/client_flags.h"
#include "sim/apiserver.h"

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
  CLI11_PARSE(app, argc, argv);
  hami::log::SetVerbosity(verbosity);

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
