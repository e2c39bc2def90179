// The scheduler's Prometheus text (spec hami.md §8.1) from the usage index: per-device limits and
// allocations, per-pod allocations, and request latency histograms for filter, bind and webhook.
// Legacy (pre-2.9) names are added with --legacy-metrics.
#ifndef HAMI_SCHEDULER_METRICS_H_
#define HAMI_SCHEDULER_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "device/usage_index.h"

namespace hami::scheduler {

// A fixed-bucket latency histogram, lock-free to observe.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 10> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                     0.025,  0.05,  0.1,    0.5,   1.0};
  void Observe(std::chrono::nanoseconds d);
  // "<name>_bucket{...,le=..} n" lines, then _sum and _count.
  std::string Render(std::string_view name, std::string_view labels) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

struct RequestMetrics {
  LatencyHistogram filter;
  LatencyHistogram bind;
  LatencyHistogram webhook;
};

// The text exposition of every metric. `requests` may be null.
std::string RenderMetrics(const device::UsageIndex& index, bool legacy,
                          const RequestMetrics* requests);

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_METRICS_H_
