// The SM share a container gets under libvgpu's compute limiter, per scenario, on the simulated
// GPU of tests/vgpu/sm_sim.h (simulated clock: runs in seconds, same figures every run).
// For each scenario: the mean share after the 6 s warm-up and the lowest and highest share over
// any 2 s window; "ok" when every 2 s window is within 5 points of the limit.
//
//   build/bin/vgpu_sm_share           every scenario (figures in docs/PERFORMANCE.md)
//   build/bin/vgpu_sm_share --sweep   phases of 0.5, 1, 2 and 4 s, with and without each
//                                     process's own utilisation reading: misses and worst error
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "tests/vgpu/sm_sim.h"

using namespace hami::vgpu::sim;  // NOLINT: a report over one header's scenarios.

namespace {

int Sweep() {
  for (bool own : {true, false}) {
    for (std::int64_t phase : {500 * kMs, 1000 * kMs, 2000 * kMs, 4000 * kMs}) {
      Scenario base;
      base.phase_ns = phase;
      base.own_readings = own;
      auto grid = FullGrid(base);
      int misses = 0;
      double worst = 0;
      for (const Scenario& s : grid) {
        double error = Simulate(s).MaxError(s.limit);
        worst = std::max(worst, error);
        misses += error > 5.0 ? 1 : 0;
      }
      std::printf("own readings %-3s phases of %4lld ms: %3d of %zu scenarios missed, worst %.1f\n",
                  own ? "yes" : "no", static_cast<long long>(phase / kMs), misses, grid.size(),
                  worst);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--sweep") == 0) return Sweep();
  std::printf("%-12s %4s %9s %5s %6s %6s %6s %s\n", "mix", "SMs", "processes", "limit", "mean",
              "low2s", "high2s", "");
  int misses = 0;
  auto report = [&](const Scenario& s, const char* label) {
    Result r = Simulate(s);
    bool ok = r.MaxError(s.limit) <= 5.0;
    misses += ok ? 0 : 1;
    std::printf("%-12s %4d %9d %5d %6.1f %6.1f %6.1f %s\n", label, s.sms, s.processes, s.limit,
                r.mean, r.worst_low, r.worst_high, ok ? "ok" : "MISS");
  };
  for (const Scenario& s : FullGrid()) {
    report(s, MixName(s.mix).c_str());
  }
  for (int processes : {1, 4}) {
    for (int limit : {10, 30, 50, 70, 90}) {
      Scenario s;
      s.limit = limit;
      s.processes = processes;
      s.lifetime_ns = 150 * kMs;
      report(s, "150ms-procs");
    }
  }
  std::printf("%d scenario(s) outside +-5 points in some 2 s window\n", misses);
  return 0;
}
