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

double Clamp(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

bool Finite(double v) { return std::isfinite(v); }

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

std::int64_t ComputeLimiter::Admit(std::uint64_t cost, std::int64_t now_ns) {
  if (!active()) return 0;
  LockState();
  SharedBucket& b = *bucket_;
  if (bucket_ != &own_) Repair(b, now_ns);
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
    b.tokens -= static_cast<double>(cost);
    b.window_units += static_cast<double>(cost);
  }
  UnlockState();
  return wait_ns;
}

void ComputeLimiter::Observe(double util_pct, std::int64_t now_ns) {
  if (!active()) return;
  LockState();
  SharedBucket& b = *bucket_;
  if (bucket_ != &own_) Repair(b, now_ns);
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
  }
  b.window_start_ns = now_ns;
  b.window_units = 0;
  UnlockState();
}

}  // namespace hami::vgpu
