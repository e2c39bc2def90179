// bench_filter: figures 1 and 3 of issue 4 item 7. The compute part of a /filter call (what
// Extender::FilterLive does minus the API calls): the candidates' rows from the usage index,
// Schedule(), FailedNodes(), the allocation annotations and the pod entering the index. The index
// is built the way the server builds it: node rows from the register annotations, pod allocations
// decoded from the pods' annotations.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "device/config.h"
#include "device/pod_view.h"
#include "device/schedule.h"
#include "device/usage_index.h"
#include "sim/percentile.h"
#include "sim/synthetic/cluster.h"

namespace hami::bench {

using namespace hami::sim::synthetic;  // NOLINT: the cluster the benches run on
using sim::Percentile;

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// This thread's CPU time in ms: on the shared, loaded build machine wall time includes waiting
// for a core, so both are reported.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Fixture {
  device::Registry registry = device::MakeRegistry(device::DefaultDeviceConfig());
  device::UsageIndex index;
  std::vector<std::string> names;  // the candidates (NodeNames)
};

bool Fill(Fixture* f, int nodes, int pods) {
  for (int n = 0; n < nodes; ++n) {
    nlohmann::json node = MakeNode(n, "Reported_2026-11-29 12:00:00");
    auto row =
        device::NodeUsageFromAnnotations(f->registry, NodeName(n), device::ObjectAnnotations(node));
    if (!row) return std::fprintf(stderr, "node %d: %s\n", n, row.error().c_str()), false;
    f->index.SetNode(std::move(*row));
  }
  for (int p = 0; p < pods; ++p) {
    auto view = device::ParsePodView(MakeBoundPod(p, nodes));
    if (!view) return std::fprintf(stderr, "pod %d: %s\n", p, view.error().c_str()), false;
    auto alloc = device::PodAllocationFromPod(f->registry, *view);
    if (!alloc || !*alloc) return std::fprintf(stderr, "pod %d: no allocation\n", p), false;
    f->index.UpsertPod(std::move(**alloc));
  }
  return true;
}

// One decision as FilterLive makes it; returns the chosen node ("" when none).
std::string Decide(Fixture& f, const device::PodView& pod, bool shared, double* rows_ms,
                   double* sched_ms) {
  f.index.RemovePod(pod.Key());
  Result<device::ScheduleDecision> decision = Error{""};
  if (shared) {
    auto t0 = Clock::now();
    device::UsageIndex::SharedSnapshot snap = f.index.SharedRows(f.names);
    *rows_ms = MsSince(t0);
    auto t1 = Clock::now();
    decision = device::Schedule(f.registry, pod, snap.nodes, snap.missing, {});
    *sched_ms = MsSince(t1);
  } else {
    auto t0 = Clock::now();
    device::UsageIndex::Snapshot snap = f.index.Rows(f.names);
    *rows_ms = MsSince(t0);
    auto t1 = Clock::now();
    decision = device::Schedule(f.registry, pod, snap.nodes, snap.missing, {});
    *sched_ms = MsSince(t1);
  }
  if (!decision) return std::fprintf(stderr, "%s\n", decision.error().c_str()), "";
  auto failed = decision->FailedNodes();
  const device::NodeFit* chosen = decision->Chosen();
  if (chosen == nullptr) return "";
  device::PodView updated = pod;
  for (auto& [k, v] : device::AllocationAnnotations(f.registry, *decision)) {
    updated.annotations[k] = v;
  }
  updated.annotations["hami.io/vgpu-time"] = "1764400100";
  auto alloc = device::PodAllocationFromPod(f.registry, updated);
  if (alloc && *alloc) f.index.UpsertPod(std::move(**alloc));
  return chosen->node + (failed.empty() ? "" : "+failed");
}

// `iters` decisions in one form; the chosen node must not change (the index is back to the
// same state before each call). Returns the chosen node, "" on failure.
std::string Measure(Fixture& f, const device::PodView& pod, bool shared, int iters) {
  std::vector<double> total, cpu, rows, sched;
  std::string first;
  for (int i = 0; i < iters + 5; ++i) {
    double r = 0, s = 0;
    auto start = Clock::now();
    double cpu0 = ThreadCpuMs();
    std::string chosen = Decide(f, pod, shared, &r, &s);
    double ms = MsSince(start);
    double cpu_ms = ThreadCpuMs() - cpu0;
    if (chosen.empty()) return std::fprintf(stderr, "no node chosen\n"), "";
    if (first.empty()) first = chosen;
    if (chosen != first) return std::fprintf(stderr, "decision changed: %s\n", chosen.c_str()), "";
    if (i < 5) continue;  // warm-up
    total.push_back(ms);
    cpu.push_back(cpu_ms);
    rows.push_back(r);
    sched.push_back(s);
  }
  std::printf("%s, %d calls, chosen %s\n",
              shared ? "SharedRows() + Schedule()" : "Rows() (copies) + Schedule()", iters,
              first.c_str());
  std::printf("  decision wall  p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", Percentile(total, 50),
              Percentile(total, 99), Percentile(total, 100));
  std::printf("  decision CPU   p50 %.3f ms  p99 %.3f ms\n", Percentile(cpu, 50),
              Percentile(cpu, 99));
  std::printf("    rows      wall p50 %.3f ms  p99 %.3f ms\n", Percentile(rows, 50),
              Percentile(rows, 99));
  std::printf("    Schedule  wall p50 %.3f ms  p99 %.3f ms\n", Percentile(sched, 50),
              Percentile(sched, 99));
  return first;
}

}  // namespace

int RunCompute(int nodes, int pods, int iters, const std::string& forms, int candidates) {
  Fixture f;
  auto t = Clock::now();
  if (!Fill(&f, nodes, pods)) return 1;
  if (candidates <= 0)
    candidates = static_cast<int>(KubeSchedulerCandidates(static_cast<size_t>(nodes)));
  candidates = std::min(candidates, nodes);
  f.names = CandidateNames(nodes, candidates);
  std::printf(
      "bench_filter: %d nodes x %d GPUs, %d bound pods, index built in %.0f ms; %d "
      "candidates\n",
      nodes, kGpusPerNode, pods, MsSince(t), candidates);
  auto view = device::ParsePodView(MakePendingPod("filter-me"));
  if (!view) return std::fprintf(stderr, "%s\n", view.error().c_str()), 1;
  std::string copied, shared;
  if (forms != "shared") copied = Measure(f, *view, /*shared=*/false, iters);
  if (forms != "copied") shared = Measure(f, *view, /*shared=*/true, iters);
  if (forms == "both" && copied != shared) return std::fprintf(stderr, "forms disagree\n"), 1;
  return copied.empty() && shared.empty() ? 1 : 0;
}

}  // namespace hami::bench

// bench_filter [nodes=1000] [pods=20000] [iters=300] [both|copied|shared] [candidates=all]
// candidates: how many node names the call carries; 0 = kube-scheduler's default share.
int main(int argc, char** argv) {
  int nodes = argc > 1 ? std::atoi(argv[1]) : 1000;
  int pods = argc > 2 ? std::atoi(argv[2]) : 20000;
  int iters = argc > 3 ? std::atoi(argv[3]) : 300;
  int candidates = argc > 5 ? std::atoi(argv[5]) : nodes;
  return hami::bench::RunCompute(nodes, pods, iters, argc > 4 ? argv[4] : "both", candidates);
}
