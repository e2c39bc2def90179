// The SM share a container gets under libvgpu's compute limiter, per scenario, on the simulated
// GPU of tests/vgpu/sm_sim.h (simulated clock: runs in about a second, same figures every run).
// For each scenario: the mean share after the 6 s warm-up and the lowest and highest share over
// any 2 s window; "ok" when every 2 s window is within 5 points of the limit.
//
//   build/bin/vgpu_sm_share              (figures in docs/PERFORMANCE.md)
#include <cstdio>

#include "tests/vgpu/sm_sim.h"

using namespace hami::vgpu::sim;  // NOLINT: a report over one header's scenarios.

int main() {
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
  for (Mix mix : {Mix::kUniform, Mix::kAlternating, Mix::kPhases}) {
    for (int sms : {132, 188}) {
      for (int processes : {1, 4, 16}) {
        for (int limit : {10, 30, 50, 70, 90}) {
          Scenario s;
          s.limit = limit;
          s.processes = processes;
          s.sms = sms;
          s.mix = mix;
          report(s, MixName(mix).c_str());
        }
      }
    }
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
