// kubectl-hami: a kubectl plugin showing who holds which GPU slice (docs/KUBECTL_HAMI.md).
//   kubectl hami inspect [NODE...] [-o json|wide] [--no-headers]
//   kubectl hami pods [-n NS | -A] [-o json|wide] [--no-headers]
//   kubectl hami explain POD [-n NS] [-o json] [--device-config FILE]
//   kubectl hami top [NODE...] [-o json] [--no-headers]
//   kubectl hami decode KIND VALUE | encode KIND JSON
// It reads the cluster as kubectl does: --kubeconfig, --context, -n, -A, $KUBECONFIG, in-cluster
// config. Flags are kubectl's (pflag): --flag=value or --flag value, -n NS, -nNS, -oJSON.
// Colour only on a terminal, and never with NO_COLOR set.
// Exit status: 0 ok, 1 an API or input error (message on stderr), 2 bad usage.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/kinds.h"
#include "cli/kubectl_hami_explain.h"
#include "cli/kubectl_hami_top.h"
#include "cli/kubectl_hami_view.h"
#include "common/clock.h"
#include "common/strings.h"
#include "device/config.h"
#include "k8s/client.h"
#include "k8s/kubeconfig.h"

namespace {

constexpr const char* kUsage =
    "kubectl-hami: HAMi's view of a cluster's GPUs (a kubectl plugin: kubectl hami ...).\n\n"
    "Usage:\n"
    "  kubectl hami inspect [NODE...]   per node and device: memory, cores and slices\n"
    "                                   allocated, the pods, the handshake and the node lock;\n"
    "                                   in DRA mode the GPUs of the ResourceSlices and the\n"
    "                                   claims' shares\n"
    "  kubectl hami pods [-n NS | -A]   pods using or asking for HAMi devices or DRA claims\n"
    "  kubectl hami explain POD         why the pod is where it is, or pending: its requests,\n"
    "                                   the filter per node in words, the node lock, history;\n"
    "                                   in DRA mode its claims and kube-scheduler's allocator\n"
    "                                   per node\n"
    "  kubectl hami top [NODE...]       per container: memory used (the monitors' /metrics,\n"
    "                                   through the API server's pod proxy) vs. allocated\n"
    "  kubectl hami decode KIND VALUE   an annotation value as JSON (hamictl's kinds)\n"
    "  kubectl hami encode KIND JSON    JSON back to the exact annotation value\n"
    "  kubectl hami kinds               list the kinds\n\n"
    "Flags:\n"
    "  -o, --output json|wide   print JSON (the shapes in docs/KUBECTL_HAMI.md) or more columns\n"
    "      --no-headers         no header rows\n"
    "  -n, --namespace NS       the namespace for pods (default: the context's)\n"
    "  -A, --all-namespaces     pods in every namespace\n"
    "      --kubeconfig FILE    kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)\n"
    "      --context NAME       the kubeconfig context (default: current-context)\n"
    "      --device-config FILE explain: the scheduler's device-config.yaml (default: the\n"
    "                           chart's)\n"
    "      --scheduler-name NAME explain: the schedulerName HAMi's webhook writes (default:\n"
    "                           hami-scheduler)\n"
    "  -h, --help               this text\n\n"
    "VALUE or JSON may be \"-\" to read standard input. Colour only on a terminal and without\n"
    "NO_COLOR. Exit status: 0 ok, 1 API or input error, 2 bad usage.\n";

struct Args {
  std::string verb;
  std::vector<std::string> positional;
  std::string output;
  bool no_headers = false;
  std::string ns;
  bool all_namespaces = false;
  std::string kubeconfig;
  std::string context;
  std::string device_config;
  std::string scheduler_name = "hami-scheduler";
  bool help = false;
};

int UsageError(const std::string& message) {
  std::fprintf(stderr, "kubectl-hami: %s\nRun 'kubectl hami --help' for usage.\n", message.c_str());
  return 2;
}

// Returns "" on success, else the usage error.
std::string ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& flag, std::string* out) -> std::string {
      if (i + 1 >= argc) return "flag needs an argument: " + flag;
      *out = argv[++i];
      return "";
    };
    std::string err;
    if (a == "--") {
      for (++i; i < argc; ++i) args->positional.push_back(argv[i]);
      break;
    } else if (a == "-h" || a == "--help") {
      args->help = true;
    } else if (a == "-A" || a == "--all-namespaces") {
      args->all_namespaces = true;
    } else if (a == "--no-headers") {
      args->no_headers = true;
    } else if (a == "-o" || a == "--output") {
      err = value(a, &args->output);
    } else if (a.starts_with("--output=")) {
      args->output = a.substr(9);
    } else if (a.starts_with("-o") && a.size() > 2) {
      args->output = a.substr(a[2] == '=' ? 3 : 2);
    } else if (a == "-n" || a == "--namespace") {
      err = value(a, &args->ns);
    } else if (a.starts_with("--namespace=")) {
      args->ns = a.substr(12);
    } else if (a.starts_with("-n") && a.size() > 2 && a[1] != '-') {
      args->ns = a.substr(a[2] == '=' ? 3 : 2);
    } else if (a == "--kubeconfig") {
      err = value(a, &args->kubeconfig);
    } else if (a.starts_with("--kubeconfig=")) {
      args->kubeconfig = a.substr(13);
    } else if (a == "--context") {
      err = value(a, &args->context);
    } else if (a.starts_with("--context=")) {
      args->context = a.substr(10);
    } else if (a == "--scheduler-name") {
      err = value(a, &args->scheduler_name);
    } else if (a.starts_with("--scheduler-name=")) {
      args->scheduler_name = a.substr(17);
    } else if (a == "--device-config") {
      err = value(a, &args->device_config);
    } else if (a.starts_with("--device-config=")) {
      args->device_config = a.substr(16);
    } else if (a.size() > 1 && a[0] == '-') {
      return "unknown flag: " + a;
    } else if (args->verb.empty()) {
      args->verb = a;
    } else {
      args->positional.push_back(a);
    }
    if (!err.empty()) return err;
  }
  if (args->output != "" && args->output != "json" && args->output != "wide") {
    return "--output: want json or wide, got " + hami::Quote(args->output);
  }
  return "";
}

