#include "vgpu/limiter.h"

#include <sched.h>

#include <cmath>

#include "vgpu/env.h"

namespace hami::vgpu {
namespace {

constexpr double kNsPerS = 1e9;
// Below this utilisation a window carries too little signal to calibrate from.
constexpr double kMinUsefulUtil = 0.5;
constexpr double kMaxStep = 4.0;
// Weight of the past in the averages, per observation (about 1 s at the watcher's 200 ms).
constexpr double kSmoothing = 0.8;
// A window whose utilisation per admitted unit differs from the average by more than this factor
// starts a new calibration (see Observe).
constexpr double kRegimeRatio = 4.0;
// Kernel prices (KernelPrice in limiter.h): a kernel is learned over its first kLearnWindows
// windows with a reading (the thread-weighted mean of what each implied), then settled: its price
// no longer moves, and what its windows show goes to the container's rate like any other change.
constexpr std::uint32_t kLearnWindows = 4;
// A window's error within this fraction of what was charged is noise, not a price.
constexpr double kPriceTolerance = 0.05;
// Learning needs some utilisation (NVML reports whole percent).
constexpr double kMinLearnUtil = 0.1;
// A reading at or above this is the device's ceiling, not the work's size.
constexpr double kSaturatedUtil = 99.0;

double Clamp(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

bool Finite(double v) { return std::isfinite(v); }

// The limiter's exponential average: `*avg` moves towards `v` by 1 - kSmoothing; the first value
// (*avg <= 0: none yet) is taken as it is.
void Average(double* avg, double v) {
  *avg = *avg > 0 ? kSmoothing * *avg + (1 - kSmoothing) * v : v;
}

// The shared bucket lives in a file every process of the container can write (and truncate, see
// the SIGBUS guard): what the limiter reads from it is brought back into the range the limiter
// itself writes before it is used, so a value written there (NaN, infinities, a debt of years, a
// refill time in the future) can neither hang the container's launches nor turn the limit off
// for longer than a calibration.
void Repair(SharedBucket& b, std::int64_t now_ns) {
  if (!Finite(b.rate) || b.rate < 0) {
    b.rate = 0;  // uncalibrated: the next observation calibrates again
    b.tokens = 0;
  }
  if (!Finite(b.tokens)) b.tokens = 0;
  if (b.rate > 0) {
    double burst = b.rate * static_cast<double>(ComputeLimiter::kBurstNs) / kNsPerS;
    double floor = -b.rate * static_cast<double>(ComputeLimiter::kMaxDebtNs) / kNsPerS;
    b.tokens = Clamp(b.tokens, floor, burst);
  }
  if (b.last_refill_ns <= 0 || b.last_refill_ns > now_ns) b.last_refill_ns = now_ns;
  if (b.window_start_ns <= 0 || b.window_start_ns > now_ns) {
    b.window_start_ns = now_ns;
    b.window_units = 0;
  }
  if (!Finite(b.window_units) || b.window_units < 0) b.window_units = 0;
  if (!Finite(b.avg_rate) || b.avg_rate < 0) b.avg_rate = 0;
  if (!Finite(b.avg_util) || b.avg_util > 100) b.avg_util = -1;
}

}  // namespace

bool ThrottleEnabled(int policy, int utilization_switch, bool trusted_policy) {
  if (policy == kPolicyForce) return true;
  if (policy == kPolicyDisable) return false;
  return trusted_policy || utilization_switch != 0;
}

void ComputeLimiter::LockState() {
  while (lock_.test_and_set(std::memory_order_acquire)) sched_yield();
  // The bucket lock is shared between processes: a holder killed inside its few instructions
  // must not stop the container's launches, so after a bounded spin it is overtaken.
  for (int spin = 0;; ++spin) {
    std::uint32_t expected = 0;
    if (__atomic_compare_exchange_n(&bucket_->lock, &expected, 1u, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED)) {
      return;
    }
    if (spin > 20000) {
      __atomic_exchange_n(&bucket_->lock, 1u, __ATOMIC_ACQUIRE);
      return;
    }
    if (spin > 64) sched_yield();
  }
}

void ComputeLimiter::UnlockState() {
  __atomic_store_n(&bucket_->lock, 0u, __ATOMIC_RELEASE);
  lock_.clear(std::memory_order_release);
}

void ComputeLimiter::Configure(int limit_pct, std::int64_t now_ns) {
  LockState();
  limit_pct_ = limit_pct;
  own_window_start_ = now_ns;
  own_units_ = 0;
  SharedBucket& b = *bucket_;
  if (bucket_ == &own_ || b.last_refill_ns == 0 || b.last_refill_ns > now_ns ||
      b.window_start_ns > now_ns) {
    // A fresh bucket (or a shared one from before a reboot) starts now. A shared bucket in use
    // keeps its calibrated rate, the debt left by the container's other processes and the
    // container's window.
    if (bucket_ == &own_) {
      b.rate = 0;
      b.tokens = 0;
    }
    b.last_refill_ns = now_ns;
    b.window_start_ns = now_ns;
    b.window_units = 0;
    b.avg_rate = 0;
    b.avg_util = -1;
  }
  UnlockState();
}

ComputeLimiter::KernelPrice* ComputeLimiter::Slot(std::uint64_t key) {
  if (key == 0) return nullptr;
  std::uint64_t h = key * 0x9e3779b97f4a7c15ULL;
  std::size_t start = static_cast<std::size_t>(h >> 58) % kPriceSlots;  // 64 slots: top 6 bits
  KernelPrice* oldest = nullptr;
  for (int probe = 0; probe < 8; ++probe) {
    KernelPrice& s = prices_[(start + static_cast<std::size_t>(probe)) % kPriceSlots];
    if (s.key == key) return &s;
    if (s.key == 0) {
      s = KernelPrice{key, 0, 0, 0, 0, 0, window_seq_, 0, 0};
      return &s;
    }
    // Not launched in the current window and seen longest ago: the one to replace.
    if (s.launches == 0 && (oldest == nullptr || s.last_window < oldest->last_window)) oldest = &s;
  }
  if (oldest == nullptr) return nullptr;  // eight kernels in this window share these slots
  *oldest = KernelPrice{key, 0, 0, 0, 0, 0, window_seq_, 0, 0};
  return oldest;
}

double ComputeLimiter::PriceOf(std::uint64_t key) const {
  if (key == 0) return 1.0;
  for (const KernelPrice& s : prices_) {
    if (s.key == key) return s.price;
  }
  return -1;
}

std::int64_t ComputeLimiter::Admit(std::uint64_t key, std::uint64_t threads, std::int64_t now_ns) {
  if (!active()) return 0;
  LockState();
  SharedBucket& b = *bucket_;
  if (bucket_ != &own_) Repair(b, now_ns);
  KernelPrice* slot = Slot(key);
  double cost = static_cast<double>(threads);
  if (slot != nullptr) {
    if (!(slot->price > 0)) {
      // A new kernel costs what this process's launches have cost on average: launch times
      // differ far less between kernels than time per thread does.
      slot->price = avg_launch_units_ > 0 && threads > 0 ? avg_launch_units_ / cost : 1.0;
    }
    cost *= slot->price;
  }
  std::int64_t wait_ns = 0;
  if (b.rate > 0) {
    double elapsed = static_cast<double>(now_ns - b.last_refill_ns);
    if (elapsed > 0) {
      double burst = b.rate * static_cast<double>(kBurstNs) / kNsPerS;
      b.tokens += b.rate * elapsed / kNsPerS;
      if (b.tokens > burst) b.tokens = burst;
      b.last_refill_ns = now_ns;
    }
    if (b.tokens < 0) {
      wait_ns = static_cast<std::int64_t>(-b.tokens / b.rate * kNsPerS) + 1;
    }
  }
  if (wait_ns == 0) {
    b.tokens -= cost;
    b.window_units += cost;
    own_units_ += cost;
    if (slot != nullptr) {
      slot->threads += static_cast<double>(threads);
      slot->charged += cost;
      ++slot->launches;
    }
  }
  UnlockState();
  return wait_ns;
}

double ComputeLimiter::LearnPrices(double util_pct, double own_util_pct, std::int64_t now_ns) {
  // The device's ceiling is the container's reading; what this process's launches took is its
  // own reading where NVML gave one.
  bool saturated = util_pct >= kSaturatedUtil;
  if (own_util_pct >= 0 && Finite(own_util_pct)) util_pct = own_util_pct;
  double window_s = static_cast<double>(now_ns - own_window_start_) / kNsPerS;
  double charged = own_units_;
  own_units_ = 0;
  own_window_start_ = now_ns;
  ++window_seq_;
  double learning_launches = 0;
  double launches = 0;
  for (const KernelPrice& s : prices_) {
    launches += s.launches;
    if (s.launches > 0 && s.windows < kLearnWindows) learning_launches += s.launches;
  }
  double repriced = 0;
  if (window_s > 0 && charged > 0 && util_pct >= kMinLearnUtil && Finite(util_pct) &&
      own_gain_ > 0 && learning_launches > 0) {
    // The units this process's launches took, from what one unit/s of its own has yielded;
    // the difference from what they were charged is put down to the kernels being learned.
    // A saturated device (the reading at its 100 % ceiling) only says "at least".
    double used = util_pct * window_s / own_gain_;
    double error = used - charged;
    if (std::fabs(error) <= kPriceTolerance * charged) error = 0;
    if (!(saturated && error <= 0)) {
      for (KernelPrice& s : prices_) {
        if (s.launches == 0 || s.threads <= 0 || s.windows >= kLearnWindows) continue;
        double should = s.charged + error * s.launches / learning_launches;
        if (should < s.charged / 100) should = s.charged / 100;
        // The price is what its windows so far implied, weighted by their threads: the first
        // window replaces the guess; a window with more launches counts for more. A saturated
        // window raises it to its lower bound and is not counted.
        double price = saturated ? should / s.threads
                                 : (s.learned_units + should) / (s.learned_threads + s.threads);
        if (!Finite(price) || price <= 0 || (saturated && price <= s.price)) continue;
        if (!saturated) {
          s.learned_units += should;
          s.learned_threads += s.threads;
          ++s.windows;
        }
        repriced += (price - s.price) * s.threads;
        s.price = price;
      }
    }
  }
  // What one unit/s of this process's yields, averaged like the container's calibration.
  if (window_s > 0 && charged > 0 && util_pct >= kMinUsefulUtil && Finite(util_pct)) {
    double gain = util_pct * window_s / (charged + repriced);
    if (Finite(gain) && gain > 0) {
      Average(&own_gain_, gain);
    }
  }
  if (launches > 0) {
    double per_launch = (charged + repriced) / launches;
    if (Finite(per_launch) && per_launch > 0) {
      Average(&avg_launch_units_, per_launch);
    }
  }
  for (KernelPrice& s : prices_) {
    if (s.launches == 0) continue;
    s.last_window = window_seq_;
    s.launches = 0;
    s.threads = 0;
    s.charged = 0;
  }
  return repriced;
}

void ComputeLimiter::Observe(double util_pct, std::int64_t now_ns, double own_util_pct) {
  if (!active()) return;
  LockState();
  SharedBucket& b = *bucket_;
  if (bucket_ != &own_) Repair(b, now_ns);
  // This process's launches of the window were charged `repriced` units too few: the container's
  // window and debt take them, so its calibration sees consistent units and the excess is paid
  // back.
  double repriced = LearnPrices(util_pct, own_util_pct, now_ns);
  if (repriced != 0 && b.rate > 0) {
    b.window_units += repriced;
    if (b.window_units < 0) b.window_units = 0;
    b.tokens -= repriced;
    double floor = -b.rate * static_cast<double>(kMaxDebtNs) / kNsPerS;
    double burst = b.rate * static_cast<double>(kBurstNs) / kNsPerS;
    b.tokens = Clamp(b.tokens, floor, burst);
  }
  std::int64_t window_ns = now_ns - b.window_start_ns;
  if (window_ns < kMinWindowNs) {
    UnlockState();
    return;
  }
  double admitted_rate = b.window_units / (static_cast<double>(window_ns) / kNsPerS);
  // A regime change: this window's utilisation per admitted unit/s is off the averaged one by
  // more than kRegimeRatio (the app switched from cheap big grids to long small ones, or back).
  // The averages would take seconds to forget the old regime, so they restart from this window,
  // the rate jumps to it unclamped and the debt priced in the old regime is forgiven.
  bool regime_change = false;
  if (b.rate > 0 && admitted_rate > 0 && b.avg_rate > 0 && b.avg_util >= kMinUsefulUtil) {
    double window_ratio = (util_pct > kMinUsefulUtil ? util_pct : kMinUsefulUtil) / admitted_rate;
    double avg_ratio = b.avg_util / b.avg_rate;
    double limit = static_cast<double>(limit_pct_);
    // Only a window far over the limit, or far under it while a debt of over a second holds the
    // container back, is evidence; lagging or noisy readings near the limit are not.
    double high = 1.5 * limit < (limit + 100) / 2 ? 1.5 * limit : (limit + 100) / 2;
    bool over = util_pct > high && util_pct > limit + 5;
    bool stalled = util_pct < limit / 2 && b.tokens < -b.rate;
    regime_change = (over && window_ratio > kRegimeRatio * avg_ratio) ||
                    (stalled && window_ratio * kRegimeRatio < avg_ratio);
  }
  // Nothing admitted for a whole window, behind a debt of over a second, while the device did
  // next to nothing for the container: the debt was priced by an old regime's rate (one cheap
  // big grid charged as seconds of GPU time) and is forgiven; the next launch then shows the new
  // regime's ratio and the rate follows it (above).
  if (b.rate > 0 && b.window_units == 0 && b.tokens < -b.rate && util_pct < kMinUsefulUtil) {
    b.tokens = 0;
  }
  if (!(b.avg_util >= 0) || !(b.avg_rate >= 0) || regime_change) {  // also repairs NaN
    b.avg_rate = admitted_rate;
    b.avg_util = util_pct > kMinUsefulUtil || !regime_change ? util_pct : kMinUsefulUtil;
  } else {
    b.avg_rate = kSmoothing * b.avg_rate + (1 - kSmoothing) * admitted_rate;
    b.avg_util = kSmoothing * b.avg_util + (1 - kSmoothing) * util_pct;
  }
  double limit = static_cast<double>(limit_pct_);
  if (b.avg_util >= kMinUsefulUtil && b.avg_rate > 0) {
    // Utilisation per admitted unit/s, from averages over the same horizon (robust to a
    // measurement that lags the admissions, and to few large kernels per window).
    double target = b.avg_rate * limit / b.avg_util;
    if (!(b.rate > 0)) {
      // First calibration: only start throttling once the limit is actually exceeded. The
      // uncalibrated consumption is forgiven rather than paid back with a long stall.
      if (util_pct > limit || b.avg_util > limit) {
        b.rate = target;
        b.tokens = 0;
        b.last_refill_ns = now_ns;
      }
    } else if (regime_change) {
      b.rate = target;
      if (b.tokens < 0) b.tokens = 0;
    } else {
      b.rate = Clamp(target, b.rate / kMaxStep, b.rate * kMaxStep);
    }
    // A reading at the device's ceiling understates what was admitted by an unknown factor, and
    // the averages take seconds to pull a rate down from it: the rate is at once set no higher
    // than what this window admitted scaled to the limit.
    if (util_pct >= kSaturatedUtil && admitted_rate > 0 && b.rate > 0) {
      double ceiling = admitted_rate * limit / util_pct;
      if (ceiling < b.rate) b.rate = ceiling;
    }
  }
  b.window_start_ns = now_ns;
  b.window_units = 0;
  UnlockState();
}

}  // namespace hami::vgpu
