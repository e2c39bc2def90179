// Benchmarks of the sim apiserver and the k8s client over loopback HTTP.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "k8s/client.h"
#include "k8s/informer.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/store.h"

namespace {

using hami::k8s::Client;
using hami::k8s::Json;
namespace res = hami::k8s::resources;

// A pod about the size of a HAMi-scheduled one (~1.3 KB of JSON).
Json BenchPod(int i) {
  Json pod = {{"metadata",
               {{"name", "pod-" + std::to_string(i)},
                {"labels", {{"app", "bench"}, {"hami.io/vgpu", "true"}}},
                {"annotations",
                 {{"hami.io/vgpu-devices-allocated",
                   "GPU-0fc9b7e6-6b8c-4d5e-9a4f-1b2c3d4e5f60,NVIDIA,4000,30:;"},
                  {"hami.io/vgpu-node", "node-" + std::to_string(i % 100)},
                  {"hami.io/bind-phase", "success"}}}}},
              {"spec",
               {{"schedulerName", "hami-scheduler"},
                {"nodeName", "node-" + std::to_string(i % 100)},
                {"containers",
                 {{{"name", "main"},
                   {"image", "nvcr.io/nvidia/pytorch:24.01-py3"},
                   {"resources",
                    {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}}},
                     {"requests", {{"cpu", "1"}, {"memory", "2Gi"}}}}},
                   {"env", {{{"name", "CUDA_TASK_PRIORITY"}, {"value", "1"}}}}}}}}}};
  return pod;
}

struct Cluster {
  explicit Cluster(int pods) : server(hami::sim::ApiServerOptions{}) {
    if (!server.Start()) std::abort();
    const auto& type = *hami::sim::FindResourceType("", "v1", "pods");
    for (int i = 0; i < pods; ++i) {
      if (!server.store().Create(type, "default", BenchPod(i))) std::abort();
    }
    hami::k8s::RestConfig cfg;
    cfg.server = server.url();
    cfg.qps = 0;
    client = std::make_unique<Client>(cfg);
  }
  hami::sim::ApiServer server;
  std::unique_ptr<Client> client;
};

// Resident memory after returning freed heap pages to the OS, so that transient buffers (the list
// body, the parsed list) do not count.
size_t RssBytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

void BM_List20kPods(benchmark::State& state) {
  Cluster c(20000);
  for (auto _ : state) {
    auto list = c.client->List(res::kPods, "default", {});
    if (!list || list->items.size() != 20000) state.SkipWithError("list failed");
    benchmark::DoNotOptimize(list);
  }
}
BENCHMARK(BM_List20kPods)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_List20kPodsPaged500(benchmark::State& state) {
  Cluster c(20000);
  hami::k8s::ListOptions o;
  o.limit = 500;
  for (auto _ : state) {
    auto list = c.client->ListAll(res::kPods, "default", o);
    if (!list || list->items.size() != 20000) state.SkipWithError("list failed");
  }
}
BENCHMARK(BM_List20kPodsPaged500)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_InformerSync20kPods(benchmark::State& state) {
  Cluster c(20000);
  auto list = c.client->List(res::kPods, "default", {});
  size_t json_bytes = 0;
  for (const auto& p : list->items) json_bytes += p.dump().size();
  list = hami::k8s::ObjectList{};
  hami::k8s::InformerOptions opts;
  opts.compact = state.range(0) != 0;
  for (auto _ : state) {
    size_t before = RssBytes();
    hami::k8s::Informer inf(*c.client, res::kPods, opts, {});
    inf.Start();
    if (!inf.WaitForSync(std::chrono::seconds(120))) state.SkipWithError("no sync");
    state.counters["cache_MB"] = static_cast<double>(RssBytes() - before) / 1e6;
    state.counters["json_MB"] = static_cast<double>(json_bytes) / 1e6;
    inf.Stop();
  }
}
// Arg 0: parsed cache; 1: compact cache.
BENCHMARK(BM_InformerSync20kPods)->Unit(benchmark::kMillisecond)->Iterations(1)->Arg(0)->Arg(1);

void BM_MergePatch(benchmark::State& state) {
  Cluster c(1);
  int i = 0;
  for (auto _ : state) {
    Json patch = {{"metadata", {{"annotations", {{"hami.io/bind-time", std::to_string(++i)}}}}}};
    auto r = c.client->Patch(res::kPods, "default", "pod-0", hami::k8s::PatchType::kMerge, patch);
    if (!r) state.SkipWithError("patch failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MergePatch)->Unit(benchmark::kMicrosecond)->UseRealTime();

// 100 watchers; each iteration makes 100 pod updates and waits until every watcher saw all.
void BM_WatchFanout100(benchmark::State& state) {
  Cluster c(1);
  const int kWatchers = 100;
  const int kUpdates = 100;
  std::atomic<int64_t> received{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> watchers;
  const std::string start_rv = std::to_string(c.server.store().resource_version());
  for (int w = 0; w < kWatchers; ++w) {
    watchers.emplace_back([&] {
      hami::k8s::WatchOptions o;
      o.resource_version = start_rv;
      o.allow_bookmarks = false;
      (void)c.client->Watch(
          res::kPods, "default", o,
          [&](const hami::k8s::WatchEvent&) {
            received.fetch_add(1);
            return !stop.load();
          },
          &stop);
    });
  }
  // Every watcher starts from the resourceVersion before the first update, so none misses an
  // event however late its stream opens.
  int i = 0;
  for (auto _ : state) {
    int64_t want = received.load() + int64_t{kWatchers} * kUpdates;
    for (int u = 0; u < kUpdates; ++u) {
      Json patch = {{"metadata", {{"labels", {{"n", std::to_string(++i)}}}}}};
      (void)c.client->Patch(res::kPods, "default", "pod-0", hami::k8s::PatchType::kMerge, patch);
    }
    while (received.load() < want) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  state.SetItemsProcessed(state.iterations() * kWatchers * kUpdates);
  stop = true;
  for (auto& t : watchers) t.join();
}
BENCHMARK(BM_WatchFanout100)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
