#include "monitor/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

namespace hami::monitor {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

struct Series {
  std::vector<std::string> values;  // in label-name order (sorted)
  std::string text;
};

struct Family {
  std::string help;
  std::string type;
  std::vector<Series> series;
};

std::string Escape(const std::string& v, bool quote) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

class Builder {
 public:
  void Add(const std::string& name, const std::string& help, Labels labels, double value,
           const char* type = "gauge", bool zone = true) {
    if (zone) labels.emplace_back("zone", "vGPU");
    std::sort(labels.begin(), labels.end());
    Series s;
    s.text = name + "{";
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) s.text += ",";
      s.text += labels[i].first + "=\"" + Escape(labels[i].second, true) + "\"";
      s.values.push_back(labels[i].second);
    }
    s.text += "} " + FormatGoFloat(value) + "\n";
    Family& f = families_[name];
    f.help = help;
    f.type = type;
    f.series.push_back(std::move(s));
  }

  std::string Text() {
    std::string out;
    for (auto& [name, f] : families_) {
      std::stable_sort(f.series.begin(), f.series.end(),
                       [](const Series& a, const Series& b) { return a.values < b.values; });
      out += "# HELP " + name + " " + Escape(f.help, false) + "\n";
      out += "# TYPE " + name + " " + f.type + "\n";
      for (const Series& s : f.series) out += s.text;
    }
    return out;
  }

 private:
  std::map<std::string, Family> families_;  // byte order, as Go sorts names
};

void AddContainer(Builder& b, const ContainerUsage& c, bool legacy, int64_t now_sec) {
  for (std::size_t k = 0; k < c.region.devices.size(); ++k) {
    const DeviceUsage& d = c.region.devices[k];
    const std::string index = std::to_string(c.region.device_index[k]);
    const Labels labels = {{"namespace", c.ns},
                           {"pod", c.pod},
                           {"container", c.container},
                           {"vdevice_index", index},
                           {"device_uuid", d.uuid}};
    const Labels old = {{"podnamespace", c.ns},
                        {"podname", c.pod},
                        {"ctrname", c.container},
                        {"vdeviceid", index},
                        {"deviceuuid", d.uuid}};
    const auto total = static_cast<double>(d.total);
    b.Add("hami_vgpu_memory_used_bytes", "vGPU device memory usage in bytes", labels, total);
    b.Add("hami_vgpu_memory_limit_bytes", "vGPU device memory limit in bytes", labels,
          static_cast<double>(d.limit));
    b.Add("hami_container_device_memory_bytes", "Container device memory usage in bytes", labels,
          total);
    b.Add("hami_container_device_utilization_ratio", "Container device SM utilization ratio",
          labels, static_cast<double>(d.sm_util));
    b.Add("hami_vgpu_memory_context_bytes", "Container device memory context size in bytes", labels,
          static_cast<double>(d.context));
    b.Add("hami_vgpu_memory_module_bytes", "Container device memory module size in bytes", labels,
          static_cast<double>(d.module));
    b.Add("hami_vgpu_memory_buffer_bytes", "Container device memory buffer size in bytes", labels,
          static_cast<double>(d.buffer));
    if (d.limit > 0 && d.total > d.limit) {
      b.Add("hami_vgpu_memory_exceeded_bytes", "vGPU device memory used beyond the limit in bytes",
            labels, static_cast<double>(d.total - d.limit));
    }
    // The region's last kernel time is the container's word: only a positive one is used, so
    // the difference cannot overflow (INT64_MIN there used to).
    const int64_t elapsed = c.region.last_kernel_time > 0
                                ? std::max<int64_t>(now_sec - c.region.last_kernel_time, 0)
                                : 0;
    if (c.region.last_kernel_time > 0) {
      b.Add("hami_container_last_kernel_elapsed_seconds",
            "Seconds since last kernel execution in container", labels,
            static_cast<double>(elapsed));
    }
    if (!legacy) continue;
    b.Add("vGPU_device_memory_usage_in_bytes", "vGPU device usage", old, total);
    b.Add("vGPU_device_memory_limit_in_bytes", "vGPU device limit", old,
          static_cast<double>(d.limit));
    Labels desc = old;
    // HAMi computes the offset in uint64 (it wraps when the parts exceed the total).
    desc.emplace_back("context", std::to_string(d.context));
    desc.emplace_back("module", std::to_string(d.module));
    desc.emplace_back("data", std::to_string(d.buffer));
    desc.emplace_back("offset", std::to_string(d.total - d.context - d.module - d.buffer));
    b.Add("Device_memory_desc_of_container", "Container device memory description", desc, total);
    b.Add("Device_utilization_desc_of_container", "Container device utilization description", old,
          static_cast<double>(d.sm_util));
    if (c.region.last_kernel_time > 0) {
      b.Add("Device_last_kernel_of_container", "Container device last kernel description", old,
            static_cast<double>(elapsed));
    }
  }
}

