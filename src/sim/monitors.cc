#include "sim/monitors.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>
#include <tuple>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/api_error.h"
#include "monitor/monitor.h"
#include "protocol/keys.h"

namespace hami::sim {
namespace {

using k8s::Json;
constexpr const char* kNamespace = "kube-system";

// The chart's DaemonSet whose pods carry the monitor: the device plugin's, or in DRA mode
// hami-dra-plugin's (docs/DRA.md "Deploying").
std::string Component(bool dra) { return dra ? "hami-dra-plugin" : "hami-device-plugin"; }
std::string PodName(const std::string& node, bool dra) { return Component(dra) + "-" + node; }

// Parses `{a="x",b="y"}` starting at text[i] == '{'; leaves i after the '}'.
bool ParseLabels(std::string_view text, size_t& i, std::map<std::string, std::string>* out) {
  ++i;  // '{'
  while (i < text.size() && text[i] != '}') {
    const size_t eq = text.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= text.size() || text[eq + 1] != '"') return false;
    std::string name(text.substr(i, eq - i));
    std::string value;
    size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        ++j;
        value += text[j] == 'n' ? '\n' : text[j];
      } else {
        value += text[j];
      }
    }
    if (j >= text.size()) return false;
    (*out)[std::move(name)] = std::move(value);
    i = j + 1;
    if (i < text.size() && text[i] == ',') ++i;
  }
  if (i >= text.size()) return false;
  ++i;  // '}'
  return true;
}

}  // namespace

std::vector<deviceplugin::GpuSample> SimulatedHostGpus(
    const std::vector<deviceplugin::GpuDevice>& gpus,
    const std::vector<monitor::ContainerUsage>& containers) {
  std::vector<deviceplugin::GpuSample> out;
  for (const deviceplugin::GpuDevice& g : gpus) {
    deviceplugin::GpuSample s;
    s.index = static_cast<unsigned>(g.index);
    s.uuid = g.uuid;
    s.name = g.model;
    s.has_memory = true;
    s.has_utilization = true;
    uint64_t util = 0;
    for (const monitor::ContainerUsage& c : containers) {
      for (const monitor::DeviceUsage& d : c.region.devices) {
        if (d.uuid != g.uuid) continue;
        s.memory_used_bytes += d.total;
        util += d.sm_util;
      }
    }
    s.gpu_utilization = static_cast<unsigned>(std::min<uint64_t>(util, 100));
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<MetricSample>> ParseMetricFamily(std::string_view text,
                                                    std::string_view family) {
  std::vector<MetricSample> out;
  size_t line_no = 0;
  for (std::string_view line : Split(text, '\n')) {
    ++line_no;
    if (line.size() <= family.size() || line.compare(0, family.size(), family) != 0) continue;
    const char next = line[family.size()];
    if (next != '{' && next != ' ') continue;  // another family sharing the prefix
    MetricSample s;
    size_t i = family.size();
    if (next == '{' && !ParseLabels(line, i, &s.labels)) {
      return Error{"metrics line " + std::to_string(line_no) + ": bad labels: " + Quote(line)};
    }
    const std::string value(Trim(line.substr(i)));
    char* end = nullptr;
    s.value = std::strtod(value.c_str(), &end);
    if (value.empty() || end == value.c_str() || (*end != '\0' && *end != ' ')) {
      return Error{"metrics line " + std::to_string(line_no) + ": bad value: " + Quote(line)};
    }
    out.push_back(std::move(s));
  }
  return out;
}

MonitorFleet::MonitorFleet(k8s::Client& monitor_client, k8s::Client& admin,
                           std::vector<SimNode> nodes, std::string hook_path, bool dra)
    : client_(monitor_client),
      admin_(admin),
      nodes_(std::move(nodes)),
      hook_path_(std::move(hook_path)),
      dra_(dra) {}

MonitorFleet::~MonitorFleet() { Stop(); }

Status MonitorFleet::Start() {
  const Json ns = {
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNamespace}}}};
  for (int attempt = 0;; ++attempt) {
    auto r = admin_.Create(k8s::resources::kNamespaces, "", ns);
    if (r || k8s::IsAlreadyExists(r.error())) break;
    if (attempt == 20) return Error{"namespace kube-system: " + r.error().ToString()};
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
  }
  for (const SimNode& sim_node : nodes_) {
    const std::string& node = sim_node.name;
    monitor::MonitorOptions o;
    o.node_name = node;
    o.host_gpus = [gpus = sim_node.gpus](const std::vector<monitor::ContainerUsage>& containers) {
      return SimulatedHostGpus(gpus, containers);
    };
    o.hook_path = hook_path_ + "/vgpu";  // the monitor's HOOK_PATH holds containers/
    o.metrics_bind = "127.0.0.1:0";
    // No NVML (the GPUs are simulated), no feedback, no clean-up: every node shares
    // the one hook directory, so one node's monitor would take the others' pods for gone ones.
    auto m = std::make_unique<monitor::Monitor>(client_, o);
    auto port = m->Start();
    if (!port) return Error{"monitor on node " + Quote(node) + ": " + port.error()};
    MonitorAddress a{node, std::string(kNamespace) + "/" + PodName(node, dra_), *port};
    monitors_.push_back(std::move(m));
    if (auto st = CreatePod(a); !st)
      return Error{"monitor on node " + Quote(node) + ": " + st.error()};
    addresses_.push_back(std::move(a));
  }
  return OkStatus();
}

