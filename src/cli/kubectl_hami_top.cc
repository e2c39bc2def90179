#include "cli/kubectl_hami_top.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>

#include "common/strings.h"
#include "device/pod_view.h"

namespace hami::cli {
namespace {

using nlohmann::json;

bool NameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool NameChar(char c) { return NameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

std::optional<double> ParseValue(std::string_view v) {
  if (v == "NaN") return std::nan("");
  if (v == "+Inf" || v == "Inf") return HUGE_VAL;
  if (v == "-Inf") return -HUGE_VAL;
  double out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return out;
}

// One sample line; "" on success, else what is wrong.
std::string ParseLine(std::string_view line, MetricSample* out) {
  size_t i = 0;
  if (i >= line.size() || !NameStart(line[i])) return "want a metric name";
  while (i < line.size() && NameChar(line[i])) ++i;
  out->name = std::string(line.substr(0, i));
  auto blanks = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  };
  blanks();
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      blanks();
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      size_t start = i;
      if (i >= line.size() || !NameStart(line[i])) return "want a label name";
      while (i < line.size() && NameChar(line[i])) ++i;
      std::string label(line.substr(start, i - start));
      blanks();
      if (i >= line.size() || line[i] != '=') return "want '=' after label " + label;
      ++i;
      blanks();
      if (i >= line.size() || line[i] != '"') return "want a quoted value for label " + label;
      ++i;
      std::string value;
      for (;;) {
        if (i >= line.size()) return "unterminated value of label " + label;
        char c = line[i++];
        if (c == '"') break;
        if (c == '\\') {
          if (i >= line.size()) return "unterminated value of label " + label;
          char e = line[i++];
          value += e == 'n' ? '\n' : e;  // \\ and \" stand for themselves
        } else {
          value += c;
        }
      }
      if (!out->labels.emplace(label, std::move(value)).second) {
        return "label " + label + " given twice";
      }
      blanks();
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      return "want ',' or '}' after label " + label;
    }
  }
  blanks();
  size_t start = i;
  while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
  auto value = ParseValue(line.substr(start, i - start));
  if (!value) return "want a number, got " + Quote(line.substr(start, i - start));
  out->value = *value;
  blanks();
  if (i < line.size()) {  // an optional timestamp (ms), ignored
    size_t ts = i;
    if (line[i] == '-') ++i;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
    blanks();
    if (i == ts || i < line.size()) return "trailing text " + Quote(line.substr(ts));
  }
  return "";
}

std::optional<int64_t> Mib(const std::optional<double>& bytes) {
  if (!bytes || !std::isfinite(*bytes) || *bytes < 0) return std::nullopt;
  return static_cast<int64_t>(*bytes / (1024.0 * 1024.0));
}

std::string Num(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::string Percent(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f", *v);
  return buf;
}

}  // namespace

