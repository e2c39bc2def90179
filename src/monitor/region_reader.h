// Reads a container's shared region file (HAMi-core's "cache file") as the vGPU monitor sees it:
// the v1.2 layout of vgpu/shared_region.h, or the older v0 layout (told apart by size;
// docs/protocol.md#shared-region-file). The file is copied into memory with plain reads: the
// region's lock is never taken, so reading never blocks a CUDA call of the container.
#ifndef HAMI_MONITOR_REGION_READER_H_
#define HAMI_MONITOR_REGION_READER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hami::monitor {

// The size of a v0 region (no version fields, no per-slot padding); smaller files are not
// regions yet (the device plugin creates the file empty at Allocate).
inline constexpr std::size_t kRegionV0Size = 1197896;

// One device of a container, summed over its live process slots.
struct DeviceUsage {
  // The first 40 bytes of the region's uuid slot (HAMi's label). The container writes the region:
  // bytes outside printable ASCII are spelled \xNN, so the text is valid UTF-8 and safe in JSON,
  // logs, Prometheus labels and Events (docs/SECURITY.md, the monitor's trust boundary).
  std::string uuid;
  uint64_t limit = 0;
  uint64_t context = 0;
  uint64_t module = 0;
  uint64_t buffer = 0;
  uint64_t total = 0;
  uint64_t sm_util = 0;
};

struct RegionUsage {
  int version = 1;                   // 0 or 1
  std::vector<DeviceUsage> devices;  // [0, device_num), devices with an empty uuid left out
  std::vector<int> device_index;     // the vdevice_index of devices[k]
  int64_t last_kernel_time = 0;      // unix seconds; 0 = none (always 0 in v0)
};

// Whether a host PID is alive; a slot whose host PID is known (> 0) and dead does not count.
using PidAlive = std::function<bool(int32_t hostpid)>;

// /proc/<pid> exists under `proc_root`.
PidAlive ProcPidAlive(std::string proc_root = "/proc");

// Parses region bytes. A slot counts when it is among the first proc_num, its status is not 0
// and its host PID is unknown (0) or alive. Errors: too small, wrong magic, device_num > 16.
Result<RegionUsage> ParseRegion(std::string_view bytes, const PidAlive& alive);

// Reads `path` (one copy) and parses it; errors name the path.
Result<RegionUsage> ReadRegionFile(const std::string& path, const PidAlive& alive);

// Reads the region open as `fd` (with pread: a file the container truncates meanwhile reads
// short and fails to parse; nothing is mapped) and parses it; errors name `path`.
Result<RegionUsage> ReadRegionFd(int fd, const std::string& path, const PidAlive& alive);

// `text` with every byte outside printable ASCII (0x20-0x7e) spelled \xNN.
std::string PrintableAscii(std::string_view text);

}  // namespace hami::monitor

#endif  // HAMI_MONITOR_REGION_READER_H_
