// CUDA driver API hooks: memory accounting, virtualised memory queries, launch throttling and
// the cuGetProcAddress resolver. Every hook calls exactly the real entry point it replaces (a
// _ptsz hook calls the real _ptsz), so stream semantics are preserved.
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vgpu/charge.h"
#include "vgpu/hooks.h"
#include "vgpu/log.h"
#include "vgpu/memory_math.h"
#include "vgpu/runtime.h"

namespace hami::vgpu {
namespace {

// Graph launches carry no grid; a constant cost is fine because the limiter calibrates its rate
// against measured utilisation (only consistency between launches matters).
constexpr std::uint64_t kGraphLaunchCost = 1 << 16;
constexpr std::uint64_t kMaxContextCharge = 2ULL << 30;

std::uint64_t Threads(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                      unsigned bz) {
  return SatMul(SatMul(SatMul(gx, gy), gz), SatMul(SatMul(bx, by), bz));
}

std::uint64_t NvmlUsedBytes(int nvml_index) {
  auto by_index = VGPU_REAL_NVML(nvmlDeviceGetHandleByIndex_v2);
  auto info = VGPU_REAL_NVML(nvmlDeviceGetMemoryInfo);
  nvmlDevice_t dev = nullptr;
  nvmlMemory_t mem{};
  if (by_index == nullptr || info == nullptr ||
      by_index(static_cast<unsigned>(nvml_index), &dev) != NVML_SUCCESS ||
      info(dev, &mem) != NVML_SUCCESS) {
    return 0;
  }
  return mem.used;
}

// Host PIDs of the processes holding a context on container device `nvml_index`, sorted.
struct PidSet {
  static constexpr unsigned kMax = 256;
  unsigned int pids[kMax];
  unsigned int count = 0;
  bool ok = false;
};

PidSet ComputePids(int nvml_index) {
  PidSet set;
  auto by_index = VGPU_REAL_NVML(nvmlDeviceGetHandleByIndex_v2);
  auto list = VGPU_REAL_NVML(nvmlDeviceGetComputeRunningProcesses);
  nvmlDevice_t dev = nullptr;
  nvmlProcessInfo_v1_t infos[PidSet::kMax];
  unsigned int count = PidSet::kMax;
  if (by_index == nullptr || list == nullptr ||
      by_index(static_cast<unsigned>(nvml_index), &dev) != NVML_SUCCESS ||
      list(dev, &count, infos) != NVML_SUCCESS) {
    return set;
  }
  set.ok = true;
  for (unsigned int i = 0; i < count && i < PidSet::kMax; ++i) set.pids[set.count++] = infos[i].pid;
  return set;
}

// The process that appeared between two snapshots taken around our context creation is us, seen
// from the host (HAMi-core's method). Ambiguous or no change: unknown (0).
std::int32_t NewPid(const PidSet& before, const PidSet& after) {
  if (!before.ok || !after.ok) return 0;
  std::int32_t found = 0;
  for (unsigned int i = 0; i < after.count; ++i) {
    bool seen = false;
    for (unsigned int j = 0; j < before.count && !seen; ++j) seen = before.pids[j] == after.pids[i];
    if (seen) continue;
    if (found != 0) return 0;
    found = static_cast<std::int32_t>(after.pids[i]);
  }
  return found;
}

// A BSD lock on the region file (independent of the POSIX record lock of its creation; released
// by the kernel when a holder dies). Waits at most kDiscoveryWaitMs, then discovers unlocked.
constexpr int kDiscoveryWaitMs = 10000;

int LockDiscovery(Runtime* rt) {
  if (!rt->accounting) return -1;
  int fd = open(rt->config.cache_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; ++waited) {
    if (errno != EWOULDBLOCK || waited >= kDiscoveryWaitMs) {
      VGPU_WARN("host PID discovery not serialised (%s)", std::strerror(errno));
      close(fd);
      return -1;
    }
    timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
  return fd;
}

void UnlockDiscovery(int fd) {
  if (fd < 0) return;
  flock(fd, LOCK_UN);
  close(fd);
}

// When the driver's resolver hands out a pointer that is not one of its exported entry points
// (an internal alias), the hook is chosen by name: which ABI a (symbol, cudaVersion, flags)
// request means is fixed by the driver API's versioning. Only the counted and throttled
// families are listed; anything else stays the driver's.
struct ProcRule {
  const char* symbol;
  int min_version;  // the versioned ABI applies from this cudaVersion on
  CudaFn legacy;    // chosen without the per-thread-default-stream flag
  CudaFn ptsz;      // chosen with it
};
constexpr ProcRule kProcRules[] = {
    {"cuMemAlloc", 3020, k_cuMemAlloc_v2, k_cuMemAlloc_v2},
    {"cuMemFree", 3020, k_cuMemFree_v2, k_cuMemFree_v2},
    {"cuMemAllocPitch", 3020, k_cuMemAllocPitch_v2, k_cuMemAllocPitch_v2},
    {"cuMemGetInfo", 3020, k_cuMemGetInfo_v2, k_cuMemGetInfo_v2},
    {"cuDeviceTotalMem", 3020, k_cuDeviceTotalMem_v2, k_cuDeviceTotalMem_v2},
    {"cuMemAllocManaged", 0, k_cuMemAllocManaged, k_cuMemAllocManaged},
    {"cuMemCreate", 0, k_cuMemCreate, k_cuMemCreate},
    {"cuMemRelease", 0, k_cuMemRelease, k_cuMemRelease},
    {"cuMemAllocAsync", 0, k_cuMemAllocAsync, k_cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 0, k_cuMemAllocFromPoolAsync, k_cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFreeAsync", 0, k_cuMemFreeAsync, k_cuMemFreeAsync_ptsz},
    {"cuDevicePrimaryCtxRetain", 0, k_cuDevicePrimaryCtxRetain, k_cuDevicePrimaryCtxRetain},
    {"cuDevicePrimaryCtxRelease", 11000, k_cuDevicePrimaryCtxRelease_v2,
     k_cuDevicePrimaryCtxRelease_v2},
    {"cuDevicePrimaryCtxReset", 11000, k_cuDevicePrimaryCtxReset_v2, k_cuDevicePrimaryCtxReset_v2},
    {"cuLaunchKernel", 0, k_cuLaunchKernel, k_cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", 0, k_cuLaunchKernelEx, k_cuLaunchKernelEx_ptsz},
    {"cuLaunchCooperativeKernel", 0, k_cuLaunchCooperativeKernel, k_cuLaunchCooperativeKernel_ptsz},
    {"cuGraphLaunch", 0, k_cuGraphLaunch, k_cuGraphLaunch_ptsz},
};

void* HookByName(const char* symbol, int cuda_version, cuuint64_t flags) {
  if (symbol == nullptr) return nullptr;
  for (const ProcRule& rule : kProcRules) {
    if (std::strcmp(rule.symbol, symbol) != 0 || cuda_version < rule.min_version) continue;
    bool ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    CudaFn fn = ptsz ? rule.ptsz : rule.legacy;
    return g_cuda_real[fn] != nullptr ? kCudaHooks[fn] : nullptr;
  }
  return nullptr;
}

CUresult GetProcAddressCommon(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                              CUresult r) {
  if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) {
    void* hook = InterceptResolved(nullptr, *pfn);
    if (hook == *pfn) {
      void* by_name = HookByName(symbol, cuda_version, flags);
      if (by_name != nullptr) hook = by_name;
    }
    *pfn = hook;
    VGPU_DEBUG("cuGetProcAddress %s -> %p", symbol ? symbol : "(null)", *pfn);
  }
  return r;
}

void UnchargeContext(Runtime* rt, int idx, bool reset) {
  pthread_mutex_lock(&rt->ctx_mu);
  if (rt->ctx_refs[idx] > 0 && (reset || --rt->ctx_refs[idx] == 0)) {
    rt->ctx_refs[idx] = 0;
    rt->region.Uncharge(idx, rt->ctx_charge[idx], ChargeKind::kContext);
    rt->ctx_charge[idx] = 0;
  }
  pthread_mutex_unlock(&rt->ctx_mu);
}

std::uint64_t LegacyGridCost(int grid_width, int grid_height) {
  std::uint64_t w = grid_width > 0 ? static_cast<std::uint64_t>(grid_width) : 1;
  std::uint64_t h = grid_height > 0 ? static_cast<std::uint64_t>(grid_height) : 1;
  return SatMul(SatMul(w, h), 256);
}

std::uint64_t MultiDeviceCost(const CUDA_LAUNCH_PARAMS_st* params, unsigned int num_devices) {
  const auto* p = reinterpret_cast<const CudaLaunchParams*>(params);
  std::uint64_t cost = 0;
  for (unsigned int i = 0; p != nullptr && i < num_devices && i < 64; ++i) {
    cost = SatAdd(cost, Threads(p[i].gridDimX, p[i].gridDimY, p[i].gridDimZ, p[i].blockDimX,
                                p[i].blockDimY, p[i].blockDimZ));
  }
  return cost == 0 ? 1 : cost;
}

std::uint64_t ConfigThreads(const CUlaunchConfig* c) {
  if (c == nullptr) return 1;
  return Threads(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ);
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuInit);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(flags);
  if (r == CUDA_SUCCESS) EnsureNvml(rt);
  return r;
}

CUresult cuDriverGetVersion(int* version) {
  Rt();
  auto real = VGPU_REAL_CUDA(cuDriverGetVersion);
  return real ? real(version) : kNoDriver;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  Rt();
  auto real = VGPU_REAL_CUDA(cuGetProcAddress);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return GetProcAddressCommon(symbol, pfn, cuda_version, flags,
                              real(symbol, pfn, cuda_version, flags));
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  Rt();
  auto real = VGPU_REAL_CUDA(cuGetProcAddress_v2);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return GetProcAddressCommon(symbol, pfn, cuda_version, flags,
                              real(symbol, pfn, cuda_version, flags, status));
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemAlloc_v2);
  if (real == nullptr) return kNoDriver;
  return ChargedAlloc(
      rt, &rt->allocs, CurrentNvmlIndex(rt), bytes, kAllocPlain,
      [&](std::uint64_t* key) {
        CUresult r = real(dptr, bytes);
        if (r == CUDA_SUCCESS) *key = *dptr;
        return r;
      },
      FreeNow);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemFree_v2);
  if (real == nullptr) return kNoDriver;
  AllocEntry pooled{};
  if (rt->async_pool.size() > 0) rt->async_pool.Erase(dptr, &pooled);
  return TrackedRelease(rt, &rt->allocs, dptr, [&] { return real(dptr); });
}

// The 32-bit entry points of CUDA < 3.2 (reachable through dlsym or cuGetProcAddress with an
// old cudaVersion): charged like their _v2 successors.
CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytes) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemAlloc);
  if (real == nullptr) return kNoDriver;
  return ChargedAlloc(
      rt, &rt->allocs, CurrentNvmlIndex(rt), bytes, kAllocPlain,
      [&](std::uint64_t* key) {
        CUresult r = real(dptr, bytes);
        if (r == CUDA_SUCCESS) *key = *dptr;
        return r;
      },
      [](std::uint64_t key) {
        auto free_fn = VGPU_REAL_CUDA(cuMemFree);
        if (free_fn != nullptr) free_fn(static_cast<unsigned int>(key));
      });
}

