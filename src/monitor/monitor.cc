#include "monitor/monitor.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "net/http_server.h"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;

// "host:port" / ":port" -> (host, port); host defaults to 0.0.0.0.
bool SplitHostPort(const std::string& bind, std::string* host, int* port) {
  size_t colon = bind.rfind(':');
  if (colon == std::string::npos) return false;
  *host = bind.substr(0, colon);
  if (host->empty()) *host = "0.0.0.0";
  std::optional<int32_t> p = ParseInt32(bind.substr(colon + 1));
  if (!p || *p < 0 || *p > 65535) return false;
  *port = *p;
  return true;
}

struct PodInfo {
  std::string ns;
  std::string name;
  std::vector<std::string> containers;
};

std::string Str(const k8s::Json& j, const char* a, const char* b) {
  if (!j.is_object() || !j.contains(a) || !j[a].is_object() || !j[a].contains(b) ||
      !j[a][b].is_string()) {
    return "";
  }
  return j[a][b].get<std::string>();
}

}  // namespace

Monitor::Monitor(k8s::Client& client, MonitorOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : RealClock()) {}

Monitor::~Monitor() { Stop(); }

Result<int> Monitor::Start() {
  if (options_.node_name.empty()) return Error{"NODE_NAME: required, got \"\""};
  std::string host;
  int port = 0;
  if (!SplitHostPort(options_.metrics_bind, &host, &port)) {
    return Error{"--metrics-bind-address: want host:port, got " + Quote(options_.metrics_bind)};
  }
  k8s::InformerOptions pod_options;
  pod_options.label_selector = "hami.io/vgpu-node=" + options_.node_name;
  // The scan reads names, namespace, UID and container names only.
  pod_options.transform = [](k8s::Json pod) {
    k8s::Json out;
    out["metadata"] = pod["metadata"];
    out["metadata"].erase("managedFields");
    out["metadata"].erase("annotations");
    if (pod.contains("spec") && pod["spec"].is_object() && pod["spec"].contains("containers")) {
      out["spec"]["containers"] = k8s::Json::array();
      for (const auto& c : pod["spec"]["containers"]) {
        if (c.is_object() && c.contains("name")) {
          out["spec"]["containers"].push_back({{"name", c["name"]}});
        }
      }
    }
    return out;
  };
  pods_ = std::make_unique<k8s::Informer>(client_, k8s::resources::kPods, pod_options,
                                          k8s::InformerHandlers{});
  pods_->Start();

  net::HttpServerOptions http_options;
  http_options.name = "monitor";
  http_options.workers = 2;
  http_options.clock = &clock_;
  http_ = std::make_unique<net::HttpServer>(http_options);
  net::RouteOptions inline_route;
  inline_route.inline_handler = true;
  http_->Route("GET", "/healthz", inline_route, [](net::Request, net::Responder r) {
    r.Send(net::Response{200, "text/plain", "ok"});
  });
  http_->Route("GET", "/metrics", net::RouteOptions{}, [this](net::Request, net::Responder r) {
    r.Send(net::Response{200, "text/plain; version=0.0.4; charset=utf-8", Metrics()});
  });
  auto listening = http_->Listen(host, port);
  if (!listening) {
    return Error{"--metrics-bind-address " + Quote(options_.metrics_bind) + ": " +
                 listening.error()};
  }
  return *listening;
}

void Monitor::Stop() {
  if (http_) http_->Stop();
  if (pods_) pods_->Stop();
}

bool Monitor::synced() const { return pods_ && pods_->HasSynced(); }

std::vector<ContainerUsage> Monitor::Scan() {
  std::vector<ContainerUsage> out;
  std::map<std::string, PodInfo> by_uid;
  if (pods_) {
    for (const k8s::ObjectRef& pod : pods_->List()) {
      const std::string uid = Str(*pod, "metadata", "uid");
      if (uid.empty()) continue;
      PodInfo info{Str(*pod, "metadata", "namespace"), Str(*pod, "metadata", "name"), {}};
      const k8s::Json& spec = (*pod).contains("spec") ? (*pod)["spec"] : k8s::Json();
      if (spec.is_object() && spec.contains("containers") && spec["containers"].is_array()) {
        for (const auto& c : spec["containers"]) {
          if (c.is_object() && c.contains("name") && c["name"].is_string()) {
            info.containers.push_back(c["name"].get<std::string>());
          }
        }
      }
      by_uid[uid] = std::move(info);
    }
  }
  std::set<std::string> problems;
  const PidAlive alive = ProcPidAlive(options_.proc_root);
  const fs::path root = fs::path(options_.hook_path) / "containers";
  std::error_code ec;
  fs::directory_iterator dirs(root, ec);
  if (ec) {
    problems.insert("monitor: cannot list " + Quote(root.string()) + ": " + ec.message());
    dirs = fs::directory_iterator();
  }
  std::map<std::string, ContainerUsage> found;  // by directory name: a stable order
  for (const fs::directory_entry& dir : dirs) {
    std::error_code dec;
    if (!dir.is_directory(dec)) continue;
    const std::string name = dir.path().filename().string();
    const size_t sep = name.find('_');  // pod UIDs have no '_'; container names may
    if (sep == std::string::npos) continue;
    auto pod = by_uid.find(name.substr(0, sep));
    if (pod == by_uid.end()) continue;  // not (or no longer) a vGPU pod of this node
    const std::string container = name.substr(sep + 1);
    bool known = false;
    for (const std::string& c : pod->second.containers) known = known || c == container;
    if (!known) continue;
    // Region files: *.cache at least as large as a v0 region (the device plugin creates the
    // file empty at Allocate; libvgpu sizes it when the first CUDA process starts).
    std::vector<std::string> regions;
    for (const fs::directory_entry& f : fs::directory_iterator(dir.path(), dec)) {
      std::error_code fec;
      const std::string fname = f.path().filename().string();
      if (fname.size() < 6 || fname.compare(fname.size() - 6, 6, ".cache") != 0) continue;
      if (!f.is_regular_file(fec)) continue;
      const auto size = f.file_size(fec);
      if (fec || size < kRegionV0Size) continue;
      regions.push_back(f.path().string());
    }
    if (regions.empty()) continue;
    std::sort(regions.begin(), regions.end());
    if (regions.size() > 1) {
      problems.insert("monitor: skipping " + Quote(dir.path().string()) + ": " +
                      std::to_string(regions.size()) + " region files (" + Join(regions, ", ") +
                      "), want one");
      continue;
    }
    auto region = ReadRegionFile(regions[0], alive);
    if (!region) {
      problems.insert("monitor: skipping container " + pod->second.ns + "/" + pod->second.name +
                      "/" + container + ": " + region.error());
      continue;
    }
    found[name] = ContainerUsage{pod->second.ns, pod->second.name, container, std::move(*region)};
  }
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    for (const std::string& p : problems) {
      if (problems_.count(p) == 0) HAMI_WARN("{}", p);
    }
    problems_ = std::move(problems);
  }
  for (auto& [name, usage] : found) out.push_back(std::move(usage));
  return out;
}

std::string Monitor::Metrics() {
  return RenderMetrics(Scan(), options_.legacy_metrics, clock_.Now());
}

}  // namespace hami::monitor
