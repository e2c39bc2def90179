// The compute limiter against simulated time: a scripted utilisation curve, and a closed loop
// with a simulated GPU (kernels of fixed duration executed in order, utilisation measured over
// the watcher's window) to check the accuracy target |measured - limit| <= 5 points.
#include "vgpu/limiter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "vgpu/env.h"

namespace hami::vgpu {
namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kUs = 1'000;
constexpr std::int64_t kS = 1'000'000'000;

TEST(ThrottleEnabledTest, PolicyAndSwitch) {
  EXPECT_TRUE(ThrottleEnabled(kPolicyForce, 0, false));
  EXPECT_TRUE(ThrottleEnabled(kPolicyForce, 1, false));
  EXPECT_FALSE(ThrottleEnabled(kPolicyDisable, 1, false));
  EXPECT_FALSE(ThrottleEnabled(kPolicyDefault, 0, false));
  EXPECT_TRUE(ThrottleEnabled(kPolicyDefault, 1, false));
}

TEST(ThrottleEnabledTest, ARegionSwitchCannotOverrideTheLimitsFile) {
  // Issue 29 finding 1: utilization_switch = 0 written into the region stopped throttling.
  EXPECT_TRUE(ThrottleEnabled(kPolicyDefault, 0, true));
  EXPECT_TRUE(ThrottleEnabled(kPolicyForce, 0, true));
  EXPECT_FALSE(ThrottleEnabled(kPolicyDisable, 1, true));
}

TEST(ComputeLimiterTest, InactiveLimitsNeverWait) {
  for (int limit : {0, 100, 150, -3}) {
    ComputeLimiter l;
    l.Configure(limit, 0);
    EXPECT_FALSE(l.active());
    for (int i = 0; i < 1000; ++i) EXPECT_EQ(l.Admit(1 << 20, i), 0);
    l.Observe(100, kMs);
    EXPECT_EQ(l.Admit(1 << 20, 2 * kMs), 0);
  }
}

TEST(ComputeLimiterTest, UncalibratedAdmitsUntilOverLimit) {
  ComputeLimiter l;
  l.Configure(50, 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(l.Admit(1000, i * kUs), 0);
  l.Observe(30, 200 * kMs);  // under the limit: stays uncalibrated
  EXPECT_EQ(l.rate(), 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(l.Admit(1000, 200 * kMs + i * kUs), 0);
  l.Observe(90, 400 * kMs);  // over the limit: calibrates from the averages
  // 500 000 units/s on average produced 0.8 * 30 + 0.2 * 90 = 42 % on average; 50 % needs
  // 500 000 * 50 / 42 units/s.
  EXPECT_NEAR(l.rate(), 500000.0 * 50 / 42, 1);
}

TEST(ComputeLimiterTest, ASaturatedReadingCapsTheRateAtOnce) {
  // A reading at the device's ceiling (100 %) understates the work admitted by an unknown
  // factor: the rate is set no higher than this window's admitted units scaled to the limit
  // (the averages alone would take seconds to come down at a 90 % limit).
  ComputeLimiter l;
  l.Configure(50, 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(l.Admit(1000, i * kUs), 0);
  l.Observe(30, 200 * kMs);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(l.Admit(1000, 200 * kMs + i * kUs), 0);
  l.Observe(100, 400 * kMs);
  // The averages say 500 000 * 50 / 44; the saturated window says at most 500 000 * 50 / 100.
  EXPECT_NEAR(l.rate(), 500000.0 * 50 / 100, 1);
}

TEST(ComputeLimiterTest, ScriptedUtilisationCurveMovesTheRate) {
  ComputeLimiter l;
  l.Configure(40, 0);
  std::int64_t now = 0;
  auto window = [&](double util) {
    // Launch as fast as admitted for one 200 ms window, then report `util`.
    std::int64_t end = now + 200 * kMs;
    while (now < end) {
      std::int64_t wait = l.Admit(100, now);
      now += wait > 0 ? wait : 10 * kUs;
    }
    l.Observe(util, now);
  };
  window(100);
  double r0 = l.rate();
  ASSERT_GT(r0, 0);
  // Scripted curve: still over the limit -> lower; then under while throttled -> higher; then
  // exactly at the limit -> unchanged.
  window(80);
  double r1 = l.rate();
  EXPECT_LT(r1, r0);
  window(20);
  double r2 = l.rate();
  EXPECT_GT(r2, r1);
  window(40);
  EXPECT_NEAR(l.rate(), r2, r2 * 0.05);
  // A step is bounded (x4) even for an extreme reading.
  double before = l.rate();
  window(0.6);
  EXPECT_LE(l.rate(), before * 4 + 1);
}

TEST(ComputeLimiterTest, ASharedBucketThrottlesANewLimiterAtOnce) {
  SharedBucket bucket{};
  ComputeLimiter first;
  first.Share(&bucket);
  first.Configure(50, 0);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(first.Admit(1000, i * kUs), 0);
  first.Observe(100, 200 * kMs);  // 100 % against 50 %: calibrated
  ASSERT_GT(first.rate(), 0);
  // A second process's limiter on the same bucket: calibrated before its first launch, and the
  // debt of one huge launch holds back the other limiter too.
  ComputeLimiter second;
  second.Share(&bucket);
  second.Configure(50, 200 * kMs);
  EXPECT_EQ(second.rate(), first.rate());
  EXPECT_EQ(second.Admit(std::uint64_t{1} << 30, 201 * kMs), 0);
  EXPECT_GT(second.Admit(1, 202 * kMs), 0);
  EXPECT_GT(first.Admit(1, 202 * kMs), 0);
  // An own bucket (no Share) starts uncalibrated.
  ComputeLimiter alone;
  alone.Configure(50, 0);
  EXPECT_EQ(alone.rate(), 0);
  EXPECT_EQ(alone.Admit(std::uint64_t{1} << 30, kMs), 0);
  EXPECT_EQ(alone.Admit(1, 2 * kMs), 0);
}

// Issue 29 item 3: the shared bucket is in a file every process of the container can write.
// What a process writes there cannot hang the others' launches: NaN or infinite values, a debt
// of years and a refill time in the future are read back into the limiter's own range (a debt
// of at most kMaxDebtNs at the rate).
TEST(ComputeLimiterTest, AWrittenBucketCannotHangTheContainer) {
  SharedBucket bucket{};
  ComputeLimiter l;
  l.Share(&bucket);
  l.Configure(50, 0);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(l.Admit(1000, i * kUs), 0);
  l.Observe(100, 200 * kMs);
  const double rate = l.rate();
  ASSERT_GT(rate, 0);
  std::int64_t t = 300 * kMs;
  bucket.tokens = -1e300;  // years of debt
  std::int64_t wait = l.Admit(1, t);
  EXPECT_GT(wait, 9 * kS);
  EXPECT_LE(wait, ComputeLimiter::kMaxDebtNs + 1);
  EXPECT_EQ(l.Admit(1, t + wait), 0);
  t += wait + kMs;
  bucket.last_refill_ns = INT64_MAX;  // a refill time in the future: no refill, ever
  bucket.tokens = -rate;              // one second of debt
  wait = l.Admit(1, t);
  EXPECT_GT(wait, 0);
  EXPECT_EQ(l.Admit(1, t + wait), 0);  // refilled from now
  t += wait + kMs;
  bucket.rate = std::nan("");
  bucket.tokens = std::numeric_limits<double>::infinity();
  EXPECT_EQ(l.Admit(1, t), 0);  // uncalibrated again
  EXPECT_EQ(l.rate(), 0);
  bucket.avg_rate = std::nan("");
  bucket.avg_util = 1e308;
  bucket.window_units = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(l.Admit(1000, t + i * kUs), 0);
  l.Observe(100, t + 200 * kMs);  // calibrates again (over the window since the last one)
  EXPECT_GT(l.rate(), 0);
  EXPECT_TRUE(std::isfinite(l.rate()));
}

TEST(ComputeLimiterTest, LargeLaunchIsAdmittedAndPaidBackLater) {
  ComputeLimiter l;
  l.Configure(50, 0);
  for (int i = 0; i < 10; ++i) l.Admit(1000, i * kMs);
  l.Observe(100, 100 * kMs);  // 10 000 units/0.1 s at 100 % -> rate 50 000 units/s
  ASSERT_NEAR(l.rate(), 50000, 1);
  std::int64_t t = 200 * kMs;
  EXPECT_EQ(l.Admit(100000, t), 0);   // two seconds' worth in one launch: never refused...
  std::int64_t wait = l.Admit(1, t);  // ...but the debt delays the next one
  EXPECT_GT(wait, 1900 * kMs);
  EXPECT_LT(wait, 2100 * kMs);
  EXPECT_EQ(l.Admit(1, t + wait), 0);
}

// Issue 29, mixed kernel sizes: a kernel's price (units per thread) is learned from the windows
// it is launched in, so a switch to a kernel of a different time per thread costs at most its
// first windows, and a switch back costs nothing. Key 1: 1000 threads, 100 us a launch; key 2:
// 10 threads, 1 ms a launch, so 1000x the time per thread. Driven as the watcher does: the
// container's and the process's own utilisation every 200 ms.
TEST(ComputeLimiterTest, KernelPricesAreLearnedThenSettled) {
  ComputeLimiter l;
  l.Configure(50, 0);
  std::int64_t now = 0;
  std::int64_t busy_until = 0;
  auto window = [&](std::uint64_t key, std::uint64_t threads, std::int64_t kernel_ns) {
    std::int64_t start = now;
    std::int64_t end = now + 200 * kMs;
    std::int64_t busy = 0;
    while (now < end) {
      std::int64_t wait = l.Admit(key, threads, now);
      if (wait > 0) {
        now += std::min<std::int64_t>(wait, end - now);
        continue;
      }
      // One kernel at a time, launched when the previous one ends (a synchronous app).
      std::int64_t s = std::max(now, busy_until);
      busy_until = s + kernel_ns;
      busy += std::min(busy_until, end) - std::max(s, start);
      now = busy_until;
    }
    double util = 100.0 * static_cast<double>(busy) / static_cast<double>(end - start);
    l.Observe(util, end, util);
    return util;
  };
  for (int i = 0; i < 10; ++i) window(1, 1000, 100 * kUs);
  EXPECT_GT(l.PriceOf(1), 0);
  EXPECT_EQ(l.PriceOf(2), -1);  // never launched
  double util = 0;
  for (int i = 0; i < 10; ++i) util = window(2, 10, kMs);
  EXPECT_NEAR(util, 50, 5);
  double ratio = l.PriceOf(2) / l.PriceOf(1);
  EXPECT_GT(ratio, 1000 * 0.8);
  EXPECT_LT(ratio, 1000 * 1.25);
  // Settled: more windows of either kernel leave both prices where they are.
  double p1 = l.PriceOf(1);
  double p2 = l.PriceOf(2);
  std::vector<double> back;
  for (int i = 0; i < 5; ++i) back.push_back(window(1, 1000, 100 * kUs));
  EXPECT_EQ(l.PriceOf(1), p1);
  EXPECT_EQ(l.PriceOf(2), p2);
  // ...and the switch back to key 1 runs at the limit from its first window on.
  for (double u : back) EXPECT_NEAR(u, 50, 5);
}

TEST(ComputeLimiterTest, APriceTableFullOfThisWindowsKernelsChargesThreads) {
  // 64 price slots per process and device; a kernel whose eight slots all hold kernels launched
  // in the current window gets none and costs its thread count; after the window a new kernel
  // takes the slot of one launched longest ago.
  ComputeLimiter l;
  l.Configure(50, 0);
  int priced = 0;
  for (std::uint64_t key = 1; key <= 200; ++key) {
    ASSERT_EQ(l.Admit(key, 100, static_cast<std::int64_t>(key) * kUs), 0);
    priced += l.PriceOf(key) > 0 ? 1 : 0;
  }
  EXPECT_LE(priced, ComputeLimiter::kPriceSlots);
  EXPECT_GT(priced, ComputeLimiter::kPriceSlots / 2);
  l.Observe(30, 200 * kMs, 30);
  EXPECT_EQ(l.PriceOf(1000), -1);
  ASSERT_EQ(l.Admit(1000, 100, 201 * kMs), 0);
  EXPECT_GT(l.PriceOf(1000), 0);
}

// A simulated device: kernels run one after another for `kernel_ns` each; utilisation over a
// window is the busy fraction.
struct SimGpu {
  std::deque<std::pair<std::int64_t, std::int64_t>> busy;  // [start, end)
  std::int64_t free_at = 0;

  std::int64_t Run(std::int64_t now, std::int64_t kernel_ns) {
    std::int64_t start = now > free_at ? now : free_at;
    free_at = start + kernel_ns;
    busy.emplace_back(start, free_at);
    return free_at;
  }
  double Util(std::int64_t from, std::int64_t to) {
    while (!busy.empty() && busy.front().second < from - 1000 * kMs) busy.pop_front();
    std::int64_t sum = 0;
    for (auto& [s, e] : busy) {
      std::int64_t a = s > from ? s : from;
      std::int64_t b = e < to ? e : to;
      if (b > a) sum += b - a;
    }
    return 100.0 * static_cast<double>(sum) / static_cast<double>(to - from);
  }
};

struct SimCase {
  int limit;
  std::int64_t kernel_ns;
  std::uint64_t cost;  // threads per launch (unrelated to duration on purpose)
  bool sync;           // the app waits for each kernel (idle-synchronised loop)
  bool lagged;         // utilisation reported one window late (NVML averaging)
  bool mixed = false;  // random mix of 0.1 ms kernels costing 100 000 units and 5 ms kernels
                       // costing 1 000 (cost anti-correlated with duration), plus an idle phase
};

std::string Name(const SimCase& c) {
  return "limit=" + std::to_string(c.limit) + " kernel=" + std::to_string(c.kernel_ns / kUs) +
         "us sync=" + std::to_string(c.sync) + " lagged=" + std::to_string(c.lagged) +
         " mixed=" + std::to_string(c.mixed);
}

// Runs the closed loop for 30 simulated seconds and returns the mean utilisation of the last
// 20 seconds.
double Simulate(const SimCase& c) {
  constexpr std::int64_t kWindow = 200 * kMs;
  constexpr std::int64_t kEnd = 30'000 * kMs;
  constexpr std::int64_t kMeasureFrom = 10'000 * kMs;
  constexpr std::int64_t kMaxQueue = 50 * kMs;  // async apps block when this far ahead
  ComputeLimiter limiter;
  limiter.Configure(c.limit, 0);
  SimGpu gpu;
  std::int64_t now = 0;
  std::int64_t next_tick = kWindow;
  double previous = 0;
  double measured_sum = 0;
  int measured_windows = 0;
  std::mt19937 rng(1);
  while (now < kEnd) {
    while (next_tick <= now) {
      double util = gpu.Util(next_tick - kWindow, next_tick);
      if (next_tick > kMeasureFrom && next_tick <= kEnd) {
        measured_sum += util;
        ++measured_windows;
      }
      limiter.Observe(c.lagged ? previous : util, next_tick);
      previous = util;
      next_tick += kWindow;
    }
    std::int64_t kernel_ns = c.kernel_ns;
    std::uint64_t cost = c.cost;
    if (c.mixed) {
      if (now > 3000 * kMs && now < 6000 * kMs) {  // idle: the app does CPU work
        now += kMs;
        continue;
      }
      bool big = rng() % 2 == 0;
      kernel_ns = big ? 5 * kMs : 100 * kUs;
      cost = big ? 1000 : 100000;
    }
    std::int64_t wait = limiter.Admit(cost, now);
    if (wait > 0) {
      now += wait < 100 * kMs ? wait : 100 * kMs;
      continue;
    }
    std::int64_t done = gpu.Run(now, kernel_ns);
    if (c.sync) {
      now = done + 20 * kUs;
    } else {
      now += 5 * kUs;
      if (done - now > kMaxQueue) now = done - kMaxQueue;
    }
  }
  return measured_sum / measured_windows;
}

TEST(ComputeLimiterSimTest, MeasuredUtilisationWithinFivePointsOfTheLimit) {
  for (int limit : {10, 30, 50, 70, 90}) {
    for (std::int64_t kernel : {100 * kUs, 2 * kMs, 25 * kMs}) {
      for (bool sync : {true, false}) {
        for (bool lagged : {false, true}) {
          SimCase c{limit, kernel, 128 * 256, sync, lagged};
          // A synchronised loop cannot exceed its own duty cycle (20 us gap per kernel).
          double natural = sync ? 100.0 * kernel / (kernel + 20 * kUs) : 100.0;
          double want = limit < natural ? limit : natural;
          double measured = Simulate(c);
          EXPECT_NEAR(measured, want, 5.0) << Name(c);
        }
      }
    }
  }
}

TEST(ComputeLimiterSimTest, CostModelMismatchAndIdlePhase) {
  for (int limit : {10, 30, 50, 70, 90}) {
    for (bool lagged : {false, true}) {
      SimCase c{limit, 0, 0, /*sync=*/true, lagged, /*mixed=*/true};
      EXPECT_NEAR(Simulate(c), limit, 5.0) << Name(c);
    }
  }
}

// N processes of one container on one simulated GPU, each with its own limiter sharing one bucket
// (the side file), each launching asynchronously as fast as admitted and each observing the
// container's utilisation from its own watcher, the watchers out of phase. Returns the container's
// mean utilisation over the last 20 of 30 simulated seconds.
double SimulateProcesses(int limit, int processes, std::int64_t kernel_ns, std::uint64_t cost) {
  constexpr std::int64_t kWindow = 200 * kMs;
  constexpr std::int64_t kEnd = 30'000 * kMs;
  constexpr std::int64_t kMeasureFrom = 10'000 * kMs;
  constexpr std::int64_t kMaxQueue = 50 * kMs;
  SharedBucket bucket{};
  std::vector<ComputeLimiter> limiters(processes);
  std::vector<std::int64_t> now(processes, 0);
  std::vector<std::int64_t> tick(processes);
  for (int p = 0; p < processes; ++p) {
    limiters[p].Share(&bucket);
    limiters[p].Configure(limit, 0);
    tick[p] = kWindow + p * kWindow / processes;
  }
  SimGpu gpu;
  std::int64_t sample = kMeasureFrom + kWindow;  // the share as NVML reports it, per window
  double sum = 0;
  int windows = 0;
  for (;;) {
    int p = 0;
    for (int q = 1; q < processes; ++q) {
      if (std::min(now[q], tick[q]) < std::min(now[p], tick[p])) p = q;
    }
    if (std::min(now[p], tick[p]) >= kEnd) break;
    if (sample <= std::min(now[p], tick[p])) {
      sum += gpu.Util(sample - kWindow, sample);
      ++windows;
      sample += kWindow;
    }
    if (tick[p] <= now[p]) {
      limiters[p].Observe(gpu.Util(tick[p] - kWindow, tick[p]), tick[p]);
      tick[p] += kWindow;
      continue;
    }
    std::int64_t wait = limiters[p].Admit(cost, now[p]);
    if (wait > 0) {
      now[p] += wait < 100 * kMs ? wait : 100 * kMs;
      continue;
    }
    std::int64_t done = gpu.Run(now[p], kernel_ns);
    now[p] += 5 * kUs;
    if (done - now[p] > kMaxQueue * processes) now[p] = done - kMaxQueue * processes;
  }
  return sum / windows;
}

TEST(ComputeLimiterSimTest, ProcessesOfAContainerShareOneLimit) {
  // Issue 29 finding 7: four processes got 11.4 % of a 30 % limit together, each computing the
  // shared rate from its own units (about L/N).
  for (int processes : {1, 4, 16}) {
    for (int limit : {10, 30, 50, 90}) {
      EXPECT_NEAR(SimulateProcesses(limit, processes, 2 * kMs, 128 * 256), limit, 5.0)
          << "processes=" << processes << " limit=" << limit;
    }
  }
}

}  // namespace
}  // namespace hami::vgpu
