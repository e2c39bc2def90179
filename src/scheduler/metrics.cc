#include "scheduler/metrics.h"

#include <cstdio>
#include <map>
#include <optional>
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

namespace {

using Families = std::map<std::string, Family>;

void Add(Families& f, const std::string& name, const std::string& labels, double value) {
  f[name].lines.push_back(name + "{" + labels + "} " + Num(value));
}

std::string Label(std::string_view key, const std::string& value) {
  return std::string(key) + "=\"" + Escape(value) + "\"";
}

// The MIG instances of a GPU in MIG mode that the device plugin has created (runtime identity
// known): hami_node_gpu_mig_instance_info = 1, and legacy nodeGPUMigInstance{migname=profile-gi}.
void AddMigInstances(Families& f, const std::string& node, const device::DeviceUsage& d,
                     bool legacy) {
  if (d.mode != "mig") return;
  for (const device::MigInstance& m : d.mig_in_use) {
    if (!m.runtime) continue;
    const std::string gi = std::to_string(m.runtime->gpu_instance_id);
    Add(f, "hami_node_gpu_mig_instance_info",
        Label("node", node) + "," + Label("device_uuid", d.id) + "," +
            Label("device_index", std::to_string(d.index)) + "," +
            Label("mig_uuid", m.runtime->mig_uuid) + "," + Label("profile", m.profile) + "," +
            Label("gpu_instance_id", gi) + "," +
            Label("compute_instance_id", std::to_string(m.runtime->compute_instance_id)) + "," +
            Label("placement_start", std::to_string(m.placement.start)) + "," +
            Label("placement_size", std::to_string(m.placement.size)) + ",zone=\"vGPU\"",
        1);
    if (!legacy) continue;
    Add(f, "nodeGPUMigInstance",
        Label("nodeid", node) + "," + Label("deviceuuid", d.id) + "," +
            Label("deviceidx", std::to_string(d.index)) + "," +
            Label("migname", m.profile + "-" + gi) + ",zone=\"vGPU\"",
        1);
  }
}

void AddDevices(Families& f, const device::UsageIndex& index, bool legacy) {
  const double mib = 1024.0 * 1024.0;
  const std::string zone = ",zone=\"vGPU\"";
  device::UsageIndex::SharedSnapshot snap = index.SharedRows(index.NodeNames());
  for (const auto& row : snap.nodes) {
    const device::NodeUsage& node = *row;
    for (const device::DeviceUsage& d : node.devices) {
      const std::string base = Label("node", node.name) + "," + Label("device_uuid", d.id) + "," +
                               Label("device_index", std::to_string(d.index));
      const std::string type = "," + Label("device_type", d.type);
      const std::string cores = "," + Label("device_cores", std::to_string(d.totalcore));
      const std::string limit = "," + Label("device_memory_limit", std::to_string(d.totalmem));
      Add(f, "hami_gpu_memory_limit_bytes", base + type + zone, d.totalmem * mib);
      Add(f, "hami_gpu_core_limit_ratio", base + type + zone, d.totalcore);
      Add(f, "hami_gpu_memory_allocated_bytes", base + cores + type + zone, d.usedmem * mib);
      Add(f, "hami_gpu_shared_count", base + type + zone, d.used);
      Add(f, "hami_gpu_core_allocated_ratio", base + type + zone, d.usedcores);
      Add(f, "hami_node_gpu_overview", base + cores + limit + type + zone, d.usedmem * mib);
      if (d.totalmem > 0) {
        Add(f, "hami_node_gpu_memory_allocated_ratio", base + type + zone,
            static_cast<double>(d.usedmem) / d.totalmem);
      }
      AddMigInstances(f, node.name, d, legacy);
      if (!legacy) continue;
      const std::string lbase = Label("nodeid", node.name) + "," + Label("deviceuuid", d.id) + "," +
                                Label("deviceidx", std::to_string(d.index));
      const std::string ltype = "," + Label("devicetype", d.type);
      Add(f, "GPUDeviceMemoryLimit", lbase + ltype + zone, d.totalmem * mib);
      Add(f, "GPUDeviceCoreLimit", lbase + ltype + zone, d.totalcore);
      Add(f, "GPUDeviceMemoryAllocated", lbase + ltype + zone, d.usedmem * mib);
      Add(f, "GPUDeviceSharedNum", lbase + ltype + zone, d.used);
      Add(f, "GPUDeviceCoreAllocated", lbase + ltype + zone, d.usedcores);
      Add(f, "nodeGPUOverview",
          lbase + "," + Label("devicecores", std::to_string(d.totalcore)) + "," +
              Label("devicememorylimit", std::to_string(d.totalmem)) + ltype + zone,
          d.usedmem * mib);
      if (d.totalmem > 0) {
        Add(f, "nodeGPUMemoryPercentage", lbase + ltype + zone,
            static_cast<double>(d.usedmem) / d.totalmem);
      }
    }
  }
}

// Per pod: its collapsed allocation is one container, index 0.
void AddPods(Families& f, const device::UsageIndex& index, const std::vector<std::string>& keys,
             bool legacy) {
  const double mib = 1024.0 * 1024.0;
  const std::string zone = ",zone=\"vGPU\"";
  for (const std::string& key : keys) {
    std::optional<device::PodAllocation> alloc = index.Pod(key);
    if (!alloc) continue;
    const std::string pod = key.substr(key.find('/') + 1);
    for (const device::DeviceDelta& d : alloc->deltas) {
      const std::string labels = Label("namespace", alloc->namespace_name) + "," +
                                 Label("node", alloc->node) + "," + Label("pod", pod) + "," +
                                 Label("container_index", "0") + "," + Label("device_uuid", d.uuid);
      Add(f, "hami_vgpu_memory_allocated_bytes", labels + zone, d.usedmem * mib);
      Add(f, "hami_vgpu_core_allocated_ratio", labels + zone, d.usedcores);
      if (!legacy) continue;
      const std::string l = Label("podnamespace", alloc->namespace_name) + "," +
                            Label("nodename", alloc->node) + "," + Label("podname", pod) + "," +
                            Label("containeridx", "0") + "," + Label("deviceuuid", d.uuid);
      Add(f, "vGPUMemoryAllocated", l + zone, d.usedmem * mib);
      Add(f, "vGPUCoreAllocated", l + zone, d.usedcores);
    }
  }
}

void AddQuotas(Families& f, const std::vector<QuotaMetric>& quotas, bool legacy) {
  const std::string zone = ",zone=\"vGPU\"";
  for (const QuotaMetric& q : quotas) {
    const std::string limit = Label("limit", std::to_string(q.limit));
    Add(f, "hami_resource_quota_used",
        Label("namespace", q.namespace_name) + "," + Label("quota_name", q.quota_name) + "," +
            limit + zone,
        static_cast<double>(q.used));
    if (q.limit_set) {
      Add(f, "hami_resource_quota_limit",
          Label("namespace", q.namespace_name) + "," + Label("quota_name", q.quota_name) + zone,
          static_cast<double>(q.limit));
    }
    if (legacy) {
      Add(f, "QuotaUsed",
          Label("quotanamespace", q.namespace_name) + "," + Label("quotaName", q.quota_name) + "," +
              limit + zone,
          static_cast<double>(q.used));
    }
  }
}

}  // namespace