CUresult cuMemFree(unsigned int dptr) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemFree);
  if (real == nullptr) return kNoDriver;
  return TrackedRelease(rt, &rt->allocs, dptr, [&] { return real(dptr); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int elem) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemAllocPitch_v2);
  if (real == nullptr) return kNoDriver;
  int dev = CurrentNvmlIndex(rt);
  std::uint64_t estimate = SatMul(width, height);
  bool charged = false;
  CUresult r = Precharge(rt, dev, estimate, &charged);
  if (r != CUDA_SUCCESS) return r;
  r = real(dptr, pitch, width, height, elem);
  if (!charged) return r;
  if (r != CUDA_SUCCESS) {
    rt->region.Uncharge(dev, estimate, ChargeKind::kData);
    return r;
  }
  // Charge what the driver really reserved (the pitch includes row alignment).
  std::uint64_t actual = SatMul(*pitch, height);
  if (actual > estimate) {
    bool extra = false;
    if (Precharge(rt, dev, actual - estimate, &extra) != CUDA_SUCCESS) {
      FreeNow(*dptr);
      rt->region.Uncharge(dev, estimate, ChargeKind::kData);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!extra) actual = estimate;
  } else {
    actual = estimate;
  }
  if (!Record(&rt->allocs, *dptr, dev, actual, kAllocPlain)) {
    FreeNow(*dptr);
    rt->region.Uncharge(dev, actual, ChargeKind::kData);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemAllocManaged);
  if (real == nullptr) return kNoDriver;
  return ChargedAlloc(
      rt, &rt->allocs, CurrentNvmlIndex(rt), bytes, kAllocManaged,
      [&](std::uint64_t* key) {
        CUresult r = real(dptr, bytes, flags);
        if (r == CUDA_SUCCESS) *key = *dptr;
        return r;
      },
      FreeNow);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemCreate);
  if (real == nullptr) return kNoDriver;
  // The device comes from the allocation's location, never from the (maybe absent) context.
  int dev = kHostMemory;
  if (prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    dev = NvmlIndexOf(rt, prop->location.id);
  }
  return ChargedAlloc(
      rt, &rt->vmm, dev, size, kAllocVmm,
      [&](std::uint64_t* key) {
        CUresult r = real(handle, size, prop, flags);
        if (r == CUDA_SUCCESS) *key = *handle;
        return r;
      },
      [](std::uint64_t key) {
        auto release = VGPU_REAL_CUDA(cuMemRelease);
        if (release != nullptr) release(key);
      });
}

