// The vGPU monitor's /metrics text: HAMi v2.10's container series (docs/MONITOR.md#metrics) with
// their names, help texts and label names, and with --legacy-metrics the pre-v2.8 names too. The
// text is what Go's client_golang writes for HAMi's registry: families sorted by name, labels
// sorted by name, every series carrying zone="vGPU" (HAMi wraps its collector with that label),
// values formatted as Go's strconv 'g' shortest (1.048576e+06).
#ifndef HAMI_MONITOR_METRICS_H_
#define HAMI_MONITOR_METRICS_H_

#include <string>
#include <vector>

#include "common/clock.h"
#include "deviceplugin/nvml.h"
#include "monitor/claims.h"
#include "monitor/region_reader.h"

namespace hami::monitor {

struct ContainerUsage {
  std::string ns;
  std::string pod;
  std::string container;
  RegionUsage region;
};

// A DRA claim prepared on this node (docs/MONITOR.md "DRA claims"): what the API says of it
// (only `uid` is known when the claim is not, or no longer, in the API) and its region.
struct ClaimUsage {
  ClaimInfo claim;
  bool has_region = false;  // false: no region file yet (no CUDA process)
  RegionUsage region;
};

// What one scrape shows: the host's GPUs as NVML reports them (hami_host_gpu_*, labelled with
// `node`), the containers' regions and, in DRA mode, this node's pool devices and claims.
struct MetricsInput {
  std::string node;
  std::vector<deviceplugin::GpuSample> host;
  std::vector<ContainerUsage> containers;
  std::vector<DraDevice> dra_devices{};
  std::vector<ClaimUsage> claims{};
};

// Besides HAMi's series: hami_vgpu_memory_exceeded_bytes (same labels as
// hami_vgpu_memory_used_bytes) = used - limit, only for a device whose live slots use more than
// its non-zero limit (issue 20's cross-check; docs/MONITOR.md). From `dra_devices` and `claims`:
// HAMi-DRA's allocation series (hami_dra_gpu_*, hami_dra_vgpu_*_allocated_*, without zone, as
// HAMi-DRA's monitor writes them), the claims' use (hami_dra_vgpu_memory_used_bytes,
// hami_dra_vgpu_core_used_ratio) and the container series of each claim's region once per pod
// that uses the claim (container="").
std::string RenderMetrics(const MetricsInput& input, bool legacy, SystemTime now);
std::string RenderMetrics(const std::vector<ContainerUsage>& containers, bool legacy,
                          SystemTime now);

// A sample value as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it.
std::string FormatGoFloat(double v);

}  // namespace hami::monitor

#endif  // HAMI_MONITOR_METRICS_H_
