// `kubectl hami top [NODE...]` (docs/KUBECTL_HAMI.md): per container and device, the memory
// allocated (the pod's allocation annotations) against the memory used and the utilisation the
// node's vGPU monitor measures (its /metrics, read through the API server's pod proxy). Pure:
// the caller fetches each node's /metrics text and passes it in.
#ifndef HAMI_CLI_KUBECTL_HAMI_TOP_H_
#define HAMI_CLI_KUBECTL_HAMI_TOP_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/kubectl_hami_view.h"
#include "common/clock.h"
#include "common/result.h"

namespace hami::cli {

// One sample of the Prometheus text format (version 0.0.4).
struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the text format: comments and blank lines skipped, `name{l="v",...} value [ts]`, label
// values with \\, \" and \n escapes. A malformed line is an error naming its line number and
// quoting it; more than `max_samples` samples is an error.
Result<std::vector<MetricSample>> ParseMetricsText(std::string_view text,
                                                   size_t max_samples = 1 << 20);

// The monitor of a node: the device-plugin DaemonSet's pod there (label
// app.kubernetes.io/component=hami-device-plugin, as charts/hami renders it), in DRA mode the
// DRA plugin's (hami-dra-plugin, whose pods run the monitor), and the port of its container port
// named "metrics" (else 9394).
struct MonitorTarget {
  std::string ns, pod;
  int64_t port = 9394;
  // "/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics"
  std::string ProxyPath() const;
};

// node name -> its monitor, from a pod list (all namespaces). A Running pod wins over others;
// then the first by namespace/name.
std::map<std::string, MonitorTarget> FindMonitors(const std::vector<nlohmann::json>& pods);

struct TopRow {
  std::string ns, pod, container, uuid;
  std::optional<int64_t> allocated_memory;  // MiB; nullopt: the monitor reports it, no allocation
  std::optional<int64_t> allocated_cores;   // percent
  std::optional<int64_t> used_memory;       // MiB (hami_vgpu_memory_used_bytes)
  std::optional<int64_t> limit_memory;      // MiB (hami_vgpu_memory_limit_bytes)
  std::optional<double> utilization;        // percent (hami_container_device_utilization_ratio)
  // DRA mode: the pod's claims with a share of the GPU, by name. The row is then the claims'
  // (the monitor reports a claim's region with container=""), and `container` names the
  // containers that use them ("," between; "" when none does).
  std::vector<std::string> claims;
};

struct TopNode {
  std::string name;
  std::optional<std::string> monitor;  // "NS/POD"
  std::optional<std::string> error;    // why no measurement: no monitor, or its answer
  std::vector<TopRow> rows;            // by namespace, pod, container, uuid
};

struct TopView {
  std::vector<TopNode> nodes;  // by name
  std::vector<std::string> warnings;
};

// The /metrics answer of one node's monitor: its text, or why there is none.
using NodeMetrics = std::map<std::string, Result<std::string>>;

// `nodes`, `pods`: all of the cluster's; `only`: node names (empty: every node with a HAMi
// device; a name with no node is an error). `metrics`: per node, what its monitor answered (a
// node missing from the map has no monitor).
// `dra`: DRA mode's slices and claims (BuildInspect): their nodes and the shares of DRA pods.
Result<TopView> BuildTop(const std::vector<nlohmann::json>& nodes,
                         const std::vector<nlohmann::json>& pods,
                         const std::vector<std::string>& only, const NodeMetrics& metrics,
                         SystemTime now, const DraObjects& dra = {});

std::string TopTable(const TopView& view, const TableOptions& options);
std::string TopJson(const TopView& view);

}  // namespace hami::cli

#endif  // HAMI_CLI_KUBECTL_HAMI_TOP_H_
