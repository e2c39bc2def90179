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
  if (bucket_ == &own_) {
    own_.rate = 0;
    own_.tokens = 0;
    own_.last_refill_ns = now_ns;
  } else if (bucket_->last_refill_ns == 0 || bucket_->last_refill_ns > now_ns) {
    // A fresh shared bucket (or one from before a reboot) starts refilling now; a calibrated
    // rate and the debt left by the container's other processes are kept.
    bucket_->last_refill_ns = now_ns;
  }
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
  SharedBucket& b = *bucket_;
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
    window_units_ += static_cast<double>(cost);
  }
  UnlockState();
  return wait_ns;
}

void ComputeLimiter::Observe(double util_pct, std::int64_t now_ns) {
  if (!active()) return;
  LockState();
  SharedBucket& b = *bucket_;
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
      if (b.rate <= 0) {
        // First calibration: only start throttling once the limit is actually exceeded. The
        // uncalibrated consumption is forgiven rather than paid back with a long stall.
        if (util_pct > limit || avg_util_ > limit) {
          b.rate = target;
          b.tokens = 0;
          b.last_refill_ns = now_ns;
        }
      } else {
        b.rate = Clamp(target, b.rate / kMaxStep, b.rate * kMaxStep);
      }
    }
  }
  window_start_ns_ = now_ns;
  window_units_ = 0;
  UnlockState();
}

}  // namespace hami::vgpu
