// The clock every periodic or time-dependent component reads (docs/ARCHITECTURE.md#decisions, 6:
// time is injected). Production code takes a `const Clock&`; tests pass a FakeClock and move it by
// hand.
#ifndef HAMI_COMMON_CLOCK_H_
#define HAMI_COMMON_CLOCK_H_

#include <atomic>
#include <chrono>

namespace hami {

using SystemTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time. Thread-safe.
  virtual SystemTime Now() const = 0;
};

// The process-wide real clock (std::chrono::system_clock).
const Clock& RealClock();

// A clock that only moves when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(SystemTime start = SystemTime(std::chrono::seconds(1700000000)))
      : now_ns_(ToNs(start)) {}
  SystemTime Now() const override {
    return SystemTime(
        std::chrono::duration_cast<SystemTime::duration>(std::chrono::nanoseconds(now_ns_.load())));
  }
  void Set(SystemTime t) { now_ns_.store(ToNs(t)); }
  void Advance(std::chrono::nanoseconds d) { now_ns_.fetch_add(d.count()); }

 private:
  static int64_t ToNs(SystemTime t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  std::atomic<int64_t> now_ns_;
};

}  // namespace hami

#endif  // HAMI_COMMON_CLOCK_H_
