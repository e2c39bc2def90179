// kubectl-hami: a kubectl plugin showing who holds which GPU slice (docs/KUBECTL_HAMI.md).
//   kubectl hami inspect [NODE...] [-o json|wide] [--no-headers]
//   kubectl hami pods [-n NS | -A] [-o json|wide] [--no-headers]
// It reads the cluster as kubectl does: --kubeconfig, --context, -n, -A, $KUBECONFIG, in-cluster
// config. Flags are kubectl's (pflag): --flag=value or --flag value, -n NS, -nNS, -oJSON.
// Exit status: 0 ok, 1 an API or input error (message on stderr), 2 bad usage.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/kubectl_hami_view.h"
#include "common/clock.h"
#include "common/strings.h"
#include "k8s/client.h"
#include "k8s/kubeconfig.h"

namespace {

constexpr const char* kUsage =
    "kubectl-hami: HAMi's view of a cluster's GPUs (a kubectl plugin: kubectl hami ...).\n\n"
    "Usage:\n"
    "  kubectl hami inspect [NODE...]   per node and device: memory, cores and slices\n"
    "                                   allocated, the pods, the handshake and the node lock\n"
    "  kubectl hami pods [-n NS | -A]   pods using or asking for HAMi devices\n\n"
    "Flags:\n"
    "  -o, --output json|wide   print JSON (the shapes in docs/KUBECTL_HAMI.md) or more columns\n"
    "      --no-headers         no header rows\n"
    "  -n, --namespace NS       the namespace for pods (default: the context's)\n"
    "  -A, --all-namespaces     pods in every namespace\n"
    "      --kubeconfig FILE    kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)\n"
    "      --context NAME       the kubeconfig context (default: current-context)\n"
    "  -h, --help               this text\n\n"
    "Exit status: 0 ok, 1 API or input error, 2 bad usage.\n";

struct Args {
  std::string verb;
  std::vector<std::string> positional;
  std::string output;
  bool no_headers = false;
  std::string ns;
  bool all_namespaces = false;
  std::string kubeconfig;
  std::string context;
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

// kubectl's order; --context applies to the kubeconfig file chosen.
hami::Result<hami::k8s::RestConfig> LoadConfig(const Args& args) {
  if (args.context.empty()) return hami::k8s::LoadConfig(args.kubeconfig);
  std::string path = args.kubeconfig;
  if (path.empty()) {
    if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env) {
      path = std::string(env).substr(0, std::string(env).find(':'));
    } else if (const char* home = std::getenv("HOME"); home != nullptr) {
      path = std::string(home) + "/.kube/config";
    } else {
      return hami::Error{"--context " + hami::Quote(args.context) +
                         ": no kubeconfig (--kubeconfig, KUBECONFIG and HOME unset)"};
    }
  }
  return hami::k8s::LoadKubeconfigFile(path, args.context);
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

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
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
  if (args.verb != "inspect" && args.verb != "pods") {
    return UsageError("unknown command " + hami::Quote(args.verb));
  }
  if (args.verb == "pods" && !args.positional.empty()) {
    return UsageError("pods takes no arguments, got " + hami::Quote(args.positional[0]));
  }
  if (args.all_namespaces && !args.ns.empty()) {
    return UsageError("-n and -A exclude each other");
  }

  auto config = LoadConfig(args);
  if (!config.ok()) {
    std::fprintf(stderr, "kubectl-hami: %s\n", config.error().c_str());
    return 1;
  }
  std::string pod_ns;  // "" = all namespaces
  if (args.verb == "pods" && !args.all_namespaces) {
    pod_ns = args.ns.empty() ? config.value().ns : args.ns;
  }
  // Two requests (nodes, pods): 15 s each keeps an unresponsive API server within 30 s.
  config.value().timeout = std::chrono::seconds(15);
  hami::k8s::Client client(config.value());
  auto nodes = ListItems(client, hami::k8s::resources::kNodes, "");
  if (!nodes.ok()) {
    std::fprintf(stderr, "kubectl-hami: %s\n", nodes.error().c_str());
    return 1;
  }
  auto pods = ListItems(client, hami::k8s::resources::kPods, pod_ns);
  if (!pods.ok()) {
    std::fprintf(stderr, "kubectl-hami: %s\n", pods.error().c_str());
    return 1;
  }
  const hami::SystemTime now = hami::RealClock().Now();
  const hami::cli::TableOptions table{.wide = args.output == "wide", .no_headers = args.no_headers};
  std::string out;
  if (args.verb == "inspect") {
    auto view = hami::cli::BuildInspect(nodes.value(), pods.value(), args.positional, now);
    if (!view.ok()) {
      std::fprintf(stderr, "kubectl-hami: %s\n", view.error().c_str());
      return 1;
    }
    PrintWarnings(view.value().warnings);
    out = args.output == "json" ? hami::cli::InspectJson(view.value())
                                : hami::cli::InspectTable(view.value(), table);
  } else {
    auto view = hami::cli::BuildPods(nodes.value(), pods.value(), now);
    PrintWarnings(view.warnings);
    out = args.output == "json" ? hami::cli::PodsJson(view) : hami::cli::PodsTable(view, table);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
