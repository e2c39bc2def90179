// Saturating arithmetic of the virtualised memory queries (pure; unit-tested).
#ifndef HAMI_VGPU_MEMORY_MATH_H_
#define HAMI_VGPU_MEMORY_MATH_H_

#include <cstdint>

namespace hami::vgpu {

struct MemoryView {
  std::uint64_t total;
  std::uint64_t free;
  std::uint64_t used;
};

// What a container with `limit` bytes (0 = unlimited) and `usage` bytes charged sees, given the
// physical view. Guarantees: total = min(limit, physical total); free <= physical free;
// used + free == total; nothing underflows when usage exceeds the limit. Unlimited: physical.
inline MemoryView VirtualMemory(std::uint64_t limit, std::uint64_t usage,
                                const MemoryView& physical) {
  if (limit == 0) return physical;
  MemoryView v;
  v.total = limit < physical.total ? limit : physical.total;
  v.used = usage < v.total ? usage : v.total;
  v.free = v.total - v.used;
  if (v.free > physical.free) {
    v.free = physical.free;
    v.used = v.total - v.free;
  }
  return v;
}

// Saturating a + b.
inline std::uint64_t SatAdd(std::uint64_t a, std::uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// Saturating a * b.
inline std::uint64_t SatMul(std::uint64_t a, std::uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_MEMORY_MATH_H_
