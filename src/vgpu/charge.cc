#include "vgpu/charge.h"

#include "vgpu/hooks.h"
#include "vgpu/log.h"
#include "vgpu/memory_math.h"

namespace hami::vgpu {

// Reserves `bytes` on container device `dev` before the real allocation. *charged tells the
// caller whether an uncharge/record is due afterwards. dev == kHostMemory charges nothing.
CUresult Precharge(Runtime* rt, int dev, std::uint64_t bytes, bool* charged) {
  *charged = false;
  if (dev == kHostMemory) return CUDA_SUCCESS;
  if (!rt->accounting) {
    return AnyMemoryLimit(rt) ? RefuseUnaccounted(dev, bytes,
                                                  rt->limits_broken ? "limits file unusable"
                                                                    : "shared region unusable")
                              : CUDA_SUCCESS;
  }
  std::uint64_t usage = 0;
  std::uint64_t limit = 0;
  ChargeResult result = rt->region.Charge(dev, bytes, ChargeKind::kData, &usage, &limit);
  if (result == ChargeResult::kOverLimit) {
    VGPU_ERROR("Device %d OOM %lu / %lu", dev, static_cast<unsigned long>(SatAdd(usage, bytes)),
               static_cast<unsigned long>(limit));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (result == ChargeResult::kUnaccounted) {
    return AnyMemoryLimit(rt) ? RefuseUnaccounted(dev, bytes, "device or slot not accounted")
                              : CUDA_SUCCESS;
  }
  *charged = true;
  return CUDA_SUCCESS;
}

// Remembers the charge of `key`; false (after logging) when the table cannot hold it, in which
// case the caller releases the allocation and refuses it.
bool Record(AllocTable* table, std::uint64_t key, int dev, std::uint64_t bytes, int kind,
            std::uint64_t aux) {
  if (table->Insert(AllocEntry{key, bytes, dev, kind, aux})) {
    Rt()->exact_net[dev].fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
    return true;
  }
  VGPU_ERROR("allocation 0x%llx cannot be tracked (table full or duplicate); refused",
             static_cast<unsigned long long>(key));
  return false;
}

namespace {

bool OwnedBy(const AllocEntry& entry, const void* ctx) {
  return entry.aux != 0 && entry.aux == *static_cast<const std::uint64_t*>(ctx);
}

void GiveBack(const AllocEntry& entry, void* arg) {
  auto* rt = static_cast<Runtime*>(arg);
  rt->region.Uncharge(entry.dev, entry.bytes, ChargeKind::kData);
  rt->exact_net[entry.dev].fetch_sub(static_cast<std::int64_t>(entry.bytes),
                                     std::memory_order_relaxed);
}

void GiveBackMeasured(const AllocEntry& entry, void* arg) {
  static_cast<Runtime*>(arg)->region.Uncharge(entry.dev, entry.bytes,
                                              static_cast<ChargeKind>(entry.kind));
}

}  // namespace

void ForgetContext(Runtime* rt, CUcontext ctx) {
  if (ctx == nullptr) return;
  const std::uint64_t key = ContextKey(ctx);
  rt->allocs.EraseWhere(OwnedBy, &key, GiveBack, rt);
  rt->measured.EraseWhere(OwnedBy, &key, GiveBackMeasured, rt);
  ForgetContextLimits(rt, ctx);
}

void FreeNow(std::uint64_t ptr) {
  auto free_fn = VGPU_REAL_CUDA(cuMemFree_v2);
  if (free_fn != nullptr) free_fn(ptr);
}

void FreeAsyncNow(std::uint64_t ptr, CUstream stream) {
  auto free_async = VGPU_REAL_CUDA(cuMemFreeAsync);
  if (free_async != nullptr) free_async(ptr, stream);
}

}  // namespace hami::vgpu
