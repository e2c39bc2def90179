#include "sim/synthetic/cluster.h"

#include <algorithm>
#include <cstdio>

#include "protocol/keys.h"
#include "protocol/node_register.h"
#include "protocol/pod_devices.h"
#include "protocol/vendor.h"

namespace hami::sim::synthetic {

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
  const std::string name = NodeName(n);
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}};
  node["metadata"] = {
      {"name", name},
      {"labels",
       {{"kubernetes.io/hostname", name},
        {"gpu", "on"},
        {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}}},
      {"annotations",
       {{std::string(protocol::kNvidiaRegisterKey), protocol::EncodeNodeRegister(devices)},
        {std::string(protocol::kNvidiaHandshakeKey), handshake}}}};
  json alloc = {
      {"cpu", "64"},
      {"memory", "515857Mi"},
      {"pods", "110"},
      {std::string(protocol::kNvidiaCountResource), std::to_string(kGpusPerNode * kSplit)}};
  node["status"] = {{"allocatable", alloc},
                    {"capacity", alloc},
                    {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}};
  return node;
}

namespace {

json GpuContainer(int32_t mem) {
  json c = {{"name", "main"}, {"image", "nvcr.io/nvidia/pytorch:24.01-py3"}};
  c["resources"]["limits"] = {{std::string(protocol::kNvidiaCountResource), "1"},
                              {std::string(protocol::kNvidiaMemoryResource), std::to_string(mem)}};
  return c;
}

json PodSkeleton(const std::string& name) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", kNamespace}, {"labels", {{"app", "bench"}}}};
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
  ctr["resources"]["limits"][std::string(protocol::kNvidiaCoreResource)] =
      std::to_string(kBoundPodCores);
  pod["spec"]["containers"].push_back(ctr);
  pod["spec"]["nodeName"] = NodeName(n);
  protocol::PodDevices devices = {{{GpuUuid(n, g), "NVIDIA", kBoundPodMemMiB, kBoundPodCores}}};
  pod["metadata"]["annotations"] = {
      {std::string(protocol::kVgpuNodeKey), NodeName(n)},
      {std::string(protocol::kVgpuTimeKey), "1764400000"},
      {std::string(protocol::kNvidiaToAllocateKey), ";"},
      {std::string(protocol::kNvidiaAllocatedKey), protocol::EncodePodDevices(devices)},
      {std::string(protocol::kBindPhaseKey), "success"},
      {std::string(protocol::kBindTimeKey), "1764400001"}};
  pod["metadata"]["labels"][std::string(protocol::kVgpuNodeKey)] = NodeName(n);
  pod["status"]["phase"] = "Running";
  return pod;
}

json MakePendingPod(const std::string& name) {
  json pod = PodSkeleton(name);
  pod["spec"]["containers"].push_back(GpuContainer(kPendingPodMemMiB));
  pod["status"]["phase"] = "Pending";
  return pod;
}

json MakePlainPod(const std::string& name) {
  json pod = PodSkeleton(name);
  pod["spec"]["containers"].push_back(json{{"name", "main"}, {"image", "busybox"}});
  pod["status"]["phase"] = "Pending";
  return pod;
}

size_t KubeSchedulerCandidates(size_t n) {
  if (n < 100) return n;
  const size_t pct = std::max<size_t>(5, 50 - std::min<size_t>(n / 125, 50));
  return std::max<size_t>(100, n * pct / 100);
}

std::vector<std::string> CandidateNames(int nodes, int count) {
  if (count <= 0 || count > nodes) count = nodes;
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) names.push_back(NodeName(static_cast<int>((i * 7919LL) % nodes)));
  return names;
}

}  // namespace hami::sim::synthetic
