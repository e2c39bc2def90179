#include "cluster.h"

#include <cmath>

#include "protocol/node_register.h"
#include "protocol/pod_devices.h"

namespace hami::bench {

using nlohmann::json;

std::string NodeName(int n) { return "gpu-node-" + std::to_string(n); }

std::string GpuUuid(int n, int g) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-%08x-5c87-89ac-b1a6-%012x", static_cast<unsigned>(n),
                static_cast<unsigned>(g));
  return buf;
}

json MakeNode(int n, const std::string& handshake) {
  std::vector<protocol::DeviceInfo> devices;
  for (int g = 0; g < kGpusPerNode; ++g) {
    devices.push_back(protocol::DeviceInfo{.id = GpuUuid(n, g),
                                           .index = static_cast<uint64_t>(g),
                                           .count = kSplit,
                                           .devmem = kGpuMemMiB,
                                           .devcore = 100,
                                           .type = "NVIDIA-NVIDIA A100-SXM4-80GB",
                                           .numa = g / 4,
                                           .mode = "hami-core",
                                           .health = true});
  }
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}};
  node["metadata"] = {{"name", NodeName(n)},
                      {"labels",
                       {{"kubernetes.io/hostname", NodeName(n)},
                        {"gpu", "on"},
                        {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}}}};
  node["metadata"]["annotations"] = {
      {"hami.io/node-nvidia-register", protocol::EncodeNodeRegister(devices)},
      {"hami.io/node-handshake", handshake}};
  std::string gpus = std::to_string(kGpusPerNode * kSplit);
  node["status"]["allocatable"] = {{"cpu", "64"}, {"memory", "515857Mi"}, {"nvidia.com/gpu", gpus}};
  node["status"]["capacity"] = node["status"]["allocatable"];
  return node;
}

namespace {

json GpuContainer(int32_t mem) {
  json c = {{"name", "main"}, {"image", "nvcr.io/nvidia/pytorch:24.01-py3"}};
  c["resources"]["limits"] = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(mem)}};
  return c;
}

json PodSkeleton(const std::string& name) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}, {"labels", {{"app", "bench"}}}};
  pod["spec"]["schedulerName"] = "hami-scheduler";
  pod["spec"]["containers"] = json::array();
  return pod;
}

}  // namespace

json MakeBoundPod(int p, int nodes) {
  const int n = p % nodes;
  const int g = (p / nodes) % kGpusPerNode;
  json pod = PodSkeleton("bound-" + std::to_string(p));
  json ctr = GpuContainer(kBoundPodMemMiB);
  ctr["resources"]["limits"]["nvidia.com/gpucores"] = std::to_string(kBoundPodCores);
  pod["spec"]["containers"].push_back(ctr);
  pod["spec"]["nodeName"] = NodeName(n);
  protocol::PodDevices devices = {{{GpuUuid(n, g), "NVIDIA", kBoundPodMemMiB, kBoundPodCores}}};
  std::string value = protocol::EncodePodDevices(devices);
  pod["metadata"]["annotations"] = {
      {"hami.io/vgpu-node", NodeName(n)},        {"hami.io/vgpu-time", "1764400000"},
      {"hami.io/vgpu-devices-to-allocate", ";"}, {"hami.io/vgpu-devices-allocated", value},
      {"hami.io/bind-phase", "success"},         {"hami.io/bind-time", "1764400001"}};
  pod["metadata"]["labels"]["hami.io/vgpu-node"] = NodeName(n);
  pod["status"]["phase"] = "Running";
  return pod;
}

json MakePendingPod(const std::string& name) {
  json pod = PodSkeleton(name);
  pod["spec"]["containers"].push_back(GpuContainer(3000));
  pod["status"]["phase"] = "Pending";
  return pod;
}

json MakePlainPod(const std::string& name) {
  json pod = PodSkeleton(name);
  pod["spec"]["containers"].push_back(json{{"name", "main"}, {"image", "busybox"}});
  pod["status"]["phase"] = "Pending";
  return pod;
}

int KubeSchedulerCandidates(int n) {
  if (n < 100) return n;
  int pct = std::max(5, 50 - n / 125);
  return std::max(100, n * pct / 100);
}

std::vector<std::string> CandidateNames(int nodes, int count) {
  if (count <= 0 || count > nodes) count = nodes;
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) names.push_back(NodeName(static_cast<int>((i * 7919LL) % nodes)));
  return names;
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

}  // namespace hami::bench
