// The scheduler's Prometheus text (docs/protocol.md#metrics) from the usage index: per-device
// limits and allocations, per-pod (collapsed) allocations, ResourceQuota usage and limits, build
// info, and request latency histograms for filter, bind and webhook. Legacy (pre-2.9) names are
// added with
// --legacy-metrics.
#ifndef HAMI_SCHEDULER_METRICS_H_
#define HAMI_SCHEDULER_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// One tracked quota resource of one namespace (quota_name is the resource, "nvidia.com/gpumem").
struct QuotaMetric {
  std::string namespace_name{};
  std::string quota_name{};
  int64_t used = 0;
  int64_t limit = 0;
  bool limit_set = false;  // hami_resource_quota_limit only when set
};

// hami_build_info's labels.
struct BuildInfo {
  std::string version{};
  std::string revision{};
  std::string build_date{};
  std::string compiler{};
  std::string platform{};
};
// This binary's: version/revision from the build (HAMI_VERSION / HAMI_REVISION definitions when
// given, else "dev" / "unknown"), the compiler that built it, linux/<arch>.
BuildInfo ThisBuild();

struct MetricsInput {
  const device::UsageIndex* index = nullptr;  // required
  bool legacy = false;
  const RequestMetrics* requests = nullptr;  // optional
  // Pods holding devices (index keys "ns/name"); each one's collapsed allocation is exported.
  std::vector<std::string> pod_keys{};
  std::vector<QuotaMetric> quotas{};
  const BuildInfo* build = nullptr;  // optional
};

// The text exposition of every metric.
std::string RenderMetrics(const MetricsInput& input);
// Devices and requests only. `requests` may be null.
std::string RenderMetrics(const device::UsageIndex& index, bool legacy,
                          const RequestMetrics* requests);

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_METRICS_H_
