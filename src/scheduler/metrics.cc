#include "scheduler/metrics.h"

#include <cstdio>
#include <map>
#include <vector>

namespace hami::scheduler {

void LatencyHistogram::Observe(std::chrono::nanoseconds d) {
  double s = std::chrono::duration<double>(d).count();
  size_t i = 0;
  while (i < kBounds.size() && s > kBounds[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(d.count()), std::memory_order_relaxed);
}

std::string LatencyHistogram::Render(std::string_view name, std::string_view labels) const {
  std::string out = "# TYPE " + std::string(name) + " histogram\n";
  std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  char le[32];
  for (size_t i = 0; i <= kBounds.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    if (i < kBounds.size()) {
      std::snprintf(le, sizeof(le), "%g", kBounds[i]);
    } else {
      std::snprintf(le, sizeof(le), "+Inf");
    }
    out += std::string(name) + "_bucket{" + std::string(labels) + sep + "le=\"" + le + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  char sum[64];
  std::snprintf(sum, sizeof(sum), "%.9f", static_cast<double>(sum_ns_.load()) / 1e9);
  out += std::string(name) + "_sum{" + std::string(labels) + "} " + sum + "\n";
  out += std::string(name) + "_count{" + std::string(labels) + "} " +
         std::to_string(count_.load()) + "\n";
  return out;
}

namespace {

// One metric family: its lines are collected, then written after one TYPE header.
struct Family {
  std::string type = "gauge";
  std::vector<std::string> lines;
};

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string RenderMetrics(const device::UsageIndex& index, bool legacy,
                          const RequestMetrics* requests) {
  std::map<std::string, Family> families;
  auto add = [&](const std::string& name, const std::string& labels, double value) {
    families[name].lines.push_back(name + "{" + labels + "} " + Num(value));
  };
  device::UsageIndex::Snapshot snap = index.Rows(index.NodeNames());
  for (const device::NodeUsage& node : snap.nodes) {
    for (const device::DeviceUsage& d : node.devices) {
      const std::string base = "node=\"" + Escape(node.name) + "\",device_uuid=\"" + Escape(d.id) +
                               "\",device_index=\"" + std::to_string(d.index) + "\"";
      const std::string type = ",device_type=\"" + Escape(d.type) + "\"";
      const std::string zone = ",zone=\"vGPU\"";
      const double mib = 1024.0 * 1024.0;
      add("hami_gpu_memory_limit_bytes", base + type + zone, d.totalmem * mib);
      add("hami_gpu_core_limit_ratio", base + type + zone, d.totalcore);
      add("hami_gpu_memory_allocated_bytes",
          base + ",device_cores=\"" + std::to_string(d.totalcore) + "\"" + type + zone,
          d.usedmem * mib);
      add("hami_gpu_shared_count", base + type + zone, d.used);
      add("hami_gpu_core_allocated_ratio", base + type + zone, d.usedcores);
      add("hami_node_gpu_overview",
          base + ",device_cores=\"" + std::to_string(d.totalcore) + "\",device_memory_limit=\"" +
              std::to_string(d.totalmem) + "\"" + type + zone,
          d.usedmem * mib);
      if (d.totalmem > 0) {
        add("hami_node_gpu_memory_allocated_ratio", base + type + zone,
            static_cast<double>(d.usedmem) / d.totalmem);
      }
      if (legacy) {
        const std::string lbase = "nodeid=\"" + Escape(node.name) + "\",deviceuuid=\"" +
                                  Escape(d.id) + "\",deviceidx=\"" + std::to_string(d.index) +
                                  "\",devicetype=\"" + Escape(d.type) + "\"" + zone;
        add("GPUDeviceMemoryLimit", lbase, d.totalmem * mib);
        add("GPUDeviceCoreLimit", lbase, d.totalcore);
        add("GPUDeviceMemoryAllocated", lbase, d.usedmem * mib);
        add("GPUDeviceSharedNum", lbase, d.used);
        add("GPUDeviceCoreAllocated", lbase, d.usedcores);
      }
    }
  }
  std::string out;
  for (const auto& [name, family] : families) {
    out += "# TYPE " + name + " " + family.type + "\n";
    for (const std::string& line : family.lines) out += line + "\n";
  }
  if (requests != nullptr) {
    out += requests->filter.Render("hami_scheduler_filter_duration_seconds", "");
    out += requests->bind.Render("hami_scheduler_bind_duration_seconds", "");
    out += requests->webhook.Render("hami_scheduler_webhook_duration_seconds", "");
  }
  return out;
}

}  // namespace hami::scheduler
