#include "vgpu/limiter.h"

#include <sched.h>

#include "vgpu/env.h"

namespace hami::vgpu {
namespace {

constexpr double kNsPerS = 1e9;
// Below this utilisation a window carries too little signal to calibrate from.
constexpr double kMinUsefulUtil = 0.5;
constexpr double kMaxStep = 4.0;
// Weight of the past in the averages, per observation (about 1 s at the watcher's 200 ms).
constexpr double kSmoothing = 0.8;

double Clamp(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

}  // namespace

bool ThrottleEnabled(int policy, int utilization_switch) {
  if (policy == kPolicyForce) return true;
  if (policy == kPolicyDisable) return false;
  return utilization_switch != 0;
}

void ComputeLimiter::LockState() {
  while (lock_.test_and_set(std::memory_order_acquire)) sched_yield();
}

void ComputeLimiter::Configure(int limit_pct, std::int64_t now_ns) {
  LockState();
  limit_pct_ = limit_pct;
  rate_ = 0;
  tokens_ = 0;
  last_refill_ns_ = now_ns;
  window_start_ns_ = now_ns;
  window_units_ = 0;
  have_average_ = false;
  avg_rate_ = 0;
  avg_util_ = 0;
  UnlockState();
}

std::int64_t ComputeLimiter::Admit(std::uint64_t cost, std::int64_t now_ns) {
  if (!active()) return 0;
  LockState();
  std::int64_t wait_ns = 0;
  if (rate_ > 0) {
    double elapsed = static_cast<double>(now_ns - last_refill_ns_);
    if (elapsed > 0) {
      double burst = rate_ * static_cast<double>(kBurstNs) / kNsPerS;
      tokens_ += rate_ * elapsed / kNsPerS;
      if (tokens_ > burst) tokens_ = burst;
      last_refill_ns_ = now_ns;
    }
    if (tokens_ < 0) {
      wait_ns = static_cast<std::int64_t>(-tokens_ / rate_ * kNsPerS) + 1;
    }
  }
  if (wait_ns == 0) {
    tokens_ -= static_cast<double>(cost);
    window_units_ += static_cast<double>(cost);
  }
  UnlockState();
  return wait_ns;
}

void ComputeLimiter::Observe(double util_pct, std::int64_t now_ns) {
  if (!active()) return;
  LockState();
  double seconds = static_cast<double>(now_ns - window_start_ns_) / kNsPerS;
  if (seconds > 0) {
    double admitted_rate = window_units_ / seconds;
    if (!have_average_) {
      avg_rate_ = admitted_rate;
      avg_util_ = util_pct;
      have_average_ = true;
    } else {
      avg_rate_ = kSmoothing * avg_rate_ + (1 - kSmoothing) * admitted_rate;
      avg_util_ = kSmoothing * avg_util_ + (1 - kSmoothing) * util_pct;
    }
    double limit = static_cast<double>(limit_pct_);
    if (avg_util_ >= kMinUsefulUtil && avg_rate_ > 0) {
      // Utilisation per admitted unit/s, from averages over the same horizon (robust to a
      // measurement that lags the admissions, and to few large kernels per window).
      double target = avg_rate_ * limit / avg_util_;
      if (rate_ <= 0) {
        // First calibration: only start throttling once the limit is actually exceeded. The
        // uncalibrated consumption is forgiven rather than paid back with a long stall.
        if (util_pct > limit || avg_util_ > limit) {
          rate_ = target;
          tokens_ = 0;
          last_refill_ns_ = now_ns;
        }
      } else {
        rate_ = Clamp(target, rate_ / kMaxStep, rate_ * kMaxStep);
      }
    }
  }
  window_start_ns_ = now_ns;
  window_units_ = 0;
  UnlockState();
}

}  // namespace hami::vgpu
