// A synthetic cluster: N nodes x 8 GPUs registered the way the device plugin registers them
// (hami.io/node-nvidia-register JSON, a handshake, allocatable nvidia.com/gpu, Ready), and bound
// pods spread evenly over them, each holding one GPU slice in its hami.io/vgpu-devices-allocated
// annotation, shaped like HAMi-scheduled pods. hami-sim loadgen pre-loads it and the scheduler
// benches (bench/scheduler) run on it; the kube-scheduler loop of hami-sim and both of them take
// kube-scheduler's share of candidate nodes from here.
#ifndef HAMI_SIM_SYNTHETIC_CLUSTER_H_
#define HAMI_SIM_SYNTHETIC_CLUSTER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hami::sim::synthetic {

inline constexpr int kGpusPerNode = 8;
inline constexpr int32_t kGpuMemMiB = 81920;  // A100 80 GB
inline constexpr int32_t kSplit = 10;
// Every bound pod holds one slice of this size (20 pods on 8 GPUs leave room for more).
inline constexpr int32_t kBoundPodMemMiB = 4000;
inline constexpr int32_t kBoundPodCores = 10;
// A pending pod asks for 1 GPU and this much memory (the filter pod).
inline constexpr int32_t kPendingPodMemMiB = 3000;
inline constexpr std::string_view kNamespace = "default";

std::string NodeName(int n);
std::string GpuUuid(int n, int g);

// A core/v1 Node with the register annotation, the handshake value given (a Reported one makes
// a registration pass write Requesting, as it does every 15 s against a live plugin), allocatable
// GPUs and a Ready condition.
nlohmann::json MakeNode(int n, const std::string& handshake);

// Bound pod `p` over `nodes` nodes: node p % nodes, GPU (p / nodes) % 8, Running.
nlohmann::json MakeBoundPod(int p, int nodes);

// A pending pod asking for 1 GPU and kPendingPodMemMiB, as the webhook leaves it.
nlohmann::json MakePendingPod(const std::string& name);

// A pending pod asking for no device (the filter passes its node list through).
nlohmann::json MakePlainPod(const std::string& name);

// kube-scheduler's numFeasibleNodesToFind with the default (adaptive) percentageOfNodesToScore:
// every node below 100, else max(100, n x max(5, 50 - n/125) %) (420 of 1,000, 500 of 5,000).
size_t KubeSchedulerCandidates(size_t n);

// `count` node names spread over the cluster (stride 7919, coprime with the sizes used), like
// kube-scheduler's rotating start index; `count` <= 0 or > nodes: every node.
std::vector<std::string> CandidateNames(int nodes, int count);

}  // namespace hami::sim::synthetic

#endif  // HAMI_SIM_SYNTHETIC_CLUSTER_H_
