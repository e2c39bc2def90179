// An independent writer of region files for the monitor tests: raw byte offsets from
// docs/protocol.md#shared-region-file (v1; HAMi's v0 Go struct for v0), never shared_region.h, so a
// wrong offset in the reader cannot be matched by the same mistake here.
#ifndef HAMI_TESTS_MONITOR_REGION_WRITER_H_
#define HAMI_TESTS_MONITOR_REGION_WRITER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

namespace hami::monitor::testing {

struct Offsets;
// The int32 at `off` of the file at `path` (0 when unreadable).
inline int32_t ReadI32(const std::string& path, std::size_t off) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(off));
  int32_t v = 0;
  in.read(reinterpret_cast<char*>(&v), sizeof(v));
  return v;
}

struct Offsets {
  std::size_t size, num, uuids, limit, procs, proc_num, last_kernel, slot, hostpid, used,
      used_entry, util, util_entry, status;
};
// v1: struct 2008952 bytes + HAMi-core's trailing byte.
inline constexpr Offsets kV1 = {2008953, 56, 64, 1600, 1856, 2008896, 2008912,
                                1960,    4,  8,  64,   1160, 48,      1928};
// v0: 1197896 bytes + the trailing byte; no last kernel time (0 = none).
inline constexpr Offsets kV0 = {1197897, 48, 56, 1592, 1848, 1197880, 0,
                                1168,    4,  8,  40,   776,  24,      1160};

class RegionWriter {
 public:
  explicit RegionWriter(const Offsets& o) : o_(o), bytes_(o.size, '\0') {
    Put<int32_t>(0, 19920718);
    if (&o == &kV1) {
      Put<uint32_t>(4, 1);
      Put<uint32_t>(8, 2);
    }
  }
  RegionWriter& Magic(int32_t m) { return Put<int32_t>(0, m); }
  RegionWriter& Devices(uint64_t n) { return Put<uint64_t>(o_.num, n); }
  RegionWriter& Uuid(int i, const std::string& u) {
    std::memcpy(&bytes_[o_.uuids + 96 * i], u.data(), u.size());
    return *this;
  }
  RegionWriter& Limit(int i, uint64_t v) { return Put<uint64_t>(o_.limit + 8 * i, v); }
  RegionWriter& ProcNum(int32_t n) { return Put<int32_t>(o_.proc_num, n); }
  // The words after proc_num, in both layouts: utilization_switch, recent_kernel, priority.
  RegionWriter& UtilizationSwitch(int32_t v) { return Put<int32_t>(o_.proc_num + 4, v); }
  RegionWriter& RecentKernel(int32_t v) { return Put<int32_t>(o_.proc_num + 8, v); }
  RegionWriter& Priority(int32_t v) { return Put<int32_t>(o_.proc_num + 12, v); }
  RegionWriter& LastKernel(int64_t t) { return Put<int64_t>(o_.last_kernel, t); }
  RegionWriter& Slot(int k, int32_t pid, int32_t hostpid, int32_t status) {
    Put<int32_t>(SlotAt(k), pid);
    Put<int32_t>(SlotAt(k) + o_.hostpid, hostpid);
    return Put<int32_t>(SlotAt(k) + o_.status, status);
  }
  // context, module, buffer (data), total of slot k on device i.
  RegionWriter& Used(int k, int i, uint64_t ctx, uint64_t mod, uint64_t buf, uint64_t total) {
    const std::size_t e = SlotAt(k) + o_.used + o_.used_entry * i;
    Put<uint64_t>(e, ctx);
    Put<uint64_t>(e + 8, mod);
    Put<uint64_t>(e + 16, buf);
    return Put<uint64_t>(e + 32, total);
  }
  RegionWriter& SmUtil(int k, int i, uint64_t v) {
    return Put<uint64_t>(SlotAt(k) + o_.util + o_.util_entry * i + 16, v);
  }
  const std::string& bytes() const { return bytes_; }
  bool Save(const std::string& path, std::size_t size = std::string::npos) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes_.data(), static_cast<std::streamsize>(std::min(size, bytes_.size())));
    return out.good();
  }

 private:
  std::size_t SlotAt(int k) const { return o_.procs + o_.slot * static_cast<std::size_t>(k); }
  template <typename T>
  RegionWriter& Put(std::size_t off, T v) {
    std::memcpy(&bytes_[off], &v, sizeof(T));
    return *this;
  }
  const Offsets& o_;
  std::string bytes_;
};

}  // namespace hami::monitor::testing

#endif  // HAMI_TESTS_MONITOR_REGION_WRITER_H_
