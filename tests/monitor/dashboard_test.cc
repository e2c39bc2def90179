// HAMi v2.10's Grafana dashboard (dashboards/hami-vgpu-dashboard.json, copied here as test data)
// works unchanged on our metrics (issue 13 item 6): a hami-sim run (the real scheduler, device
// plugins and one hami-vgpu-monitor per node, containers with a simulated `usage:`) is scraped
// over HTTP, and every metric and label the dashboard's 17 queries and 2 variables use must
// exist, the `on (device_uuid)` joins must find partners, and the values must agree with the
// scenario and with each other.
#include <httplib.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/json.h"
#include "sim/monitors.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace hami::sim {
namespace {

using nlohmann::json;
constexpr double kMiB = 1024.0 * 1024.0;

struct Dashboard {
  std::vector<std::string> queries;    // panel target expressions
  std::vector<std::string> variables;  // templating queries
};

void Panels(const json& j, Dashboard* d) {
  if (!j.is_object() || !j.contains("panels") || !j["panels"].is_array()) return;
  for (const json& p : j["panels"]) {
    if (p.contains("targets") && p["targets"].is_array()) {
      for (const json& t : p["targets"]) {
        if (t.contains("expr") && t["expr"].is_string()) d->queries.push_back(t["expr"]);
      }
    }
    Panels(p, d);  // rows nest panels
  }
}

Dashboard LoadDashboard() {
  std::ifstream in(HAMI_DASHBOARD_JSON);
  std::stringstream text;
  text << in.rdbuf();
  auto j = ParseJson(text.str());
  EXPECT_TRUE(j.ok()) << HAMI_DASHBOARD_JSON;
  Dashboard d;
  if (!j) return d;
  Panels(*j, &d);
  for (const json& v : (*j)["templating"]["list"]) {
    if (v.contains("definition") && v["definition"].is_string() &&
        !v["definition"].get<std::string>().empty()) {
      d.variables.push_back(v["definition"]);
    }
  }
  return d;
}

std::set<std::string> Matches(const std::string& text, const std::string& pattern) {
  std::set<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.insert((*it)[1].str());
  }
  return out;
}

std::set<std::string> MetricsOf(const std::string& q) { return Matches(q, R"((hami_[a-z_]+))"); }

// Labels a query selects, groups or joins on, or reads with label_values().
std::set<std::string> LabelsOf(const std::string& q) {
  std::set<std::string> out = Matches(q, R"(([a-z_]+)=~)");
  for (const char* p : {R"(by \(([a-z_]+)\))", R"(on \(([a-z_]+)\))",
                        R"(label_values\(hami_[a-z_]+, ([a-z_]+)\))"}) {
    for (const std::string& l : Matches(q, p)) out.insert(l);
  }
  return out;
}

constexpr const char* kScenario = R"(
name: dashboard
timing: {kubeletLatency: 0ms, timeout: 60s}
nodes:
  - name: node-t4
    gpus:
      - {model: Tesla T4, memory: 15360, count: 2}
  - name: node-a100
    gpus:
      - {model: NVIDIA A100-SXM4-80GB, memory: 81920, count: 1}
workloads:
  - name: train
    namespace: team-a
    replicas: 2
    annotations: {nvidia.com/use-gputype: T4, hami.io/gpu-scheduler-policy: binpack}
    containers:
      - name: main
        resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 4000, nvidia.com/gpucores: 30}
        usage: {memory: 2500, utilization: 20}
  - name: infer
    namespace: team-b
    annotations: {nvidia.com/use-gputype: A100}
    containers:
      - name: server
        resources: {nvidia.com/gpu: 1, nvidia.com/gpumem: 10000}
        usage: {memory: 3000, utilization: 55}
)";

std::string Get(int port) {
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  EXPECT_TRUE(res && res->status == 200) << "port " << port;
  return res ? res->body : "";
}