// The driver frees a released handle's memory only at its last unmap, so the charge stays until
// then (a handle released while mapped is moved to vmm_released).
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemRelease);
  if (real == nullptr) return kNoDriver;
  pthread_mutex_lock(&rt->vmm_mu);
  AllocEntry maps{};
  bool mapped = rt->vmm_map_counts.Erase(handle, &maps);
  if (mapped) rt->vmm_map_counts.Insert(maps);
  CUresult r;
  if (!mapped) {
    r = TrackedRelease(rt, &rt->vmm, handle, [&] { return real(handle); });
  } else {
    r = real(handle);
    AllocEntry entry{};
    if (r == CUDA_SUCCESS && rt->vmm.Erase(handle, &entry)) rt->vmm_released.Insert(entry);
  }
  pthread_mutex_unlock(&rt->vmm_mu);
  return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemMap);
  if (real == nullptr) return kNoDriver;
  pthread_mutex_lock(&rt->vmm_mu);
  CUresult r = real(ptr, size, offset, handle, flags);
  if (r == CUDA_SUCCESS) {
    AllocEntry count{handle, 0, 0, 0};
    rt->vmm_map_counts.Erase(handle, &count);
    count.key = handle;
    ++count.bytes;
    rt->vmm_map_counts.Insert(count);
    rt->vmm_maps.Insert(AllocEntry{ptr, handle, 0, 0});
  }
  pthread_mutex_unlock(&rt->vmm_mu);
  return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemUnmap);
  if (real == nullptr) return kNoDriver;
  pthread_mutex_lock(&rt->vmm_mu);
  CUresult r = real(ptr, size);
  AllocEntry map{};
  if (r == CUDA_SUCCESS && rt->vmm_maps.Erase(ptr, &map)) {
    const std::uint64_t handle = map.bytes;
    AllocEntry count{};
    if (rt->vmm_map_counts.Erase(handle, &count) && --count.bytes > 0) {
      rt->vmm_map_counts.Insert(count);
    } else {
      AllocEntry released{};
      if (rt->vmm_released.Erase(handle, &released)) {
        rt->region.Uncharge(released.dev, released.bytes, ChargeKind::kData);
        rt->exact_net[released.dev].fetch_sub(static_cast<std::int64_t>(released.bytes),
                                              std::memory_order_relaxed);
      }
    }
  }
  pthread_mutex_unlock(&rt->vmm_mu);
  return r;
}

