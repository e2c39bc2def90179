// hami-vgpu-monitor on every simulated node (issue 13 item 3): the real monitor::Monitor, in
// process, each with its own HTTP listener on 127.0.0.1:0, reading the node's region files
// under the device plugins' hook path (the sim kubelet writes them for containers with a
// `usage:`, sim/usage.h). Each monitor is also a pod in the API server, as the chart's
// device-plugin DaemonSet pod that carries it: kube-system/hami-device-plugin-<node>, the
// DaemonSet's pod labels, spec.nodeName, a container port named "metrics" = the listener's real
// port, status Running with podIP 127.0.0.1, so that `kubectl hami top` finds it and reaches it
// through the API server's pod proxy. The runner scrapes the monitors' /metrics over HTTP for the
// report's measured memory per GPU.
#ifndef HAMI_SIM_MONITORS_H_
#define HAMI_SIM_MONITORS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "k8s/client.h"
#include "sim/kubelet.h"

#include "monitor/metrics.h"

namespace hami::monitor {
class Monitor;
}

namespace hami::sim {

struct MonitorAddress {
  std::string node;
  std::string pod;  // kube-system/<name>
  int port = 0;     // on 127.0.0.1
};

class MonitorFleet {
 public:
  // `monitor_client` (the device plugins' identity) reads pods; `admin` creates the monitor pods.
  // Both must outlive the fleet. `hook_path` is the device plugins' (it holds vgpu/containers).
  // The host GPU series (hami_host_gpu_*) are the simulated GPUs of `nodes`: memory used = the
  // sum over the containers' regions on that GPU, utilisation = the sum of their SM use (at most
  // 100), as NVML would report them on a real node.
  // `dra`: the nodes run hami-dra-plugin, so the monitor is the DRA plugin DaemonSet's pod
  // (kube-system/hami-dra-plugin-<node>, component hami-dra-plugin), as the chart's dra.enabled.
  MonitorFleet(k8s::Client& monitor_client, k8s::Client& admin, std::vector<SimNode> nodes,
               std::string hook_path, bool dra = false);
  ~MonitorFleet();  // Stop()s
  MonitorFleet(const MonitorFleet&) = delete;
  MonitorFleet& operator=(const MonitorFleet&) = delete;

  // Starts every node's monitor and creates its pod. Errors name the node.
  Status Start();
  void Stop();

  std::vector<MonitorAddress> Addresses() const;

  // Scrapes every monitor's /metrics over HTTP and sums hami_vgpu_memory_used_bytes per
  // device_uuid, in MiB (rounded down). `want_containers`: the number of containers with a
  // usage region; the scrape is repeated (up to `patience`) until that many distinct containers
  // are seen, since a monitor's informer may lag the pod that was just bound. Errors name the
  // monitor.
  Result<std::map<std::string, int64_t>> MeasuredMemoryMiB(size_t want_containers,
                                                           std::chrono::milliseconds patience);

 private:
  Status CreatePod(const MonitorAddress& address);

  k8s::Client& client_;
  k8s::Client& admin_;
  std::vector<SimNode> nodes_;
  std::string hook_path_;
  bool dra_ = false;
  std::vector<std::unique_ptr<monitor::Monitor>> monitors_;
  std::vector<MonitorAddress> addresses_;
};

// The samples of `family` in Prometheus text: each sample's labels and value. Lines that are not
// samples of that family are skipped; a sample that does not parse is an error naming its line.
struct MetricSample {
  std::map<std::string, std::string> labels;
  double value = 0;
};
Result<std::vector<MetricSample>> ParseMetricFamily(std::string_view text, std::string_view family);

// What NVML would report for simulated GPUs given the containers' regions (see MonitorFleet).
std::vector<deviceplugin::GpuSample> SimulatedHostGpus(
    const std::vector<deviceplugin::GpuDevice>& gpus,
    const std::vector<monitor::ContainerUsage>& containers);

}  // namespace hami::sim

#endif  // HAMI_SIM_MONITORS_H_