Status MonitorFleet::CreatePod(const MonitorAddress& a) {
  const std::string name = PodName(a.node, dra_);
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  // The chart's device-plugin DaemonSet pod labels (release "hami").
  pod["metadata"] = {{"name", name},
                     {"namespace", kNamespace},
                     {"labels",
                      {{"app.kubernetes.io/component", Component(dra_)},
                       {"app.kubernetes.io/name", "hami"},
                       {"app.kubernetes.io/instance", "hami"},
                       {std::string(protocol::kWebhookLabelKey), "ignore"}}}};
  pod["spec"] = {{"nodeName", a.node},
                 {"containers", Json::array({{{"name", dra_ ? "dra-plugin" : "device-plugin"},
                                              {"image", "hami-sim/device-plugin"}},
                                             {{"name", "vgpu-monitor"},
                                              {"image", "hami-sim/vgpu-monitor"},
                                              {"ports", Json::array({{{"name", "metrics"},
                                                                      {"containerPort", a.port},
                                                                      {"protocol", "TCP"}}})}}})}};
  const Json status = {{"status",
                        {{"phase", "Running"},
                         {"hostIP", "127.0.0.1"},
                         {"podIP", "127.0.0.1"},
                         {"podIPs", Json::array({{{"ip", "127.0.0.1"}}})}}}};
  std::string last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
    auto created = admin_.Create(k8s::resources::kPods, kNamespace, pod);
    if (!created && !k8s::IsAlreadyExists(created.error())) {
      last = created.error().ToString();
      continue;
    }
    auto patched = admin_.Patch(k8s::resources::kPods, kNamespace, name, k8s::PatchType::kMerge,
                                status, "status");
    if (patched) return OkStatus();
    last = patched.error().ToString();
  }
  return Error{"pod " + Quote(std::string(kNamespace) + "/" + name) + ": " + last};
}

void MonitorFleet::Stop() {
  for (auto& m : monitors_) m->Stop();
}

std::vector<MonitorAddress> MonitorFleet::Addresses() const { return addresses_; }

Result<std::map<std::string, int64_t>> MonitorFleet::MeasuredMemoryMiB(
    size_t want_containers, std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    std::map<std::string, double> bytes;
    std::set<std::tuple<std::string, std::string, std::string>> containers;
    for (const MonitorAddress& a : addresses_) {
      httplib::Client http("127.0.0.1", a.port);
      http.set_read_timeout(std::chrono::seconds(10));
      auto res = http.Get("/metrics");
      if (!res || res->status != 200) {
        return Error{
            "monitor of node " + Quote(a.node) + ": GET /metrics: " +
            (res ? "HTTP " + std::to_string(res->status) : httplib::to_string(res.error()))};
      }
      auto samples = ParseMetricFamily(res->body, "hami_vgpu_memory_used_bytes");
      if (!samples) return Error{"monitor of node " + Quote(a.node) + ": " + samples.error()};
      for (const MetricSample& s : *samples) {
        auto label = [&s](const char* k) {
          auto it = s.labels.find(k);
          return it == s.labels.end() ? std::string() : it->second;
        };
        bytes[label("device_uuid")] += s.value;
        containers.emplace(label("namespace"), label("pod"), label("container"));
      }
    }
    if (containers.size() >= want_containers || std::chrono::steady_clock::now() >= deadline) {
      std::map<std::string, int64_t> out;
      for (const auto& [uuid, b] : bytes) out[uuid] = static_cast<int64_t>(b / (1024 * 1024));
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace hami::sim
