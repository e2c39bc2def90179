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
// request means is fixed by the driver API's versioning (cudaTypedefs.h: PFN_<name>_v<version>).
// Every hooked family is covered: the candidates are the hooks named <symbol>, <symbol>_v<N>,
// <symbol>_ptsz and <symbol>_ptds, each applying from the cudaVersion listed here (0 when only
// one ABI exists).
struct HookVersion {
  const char* name;
  int since;
  int until = 1 << 30;  // the ABI applies below this cudaVersion
};
constexpr HookVersion kHookVersions[] = {
    {"cuMemAlloc", 2000},
    {"cuMemAlloc_v2", 3020},
    {"cuMemFree", 2000},
    {"cuMemFree_v2", 3020},
    {"cuMemAllocPitch", 2000},
    {"cuMemAllocPitch_v2", 3020},
    {"cuMemGetInfo_v2", 3020},
    {"cuDeviceTotalMem_v2", 3020},
    {"cuArrayCreate", 2000},
    {"cuArrayCreate_v2", 3020},
    {"cuArray3DCreate", 2000},
    {"cuArray3DCreate_v2", 3020},
    {"cuCtxCreate", 2000},
    {"cuCtxCreate_v2", 3020},
    {"cuCtxCreate_v3", 11040},
    {"cuCtxCreate_v4", 12050},
    {"cuCtxDestroy", 2000},
    {"cuCtxDestroy_v2", 4000},
    {"cuDevicePrimaryCtxRelease", 7000},
    {"cuDevicePrimaryCtxRelease_v2", 11000},
    {"cuDevicePrimaryCtxReset", 7000},
    {"cuDevicePrimaryCtxReset_v2", 11000},
    {"cuGetProcAddress", 11030},
    {"cuGetProcAddress_v2", 12050},
    {"cuGraphAddNode", 12030},
    {"cuGraphAddNode_v2", 12040},
    {"cuGraphInstantiate", 10000, 11000},
    {"cuGraphInstantiate_v2", 11000, 12000},
};

// The cudaVersion hook `name` applies from; -1 when it does not apply to `cuda_version`.
int HookSince(const char* name, int cuda_version) {
  for (const HookVersion& v : kHookVersions) {
    if (std::strcmp(v.name, name) != 0) continue;
    return cuda_version >= v.since && cuda_version < v.until ? v.since : -1;
  }
  return 0;
}

// Names whose ABI moved to another entry point (cuda.h's #define): from `since` on, a request
// for `symbol` means `target`.
struct Renamed {
  const char* symbol;
  int since;
  const char* target;
};
constexpr Renamed kRenamed[] = {
    {"cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags"},
};

