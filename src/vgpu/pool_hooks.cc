// Hooks of the stream-ordered allocator: asynchronous allocations charged to the device they live
// on (the stream's or the pool's), and the memory a pool keeps after a free (up to its release
// threshold) kept charged until the pool reuses, trims or releases it. docs/vgpu.md "Memory".
#include <pthread.h>

#include <cstdint>
#include <type_traits>

#include "vgpu/charge.h"
#include "vgpu/hooks.h"
#include "vgpu/log.h"
#include "vgpu/runtime.h"

namespace hami::vgpu {
namespace {

// CUDA ordinal of the device a stream belongs to (its context's device); the current context's
// for the default streams (0, CU_STREAM_LEGACY = 1, CU_STREAM_PER_THREAD = 2).
CUdevice StreamCudaDevice(CUstream stream) {
  CUdevice dev = 0;
  auto get_dev = VGPU_REAL_CUDA(cuCtxGetDevice);
  if (reinterpret_cast<std::uintptr_t>(stream) > 2) {
    auto get_ctx = VGPU_REAL_CUDA(cuStreamGetCtx);
    auto push = VGPU_REAL_CUDA(cuCtxPushCurrent_v2);
    auto pop = VGPU_REAL_CUDA(cuCtxPopCurrent_v2);
    CUcontext ctx = nullptr;
    if (get_ctx != nullptr && push != nullptr && pop != nullptr && get_dev != nullptr &&
        get_ctx(stream, &ctx) == CUDA_SUCCESS && ctx != nullptr && push(ctx) == CUDA_SUCCESS) {
      bool ok = get_dev(&dev) == CUDA_SUCCESS;
      CUcontext popped = nullptr;
      pop(&popped);
      if (ok) return dev;
    }
  }
  if (get_dev == nullptr || get_dev(&dev) != CUDA_SUCCESS) dev = 0;
  return dev;
}

std::uint64_t PoolKey(CUmemoryPool pool) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(pool));
}

// A pool's device, as recorded when it was created or fetched (kHostMemory for a pool in host
// memory); -1 when never seen.
int PoolNvmlIndex(Runtime* rt, std::uint64_t pool) {
  AllocEntry entry{};
  pthread_mutex_lock(&rt->pool_mu);
  bool known = pool != 0 && rt->pools.Erase(pool, &entry);
  if (known) rt->pools.Insert(entry);
  pthread_mutex_unlock(&rt->pool_mu);
  return known ? entry.dev : -1;
}

// Records (dev >= 0, or kHostMemory for a pool in host memory) or forgets (dev == -1) a pool; a
// recorded release threshold is kept.
void RememberPool(Runtime* rt, std::uint64_t pool, int dev) {
  pthread_mutex_lock(&rt->pool_mu);
  AllocEntry entry{pool, 0, dev, 0};
  rt->pools.Erase(pool, &entry);
  entry.dev = dev;
  if (dev >= 0 || dev == kHostMemory) rt->pools.Insert(entry);
  pthread_mutex_unlock(&rt->pool_mu);
}

// Pools keep freed memory up to their release threshold (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), and
// the driver still holds it: that part of a free stays charged to the pool ("kept") until the
// pool reuses it, is trimmed, lowers its threshold or is destroyed.
void ChargeKept(Runtime* rt, std::uint64_t pool, int dev, std::uint64_t bytes) {
  if (bytes == 0 || dev < 0) return;
  rt->region.Charge(dev, bytes, ChargeKind::kData, nullptr, nullptr, /*enforce=*/false);
  rt->exact_net[dev].fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  pthread_mutex_lock(&rt->pool_mu);
  AllocEntry kept{pool, 0, dev, 0};
  rt->pool_kept.Erase(pool, &kept);
  kept.bytes += bytes;
  rt->pool_kept.Insert(kept);
  pthread_mutex_unlock(&rt->pool_mu);
}

// Gives back the charge of what `pool` keeps beyond `keep_at_most` bytes, or takes up to
// `reuse` bytes for an allocation that reuses them (returns how many).
std::uint64_t ReleaseKept(Runtime* rt, std::uint64_t pool, std::uint64_t keep_at_most,
                          std::uint64_t reuse = 0) {
  pthread_mutex_lock(&rt->pool_mu);
  AllocEntry kept{};
  std::uint64_t taken = 0;
  if (rt->pool_kept.Erase(pool, &kept)) {
    if (kept.bytes > keep_at_most) taken = kept.bytes - keep_at_most;
    if (reuse > 0) taken = kept.bytes < reuse ? kept.bytes : reuse;
    kept.bytes -= taken;
    if (kept.bytes > 0) rt->pool_kept.Insert(kept);
  }
  pthread_mutex_unlock(&rt->pool_mu);
  if (taken > 0) {
    rt->region.Uncharge(kept.dev, taken, ChargeKind::kData);
    rt->exact_net[kept.dev].fetch_sub(static_cast<std::int64_t>(taken), std::memory_order_relaxed);
  }
  return taken;
}

