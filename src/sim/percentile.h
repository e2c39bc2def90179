// Nearest-rank percentiles, shared by hami-sim's report, `hami-sim loadgen` and the benches in
// bench/ (header-only, so a bench needs no library for it).
#ifndef HAMI_SIM_PERCENTILE_H_
#define HAMI_SIM_PERCENTILE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace hami::sim {

// The p-th percentile (p in [0, 100]) of unsorted `samples` by nearest rank (sorts a copy); p 0 is
// the minimum, p 100 the maximum, and no samples give 0.
inline double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(samples.size()));
  const size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return samples[std::min(idx, samples.size() - 1)];
}

}  // namespace hami::sim

#endif  // HAMI_SIM_PERCENTILE_H_
