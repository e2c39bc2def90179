// The SM share a container gets under the compute limiter, on the simulated GPU of sm_sim.h:
// 1, 4 and 16 processes, 10-90 %, 132 and 188 SMs, uniform and mixed kernel sizes, and phases of
// one kernel kind then the other. The target (issue 29): the share over every 2 s window after
// calibration within 5 points of the limit.
#include <gtest/gtest.h>

#include <string>

#include "tests/vgpu/sm_sim.h"

namespace hami::vgpu::sim {
namespace {

std::string Name(const Scenario& s) {
  return MixName(s.mix) + " sms=" + std::to_string(s.sms) +
         " processes=" + std::to_string(s.processes) + " limit=" + std::to_string(s.limit);
}

TEST(SmShareTest, EveryTwoSecondWindowWithinFivePoints) {
  // Issue 29 finding 7, kPhases: 2 s of cheap big grids then 2 s of 1 ms single-block kernels,
  // repeated (and the other way round). The threads charged per unit of GPU time change by 10^6
  // at each switch; each process prices its kernels (KernelPrice), so after a kernel's first
  // windows a switch moves nothing. Before the prices: 2 s windows 8-42 points off.
  for (const Scenario& s : FullGrid()) {
    Result r = Simulate(s);
    EXPECT_LE(r.MaxError(s.limit), 5.0)
        << Name(s) << ": 2 s windows " << r.worst_low << ".." << r.worst_high;
  }
}

TEST(SmShareTest, PhasesWithOnlyTheContainersReadingStayNearTheLimit) {
  // Where NVML gives no per-process sample of our own pid (a PID namespace whose host pid was
  // not found), a process learns its prices from the container's reading, which other processes'
  // launches move too: the 2 s windows stay within 6 points (docs/vgpu.md "Compute limiter").
  Scenario base;
  base.own_readings = false;
  for (const Scenario& s : Grid({Mix::kPhases, Mix::kPhasesSingleFirst}, base)) {
    Result r = Simulate(s);
    EXPECT_LE(r.MaxError(s.limit), 6.0)
        << Name(s) << ": 2 s windows " << r.worst_low << ".." << r.worst_high;
  }
}

TEST(SmShareTest, BackToBackShortProcessesAreThrottled) {
  // Issue 29 finding 7: processes of 150 ms each, one after another, ran at 78-106 % of the
  // device against a 30 % limit when no process lived through a 200 ms watcher period. The
  // watcher's first measurement (kWatcherFirstNs) and the container's shared calibration window
  // let the first processes calibrate and the later ones inherit the rate.
  for (int processes : {1, 4}) {
    for (int limit : {10, 30, 50}) {
      Scenario s;
      s.limit = limit;
      s.processes = processes;
      s.lifetime_ns = 150 * kMs;
      Result r = Simulate(s);
      EXPECT_LE(r.MaxError(limit), 5.0)
          << Name(s) << ": 2 s windows " << r.worst_low << ".." << r.worst_high;
    }
  }
}

}  // namespace
}  // namespace hami::vgpu::sim
