#include "monitor/region_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "common/strings.h"
#include "vgpu/shared_region.h"

namespace hami::monitor {
namespace {

// Where a layout keeps the fields the monitor reads.
struct Layout {
  int version;
  std::size_t size;  // bytes the layout needs
  std::size_t device_num, uuids, limit, procs, proc_num, last_kernel_time;
  std::size_t slot_size, slot_hostpid, slot_used, used_size, slot_util, util_size, slot_status;
  // Within one device memory entry / one utilization entry.
  std::size_t context, module, buffer, total, sm_util;
};

constexpr Layout kV1 = {
    1,
    sizeof(hami_shared_region_t),
    offsetof(hami_shared_region_t, device_num),
    offsetof(hami_shared_region_t, uuids),
    offsetof(hami_shared_region_t, limit),
    offsetof(hami_shared_region_t, procs),
    offsetof(hami_shared_region_t, proc_num),
    offsetof(hami_shared_region_t, last_kernel_time),
    sizeof(hami_proc_slot_t),
    offsetof(hami_proc_slot_t, hostpid),
    offsetof(hami_proc_slot_t, used),
    sizeof(hami_device_memory_t),
    offsetof(hami_proc_slot_t, device_util),
    sizeof(hami_device_util_t),
    offsetof(hami_proc_slot_t, status),
    offsetof(hami_device_memory_t, context_size),
    offsetof(hami_device_memory_t, module_size),
    offsetof(hami_device_memory_t, data_size),
    offsetof(hami_device_memory_t, total),
    offsetof(hami_device_util_t, sm_util),
};

// v0 (HAMi-core before the version fields): int32 flag@0, int32 sm_init@4, uint32 owner@8,
// sem[32]@12, uint64 num@48, uuid[16][96]@56, limit[16]@1592, sm_limit[16]@1720, 1024 slots of
// 1168 bytes @1848 (pid, hostpid, 5-word used[16]@8, monitorused[16]@648, 3-word util[16]@776,
// status@1160), proc_num@1197880 ... 1197896 bytes. No last kernel time.
constexpr Layout kV0 = {
    0,  kRegionV0Size, 48, 56,   1592, 1848, 1197880, 0,  1168, 4, 8,
    40, 776,           24, 1160, 0,    8,    16,      32, 16,
};

template <typename T>
T Load(std::string_view b, std::size_t off) {
  T v{};
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

}  // namespace

PidAlive ProcPidAlive(std::string proc_root) {
  return [root = std::move(proc_root)](int32_t pid) {
    struct stat st;
    return ::stat((root + "/" + std::to_string(pid)).c_str(), &st) == 0;
  };
}

Result<RegionUsage> ParseRegion(std::string_view bytes, const PidAlive& alive) {
  if (bytes.size() < kRegionV0Size) {
    return Error{"region of " + std::to_string(bytes.size()) + " bytes: smaller than a region (" +
                 std::to_string(kRegionV0Size) + " bytes)"};
  }
  // A v0 file is the struct plus HAMi-core's one trailing byte; allow up to a page. Anything
  // between that and the v1 size is a truncated v1 file.
  if (bytes.size() < kV1.size && bytes.size() >= kRegionV0Size + 4096) {
    return Error{"region of " + std::to_string(bytes.size()) + " bytes: truncated (v1 needs " +
                 std::to_string(kV1.size) + ")"};
  }
  const Layout& l = bytes.size() >= kV1.size ? kV1 : kV0;
  const int32_t magic = Load<int32_t>(bytes, 0);
  if (magic != HAMI_REGION_MAGIC) {
    return Error{"region initialized_flag " + std::to_string(magic) + ": not " +
                 std::to_string(HAMI_REGION_MAGIC) + " (not initialised, or not a region)"};
  }
  const uint64_t device_num = Load<uint64_t>(bytes, l.device_num);
  if (device_num > HAMI_REGION_MAX_DEVICES) {
    return Error{"region device_num " + std::to_string(device_num) + ": more than " +
                 std::to_string(HAMI_REGION_MAX_DEVICES)};
  }
  int32_t proc_num = Load<int32_t>(bytes, l.proc_num);
  if (proc_num < 0) proc_num = 0;
  if (proc_num > HAMI_REGION_MAX_PROCS) proc_num = HAMI_REGION_MAX_PROCS;

  RegionUsage out;
  out.version = l.version;
  // Written by the container: a negative time (INT64_MIN would overflow now - last) reads as none.
  if (l.version == 1) {
    out.last_kernel_time = std::max<int64_t>(Load<int64_t>(bytes, l.last_kernel_time), 0);
  }
  std::vector<bool> live(static_cast<std::size_t>(proc_num));
  for (int k = 0; k < proc_num; ++k) {
    const std::size_t slot = l.procs + l.slot_size * static_cast<std::size_t>(k);
    if (Load<int32_t>(bytes, slot + l.slot_status) == HAMI_SLOT_INACTIVE) continue;
    const int32_t hostpid = Load<int32_t>(bytes, slot + l.slot_hostpid);
    live[static_cast<std::size_t>(k)] = hostpid <= 0 || !alive || alive(hostpid);
  }
  for (uint64_t i = 0; i < device_num; ++i) {
    const char* uuid = bytes.data() + l.uuids + HAMI_REGION_UUID_LEN * i;
    if (uuid[0] == '\0') continue;  // not yet initialised (HAMi skips it too)
    DeviceUsage d;
    d.uuid = PrintableAscii(std::string_view(uuid, strnlen(uuid, 40)));
    d.limit = Load<uint64_t>(bytes, l.limit + 8 * i);
    for (int k = 0; k < proc_num; ++k) {
      if (!live[static_cast<std::size_t>(k)]) continue;
      const std::size_t slot = l.procs + l.slot_size * static_cast<std::size_t>(k);
      const std::size_t used = slot + l.slot_used + l.used_size * i;
      d.context += Load<uint64_t>(bytes, used + l.context);
      d.module += Load<uint64_t>(bytes, used + l.module);
      d.buffer += Load<uint64_t>(bytes, used + l.buffer);
      d.total += Load<uint64_t>(bytes, used + l.total);
      d.sm_util += Load<uint64_t>(bytes, slot + l.slot_util + l.util_size * i + l.sm_util);
    }
    out.devices.push_back(std::move(d));
    out.device_index.push_back(static_cast<int>(i));
  }
  return out;
}

std::string PrintableAscii(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c <= 0x7e) {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Result<RegionUsage> ReadRegionFd(int fd, const std::string& path, const PidAlive& alive) {
  std::string bytes;
  bytes.resize(sizeof(hami_shared_region_t));
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{"region file " + Quote(path) + ": " + std::strerror(errno)};
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  auto r = ParseRegion(bytes, alive);
  if (!r) return Error{"region file " + Quote(path) + ": " + r.error()};
  return r;
}

Result<RegionUsage> ReadRegionFile(const std::string& path, const PidAlive& alive) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return Error{"region file " + Quote(path) + ": " + std::strerror(errno)};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{"region file " + Quote(path) + ": not a regular file"};
  }
  auto r = ReadRegionFd(fd, path, alive);
  ::close(fd);
  return r;
}

}  // namespace hami::monitor