// True when hook `name` is `symbol` itself or one of its versioned / per-thread variants;
// *ptsz tells which.
bool IsVariant(const char* name, const char* symbol, bool* ptsz) {
  std::size_t n = std::strlen(symbol);
  if (std::strncmp(name, symbol, n) != 0) return false;
  const char* rest = name + n;
  *ptsz = false;
  if (rest[0] == '_' && rest[1] == 'v' && rest[2] >= '0' && rest[2] <= '9') {
    rest += 2;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  if (std::strcmp(rest, "_ptsz") == 0 || std::strcmp(rest, "_ptds") == 0) {
    *ptsz = true;
    return true;
  }
  return *rest == '\0';
}

void* HookByName(const char* symbol, int cuda_version, cuuint64_t flags) {
  if (symbol == nullptr) return nullptr;
  for (const Renamed& r : kRenamed) {
    if (cuda_version >= r.since && std::strcmp(symbol, r.symbol) == 0) symbol = r.target;
  }
  const bool want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  int best = -1, best_since = -1;
  bool best_ptsz = false;
  for (int i = 0; i < kCudaHookCount; ++i) {
    bool ptsz = false;
    if (!IsVariant(kCudaNames[i], symbol, &ptsz) || (ptsz && !want_ptsz)) continue;
    int since = HookSince(kCudaNames[i], cuda_version);
    if (since < 0 || since > cuda_version) continue;
    // A per-thread variant wins over the legacy one when asked for; then the newest ABI.
    if (best < 0 || (ptsz && !best_ptsz) || (ptsz == best_ptsz && since > best_since)) {
      best = i;
      best_since = since;
      best_ptsz = ptsz;
    }
  }
  if (best < 0) return nullptr;
  return g_cuda_real[best] != nullptr ? kCudaHooks[best] : nullptr;
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

// The last release of a primary context, or its reset, destroys it with everything it owns
// (cudaDeviceReset): its estimate and the charges of its allocations, arrays and modules go.
// `primary`: the device's primary context when the caller knows it otherwise (a reset of a
// context retained where no hook saw it, e.g. through cudart's private tables).
void UnchargeContext(Runtime* rt, int idx, bool reset, CUcontext primary = nullptr) {
  pthread_mutex_lock(&rt->ctx_mu);
  CUcontext gone = reset ? primary : nullptr;
  if (rt->ctx_refs[idx] > 0 && (reset || --rt->ctx_refs[idx] == 0)) {
    rt->ctx_refs[idx] = 0;
    rt->region.Uncharge(idx, rt->ctx_charge[idx], ChargeKind::kContext);
    rt->ctx_charge[idx] = 0;
    gone = rt->primary_ctx[idx];
    rt->primary_ctx[idx] = nullptr;
    rt->live_contexts.fetch_sub(1, std::memory_order_relaxed);
  }
  pthread_mutex_unlock(&rt->ctx_mu);
  if (gone != nullptr) ForgetContext(rt, gone);
}

// The primary context of CUDA device `dev` as far as this thread can tell before a reset: the
// current context when it is on `dev` and is not one this process created.
CUcontext CurrentPrimary(Runtime* rt, CUdevice dev) {
  CUcontext ctx = CurrentContext();
  CUdevice cur = -1;
  auto get_dev = VGPU_REAL_CUDA(cuCtxGetDevice);
  if (ctx == nullptr || get_dev == nullptr || get_dev(&cur) != CUDA_SUCCESS || cur != dev) {
    return nullptr;
  }
  AllocEntry created{};
  return rt->measured.Find(ContextKey(ctx), &created) ? nullptr : ctx;
}

std::uint64_t LegacyGridCost(int grid_width, int grid_height) {
  std::uint64_t w = grid_width > 0 ? static_cast<std::uint64_t>(grid_width) : 1;
  std::uint64_t h = grid_height > 0 ? static_cast<std::uint64_t>(grid_height) : 1;
  return SatMul(SatMul(w, h), 256);
}

// The list is read only when its length is one the driver accepts (at most the device count):
// a longer count is the driver's error to report, and reading that many entries of a shorter
// list would fault in here first.
std::uint64_t MultiDeviceCost(const CUDA_LAUNCH_PARAMS_st* params, unsigned int num_devices) {
  const auto* p = reinterpret_cast<const CudaLaunchParams*>(params);
  int devices = 0;
  auto count = VGPU_REAL_CUDA(cuDeviceGetCount);
  if (count == nullptr || count(&devices) != CUDA_SUCCESS || devices < 0) devices = 0;
  if (num_devices > static_cast<unsigned int>(devices)) return 1;
  std::uint64_t cost = 0;
  for (unsigned int i = 0; p != nullptr && i < num_devices; ++i) {
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
  // An asynchronous allocation freed with cuMemFree goes back to its pool like a cuMemFreeAsync
  // (the driver synchronises first): what the pool keeps of it stays charged.
  AllocEntry pooled{};
  if (rt->async_pool.size() > 0 && rt->async_pool.Erase(dptr, &pooled)) {
    AllocEntry entry{};
    bool tracked = rt->allocs.Erase(dptr, &entry);
    CUresult r = real(dptr);
    if (r != CUDA_SUCCESS) {
      if (tracked) rt->allocs.Insert(entry);
      rt->async_pool.Insert(pooled);
      return r;
    }
    if (tracked) PoolPointerFreed(rt, pooled, entry);
    return r;
  }
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
  if (!Record(&rt->allocs, *dptr, dev, actual, kAllocPlain, ContextKey(CurrentContext()))) {
    FreeNow(*dptr);
    rt->region.Uncharge(dev, actual, ChargeKind::kData);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

// The 32-bit pitched allocator of CUDA < 3.2, charged at what it reserved (pitch x height).
CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pitch, unsigned int width,
                         unsigned int height, unsigned int elem) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemAllocPitch);
  if (real == nullptr) return kNoDriver;
  // The driver aligns rows to at most 512 bytes: the estimate covers the worst case.
  std::uint64_t bytes = SatMul((static_cast<std::uint64_t>(width) + 511) / 512 * 512, height);
  return ChargedAlloc(
      rt, &rt->allocs, CurrentNvmlIndex(rt), bytes, kAllocPlain,
      [&](std::uint64_t* key) {
        CUresult r = real(dptr, pitch, width, height, elem);
        if (r == CUDA_SUCCESS) *key = *dptr;
        return r;
      },
      [](std::uint64_t key) {
        auto free_fn = VGPU_REAL_CUDA(cuMemFree);
        if (free_fn != nullptr) free_fn(static_cast<unsigned int>(key));
      });
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
  // The context's own footprint is estimated once per device per process as the change in this
  // process's used memory (NVML's per-process figure) around the first retain, less what the
  // sized paths charged meanwhile; never the device's figure, which other tenants move.
  pthread_mutex_lock(&rt->ctx_mu);
  bool first = rt->ctx_refs[idx] == 0;
  // Host-PID discovery is serialised across the container's processes: two contexts created at
  // once would each see two new processes and both stay unknown.
  int discovery_lock = first ? LockDiscovery(rt) : -1;
  std::uint64_t before = 0;
  if (first && !ProcessUsedBytes(rt, idx, &before)) before = 0;
  std::int64_t exact_before = rt->exact_net[idx].load(std::memory_order_relaxed);
  PidSet pids_before = first ? ComputePids(idx) : PidSet{};
  CUresult r = real(ctx, dev);
  if (r == CUDA_SUCCESS && rt->ctx_refs[idx]++ == 0) {
    rt->primary_ctx[idx] = *ctx;
    rt->live_contexts.fetch_add(1, std::memory_order_relaxed);
    std::int32_t hostpid = NewPid(pids_before, ComputePids(idx));
    if (hostpid != 0) rt->region.SetOwnHostPid(hostpid);
    std::uint64_t after = 0;
    if (!ProcessUsedBytes(rt, idx, &after)) after = before;
    std::int64_t grew = static_cast<std::int64_t>(after) - static_cast<std::int64_t>(before) -
                        (rt->exact_net[idx].load(std::memory_order_relaxed) - exact_before);
    std::uint64_t charge = grew > 0 ? static_cast<std::uint64_t>(grew) : 0;
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
  int idx = rt->accounting ? NvmlIndexOf(rt, dev) : -1;
  CUcontext primary = idx >= 0 ? CurrentPrimary(rt, dev) : nullptr;
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS && idx >= 0) UnchargeContext(rt, idx, true, primary);
  return r;
}

// The entries of CUDA 7.0-10.x (before their _v2), same semantics.
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuDevicePrimaryCtxRelease);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(dev);
  int idx = rt->accounting ? NvmlIndexOf(rt, dev) : -1;
  if (r == CUDA_SUCCESS && idx >= 0) UnchargeContext(rt, idx, false);
  return r;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuDevicePrimaryCtxReset);
  if (real == nullptr) return kNoDriver;
  int idx = rt->accounting ? NvmlIndexOf(rt, dev) : -1;
  CUcontext primary = idx >= 0 ? CurrentPrimary(rt, dev) : nullptr;
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS && idx >= 0) UnchargeContext(rt, idx, true, primary);
  return r;
}

