// A simulated GPU under the compute limiter, on a simulated clock: the processes of one container
// each run a ComputeLimiter on one SharedBucket (the side file) and launch as fast as admitted;
// kernels execute one after another on a device of `sms` SMs, each kernel taking
// ceil(blocks / (sms * blocks per SM)) waves of `block_ns`; every process's watcher feeds the
// container's utilisation over its last 200 ms (out of phase with the others), as NVML measures
// it: the busy fraction of the device. Used by limiter_test (the accuracy target) and
// bench/vgpu/sm_share (the figures in docs/PERFORMANCE.md). Deterministic; no sleeping.
#ifndef HAMI_TESTS_VGPU_SM_SIM_H_
#define HAMI_TESTS_VGPU_SM_SIM_H_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "vgpu/limiter.h"

namespace hami::vgpu::sim {

inline constexpr std::int64_t kUs = 1'000;
inline constexpr std::int64_t kMs = 1'000'000;

struct Kernel {
  std::uint64_t blocks;
  std::uint32_t threads;  // per block
  std::int64_t block_ns;  // time one wave of blocks takes
  std::uint64_t key;      // the kernel (function and shape) as the launch hook keys it
};

// Kernel mixes of issue 29: a uniform mid-size kernel; cheap big-grid kernels alternating with
// 1 ms single-block kernels (the threads charged and the time taken are unrelated); and the two
// kinds in phases of `phase_ms` each (the regime changes under a calibrated rate).
enum class Mix { kUniform, kAlternating, kPhases, kPhasesSingleFirst };

struct Scenario {
  int limit = 30;
  int processes = 1;
  int sms = 132;
  Mix mix = Mix::kUniform;
  std::int64_t phase_ns = 2000 * kMs;
  std::int64_t end_ns = 30'000 * kMs;
  std::int64_t warmup_ns = 6'000 * kMs;  // excluded from the figures
  // Each process exits after this long and a new one takes its place at once (0: they live to
  // the end). A process's watcher first measures `first_tick_ns` after it starts, then every
  // 200 ms, over the 200 ms before (or since the process started).
  std::int64_t lifetime_ns = 0;
  std::int64_t first_tick_ns = kWatcherFirstNs;
  // Whether each process's watcher also reads its own utilisation (NVML's sample of its pid).
  bool own_readings = true;
};

struct Result {
  double mean = 0;        // share over [warmup, end)
  double worst_low = 0;   // lowest share over any 2 s window (200 ms steps) after the warm-up
  double worst_high = 0;  // highest
  double MaxError(int limit) const {
    return std::max(static_cast<double>(limit) - worst_low, worst_high - limit);
  }
};

inline std::string MixName(Mix mix) {
  switch (mix) {
    case Mix::kUniform:
      return "uniform";
    case Mix::kAlternating:
      return "alternating";
    case Mix::kPhases:
      return "phases";
    case Mix::kPhasesSingleFirst:
      return "phases-1st";
  }
  return "?";
}

inline std::int64_t Duration(const Kernel& k, int sms) {
  std::uint64_t per_sm = std::max<std::uint32_t>(1, 2048 / std::max<std::uint32_t>(1, k.threads));
  std::uint64_t slots = per_sm * static_cast<std::uint64_t>(sms);
  return static_cast<std::int64_t>((k.blocks + slots - 1) / slots) * k.block_ns;
}

inline Kernel Pick(const Scenario& s, std::int64_t now, std::uint64_t n) {
  const Kernel mid{static_cast<std::uint64_t>(s.sms) * 8, 256, 250 * kUs, 1};  // 1 wave, 0.25 ms
  const Kernel cheap_big{static_cast<std::uint64_t>(s.sms) * 64, 256, 4 * kUs,
                         2};                  // 8 waves, 32 us
  const Kernel single{1, 32, 1000 * kUs, 3};  // 1 ms
  switch (s.mix) {
    case Mix::kUniform:
      return mid;
    case Mix::kAlternating:
      return n % 2 == 0 ? cheap_big : single;
    case Mix::kPhases:
      return (now / s.phase_ns) % 2 == 0 ? cheap_big : single;
    case Mix::kPhasesSingleFirst:
      return (now / s.phase_ns) % 2 == 0 ? single : cheap_big;
  }
  return mid;
}

// The grid of issue 29: each of `mixes` x 132 and 188 SMs x 1, 4 and 16 processes x limits 10,
// 30, 50, 70 and 90 %, the other fields as in `base`.
inline std::vector<Scenario> Grid(std::initializer_list<Mix> mixes, const Scenario& base = {}) {
  std::vector<Scenario> grid;
  for (Mix mix : mixes) {
    for (int sms : {132, 188}) {
      for (int processes : {1, 4, 16}) {
        for (int limit : {10, 30, 50, 70, 90}) {
          Scenario s = base;
          s.mix = mix;
          s.sms = sms;
          s.processes = processes;
          s.limit = limit;
          grid.push_back(s);
        }
      }
    }
  }
  return grid;
}

// The grid over every mix.
inline std::vector<Scenario> FullGrid(const Scenario& base = {}) {
  return Grid({Mix::kUniform, Mix::kAlternating, Mix::kPhases, Mix::kPhasesSingleFirst}, base);
}

inline Result Simulate(const Scenario& s) {
  constexpr std::int64_t kWindow = kWatcherPeriodNs;
  constexpr std::int64_t kFigureNs = 2000 * kMs;
  constexpr std::int64_t kMaxQueue = 20 * kMs;  // an async app blocks this far ahead
  SharedBucket bucket{};
  std::vector<std::unique_ptr<ComputeLimiter>> limiters(static_cast<std::size_t>(s.processes));
  std::vector<std::int64_t> now(limiters.size(), 0);
  std::vector<std::int64_t> tick(limiters.size());
  std::vector<std::uint64_t> launched(limiters.size(), 0);
  std::vector<std::int64_t> born(limiters.size(), 0);
  auto start_process = [&](std::size_t p, std::int64_t t) {
    limiters[p] = std::make_unique<ComputeLimiter>();
    limiters[p]->Share(&bucket);
    limiters[p]->Configure(s.limit, t);
    born[p] = t;
    tick[p] = t + s.first_tick_ns;
  };
  for (std::size_t p = 0; p < limiters.size(); ++p) {
    start_process(p, 0);
    tick[p] += static_cast<std::int64_t>(p) * kWindow / s.processes;  // watchers out of phase
  }
  // Busy time per 1 ms bin, filled as kernels are placed (FIFO device).
  constexpr std::int64_t kBin = kMs;
  // and per process (NVML's per-process samples, each process's own reading).
  std::vector<double> busy(static_cast<std::size_t>(s.end_ns / kBin + 1000), 0.0);
  std::vector<std::vector<double>> own(limiters.size(), std::vector<double>(busy.size(), 0.0));
  auto add_busy = [&](std::size_t p, std::int64_t a, std::int64_t b) {
    while (a < b) {
      std::size_t i = static_cast<std::size_t>(a / kBin);
      if (i >= busy.size()) return;
      std::int64_t stop = std::min(b, static_cast<std::int64_t>(i + 1) * kBin);
      busy[i] += static_cast<double>(stop - a);
      own[p][i] += static_cast<double>(stop - a);
      a = stop;
    }
  };
  auto pct = [&](const std::vector<double>& bins, std::int64_t from, std::int64_t to) {
    double sum = 0;  // bin-aligned
    for (std::int64_t i = from / kBin; i < to / kBin; ++i) sum += bins[static_cast<std::size_t>(i)];
    return 100.0 * sum / static_cast<double>(to - from);
  };
  auto busy_pct = [&](std::int64_t from, std::int64_t to) { return pct(busy, from, to); };
  std::int64_t free_at = 0;
  for (;;) {
    std::size_t p = 0;
    for (std::size_t q = 1; q < limiters.size(); ++q) {
      if (std::min(now[q], tick[q]) < std::min(now[p], tick[p])) p = q;
    }
    if (std::min(now[p], tick[p]) >= s.end_ns) break;
    if (s.lifetime_ns > 0 && std::min(now[p], tick[p]) >= born[p] + s.lifetime_ns) {
      start_process(p, born[p] + s.lifetime_ns);
      now[p] = std::max(now[p], born[p]);
      continue;
    }
    if (tick[p] <= now[p]) {
      // Events run in time order, so the busy time before the tick is final.
      std::int64_t from = std::max(tick[p] - kWindow, born[p] / kMs * kMs);
      limiters[p]->Observe(busy_pct(from, tick[p]), tick[p],
                           s.own_readings ? pct(own[p], from, tick[p]) : -1);
      tick[p] += kWindow;
      continue;
    }
    Kernel k = Pick(s, now[p], launched[p]);
    std::uint64_t cost = k.blocks * k.threads;
    std::int64_t wait = limiters[p]->Admit(k.key, cost, now[p]);
    if (wait > 0) {
      now[p] += std::min<std::int64_t>(wait, 100 * kMs);
      continue;
    }
    ++launched[p];
    std::int64_t start = std::max(now[p], free_at);
    free_at = start + Duration(k, s.sms);
    add_busy(p, start, free_at);
    now[p] += 5 * kUs;
    if (free_at - now[p] > kMaxQueue) now[p] = free_at - kMaxQueue;
  }
  Result r;
  r.mean = busy_pct(s.warmup_ns, s.end_ns);
  r.worst_low = 100;
  r.worst_high = 0;
  for (std::int64_t t = s.warmup_ns; t + kFigureNs <= s.end_ns; t += kWindow) {
    double share = busy_pct(t, t + kFigureNs);
    r.worst_low = std::min(r.worst_low, share);
    r.worst_high = std::max(r.worst_high, share);
  }
  return r;
}

}  // namespace hami::vgpu::sim

#endif  // HAMI_TESTS_VGPU_SM_SIM_H_