// Go's %g of a ratio: cores are 0-100 in the API, HAMi-DRA exports cores / 100.
double Ratio(double cores) { return cores / 100.0; }

void AddClaims(Builder& b, const MetricsInput& input, bool legacy, int64_t now_sec) {
  std::map<std::string, const DraDevice*> by_name;
  for (const DraDevice& d : input.dra_devices) by_name.emplace(d.name, &d);
  // A share without consumedCapacity took the whole device.
  auto memory = [](const ClaimShare& s, const DraDevice& d) {
    return s.memory_bytes >= 0 ? s.memory_bytes : d.memory_bytes;
  };
  auto cores = [](const ClaimShare& s, const DraDevice& d) {
    return s.cores >= 0 ? s.cores : d.cores;
  };
  // hami_dra_gpu_*: per device of this node's pool, allocated = the sum over the claims.
  std::map<std::string, std::pair<double, double>> allocated;  // device name -> memory, cores
  // hami_dra_vgpu_*_allocated_*: per (namespace, pod, device_uuid), summed over its claims.
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<double, double>> per_pod;
  for (const ClaimUsage& c : input.claims) {
    for (const ClaimShare& s : c.claim.shares) {
      auto dev = by_name.find(s.device);
      if (dev == by_name.end()) continue;  // not a device of this node's pool (HAMi-DRA skips it)
      auto& a = allocated[s.device];
      a.first += memory(s, *dev->second);
      a.second += cores(s, *dev->second);
      if (dev->second->uuid.empty()) continue;  // every such device would be device_uuid=""
      for (const ClaimPod& p : c.claim.pods) {
        auto& pp = per_pod[{c.claim.ns, p.name, dev->second->uuid}];
        pp.first += memory(s, *dev->second);
        pp.second += cores(s, *dev->second);
      }
    }
  }
  for (const DraDevice& d : input.dra_devices) {
    const Labels labels = {{"node", input.node},
                           {"device_uuid", d.uuid},
                           {"device_index", d.index},
                           {"device_name", d.name},
                           {"device_type", d.type}};
    const auto a = allocated[d.name];
    b.Add("hami_dra_gpu_memory_limit_bytes", "Device memory limit for a certain GPU", labels,
          d.memory_bytes, "gauge", false);
    b.Add("hami_dra_gpu_core_limit_ratio", "Device core limit for a certain GPU", labels,
          Ratio(d.cores), "gauge", false);
    b.Add("hami_dra_gpu_memory_allocated_bytes", "Device memory allocated for a certain GPU",
          labels, a.first, "gauge", false);
    b.Add("hami_dra_gpu_core_allocated_ratio", "Device core allocated for a certain GPU", labels,
          Ratio(a.second), "gauge", false);
  }
  for (const auto& [key, a] : per_pod) {
    const auto& [ns, pod, uuid] = key;
    const Labels labels = {
        {"node", input.node}, {"device_uuid", uuid}, {"namespace", ns}, {"pod", pod}};
    b.Add("hami_dra_vgpu_memory_allocated_bytes", "vGPU Device memory allocated for a container",
          labels, a.first, "gauge", false);
    b.Add("hami_dra_vgpu_core_allocated_ratio", "vGPU Device core allocated for a container",
          labels, Ratio(a.second), "gauge", false);
  }
  // The claims' use, once per pod that uses the claim (pod="" when none does or the claim is
  // not in the API), and the container series of the claim's region for each of those pods
  // (none without a pod: two such claims on one GPU would be one series twice, which makes the
  // whole scrape invalid; their use is in the claim series, told apart by claim_uid).
  for (const ClaimUsage& c : input.claims) {
    if (!c.has_region) continue;
    std::vector<std::string> pods;
    for (const ClaimPod& p : c.claim.pods) pods.push_back(p.name);
    const bool consumed = !pods.empty();
    if (pods.empty()) pods.emplace_back();
    for (const std::string& pod : pods) {
      for (const DeviceUsage& d : c.region.devices) {
        const Labels labels = {{"node", input.node},      {"device_uuid", d.uuid},
                               {"namespace", c.claim.ns}, {"pod", pod},
                               {"claim", c.claim.name},   {"claim_uid", c.claim.uid}};
        b.Add("hami_dra_vgpu_memory_used_bytes", "vGPU Device memory used by a claim", labels,
              static_cast<double>(d.total), "gauge", false);
        b.Add("hami_dra_vgpu_core_used_ratio", "vGPU Device SM utilization of a claim", labels,
              Ratio(static_cast<double>(d.sm_util)), "gauge", false);
      }
      if (consumed) AddContainer(b, ContainerUsage{c.claim.ns, pod, "", c.region}, legacy, now_sec);
    }
  }
}

}  // namespace

