// An independent reader of the shared region v1.2 file, written from the offset table of
// docs/protocol.md#shared-region-file with hard-coded numbers and raw byte reads, never from
// shared_region.h. It reads what HAMi's vGPU monitor reads, the way its v1 reader does (sums over
// the first proc_num slots whose status != 0).
#ifndef HAMI_TESTS_VGPU_REGION_READER_H_
#define HAMI_TESTS_VGPU_REGION_READER_H_

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace hami::vgpu::testing {

class RawRegion {
 public:
  static constexpr std::size_t kFileSize = 2008953;
  static constexpr std::size_t kSlots = 1856;
  static constexpr std::size_t kSlotSize = 1960;

  bool Load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return in.good() || in.eof();
  }
  std::size_t size() const { return bytes_.size(); }

  std::int32_t I32(std::size_t off) const { return Read<std::int32_t>(off); }
  std::uint32_t U32(std::size_t off) const { return Read<std::uint32_t>(off); }
  std::uint64_t U64(std::size_t off) const { return Read<std::uint64_t>(off); }
  std::string Str(std::size_t off, std::size_t max) const {
    std::string s = bytes_.substr(off, max);
    return s.substr(0, s.find('\0'));
  }

  std::int32_t magic() const { return I32(0); }
  std::uint32_t major() const { return U32(4); }
  std::uint32_t minor() const { return U32(8); }
  std::uint64_t owner_pid() const { return U64(16); }
  std::uint64_t device_num() const { return U64(56); }
  std::string uuid(int i) const { return Str(64 + 96 * i, 96); }
  std::uint64_t limit(int i) const { return U64(1600 + 8 * i); }
  std::uint64_t sm_limit(int i) const { return U64(1728 + 8 * i); }
  std::int32_t proc_num() const { return I32(2008896); }
  std::int32_t utilization_switch() const { return I32(2008900); }
  std::int32_t recent_kernel() const { return I32(2008904); }
  std::int32_t priority() const { return I32(2008908); }
  std::uint64_t last_kernel_time() const { return U64(2008912); }

  std::size_t Slot(int k) const { return kSlots + kSlotSize * static_cast<std::size_t>(k); }
  std::int32_t slot_pid(int k) const { return I32(Slot(k)); }
  std::int32_t slot_hostpid(int k) const { return I32(Slot(k) + 4); }
  std::uint64_t slot_context(int k, int dev) const { return U64(Slot(k) + 8 + 64 * dev); }
  std::uint64_t slot_data(int k, int dev) const { return U64(Slot(k) + 8 + 64 * dev + 16); }
  std::uint64_t slot_total(int k, int dev) const { return U64(Slot(k) + 8 + 64 * dev + 32); }
  std::uint64_t slot_sm_util(int k, int dev) const { return U64(Slot(k) + 1160 + 48 * dev + 16); }
  std::int32_t slot_status(int k) const { return I32(Slot(k) + 1928); }
  std::uint64_t slot_seqlock(int k) const { return U64(Slot(k) + 1936); }

  // The monitor's view of a container's usage on `dev`.
  std::uint64_t MonitorUsage(int dev) const {
    std::uint64_t sum = 0;
    for (int k = 0; k < proc_num() && k < 1024; ++k) {
      if (slot_status(k) != 0) sum += slot_total(k, dev);
    }
    return sum;
  }

 private:
  template <typename T>
  T Read(std::size_t off) const {
    T v{};
    if (off + sizeof(T) <= bytes_.size()) std::memcpy(&v, bytes_.data() + off, sizeof(T));
    return v;
  }
  std::string bytes_;
};

}  // namespace hami::vgpu::testing

#endif  // HAMI_TESTS_VGPU_REGION_READER_H_