// Sparse and mipmapped-array tile mappings reference cuMemCreate memory without a handle or a
// mapping libvgpu can count: the memory could outlive its charge. Refused while a memory limit
// is set (docs/vgpu.md "What cannot be stopped in-process").
constexpr CUresult kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED

CUresult cuMemMapArrayAsync(void* map_info, unsigned int count, CUstream stream) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemMapArrayAsync);
  if (real == nullptr) return kNoDriver;
  if (AnyMemoryLimit(rt)) {
    VGPU_ERROR("cuMemMapArrayAsync refused: sparse array mappings cannot be accounted");
    return kNotSupported;
  }
  return real(map_info, count, stream);
}

CUresult cuMemMapArrayAsync_ptsz(void* map_info, unsigned int count, CUstream stream) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemMapArrayAsync_ptsz);
  if (real == nullptr) return kNoDriver;
  if (AnyMemoryLimit(rt)) {
    VGPU_ERROR("cuMemMapArrayAsync refused: sparse array mappings cannot be accounted");
    return kNotSupported;
  }
  return real(map_info, count, stream);
}

// `stream` is the launch's stream (null for the legacy entries without one): the kernel runs on
// its context's device, which need not be the current context's. `fn` (the function or graph)
// and the cost together name the kernel for the limiter's prices.
#define VGPU_LAUNCH_BODY_ON(name, fn, cost, stream, ...) \
  auto real = VGPU_REAL_CUDA(name);                      \
  if (real == nullptr) return kNoDriver;                 \
  BeforeLaunch(fn, cost, stream);                        \
  return real(__VA_ARGS__)