BuildInfo ThisBuild() {
  BuildInfo b;
#ifdef HAMI_VERSION
  b.version = HAMI_VERSION;
#else
  b.version = "dev";
#endif
#ifdef HAMI_REVISION
  b.revision = HAMI_REVISION;
#else
  b.revision = "unknown";
#endif
  b.build_date = __DATE__ " " __TIME__;
#if defined(__clang__)
  b.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  b.compiler = "gcc " __VERSION__;
#endif
#if defined(__x86_64__)
  b.platform = "linux/amd64";
#elif defined(__aarch64__)
  b.platform = "linux/arm64";
#else
  b.platform = "linux/unknown";
#endif
  return b;
}

std::string RenderMetrics(const MetricsInput& input) {
  Families families;
  AddDevices(families, *input.index, input.legacy);
  AddPods(families, *input.index, input.pod_keys, input.legacy);
  AddQuotas(families, input.quotas, input.legacy);
  if (input.build != nullptr) {
    const BuildInfo& b = *input.build;
    // go_version is HAMi's label set; a C++ build has no Go, so it is left empty.
    Add(families, "hami_build_info",
        Label("version", b.version) + "," + Label("revision", b.revision) + "," +
            Label("build_date", b.build_date) + "," + Label("go_version", "") + "," +
            Label("compiler", b.compiler) + "," + Label("platform", b.platform),
        1);
  }
  std::string out;
  for (const auto& [name, family] : families) {
    out += "# TYPE " + name + " " + family.type + "\n";
    for (const std::string& line : family.lines) out += line + "\n";
  }
  if (input.requests != nullptr) {
    out += input.requests->filter.Render("hami_scheduler_filter_duration_seconds", "");
    out += input.requests->bind.Render("hami_scheduler_bind_duration_seconds", "");
    out += input.requests->webhook.Render("hami_scheduler_webhook_duration_seconds", "");
  }
  return out;
}

std::string RenderMetrics(const device::UsageIndex& index, bool legacy,
                          const RequestMetrics* requests) {
  MetricsInput input;
  input.index = &index;
  input.legacy = legacy;
  input.requests = requests;
  return RenderMetrics(input);
}

}  // namespace hami::scheduler
