// The cluster the scheduler benchmarks run on (issue 4 item 7): N nodes x 8 GPUs registered the
// way the device plugin registers them (hami.io/node-nvidia-register JSON, a Reported handshake,
// allocatable nvidia.com/gpu), and P running pods spread evenly over them, each holding one GPU
// slice in its hami.io/vgpu-devices-allocated annotation, shaped like HAMi-scheduled pods.
#ifndef HAMI_BENCH_SCHEDULER_CLUSTER_H_
#define HAMI_BENCH_SCHEDULER_CLUSTER_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hami::bench {

inline constexpr int kGpusPerNode = 8;
inline constexpr int32_t kGpuMemMiB = 81920;  // A100 80 GB
inline constexpr int32_t kSplit = 10;
// Every running pod holds one slice of this size (20 pods on 8 GPUs leave room for more).
inline constexpr int32_t kBoundPodMemMiB = 4000;
inline constexpr int32_t kBoundPodCores = 10;

std::string NodeName(int n);
std::string GpuUuid(int n, int g);

// A core/v1 Node with the register annotation, a Reported handshake (so a registration pass
// writes Requesting, as it does every 15 s against a live plugin) and allocatable GPUs.
nlohmann::json MakeNode(int n, const std::string& handshake);

// Running pod `p` of `pods` over `nodes` nodes: node p % nodes, GPU (p / nodes) % 8.
nlohmann::json MakeBoundPod(int p, int nodes);

// A pending pod asking for 1 GPU and 3000 MiB (the filter pod), as the webhook leaves it.
nlohmann::json MakePendingPod(const std::string& name);

// A pending pod asking for no device (the filter passes its node list through).
nlohmann::json MakePlainPod(const std::string& name);

// kube-scheduler hands the extender only the feasible nodes it looked for: with the default
// percentageOfNodesToScore, max(100, n x max(5, 50 - n/125) / 100) of n nodes (420 of 1,000,
// 500 of 5,000); all of them below 100.
int KubeSchedulerCandidates(int n);

// `count` node names spread over the cluster (stride 7919, coprime with the sizes used), like
// kube-scheduler's rotating start index; `count` <= 0 or > nodes: every node.
std::vector<std::string> CandidateNames(int nodes, int count);

// p-th percentile (0..100) of `samples` (nearest rank); sorts a copy.
double Percentile(std::vector<double> samples, double p);

}  // namespace hami::bench

#endif  // HAMI_BENCH_SCHEDULER_CLUSTER_H_