// After `bytes` were freed into `pool`: the part it keeps (up to its threshold) stays charged.
void KeepFreed(Runtime* rt, std::uint64_t pool, int dev, std::uint64_t bytes) {
  pthread_mutex_lock(&rt->pool_mu);
  AllocEntry info{}, kept{};
  std::uint64_t threshold = 0, held = 0;
  if (rt->pools.Erase(pool, &info)) {
    threshold = info.bytes;
    rt->pools.Insert(info);
  }
  if (rt->pool_kept.Erase(pool, &kept)) {
    held = kept.bytes;
    rt->pool_kept.Insert(kept);
  }
  pthread_mutex_unlock(&rt->pool_mu);
  std::uint64_t room = threshold > held ? threshold - held : 0;
  ChargeKept(rt, pool, dev, room < bytes ? room : bytes);
}

// An asynchronous allocation from `pool` on container device `dev`: memory the pool keeps is
// reused first (its kept charge moves to the allocation), the rest is charged as usual.
template <typename Call>
CUresult PoolAlloc(Runtime* rt, std::uint64_t pool, int dev, CUdeviceptr* dptr, size_t bytes,
                   CUstream stream, Call call) {
  std::uint64_t reused = pool != 0 ? ReleaseKept(rt, pool, 0, bytes) : 0;
  CUresult r = ChargedAlloc(
      rt, &rt->allocs, dev, bytes, kAllocAsync,
      [&](std::uint64_t* key) {
        CUresult rc = call();
        if (rc == CUDA_SUCCESS) *key = *dptr;
        return rc;
      },
      [&](std::uint64_t key) { FreeAsyncNow(key, stream); });
  if (r != CUDA_SUCCESS) {
    ChargeKept(rt, pool, dev, reused);
  } else if (pool != 0) {
    rt->async_pool.Insert(AllocEntry{*dptr, pool, dev, 0});
  }
  return r;
}

// Each hook passes its table index, not the pointer: the table is read after Rt() has filled
// it, so an asynchronous call that is the process's first driver call is served.
CUresult AllocAsyncCommon(CudaFn fn, CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  Runtime* rt = Rt();
  auto real = reinterpret_cast<cuMemAllocAsync_fn>(g_cuda_real[fn]);
  if (real == nullptr) return kNoDriver;
  // Charged to the stream's device, where the driver allocates it (from that device's current
  // pool), not the current context's.
  CUdevice cuda_dev = StreamCudaDevice(stream);
  CUmemoryPool pool = nullptr;
  auto get_pool = VGPU_REAL_CUDA(cuDeviceGetMemPool);
  if (get_pool == nullptr || get_pool(&pool, cuda_dev) != CUDA_SUCCESS) pool = nullptr;
  return PoolAlloc(rt, PoolKey(pool), NvmlIndexOf(rt, cuda_dev), dptr, bytes, stream,
                   [&] { return real(dptr, bytes, stream); });
}

CUresult AllocFromPoolCommon(CudaFn fn, CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                             CUstream stream) {
  Runtime* rt = Rt();
  auto real = reinterpret_cast<cuMemAllocFromPoolAsync_fn>(g_cuda_real[fn]);
  if (real == nullptr) return kNoDriver;
  int dev = PoolNvmlIndex(rt, PoolKey(pool));
  if (dev == -1) dev = NvmlIndexOf(rt, StreamCudaDevice(stream));
  return PoolAlloc(rt, PoolKey(pool), dev, dptr, bytes, stream,
                   [&] { return real(dptr, bytes, pool, stream); });
}

// cuDeviceGetDefaultMemPool and cuDeviceGetMemPool (`fn`, the same signature): the pool handed
// out is remembered on `dev`'s NVML device.
static_assert(std::is_same_v<cuDeviceGetDefaultMemPool_fn, cuDeviceGetMemPool_fn>);
CUresult GetDevicePool(CudaFn fn, CUmemoryPool* pool, CUdevice dev) {
  Runtime* rt = Rt();
  auto real = reinterpret_cast<cuDeviceGetMemPool_fn>(g_cuda_real[fn]);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(pool, dev);
  if (r == CUDA_SUCCESS && pool != nullptr) RememberPool(rt, PoolKey(*pool), NvmlIndexOf(rt, dev));
  return r;
}

