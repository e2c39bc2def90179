// Benchmarks of the device scheduling core: what one /filter call costs when it reads only its
// candidates' rows from the usage index, and what one pod event costs the index.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "device/schedule.h"
#include "device/usage_index.h"

namespace {

using namespace hami::device;

constexpr int kGpusPerNode = 8;

std::string NodeName(int n) { return "node-" + std::to_string(n); }
std::string GpuId(int n, int g) { return "GPU-" + std::to_string(n) + "-" + std::to_string(g); }

NodeUsage MakeNode(int n) {
  NodeUsage node{.name = NodeName(n)};
  for (int g = 0; g < kGpusPerNode; ++g) {
    node.devices.push_back(DeviceUsage{.id = GpuId(n, g),
                                       .index = static_cast<uint64_t>(g),
                                       .type = "NVIDIA A100-SXM4-80GB",
                                       .vendor = "NVIDIA",
                                       .health = true,
                                       .mode = "hami-core",
                                       .numa = g / 4,
                                       .count = 10,
                                       .totalmem = 81920,
                                       .totalcore = 100});
  }
  return node;
}

// A cluster of `nodes` nodes with 4 running pods per node (one GPU slice each).
void Fill(UsageIndex* index, int nodes) {
  for (int n = 0; n < nodes; ++n) index->SetNode(MakeNode(n));
  for (int n = 0; n < nodes; ++n) {
    for (int p = 0; p < 4; ++p) {
      index->UpsertPod(PodAllocation{.key = "ns/pod-" + std::to_string(n) + "-" + std::to_string(p),
                                     .namespace_name = "ns",
                                     .node = NodeName(n),
                                     .deltas = {{.uuid = GpuId(n, p),
                                                 .vendor = "NVIDIA",
                                                 .usedmem = 20000,
                                                 .usedcores = 25,
                                                 .slots = 1}}});
    }
  }
}

PodView GpuPod() {
  PodView pod{.name = "new", .namespace_name = "ns"};
  pod.containers.push_back(ContainerView{
      .name = "main",
      .limits = {
          {"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}, {"nvidia.com/gpucores", "30"}}});
  return pod;
}

// One filter call: snapshot `candidates` rows out of a cluster of range(0) nodes, decide.
// The time should not grow with the cluster size (no scan of all nodes or pods).
void BM_FilterFromIndex(benchmark::State& state) {
  const int cluster = static_cast<int>(state.range(0));
  const int candidates = static_cast<int>(state.range(1));
  UsageIndex index;
  Fill(&index, cluster);
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  PodView pod = GpuPod();
  std::vector<std::string> names;
  for (int i = 0; i < candidates; ++i) names.push_back(NodeName((i * 7919) % cluster));
  for (auto _ : state) {
    auto rows = index.Rows(names);
    auto decision = Schedule(registry, pod, rows.nodes, rows.missing, ScheduleOptions{});
    benchmark::DoNotOptimize(decision);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FilterFromIndex)
    ->Args({100, 10})
    ->Args({1000, 10})
    ->Args({5000, 10})
    ->Args({1000, 100})
    ->Args({5000, 1000});

// One pod event: replace a pod's allocation (subtract the old deltas, add the new ones).
void BM_PodEvent(benchmark::State& state) {
  UsageIndex index;
  Fill(&index, static_cast<int>(state.range(0)));
  int i = 0;
  for (auto _ : state) {
    index.UpsertPod(PodAllocation{.key = "ns/churn",
                                  .namespace_name = "ns",
                                  .node = NodeName(i % 50),
                                  .deltas = {{.uuid = GpuId(i % 50, 7),
                                              .vendor = "NVIDIA",
                                              .usedmem = 1000,
                                              .usedcores = 10,
                                              .slots = 1}}});
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PodEvent)->Arg(100)->Arg(5000);

// Decoding a pod's allocated annotation into deltas (informer event handler cost).
void BM_PodAllocationFromPod(benchmark::State& state) {
  Registry registry = MakeRegistry(DefaultDeviceConfig());
  PodView pod{.name = "p", .namespace_name = "ns"};
  pod.containers.resize(2);
  pod.annotations = {{"hami.io/vgpu-node", "node-1"},
                     {"hami.io/vgpu-devices-allocated",
                      "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:"
                      "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1449,NVIDIA,3000,30:;"
                      "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,1000,0:;"}};
  for (auto _ : state) {
    auto a = PodAllocationFromPod(registry, pod);
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(BM_PodAllocationFromPod);

}  // namespace

BENCHMARK_MAIN();