// kubectl's order (the files of $KUBECONFIG merged); --context applies to the kubeconfig chosen.
hami::Result<hami::k8s::RestConfig> LoadConfig(const Args& args) {
  return hami::k8s::LoadConfig(args.kubeconfig, args.context);
}

hami::Result<std::vector<hami::k8s::Json>> ListItems(hami::k8s::Client& client,
                                                     const hami::k8s::Resource& resource,
                                                     const std::string& ns) {
  auto listed = client.ListAll(resource, ns, {});
  if (!listed.ok()) {
    return hami::Error{"listing " + resource.plural + ": " + listed.error().ToString()};
  }
  return std::move(listed.value().items);
}

namespace res = hami::k8s::resources;

// DRA mode's ResourceSlices and ResourceClaims (all namespaces). A cluster that does not serve
// resource.k8s.io/v1 (404) has none; a refusal (403, ...) is a warning and shows no claims; a
// server that does not answer ends the command as any other list does.
hami::Result<hami::cli::DraObjects> ListDra(hami::k8s::Client& client,
                                            std::vector<std::string>* warnings) {
  hami::cli::DraObjects out;
  for (auto [resource, items] : {std::pair{&res::kResourceSlices, &out.slices},
                                 std::pair{&res::kResourceClaims, &out.claims}}) {
    auto listed = client.ListAll(*resource, "", {});
    if (listed.ok()) {
      *items = std::move(listed.value().items);
    } else if (listed.error().code == 0) {
      return hami::Error{"listing " + resource->plural + ": " + listed.error().ToString()};
    } else if (listed.error().code != 404) {
      warnings->push_back("listing " + resource->plural + ": " + listed.error().ToString() +
                          " (DRA claims not shown)");
    }
  }
  return out;
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) {
    std::fprintf(stderr, "warning: %s\n", hami::EscapeTerminal(w).c_str());
  }
}

// decode/encode: hamictl's kinds; no cluster needed.
int Codec(const Args& args) {
  if (args.positional.size() != 2) {
    return UsageError(args.verb + " wants KIND and a value, got " +
                      std::to_string(args.positional.size()) + " argument(s)");
  }
  const std::string& kind_name = args.positional[0];
  for (const auto& k : hami::cli::Kinds()) {
    if (k.name != kind_name) continue;
    std::string input = args.positional[1];
    if (input == "-") {
      input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      if (!input.empty() && input.back() == '\n') input.pop_back();
    }
    auto r = args.verb == "decode" ? k.decode(input) : k.encode(input);
    if (!r.ok()) {
      std::fprintf(stderr, "kubectl-hami %s %s: %s\n", args.verb.c_str(), kind_name.c_str(),
                   hami::EscapeTerminal(r.error()).c_str());
      return 1;
    }
    const std::string out = hami::EscapeTerminal(r.value(), /*keep_newlines=*/true);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  return UsageError("unknown kind " + hami::Quote(kind_name) + " (see 'kubectl hami kinds')");
}

// Colour: a terminal, NO_COLOR unset or empty (no-color.org), and not JSON.
bool UseColour(const Args& args) {
  if (args.output == "json") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && *no_color != '\0') return false;
  return isatty(STDOUT_FILENO) == 1;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "kubectl-hami: %s\n", hami::EscapeTerminal(message, true).c_str());
  return 1;
}

