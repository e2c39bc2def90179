// Nearest-rank percentiles of the benches' samples.
#ifndef HAMI_BENCH_SCHEDULER_PERCENTILE_H_
#define HAMI_BENCH_SCHEDULER_PERCENTILE_H_

#include <algorithm>
#include <cmath>
#include <vector>

namespace hami::bench {

// p-th percentile (0..100) of `samples` (nearest rank); sorts a copy.
inline double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

}  // namespace hami::bench

#endif  // HAMI_BENCH_SCHEDULER_PERCENTILE_H_
