#include "k8s/rate_limiter.h"

#include <algorithm>
#include <thread>

namespace hami::k8s {

RateLimiter::RateLimiter(double qps, int burst, const Clock& clock)
    : qps_(qps), burst_(std::max(burst, 1)), clock_(clock), tokens_(burst_), last_(clock.Now()) {}

std::chrono::nanoseconds RateLimiter::Reserve() {
  if (qps_ <= 0) return std::chrono::nanoseconds(0);
  std::lock_guard<std::mutex> lock(mu_);
  SystemTime now = clock_.Now();
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<int64_t>(-tokens_ / qps_ * 1e9));
}

void RateLimiter::Wait() {
  auto wait = Reserve();
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
}

}  // namespace hami::k8s