// The explained pod's objects: the pod, nodes, all pods, its events, its namespace's quotas.
int Explain(const Args& args, hami::k8s::Client& client, const std::string& ns,
            const hami::cli::TableOptions& table) {
  std::string name = args.positional[0];
  for (const char* prefix : {"pod/", "pods/"}) {
    if (name.starts_with(prefix)) name = name.substr(std::string(prefix).size());
  }
  hami::cli::ExplainInput input;
  if (!args.device_config.empty()) {
    std::ifstream in(args.device_config);
    if (!in) return Fail("--device-config " + hami::Quote(args.device_config) + ": cannot read");
    std::stringstream text;
    text << in.rdbuf();
    auto loaded = hami::device::LoadDeviceConfig(text.str());
    if (!loaded.ok()) return Fail("--device-config " + args.device_config + ": " + loaded.error());
    input.config = std::move(loaded.value());
  }
  auto pod = client.Get(res::kPods, ns, name);
  if (!pod.ok()) {
    if (pod.error().code == 404) return Fail("pod " + hami::Quote(ns + "/" + name) + ": not found");
    return Fail("getting pod " + ns + "/" + name + ": " + pod.error().ToString());
  }
  input.pod = std::move(pod.value());
  auto nodes = ListItems(client, res::kNodes, "");
  if (!nodes.ok()) return Fail(nodes.error());
  input.nodes = std::move(nodes.value());
  auto pods = ListItems(client, res::kPods, "");
  if (!pods.ok()) return Fail(pods.error());
  input.pods = std::move(pods.value());
  std::vector<std::string> warnings;
  hami::k8s::ListOptions by_pod;
  by_pod.field_selector = "involvedObject.name=" + name;
  auto events = client.ListAll(res::kEvents, ns, by_pod);
  if (events.ok()) {
    input.events = std::move(events.value().items);
  } else {
    warnings.push_back("listing events: " + events.error().ToString() + " (no history)");
  }
  auto quotas = client.ListAll(res::kResourceQuotas, ns, {});
  if (quotas.ok()) {
    input.quotas = std::move(quotas.value().items);
  } else {
    warnings.push_back("listing resourcequotas: " + quotas.error().ToString() +
                       " (quota not checked)");
  }
  // DRA mode: slices, claims and device classes for the pod's claims and the allocator.
  auto dra = ListDra(client, &warnings);
  if (!dra.ok()) return Fail(dra.error());
  input.dra = std::move(dra.value());
  if (!input.dra.slices.empty() || !input.dra.claims.empty()) {
    auto classes = client.ListAll(res::kDeviceClasses, "", {});
    if (classes.ok()) {
      input.device_classes = std::move(classes.value().items);
    } else if (classes.error().code != 404) {
      warnings.push_back("listing deviceclasses: " + classes.error().ToString() +
                         " (the allocator finds no class)");
    }
  }
  input.now = hami::RealClock().Now();
  input.scheduler_name = args.scheduler_name;
  auto view = hami::cli::BuildExplain(input);
  if (!view.ok()) return Fail(view.error());
  warnings.insert(warnings.end(), view.value().warnings.begin(), view.value().warnings.end());
  PrintWarnings(warnings);
  std::string out = args.output == "json" ? hami::cli::ExplainJson(view.value())
                                          : hami::cli::ExplainText(view.value(), table);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

// Each node's monitor /metrics through the API server's pod proxy; 5 s per node and 20 s in all,
// so a cluster of dead monitors still answers within 30 s.
hami::cli::NodeMetrics FetchMetrics(const hami::k8s::RestConfig& config,
                                    const std::vector<nlohmann::json>& pods,
                                    const std::vector<std::string>& node_names) {
  hami::k8s::RestConfig proxy_config = config;
  proxy_config.timeout = std::chrono::seconds(5);
  hami::k8s::Client proxy(proxy_config);
  const hami::Clock& clock = hami::RealClock();
  const hami::SystemTime deadline = clock.Now() + std::chrono::seconds(20);
  const auto monitors = hami::cli::FindMonitors(pods);
  hami::cli::NodeMetrics out;
  for (const auto& node : node_names) {
    auto m = monitors.find(node);
    if (m == monitors.end()) continue;
    if (clock.Now() >= deadline) {
      out.emplace(node, hami::Error{"not asked: 20 s spent on other monitors"});
      continue;
    }
    auto body = proxy.Request("GET", m->second.ProxyPath());
    if (body.ok()) {
      out.emplace(node, std::move(body.value()));
    } else {
      out.emplace(node,
                  hami::Error{"GET " + m->second.ProxyPath() + ": " + body.error().ToString()});
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (std::string err = ParseArgs(argc, argv, &args); !err.empty()) return UsageError(err);
  if (args.help || args.verb == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.verb.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (args.verb == "kinds") {
    for (const auto& k : hami::cli::Kinds())
      std::printf("%-22s %s\n", k.name.c_str(), k.help.c_str());
    return 0;
  }
  if (args.verb == "decode" || args.verb == "encode") return Codec(args);
  if (args.verb != "inspect" && args.verb != "pods" && args.verb != "explain" &&
      args.verb != "top") {
    return UsageError("unknown command " + hami::Quote(args.verb));
  }
  if (args.verb == "pods" && !args.positional.empty()) {
    return UsageError("pods takes no arguments, got " + hami::Quote(args.positional[0]));
  }
  if (args.verb == "explain" && args.positional.size() != 1) {
    return UsageError("explain wants one POD, got " + std::to_string(args.positional.size()));
  }
  if (args.verb == "explain" && args.all_namespaces) {
    return UsageError("explain takes -n NS, not -A");
  }
  if ((args.verb == "explain" || args.verb == "top") && args.output == "wide") {
    return UsageError(args.verb + " has no -o wide");
  }
  if (args.all_namespaces && !args.ns.empty()) {
    return UsageError("-n and -A exclude each other");
  }

  auto config = LoadConfig(args);
  if (!config.ok()) return Fail(config.error());
  const hami::cli::TableOptions table{
      .wide = args.output == "wide", .no_headers = args.no_headers, .colour = UseColour(args)};
  // Each request fails within 10 s (15 s for the two of inspect/pods), and the first failure
  // ends the command: an unresponsive API server costs at most 30 s.
  config.value().timeout = std::chrono::seconds(args.verb == "explain" ? 10 : 15);
  hami::k8s::Client client(config.value());
  if (args.verb == "explain") {
    return Explain(args, client, args.ns.empty() ? config.value().ns : args.ns, table);
  }
  std::string pod_ns;  // "" = all namespaces
  if (args.verb == "pods" && !args.all_namespaces) {
    pod_ns = args.ns.empty() ? config.value().ns : args.ns;
  }
  auto nodes = ListItems(client, res::kNodes, "");
  if (!nodes.ok()) return Fail(nodes.error());
  auto pods = ListItems(client, res::kPods, pod_ns);
  if (!pods.ok()) return Fail(pods.error());
  std::vector<std::string> list_warnings;
  auto dra = ListDra(client, &list_warnings);
  if (!dra.ok()) return Fail(dra.error());
  PrintWarnings(list_warnings);
  const hami::SystemTime now = hami::RealClock().Now();
  std::string out;
  if (args.verb == "inspect") {
    auto view =
        hami::cli::BuildInspect(nodes.value(), pods.value(), args.positional, now, dra.value());
    if (!view.ok()) return Fail(view.error());
    PrintWarnings(view.value().warnings);
    out = args.output == "json" ? hami::cli::InspectJson(view.value())
                                : hami::cli::InspectTable(view.value(), table);
  } else if (args.verb == "top") {
    // The nodes first (a name with no node is an error before any proxy request).
    auto nodes_view =
        hami::cli::BuildInspect(nodes.value(), pods.value(), args.positional, now, dra.value());
    if (!nodes_view.ok()) return Fail(nodes_view.error());
    std::vector<std::string> names;
    for (const auto& n : nodes_view.value().nodes) names.push_back(n.name);
    auto metrics = FetchMetrics(config.value(), pods.value(), names);
    auto view = hami::cli::BuildTop(nodes.value(), pods.value(), args.positional, metrics, now,
                                    dra.value());
    if (!view.ok()) return Fail(view.error());
    PrintWarnings(view.value().warnings);
    out = args.output == "json" ? hami::cli::TopJson(view.value())
                                : hami::cli::TopTable(view.value(), table);
  } else {
    auto view = hami::cli::BuildPods(nodes.value(), pods.value(), now, dra.value());
    PrintWarnings(view.warnings);
    out = args.output == "json" ? hami::cli::PodsJson(view) : hami::cli::PodsTable(view, table);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
