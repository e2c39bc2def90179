// The charge-then-allocate protocol shared by the memory hooks (cuda_hooks.cc, pool_hooks.cc):
// a precharge in the region before the real allocation, a record of the charge under the new
// pointer/handle, and the release that gives it back. Internal to libvgpu.
#ifndef HAMI_VGPU_CHARGE_H_
#define HAMI_VGPU_CHARGE_H_

#include <cstdint>

#include "vgpu/cuda_defs.h"
#include "vgpu/runtime.h"

namespace hami::vgpu {

// Returned when the real driver could not be loaded at all.
inline constexpr CUresult kNoDriver = CUDA_ERROR_NOT_INITIALIZED;
// Device argument of Precharge for memory that is not device memory (VMM host locations).
inline constexpr int kHostMemory = -2;

// Reserves `bytes` on container device `dev` before the real allocation. *charged tells the
// caller whether an uncharge/record is due afterwards. dev == kHostMemory charges nothing.
// Refuses (CUDA_ERROR_OUT_OF_MEMORY, logged) over the limit, and while a limit is set whenever
// the bytes cannot be accounted for.
CUresult Precharge(Runtime* rt, int dev, std::uint64_t bytes, bool* charged);

// Remembers the charge of `key`; false (after logging) when the table cannot hold it, in which
// case the caller releases the allocation and refuses it.
// `aux` is stored with it (the owning context of a device allocation).
bool Record(AllocTable* table, std::uint64_t key, int dev, std::uint64_t bytes, int kind,
            std::uint64_t aux = 0);

// The key under which allocations owned by `ctx` are recorded (AllocEntry::aux).
inline std::uint64_t ContextKey(CUcontext ctx) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ctx));
}

// An asynchronous allocation (`entry`, recorded in allocs) from pool `pooled.bytes` was freed:
// gives its charge back, less what the pool keeps of it; pool_hooks.cc.
void PoolPointerFreed(Runtime* rt, const AllocEntry& pooled, const AllocEntry& entry);

// Gives back the charges of a destroyed context's limits (heap, stack, FIFO); measured_hooks.cc.
void ForgetContextLimits(Runtime* rt, CUcontext ctx);

// The real cuMemFree_v2 / cuMemFreeAsync, for undoing an allocation that cannot be tracked.
void FreeNow(std::uint64_t ptr);
void FreeAsyncNow(std::uint64_t ptr, CUstream stream);

// Runs `call` (the real allocation, which stores the new key) between a precharge and the
// bookkeeping; undoes the charge when the driver fails, and undoes the allocation (`release`)
// when it cannot be tracked.
template <typename Call, typename Release>
CUresult ChargedAlloc(Runtime* rt, AllocTable* table, int dev, std::uint64_t bytes, int kind,
                      Call call, Release release) {
  bool charged = false;
  CUresult r = Precharge(rt, dev, bytes, &charged);
  if (r != CUDA_SUCCESS) return r;
  std::uint64_t key = 0;
  r = call(&key);
  if (!charged) return r;
  // Device allocations belong to the current context: its destruction frees them.
  const bool owned = table == &rt->allocs && kind != kAllocAsync;
  if (r != CUDA_SUCCESS) {
    rt->region.Uncharge(dev, bytes, ChargeKind::kData);
  } else if (!Record(table, key, dev, bytes, kind, owned ? ContextKey(CurrentContext()) : 0)) {
    release(key);
    rt->region.Uncharge(dev, bytes, ChargeKind::kData);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

// Forgets `key` before the real release (so a concurrent allocation reusing the address cannot
// be confused with it) and restores it if the driver refuses the release.
template <typename Call>
CUresult TrackedRelease(Runtime* rt, AllocTable* table, std::uint64_t key, Call call) {
  AllocEntry entry{};
  bool tracked = table->Erase(key, &entry);
  CUresult r = call();
  if (!tracked) return r;
  if (r == CUDA_SUCCESS) {
    rt->region.Uncharge(entry.dev, entry.bytes, ChargeKind::kData);
    rt->exact_net[entry.dev].fetch_sub(static_cast<std::int64_t>(entry.bytes),
                                       std::memory_order_relaxed);
  } else {
    table->Insert(entry);
  }
  return r;
}

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_CHARGE_H_