TEST(GrafanaDashboard, EveryQueryFindsItsSeriesLabelsAndPartners) {
  const Dashboard dash = LoadDashboard();
  ASSERT_EQ(dash.queries.size(), 17u);
  ASSERT_EQ(dash.variables.size(), 2u);
  std::set<std::string> used;
  for (const auto& q : dash.queries) used.merge(MetricsOf(q));
  for (const auto& q : dash.variables) used.merge(MetricsOf(q));
  EXPECT_EQ(used, (std::set<std::string>{
                      "hami_container_device_utilization_ratio", "hami_gpu_core_allocated_ratio",
                      "hami_gpu_memory_allocated_bytes", "hami_gpu_memory_limit_bytes",
                      "hami_gpu_shared_count", "hami_host_gpu_memory_used_bytes",
                      "hami_host_gpu_utilization_ratio", "hami_node_gpu_memory_allocated_ratio",
                      "hami_vgpu_memory_limit_bytes", "hami_vgpu_memory_used_bytes"}));

  auto scenario = ParseScenario(kScenario);
  ASSERT_TRUE(scenario.ok()) << scenario.error();
  RunOptions options;
  options.kubelet_latency = std::chrono::milliseconds(0);
  Runner runner(*scenario, options);
  auto report = runner.Run();
  ASSERT_TRUE(report.ok()) << report.error();
  ASSERT_EQ(report->pods_running, 3);
  ASSERT_TRUE(report->measured);

  // The scheduler's /metrics and every node's monitor's, as Prometheus would scrape them.
  std::vector<std::string> scrapes = {Get(runner.scheduler_metrics_port())};
  ASSERT_EQ(runner.monitors().size(), 2u);
  for (const MonitorAddress& m : runner.monitors()) scrapes.push_back(Get(m.port));
  std::map<std::string, std::vector<MetricSample>> series;
  for (const std::string& metric : used) {
    for (const std::string& text : scrapes) {
      auto samples = ParseMetricFamily(text, metric);
      ASSERT_TRUE(samples.ok()) << samples.error();
      for (auto& s : *samples) series[metric].push_back(std::move(s));
    }
    EXPECT_FALSE(series[metric].empty()) << metric << " is not exported";
  }
  runner.Stop();

  // Every label a query or variable names is on every series of every metric it reads.
  std::vector<std::string> all = dash.queries;
  all.insert(all.end(), dash.variables.begin(), dash.variables.end());
  for (const std::string& q : all) {
    for (const std::string& metric : MetricsOf(q)) {
      for (const std::string& label : LabelsOf(q)) {
        for (const MetricSample& s : series[metric]) {
          EXPECT_EQ(s.labels.count(label), 1u) << metric << " lacks " << label << " for " << q;
        }
      }
    }
  }

  // One series per GPU from the scheduler; the host series join on device_uuid, both ways.
  std::map<std::string, const GpuReport*> gpus;
  for (const GpuReport& g : report->gpus) gpus[g.uuid] = &g;
  ASSERT_EQ(gpus.size(), 3u);
  auto by_uuid = [&](const std::string& metric) {
    std::map<std::string, double> out;
    for (const MetricSample& s : series[metric]) {
      EXPECT_EQ(out.count(s.labels.at("device_uuid")), 0u) << metric << " twice";
      out[s.labels.at("device_uuid")] = s.value;
    }
    return out;
  };
  const auto limit = by_uuid("hami_gpu_memory_limit_bytes");
  const auto allocated = by_uuid("hami_gpu_memory_allocated_bytes");
  const auto shared = by_uuid("hami_gpu_shared_count");
  const auto cores = by_uuid("hami_gpu_core_allocated_ratio");
  const auto ratio = by_uuid("hami_node_gpu_memory_allocated_ratio");
  const auto host_used = by_uuid("hami_host_gpu_memory_used_bytes");
  const auto host_util = by_uuid("hami_host_gpu_utilization_ratio");
  for (const auto* m : {&limit, &allocated, &shared, &cores, &ratio, &host_used, &host_util}) {
    std::set<std::string> keys;
    for (const auto& [uuid, v] : *m) keys.insert(uuid);
    std::set<std::string> want;
    for (const auto& [uuid, g] : gpus) want.insert(uuid);
    EXPECT_EQ(keys, want);  // `and on (device_uuid)` finds a partner for every GPU
  }
  std::map<std::string, double> vgpu_used_per_gpu;
  for (const MetricSample& s : series["hami_vgpu_memory_used_bytes"]) {
    vgpu_used_per_gpu[s.labels.at("device_uuid")] += s.value;
  }
  double total_limit = 0;
  for (const auto& [uuid, g] : gpus) {
    SCOPED_TRACE(uuid);
    total_limit += limit.at(uuid);
    EXPECT_EQ(limit.at(uuid), static_cast<double>(g->memory_limit_mib) * kMiB);
    EXPECT_EQ(allocated.at(uuid), static_cast<double>(g->used_memory_mib) * kMiB);
    EXPECT_EQ(shared.at(uuid), g->used_slots);
    EXPECT_EQ(cores.at(uuid), static_cast<double>(g->used_cores));
    EXPECT_DOUBLE_EQ(ratio.at(uuid), static_cast<double>(g->used_memory_mib) /
                                         static_cast<double>(g->memory_limit_mib));
    ASSERT_TRUE(g->measured_memory_mib.has_value());
    EXPECT_EQ(host_used.at(uuid), static_cast<double>(*g->measured_memory_mib) * kMiB);
    EXPECT_EQ(host_used.at(uuid), vgpu_used_per_gpu[uuid]);
  }
  EXPECT_EQ(total_limit, (15360.0 * 2 + 81920) * kMiB);  // "Total GPU memory"

  // The containers: what `usage:` declared, under the limits the scheduler handed out.
  ASSERT_EQ(series["hami_vgpu_memory_used_bytes"].size(), 3u);
  std::map<std::string, int> per_gpu_pods;
  for (const MetricSample& s : series["hami_vgpu_memory_used_bytes"]) {
    const bool train = s.labels.at("namespace") == "team-a";
    EXPECT_EQ(s.value, (train ? 2500 : 3000) * kMiB);
    ++per_gpu_pods[s.labels.at("device_uuid")];
  }
  for (const MetricSample& s : series["hami_vgpu_memory_limit_bytes"]) {
    EXPECT_EQ(s.value, (s.labels.at("namespace") == "team-a" ? 4000 : 10000) * kMiB);
  }
  for (const MetricSample& s : series["hami_container_device_utilization_ratio"]) {
    EXPECT_EQ(s.value, s.labels.at("namespace") == "team-a" ? 20 : 55);
  }
  // Binpack put both training pods on one T4: its host utilisation is their sum.
  for (const auto& [uuid, n] : per_gpu_pods) {
    EXPECT_EQ(host_util.at(uuid), n == 2 ? 40 : (gpus.at(uuid)->model == "Tesla T4" ? 20 : 55));
  }
}

}  // namespace
}  // namespace hami::sim