#define VGPU_LAUNCH_BODY(name, fn, cost, ...) \
  VGPU_LAUNCH_BODY_ON(name, fn, cost, nullptr, __VA_ARGS__)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream stream, void** params, void** extra) {
  VGPU_LAUNCH_BODY_ON(cuLaunchKernel, f, Threads(gx, gy, gz, bx, by, bz), stream, f, gx, gy, gz, bx,
                      by, bz, shmem, stream, params, extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                             CUstream stream, void** params, void** extra) {
  VGPU_LAUNCH_BODY_ON(cuLaunchKernel_ptsz, f, Threads(gx, gy, gz, bx, by, bz), stream, f, gx, gy,
                      gz, bx, by, bz, shmem, stream, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  VGPU_LAUNCH_BODY_ON(cuLaunchKernelEx, f, ConfigThreads(config),
                      config != nullptr ? config->hStream : nullptr, config, f, params, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  VGPU_LAUNCH_BODY_ON(cuLaunchKernelEx_ptsz, f, ConfigThreads(config),
                      config != nullptr ? config->hStream : nullptr, config, f, params, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shmem, CUstream stream, void** params) {
  VGPU_LAUNCH_BODY_ON(cuLaunchCooperativeKernel, f, Threads(gx, gy, gz, bx, by, bz), stream, f, gx,
                      gy, gz, bx, by, bz, shmem, stream, params);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shmem, CUstream stream,
                                        void** params) {
  VGPU_LAUNCH_BODY_ON(cuLaunchCooperativeKernel_ptsz, f, Threads(gx, gy, gz, bx, by, bz), stream, f,
                      gx, gy, gz, bx, by, bz, shmem, stream, params);
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  VGPU_LAUNCH_BODY_ON(cuGraphLaunch, exec, kGraphLaunchCost, stream, exec, stream);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  VGPU_LAUNCH_BODY_ON(cuGraphLaunch_ptsz, exec, kGraphLaunchCost, stream, exec, stream);
}

// The pre-CUDA 4.0 launch API: the block shape was set separately (cuFuncSetBlockShape) and is
// not visible here, so a grid costs kLegacyBlockThreads per block. Only consistency between
// launches matters to the calibrated limiter.
constexpr std::uint64_t kLegacyBlockThreads = 256;

CUresult cuLaunch(CUfunction f) { VGPU_LAUNCH_BODY(cuLaunch, f, kLegacyBlockThreads, f); }

CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  VGPU_LAUNCH_BODY(cuLaunchGrid, f, LegacyGridCost(grid_width, grid_height), f, grid_width,
                   grid_height);
}

CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream stream) {
  VGPU_LAUNCH_BODY_ON(cuLaunchGridAsync, f, LegacyGridCost(grid_width, grid_height), stream, f,
                      grid_width, grid_height, stream);
}

CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS_st* params,
                                              unsigned int num_devices, unsigned int flags) {
  VGPU_LAUNCH_BODY(cuLaunchCooperativeKernelMultiDevice, nullptr,
                   MultiDeviceCost(params, num_devices), params, num_devices, flags);
}

#undef VGPU_LAUNCH_BODY
#undef VGPU_LAUNCH_BODY_ON

}  // extern "C"
}  // namespace hami::vgpu