// Memory allocated by another API (Vulkan, OpenGL, OpenCL) and imported into CUDA is charged at
// its imported size on the current device while the import lives.
CUresult cuImportExternalMemory(CUexternalMemory* ext, const CudaExternalMemoryHandleDesc* desc) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuImportExternalMemory);
  if (real == nullptr) return kNoDriver;
  if (desc == nullptr || ext == nullptr) return real(ext, desc);
  return ChargedAlloc(
      rt, &rt->vmm, CurrentNvmlIndex(rt), desc->size, kAllocVmm,
      [&](std::uint64_t* key) {
        CUresult r = real(ext, desc);
        if (r == CUDA_SUCCESS) *key = reinterpret_cast<std::uintptr_t>(*ext);
        return r;
      },
      [](std::uint64_t key) {
        auto destroy = VGPU_REAL_CUDA(cuDestroyExternalMemory);
        if (destroy != nullptr) destroy(reinterpret_cast<CUexternalMemory>(key));
      });
}

CUresult cuDestroyExternalMemory(CUexternalMemory ext) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuDestroyExternalMemory);
  if (real == nullptr) return kNoDriver;
  return TrackedRelease(rt, &rt->vmm, reinterpret_cast<std::uintptr_t>(ext),
                        [&] { return real(ext); });
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemGetInfo_v2);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS || !rt->accounting || free_bytes == nullptr || total_bytes == nullptr) {
    return r;
  }
  int dev = CurrentNvmlIndex(rt);
  if (dev < 0) return r;
  MemoryView physical{*total_bytes, *free_bytes, *total_bytes - *free_bytes};
  MemoryView v = VirtualMemory(rt->region.Limit(dev), rt->region.Usage(dev), physical);
  *free_bytes = v.free;
  *total_bytes = v.total;
  return r;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuDeviceTotalMem_v2);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(bytes, dev);
  if (r != CUDA_SUCCESS || bytes == nullptr || !rt->accounting) return r;
  std::uint64_t limit = rt->region.Limit(NvmlIndexOf(rt, dev));
  if (limit != 0 && limit < *bytes) *bytes = limit;
  return r;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuDevicePrimaryCtxRetain);
  if (real == nullptr) return kNoDriver;
  int idx = rt->accounting ? NvmlIndexOf(rt, dev) : -1;
  if (idx < 0) return real(ctx, dev);
  // The context's own footprint is estimated once per device per process as the change in the
  // device's used memory (NVML) around the first retain.
  pthread_mutex_lock(&rt->ctx_mu);
  bool first = rt->ctx_refs[idx] == 0;
  // Host-PID discovery is serialised across the container's processes: two contexts created at
  // once would each see two new processes and both stay unknown.
  int discovery_lock = first ? LockDiscovery(rt) : -1;
  std::uint64_t before = first ? NvmlUsedBytes(idx) : 0;
  PidSet pids_before = first ? ComputePids(idx) : PidSet{};
  CUresult r = real(ctx, dev);
  if (r == CUDA_SUCCESS && rt->ctx_refs[idx]++ == 0) {
    std::int32_t hostpid = NewPid(pids_before, ComputePids(idx));
    if (hostpid != 0) rt->region.SetOwnHostPid(hostpid);
    std::uint64_t after = NvmlUsedBytes(idx);
    std::uint64_t charge = after > before ? after - before : 0;
    if (charge > kMaxContextCharge) charge = kMaxContextCharge;
    rt->ctx_charge[idx] = charge;
    if (charge > 0) {
      rt->region.Charge(idx, charge, ChargeKind::kContext, nullptr, nullptr, /*enforce=*/false);
    }
  }
  UnlockDiscovery(discovery_lock);
  pthread_mutex_unlock(&rt->ctx_mu);
  return r;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuDevicePrimaryCtxRelease_v2);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(dev);
  int idx = rt->accounting ? NvmlIndexOf(rt, dev) : -1;
  if (r == CUDA_SUCCESS && idx >= 0) UnchargeContext(rt, idx, false);
  return r;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuDevicePrimaryCtxReset_v2);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(dev);
  int idx = rt->accounting ? NvmlIndexOf(rt, dev) : -1;
  if (r == CUDA_SUCCESS && idx >= 0) UnchargeContext(rt, idx, true);
  return r;
}

