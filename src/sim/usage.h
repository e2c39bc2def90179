// Simulated GPU use for `hami-sim run` (issue 13 item 3): a scenario container may declare
// `usage: {memory: 2000, utilization: 40}` (MiB and percent, on each of its GPUs). The runner
// carries it on the pod as the annotation sim.hami.io/usage (JSON: container name -> {memory,
// utilization}); the sim kubelet, after the device plugin's Allocate, writes it into the
// container's region file (the one the plugin created empty under
// <hook>/vgpu/containers/<podUID>_<container>/) with the region layout of
// vgpu/shared_region.h, as libvgpu would once a process of the container ran: one live process
// slot using that much memory and SM on every device of the container. The node's monitor then
// reads it like any region.
#ifndef HAMI_SIM_USAGE_H_
#define HAMI_SIM_USAGE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "sim/scenario.h"

namespace hami::sim {

inline constexpr std::string_view kUsageAnnotation = "sim.hami.io/usage";

// The annotation's value for these containers; "" when none declares a usage.
std::string UsageAnnotation(const std::vector<ContainerSpec>& containers);

// Parses the annotation; errors name the annotation and quote the value.
Result<std::map<std::string, SimUsage>> ParseUsageAnnotation(std::string_view value);

// One container's region: its devices (uuids in order), their limits in bytes (0 = none).
struct UsageRegion {
  std::vector<std::string> uuids;
  std::vector<uint64_t> limits;
  SimUsage usage;
  int32_t pid = 1;  // the slot's pid (its hostpid stays 0: unknown, so the monitor counts it)
};

// Writes the region file at `path` (created or replaced whole: temp file + rename). Errors name
// the path.
Status WriteUsageRegion(const std::string& path, const UsageRegion& region);

// What Allocate answered a container (its envs), turned into the region's devices and the
// region file's host path under `hook_path` (the device plugin's hook path, holding vgpu/).
// Errors name the env variable and quote its value.
Result<std::string> UsageRegionFor(const std::map<std::string, std::string>& envs,
                                   const std::string& hook_path, const std::string& pod_uid,
                                   const std::string& container, UsageRegion* region);

}  // namespace hami::sim

#endif  // HAMI_SIM_USAGE_H_