std::string FormatGoFloat(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string s(buf, sci.ptr);
  const std::size_t e = s.find('e');
  const int exp = std::stoi(s.substr(e + 1));
  // Go's 'g' with the shortest precision decides with precision 6: %e when the exponent is
  // < -4 or >= 6 (so 1048576 is 1.048576e+06), with at least two exponent digits as here.
  if (exp < -4 || exp >= 6) return s;
  auto fix = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  return std::string(buf, fix.ptr);
}

std::string RenderMetrics(const std::vector<ContainerUsage>& containers, bool legacy,
                          SystemTime now) {
  MetricsInput input;
  input.containers = containers;
  return RenderMetrics(input, legacy, now);
}

std::string RenderMetrics(const MetricsInput& input, bool legacy, SystemTime now) {
  Builder b;
  for (const deviceplugin::GpuSample& g : input.host) {
    const std::string index = std::to_string(g.index);
    const std::string type = "NVIDIA-" + g.name;  // HAMi's device_type
    const Labels labels = {{"node", input.node},
                           {"device_index", index},
                           {"device_uuid", g.uuid},
                           {"device_type", type}};
    const Labels old = {
        {"nodeid", input.node}, {"deviceidx", index}, {"deviceuuid", g.uuid}, {"devicetype", type}};
    if (g.has_memory) {
      const auto used = static_cast<double>(g.memory_used_bytes);
      b.Add("hami_host_gpu_memory_used_bytes", "GPU device memory usage in bytes", labels, used);
      if (legacy) b.Add("HostGPUMemoryUsage", "GPU device memory usage", old, used);
    }
    if (g.has_utilization) {
      const auto util = static_cast<double>(g.gpu_utilization);
      b.Add("hami_host_gpu_utilization_ratio", "GPU core utilization ratio (0-100)", labels, util);
      if (legacy) b.Add("HostCoreUtilization", "GPU core utilization", old, util);
      b.Add("hami_host_gpu_memory_controller_utilization_ratio",
            "GPU memory controller utilization ratio (0-100)", labels,
            static_cast<double>(g.memory_utilization));
    }
    // HAMi v2.11's host series, each left out where NVML does not support it.
    if (g.has_temperature) {
      b.Add("hami_host_gpu_temperature_celsius", "GPU temperature in degrees Celsius", labels,
            static_cast<double>(g.temperature_celsius));
    }
    if (g.has_power) {
      b.Add("hami_host_gpu_power_usage_watts", "GPU power draw in watts", labels,
            static_cast<double>(g.power_milliwatts) / 1000.0);
    }
    // HAMi declares it a gauge despite the _total name; one series per error_type.
    for (const auto& [has, count, error_type] :
         {std::tuple{g.has_ecc_corrected, g.ecc_corrected, "corrected"},
          std::tuple{g.has_ecc_uncorrected, g.ecc_uncorrected, "uncorrected"}}) {
      if (!has) continue;
      Labels ecc = labels;
      ecc.emplace_back("error_type", error_type);
      b.Add("hami_host_gpu_ecc_errors_total", "Lifetime aggregate ECC errors", ecc,
            static_cast<double>(count));
    }
  }
  const int64_t now_sec =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  for (const ContainerUsage& c : input.containers) AddContainer(b, c, legacy, now_sec);
  AddClaims(b, input, legacy, now_sec);
  return b.Text();
}

}  // namespace hami::monitor