// `stream` is the launch's stream (null for the legacy entries without one): the kernel runs on
// its context's device, which need not be the current context's.
#define VGPU_LAUNCH_BODY_ON(name, cost, stream, ...) \
  auto real = VGPU_REAL_CUDA(name);                  \
  if (real == nullptr) return kNoDriver;             \
  BeforeLaunch(cost, stream);                        \
  return real(__VA_ARGS__)
#define VGPU_LAUNCH_BODY(name, cost, ...) VGPU_LAUNCH_BODY_ON(name, cost, nullptr, __VA_ARGS__)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream stream, void** params, void** extra) {
  VGPU_LAUNCH_BODY_ON(cuLaunchKernel, Threads(gx, gy, gz, bx, by, bz), stream, f, gx, gy, gz, bx,
                      by, bz, shmem, stream, params, extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                             CUstream stream, void** params, void** extra) {
  VGPU_LAUNCH_BODY_ON(cuLaunchKernel_ptsz, Threads(gx, gy, gz, bx, by, bz), stream, f, gx, gy, gz,
                      bx, by, bz, shmem, stream, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  VGPU_LAUNCH_BODY_ON(cuLaunchKernelEx, ConfigThreads(config),
                      config != nullptr ? config->hStream : nullptr, config, f, params, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  VGPU_LAUNCH_BODY_ON(cuLaunchKernelEx_ptsz, ConfigThreads(config),
                      config != nullptr ? config->hStream : nullptr, config, f, params, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shmem, CUstream stream, void** params) {
  VGPU_LAUNCH_BODY_ON(cuLaunchCooperativeKernel, Threads(gx, gy, gz, bx, by, bz), stream, f, gx, gy,
                      gz, bx, by, bz, shmem, stream, params);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shmem, CUstream stream,
                                        void** params) {
  VGPU_LAUNCH_BODY_ON(cuLaunchCooperativeKernel_ptsz, Threads(gx, gy, gz, bx, by, bz), stream, f,
                      gx, gy, gz, bx, by, bz, shmem, stream, params);
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  VGPU_LAUNCH_BODY_ON(cuGraphLaunch, kGraphLaunchCost, stream, exec, stream);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  VGPU_LAUNCH_BODY_ON(cuGraphLaunch_ptsz, kGraphLaunchCost, stream, exec, stream);
}

// The pre-CUDA 4.0 launch API: the block shape was set separately (cuFuncSetBlockShape) and is
// not visible here, so a grid costs kLegacyBlockThreads per block. Only consistency between
// launches matters to the calibrated limiter.
constexpr std::uint64_t kLegacyBlockThreads = 256;

CUresult cuLaunch(CUfunction f) { VGPU_LAUNCH_BODY(cuLaunch, kLegacyBlockThreads, f); }

CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  VGPU_LAUNCH_BODY(cuLaunchGrid, LegacyGridCost(grid_width, grid_height), f, grid_width,
                   grid_height);
}

CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream stream) {
  VGPU_LAUNCH_BODY_ON(cuLaunchGridAsync, LegacyGridCost(grid_width, grid_height), stream, f,
                      grid_width, grid_height, stream);
}

CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS_st* params,
                                              unsigned int num_devices, unsigned int flags) {
  VGPU_LAUNCH_BODY(cuLaunchCooperativeKernelMultiDevice, MultiDeviceCost(params, num_devices),
                   params, num_devices, flags);
}

#undef VGPU_LAUNCH_BODY
#undef VGPU_LAUNCH_BODY_ON

}  // extern "C"
}  // namespace hami::vgpu
