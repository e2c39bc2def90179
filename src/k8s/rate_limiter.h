// Client-side request throttling: a token bucket of `burst` tokens refilled at `qps` per second,
// as client-go's --kube-api-qps/--kube-api-burst.
#ifndef HAMI_K8S_RATE_LIMITER_H_
#define HAMI_K8S_RATE_LIMITER_H_

#include <chrono>
#include <mutex>

#include "common/clock.h"

namespace hami::k8s {

class RateLimiter {
 public:
  // qps <= 0 disables limiting. burst < 1 counts as 1. `clock` must outlive the limiter.
  RateLimiter(double qps, int burst, const Clock& clock = RealClock());

  // Takes the next token and returns how long the caller must wait before using it (zero when
  // one was available). Tokens are handed out in order, so waits grow by 1/qps per caller in
  // excess of the burst. Thread-safe.
  std::chrono::nanoseconds Reserve();

  // Reserve() and sleep for the returned time.
  void Wait();

 private:
  const double qps_;
  const double burst_;
  const Clock& clock_;
  std::mutex mu_;
  double tokens_;  // may go negative: tokens already promised to waiting callers
  SystemTime last_;
};

}  // namespace hami::k8s

#endif  // HAMI_K8S_RATE_LIMITER_H_