Result<std::vector<MetricSample>> ParseMetricsText(std::string_view text, size_t max_samples) {
  std::vector<MetricSample> out;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view trimmed = Trim(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    if (out.size() >= max_samples) {
      return Error{"metrics: more than " + std::to_string(max_samples) + " samples"};
    }
    MetricSample s;
    std::string err = ParseLine(trimmed, &s);
    if (!err.empty()) {
      std::string shown(trimmed.substr(0, 200));
      return Error{"metrics line " + std::to_string(line_no) + ": " + err + ": " + Quote(shown)};
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string MonitorTarget::ProxyPath() const {
  return "/api/v1/namespaces/" + ns + "/pods/" + pod + ":" + std::to_string(port) +
         "/proxy/metrics";
}

std::map<std::string, MonitorTarget> FindMonitors(const std::vector<json>& pods) {
  struct Candidate {
    bool running = false;
    MonitorTarget target;
  };
  std::map<std::string, Candidate> best;
  for (const auto& p : pods) {
    if (!p.is_object() || !p.contains("metadata") || !p["metadata"].is_object()) continue;
    const json& meta = p["metadata"];
    const json labels = meta.value("labels", json::object());
    const json component =
        labels.is_object() ? labels.value("app.kubernetes.io/component", json()) : json();
    if (component != "hami-device-plugin" && component != "hami-dra-plugin") continue;
    const json spec = p.value("spec", json::object());
    if (!spec.is_object()) continue;
    const json node = spec.value("nodeName", json());
    if (!node.is_string() || node.get<std::string>().empty()) continue;
    Candidate c;
    c.target.ns =
        meta.value("namespace", json("")).is_string() ? meta.value("namespace", std::string()) : "";
    c.target.pod = device::ObjectName(p);
    const json status = p.value("status", json::object());
    c.running = status.is_object() && status.value("phase", json()) == "Running";
    const json containers = spec.value("containers", json::array());
    bool found = false;
    for (const auto& ctr : containers.is_array() ? containers : json::array()) {
      if (!ctr.is_object() || !ctr.contains("ports") || !ctr["ports"].is_array()) continue;
      for (const auto& port : ctr["ports"]) {
        if (!port.is_object() || port.value("name", json()) != "metrics") continue;
        json number = port.value("containerPort", json());
        if (number.is_number_integer() && number.get<int64_t>() > 0 &&
            number.get<int64_t>() < 65536) {
          c.target.port = number.get<int64_t>();
          found = true;
          break;
        }
      }
      if (found) break;
    }
    auto& slot = best[node.get<std::string>()];
    auto key = [](const Candidate& x) {
      return std::make_tuple(!x.running, x.target.ns, x.target.pod);
    };
    if (slot.target.pod.empty() || key(c) < key(slot)) slot = c;
  }
  std::map<std::string, MonitorTarget> out;
  for (auto& [node, c] : best) out[node] = c.target;
  return out;
}

Result<TopView> BuildTop(const std::vector<json>& nodes, const std::vector<json>& pods,
                         const std::vector<std::string>& only, const NodeMetrics& metrics,
                         SystemTime now, const DraObjects& dra) {
  auto inspect = BuildInspect(nodes, pods, only, now, dra);
  if (!inspect.ok()) return std::move(inspect).take_error();
  TopView view;
  view.warnings = inspect.value().warnings;
  std::vector<std::string> alloc_warnings;
  const std::vector<ContainerAllocation> allocations =
      ContainerAllocations(nodes, pods, &alloc_warnings, dra);
  const std::map<std::string, MonitorTarget> monitors = FindMonitors(pods);
  for (const auto& n : inspect.value().nodes) {
    TopNode node;
    node.name = n.name;
    using Key = std::tuple<std::string, std::string, std::string, std::string>;
    std::map<Key, TopRow> rows;
    for (const auto& a : allocations) {
      if (a.node != n.name) continue;
      TopRow& r = rows[{a.ns, a.pod, a.container, a.uuid}];
      r.ns = a.ns;
      r.pod = a.pod;
      r.uuid = a.uuid;
      r.allocated_memory = r.allocated_memory.value_or(0) + a.memory;
      r.allocated_cores = r.allocated_cores.value_or(0) + a.cores;
      if (a.claim.empty()) {
        r.container = a.container;
        continue;
      }
      // A claim's share: the row of the pod's claims on this GPU, keyed as the monitor labels
      // a claim's region (container ""), showing the containers that use them.
      if (std::find(r.claims.begin(), r.claims.end(), a.claim) == r.claims.end()) {
        r.claims.push_back(a.claim);
      }
      std::vector<std::string> shown = Split(r.container, ',');
      for (const auto& c : a.containers) {
        if (std::find(shown.begin(), shown.end(), c) == shown.end()) shown.push_back(c);
      }
      r.container = JoinNames(shown);
    }
    if (auto m = monitors.find(n.name); m != monitors.end()) {
      node.monitor = m->second.ns + "/" + m->second.pod;
    }
    auto answer = metrics.find(n.name);
    const bool dra = !n.devices.empty() && !n.devices.front().driver.empty();
    if (!node.monitor) {
      node.error = std::string(
                       "no monitor pod on the node (label "
                       "app.kubernetes.io/component=") +
                   (dra ? "hami-dra-plugin)" : "hami-device-plugin)");
    } else if (answer == metrics.end()) {
      node.error = "not asked";
    } else if (!answer->second.ok()) {
      node.error = answer->second.error();
    } else {
      auto samples = ParseMetricsText(answer->second.value());
      if (!samples.ok()) {
        node.error = samples.error();
      } else {
        for (const auto& s : samples.value()) {
          const bool used = s.name == "hami_vgpu_memory_used_bytes";
          const bool limit = s.name == "hami_vgpu_memory_limit_bytes";
          const bool util = s.name == "hami_container_device_utilization_ratio";
          if (!used && !limit && !util) continue;
          auto label = [&](const char* k) {
            auto it = s.labels.find(k);
            return it == s.labels.end() ? std::string() : it->second;
          };
          Key key{label("namespace"), label("pod"), label("container"), label("device_uuid")};
          TopRow& r = rows[key];
          // A new row takes the labels; an allocation's row keeps what it shows (a claim's
          // containers).
          if (!r.allocated_memory) std::tie(r.ns, r.pod, r.container, r.uuid) = key;
          // A container with several vGPUs of one device is summed over them.
          if (used) r.used_memory = r.used_memory.value_or(0) + Mib(s.value).value_or(0);
          if (limit) r.limit_memory = r.limit_memory.value_or(0) + Mib(s.value).value_or(0);
          if (util && std::isfinite(s.value)) r.utilization = r.utilization.value_or(0) + s.value;
        }
      }
    }
    for (auto& [key, row] : rows) node.rows.push_back(std::move(row));
    view.nodes.push_back(std::move(node));
  }
  for (auto& w : alloc_warnings) {
    if (std::find(view.warnings.begin(), view.warnings.end(), w) == view.warnings.end()) {
      view.warnings.push_back(std::move(w));
    }
  }
  return view;
}

std::string TopTable(const TopView& view, const TableOptions& options) {
  std::vector<std::vector<std::string>> rows;
  // The CLAIMS column only where a row is a claim's (DRA mode).
  bool any_claims = false;
  for (const auto& n : view.nodes) {
    for (const auto& r : n.rows) any_claims = any_claims || !r.claims.empty();
  }
  if (!options.no_headers) {
    rows.push_back({"NODE", "NAMESPACE", "POD", "CONTAINER", "UUID", "MEMORY-USED(MiB)",
                    "MEMORY-ALLOCATED(MiB)", "CORES-ALLOCATED(%)", "UTILIZATION(%)"});
    if (any_claims) rows.back().insert(rows.back().begin() + 4, "CLAIMS");
  }
  for (const auto& n : view.nodes) {
    for (const auto& r : n.rows) {
      rows.push_back({n.name, r.ns, r.pod, r.container, r.uuid, Num(r.used_memory),
                      Num(r.allocated_memory), Num(r.allocated_cores), Percent(r.utilization)});
      if (any_claims) {
        rows.back().insert(rows.back().begin() + 4, r.claims.empty() ? "" : JoinNames(r.claims));
      }
    }
  }
  std::string out = RenderTable(rows);
  for (const auto& n : view.nodes) {
    if (!n.error) continue;
    std::string line =
        EscapeTerminal("node " + n.name + ": no measurements, allocations only: " + *n.error);
    out += options.colour ? "\033[33m" + line + "\033[0m\n" : line + "\n";
  }
  return out;
}

std::string TopJson(const TopView& view) {
  using oj = nlohmann::ordered_json;
  auto opt = [](const auto& v) { return v ? oj(*v) : oj(nullptr); };
  oj nodes = oj::array();
  for (const auto& n : view.nodes) {
    oj containers = oj::array();
    for (const auto& r : n.rows) {
      oj o;
      o["namespace"] = r.ns;
      o["pod"] = r.pod;
      o["container"] = r.container;
      o["uuid"] = r.uuid;
      if (!r.claims.empty()) o["claims"] = r.claims;
      if (r.allocated_memory) {
        o["allocated"]["memory"] = *r.allocated_memory;
        o["allocated"]["cores"] = r.allocated_cores.value_or(0);
      } else {
        o["allocated"] = nullptr;
      }
      if (r.used_memory || r.limit_memory || r.utilization) {
        o["used"]["memory"] = opt(r.used_memory);
        o["used"]["limit"] = opt(r.limit_memory);
        o["used"]["utilization"] =
            r.utilization && std::isfinite(*r.utilization) ? oj(*r.utilization) : oj(nullptr);
      } else {
        o["used"] = nullptr;
      }
      containers.push_back(std::move(o));
    }
    oj on;
    on["name"] = n.name;
    on["monitor"] = opt(n.monitor);
    on["error"] = opt(n.error);
    on["containers"] = std::move(containers);
    nodes.push_back(std::move(on));
  }
  oj out;
  out["nodes"] = std::move(nodes);
  return out.dump() + "\n";
}

}  // namespace hami::cli
