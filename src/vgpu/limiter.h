// The compute (SM) limiter for one device: a token bucket whose refill rate is calibrated from
// measured utilisation. Pure logic: the caller passes the time (tests inject a simulated clock)
// and does the waiting. See docs/vgpu.md, "Compute limiter".
//
// Tokens are abstract launch-cost units (the hook charges threads per launch). The refill rate
// R (units/s) is what maps cost to GPU time, and it is unknown a priori, so it is learned: every
// observation window the caller reports the measured SM utilisation U (percent) of this
// container on the device. With C = units admitted per second, utilisation is proportional to
// admitted work (U = k·C) whether or not the app is throttled, so the rate that yields exactly
// the limit L is L/k = C·L/U, with C and U exponentially averaged over ~5 windows so a lagging
// measurement or a few long kernels per window do not bias it. R follows it, bounded to ×4 per
// step. The result does not depend on grid sizes, kernel durations or the number of SMs
// (HAMi-core's fixed cost model is off by up to 3x for exactly those reasons). Launches may
// overdraw the bucket (a launch is admitted whenever tokens >= 0), so one large kernel is never
// refused; the debt delays the next launches, which keeps the long-run average exact.
#ifndef HAMI_VGPU_LIMITER_H_
#define HAMI_VGPU_LIMITER_H_

#include <atomic>
#include <cstdint>

namespace hami::vgpu {

// Whether launches are throttled at all, from GPU_CORE_UTILIZATION_POLICY and the monitor's
// utilization_switch: FORCE always, DISABLE never, default follows the switch.
bool ThrottleEnabled(int policy, int utilization_switch);

// The bucket of one device: what every process of a container shares (through the limiter side
// file, limiter_file.h) so a new process starts with the calibrated rate and the others' debt
// instead of running unthrottled until its own first measurement. Plain data: it may live in
// shared memory. `lock` is a spinlock word (0 = free); a holder that died inside the few
// instructions it guards is overtaken after a bounded spin.
struct SharedBucket {
  std::uint32_t lock;
  std::uint32_t reserved;
  double rate;                  // units/s, 0 = uncalibrated
  double tokens;                // negative = debt
  std::int64_t last_refill_ns;  // CLOCK_MONOTONIC (one clock for every process on the host)
};
static_assert(sizeof(SharedBucket) == 32);

// The limiter side file, "<region file>.limiter" (0666, beside the region; the monitor's
// "*.cache" glob does not match it): one SharedBucket per container device index. Not part of
// the HAMi-core region contract, so the region layout stays byte-compatible.
inline constexpr std::uint32_t kLimiterFileMagic = 0x4d494c48;  // "HLIM"
struct LimiterFile {
  std::uint32_t magic;
  std::uint32_t version;  // 1
  std::uint64_t reserved;
  SharedBucket dev[16];
};
static_assert(sizeof(LimiterFile) == 16 + 16 * 32);

class ComputeLimiter {
 public:
  // Burst capacity of the bucket, as time at the calibrated rate.
  static constexpr std::int64_t kBurstNs = 100'000'000;

  // limit_pct in [1, 99] enables throttling; anything else makes Admit() always return 0.
  void Configure(int limit_pct, std::int64_t now_ns);
  int limit_pct() const { return limit_pct_; }
  bool active() const { return limit_pct_ > 0 && limit_pct_ < 100; }

  // One launch of `cost` units at now_ns. Returns 0 when admitted (cost charged), or the ns to
  // wait before asking again (nothing charged). Thread-safe; allocation-free.
  std::int64_t Admit(std::uint64_t cost, std::int64_t now_ns);

  // Feeds the utilisation (percent, 0..100) measured over the window that ends at now_ns.
  void Observe(double util_pct, std::int64_t now_ns);

  // Uses `bucket` (shared with other processes) for the rate, tokens and refill time from now
  // on; a calibrated rate already there is adopted at once. Call before the limiter is used.
  void Share(SharedBucket* bucket) { bucket_ = bucket; }

  // In a fork child: the lock may have been held by a parent thread that does not exist here.
  void ResetLockAfterFork() {
    lock_.clear(std::memory_order_relaxed);
    own_.lock = 0;
  }

  // Calibrated refill rate in units/s (0 while uncalibrated: everything is admitted).
  double rate() const {
    double value;
    __atomic_load(&bucket_->rate, &value, __ATOMIC_RELAXED);
    return value;
  }

 private:
  void LockState();
  void UnlockState();

  int limit_pct_ = 0;
  SharedBucket own_{};
  SharedBucket* bucket_ = &own_;
  std::int64_t window_start_ns_ = 0;
  double window_units_ = 0;
  bool have_average_ = false;
  double avg_rate_ = 0;  // admitted units/s, exponentially averaged over observations
  double avg_util_ = 0;  // measured percent, averaged the same way
  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_LIMITER_H_