// Frees an asynchronous allocation; what its pool keeps of it stays charged.
CUresult FreeAsyncCommon(CudaFn fn, CUdeviceptr dptr, CUstream stream) {
  Runtime* rt = Rt();
  auto real = reinterpret_cast<cuMemFreeAsync_fn>(g_cuda_real[fn]);
  if (real == nullptr) return kNoDriver;
  AllocEntry pooled{};
  bool in_pool = rt->async_pool.size() > 0 && rt->async_pool.Erase(dptr, &pooled);
  AllocEntry entry{};
  bool tracked = rt->allocs.Erase(dptr, &entry);
  CUresult r = real(dptr, stream);
  if (r != CUDA_SUCCESS) {
    if (tracked) rt->allocs.Insert(entry);
    if (in_pool) rt->async_pool.Insert(pooled);
    return r;
  }
  if (!tracked) return r;
  if (in_pool) {
    PoolPointerFreed(rt, pooled, entry);
  } else {
    rt->region.Uncharge(entry.dev, entry.bytes, ChargeKind::kData);
    rt->exact_net[entry.dev].fetch_sub(static_cast<std::int64_t>(entry.bytes),
                                       std::memory_order_relaxed);
  }
  return r;
}

}  // namespace

void PoolPointerFreed(Runtime* rt, const AllocEntry& pooled, const AllocEntry& entry) {
  rt->region.Uncharge(entry.dev, entry.bytes, ChargeKind::kData);
  rt->exact_net[entry.dev].fetch_sub(static_cast<std::int64_t>(entry.bytes),
                                     std::memory_order_relaxed);
  KeepFreed(rt, pooled.bytes, entry.dev, entry.bytes);
}

extern "C" {

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return AllocAsyncCommon(k_cuMemAllocAsync, dptr, bytes, stream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return AllocAsyncCommon(k_cuMemAllocAsync_ptsz, dptr, bytes, stream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                 CUstream stream) {
  return AllocFromPoolCommon(k_cuMemAllocFromPoolAsync, dptr, bytes, pool, stream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream) {
  return AllocFromPoolCommon(k_cuMemAllocFromPoolAsync_ptsz, dptr, bytes, pool, stream);
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemPoolCreate);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(pool, props);
  // A pool located in host memory (CU_MEM_LOCATION_TYPE_HOST, HOST_NUMA, ...) holds no device
  // memory: its allocations are not charged.
  if (r == CUDA_SUCCESS && pool != nullptr && props != nullptr) {
    RememberPool(rt, PoolKey(*pool),
                 props->location.type == CU_MEM_LOCATION_TYPE_DEVICE
                     ? NvmlIndexOf(rt, props->location.id)
                     : kHostMemory);
  }
  return r;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemPoolDestroy);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(pool);
  if (r == CUDA_SUCCESS) {
    ReleaseKept(rt, PoolKey(pool), 0);
    RememberPool(rt, PoolKey(pool), -1);
  }
  return r;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void* value) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemPoolSetAttribute);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(pool, attr, value);
  if (r == CUDA_SUCCESS && attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD && value != nullptr) {
    std::uint64_t threshold = *static_cast<const cuuint64_t*>(value);
    pthread_mutex_lock(&rt->pool_mu);
    AllocEntry entry{PoolKey(pool), 0, -1, 0};
    rt->pools.Erase(entry.key, &entry);
    entry.bytes = threshold;
    rt->pools.Insert(entry);
    pthread_mutex_unlock(&rt->pool_mu);
    ReleaseKept(rt, PoolKey(pool), threshold);
  }
  return r;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemPoolTrimTo);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(pool, keep);
  if (r == CUDA_SUCCESS) ReleaseKept(rt, PoolKey(pool), keep);
  return r;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  return GetDevicePool(k_cuDeviceGetDefaultMemPool, pool, dev);
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  return GetDevicePool(k_cuDeviceGetMemPool, pool, dev);
}

// The pools of a location (CUDA 13): remembered on the location's device, or as host memory.
CUresult cuMemGetDefaultMemPool(CUmemoryPool* pool, CUmemLocation* location, int type) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemGetDefaultMemPool);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(pool, location, type);
  if (r == CUDA_SUCCESS && pool != nullptr && location != nullptr) {
    RememberPool(rt, PoolKey(*pool),
                 location->type == CU_MEM_LOCATION_TYPE_DEVICE ? NvmlIndexOf(rt, location->id)
                                                               : kHostMemory);
  }
  return r;
}

CUresult cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, int type) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemGetMemPool);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(pool, location, type);
  if (r == CUDA_SUCCESS && pool != nullptr && location != nullptr) {
    RememberPool(rt, PoolKey(*pool),
                 location->type == CU_MEM_LOCATION_TYPE_DEVICE ? NvmlIndexOf(rt, location->id)
                                                               : kHostMemory);
  }
  return r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  return FreeAsyncCommon(k_cuMemFreeAsync, dptr, stream);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  return FreeAsyncCommon(k_cuMemFreeAsync_ptsz, dptr, stream);
}

}  // extern "C"
}  // namespace hami::vgpu
