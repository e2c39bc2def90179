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
// utilization_switch: FORCE always, DISABLE never, default follows the switch. With a trusted
// policy (it came from the device plugin's read-only limits file) the switch, a word of the
// region every process of the container can write, cannot turn throttling off: default throttles
// like FORCE.
bool ThrottleEnabled(int policy, int utilization_switch, bool trusted_policy);

// The bucket of one device: what every process of a container shares (through the limiter side
// file, limiter_file.h) so a new process starts with the calibrated rate and the others' debt
// instead of running unthrottled until its own first measurement. Plain data: it may live in
// shared memory. `lock` is a spinlock word (0 = free); a holder that died inside the few
// instructions it guards is overtaken after a bounded spin.
//
// The calibration is the container's, not a process's: the units every process admitted since the
// last calibration are summed here (window_*), and the measured utilisation is the container's,
// so the rate is C_container * L / U. Each process computing it from its own units would set the
// shared rate to about L/N with N busy processes.
struct SharedBucket {
  std::uint32_t lock;
  std::uint32_t reserved;
  double rate;                   // units/s, 0 = uncalibrated
  double tokens;                 // negative = debt
  std::int64_t last_refill_ns;   // CLOCK_MONOTONIC (one clock for every process on the host)
  std::int64_t window_start_ns;  // start of the container's current observation window
  double window_units;           // units admitted by every process since window_start_ns
  double avg_rate;               // container's admitted units/s, exponentially averaged
  double avg_util;               // measured percent, averaged the same way (< 0: no average yet)
};
static_assert(sizeof(SharedBucket) == 64);

// The limiter side file, "<region file>.limiter" (0666, beside the region; the monitor's
// "*.cache" glob does not match it): one SharedBucket per container device index. Not part of
// the HAMi-core region contract, so the region layout stays byte-compatible.
inline constexpr std::uint32_t kLimiterFileMagic = 0x4d494c48;  // "HLIM"
inline constexpr std::uint32_t kLimiterFileVersion = 2;
struct LimiterFile {
  std::uint32_t magic;
  std::uint32_t version;  // kLimiterFileVersion; another version is reinitialised
  std::uint64_t reserved;
  SharedBucket dev[16];
};
static_assert(sizeof(LimiterFile) == 16 + 16 * 64);

// The utilisation watcher of each process (runtime.cc) feeds Observe kWatcherFirstNs after its
// first throttled launch, then every kWatcherPeriodNs. The first measurement comes early so a
// container whose processes each live less than a period still calibrates (issue 29: back-to-back
// 150 ms processes ran unthrottled).
inline constexpr std::int64_t kWatcherFirstNs = 50'000'000;
inline constexpr std::int64_t kWatcherPeriodNs = 200'000'000;

class ComputeLimiter {
 public:
  // Burst capacity of the bucket, as time at the calibrated rate.
  static constexpr std::int64_t kBurstNs = 100'000'000;
  // The largest debt a shared bucket is read with, as time at the calibrated rate: a launch
  // costing more than this is priced at it (one kernel of over 10 s of the container's share).
  static constexpr std::int64_t kMaxDebtNs = 10'000'000'000;

  // limit_pct in [1, 99] enables throttling; anything else makes Admit() always return 0.
  void Configure(int limit_pct, std::int64_t now_ns);
  int limit_pct() const { return limit_pct_; }
  bool active() const { return limit_pct_ > 0 && limit_pct_ < 100; }

  // One launch of `cost` units at now_ns. Returns 0 when admitted (cost charged), or the ns to
  // wait before asking again (nothing charged). Thread-safe; allocation-free.
  std::int64_t Admit(std::uint64_t cost, std::int64_t now_ns) { return Admit(0, cost, now_ns); }

  // One launch of the kernel `key` (the function and its grid and block shape: a launch's GPU
  // time depends on them, not on its thread count alone; 0 = unknown) with `threads` threads.
  // It is charged threads x the kernel's learned price (see KernelPrice); key 0 at price 1.
  std::int64_t Admit(std::uint64_t key, std::uint64_t threads, std::int64_t now_ns);

  // Feeds the container's utilisation (percent, 0..100) measured over the window that ends at
  // now_ns and starts at this process's previous Observe (or its Configure). Every process of
  // the container calls it from its watcher; a window shorter than kMinWindowNs since the last
  // calibration (another process just calibrated) is skipped for the rate, so the container
  // calibrates at most once per kMinWindowNs whatever its number of processes.
  void Observe(double util_pct, std::int64_t now_ns) { Observe(util_pct, now_ns, -1); }
  // The same with this process's own share of it (NVML's samples of its pid; < 0: unknown, the
  // container's is used), from which its kernel prices are learned.
  void Observe(double util_pct, std::int64_t now_ns, double own_util_pct);
  static constexpr std::int64_t kMinWindowNs = 40'000'000;

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

  // The price of kernel `key` in units per thread (1 for key 0; -1 when the table does not hold
  // it). For tests.
  double PriceOf(std::uint64_t key) const;

  // Per-kernel prices (issue 29, mixed kernel sizes). A launch's thread count says little about
  // its GPU time: per thread, a cheap big grid and a 1 ms single-block kernel differ by 10^6, so
  // a rate calibrated on one kind is wrong for the other, and an app that switched between phases
  // of the two ran at the old rate for seconds after every switch. So each process prices the
  // kernels it launches (a key: the function or graph and its thread count): a launch costs
  // threads x price units. A new kernel starts at the process's average units per launch (launch
  // times differ far less than time per thread). Over its first kLearnWindows windows with a
  // reading, its price is learned: the units the process's launches really took (its own
  // utilisation reading over g, the utilisation one unit/s of its own has yielded) against the
  // units charged; the difference goes to the kernels still being learned, by launch count, and
  // the price is the thread-weighted mean of what those windows implied. Then it is settled and
  // no longer moves (changes of a settled kernel's time go to the container's rate, as before).
  // The units a window charged too few (or too many) are added to the shared bucket's debt and
  // window, so the container's rate sees consistent units and the excess is paid back. Per
  // process, not shared: a CUfunction is an address in one process. At most kPriceSlots kernels:
  // a new one takes, of the eight slots its key may use, the one launched longest ago (never one
  // launched in the current window); one without a slot costs its thread count.
  struct KernelPrice {
    std::uint64_t key;          // 0 = empty
    double price;               // units per thread
    double threads;             // launched in the current window
    double charged;             // units charged in the current window
    std::uint32_t launches;     // in the current window
    std::uint32_t windows;      // windows it was learned from (settled at kLearnWindows)
    std::uint64_t last_window;  // window_seq_ when it was last launched
    double learned_units;       // what its learning windows say its launches took...
    double learned_threads;     // ...for this many threads
  };
  static constexpr int kPriceSlots = 64;

 private:
  void LockState();
  void UnlockState();
  KernelPrice* Slot(std::uint64_t key);
  // Learns this process's prices from its window; returns the units charged too few (> 0) or
  // too many (< 0) in it.
  double LearnPrices(double util_pct, double own_util_pct, std::int64_t now_ns);

  int limit_pct_ = 0;
  KernelPrice prices_[kPriceSlots] = {};
  double own_units_ = 0;  // units this process charged in its current window
  std::int64_t own_window_start_ = 0;
  double own_gain_ = -1;          // g: utilisation percent per own unit/s (< 0: unknown)
  std::uint64_t window_seq_ = 0;  // this process's windows so far
  double avg_launch_units_ = 0;   // units per launch, averaged over its windows
  SharedBucket own_{};
  SharedBucket* bucket_ = &own_;
  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_LIMITER_H_
