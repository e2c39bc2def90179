// Process-wide state of libvgpu: configuration, the shared region and this process's slot, the
// allocation tables, the CUDA→container device map and the per-device compute limiters.
//
// Initialisation is lazy (first hook, dlsym of a cu* name, cuInit or nvmlInit*), thread-safe,
// and redone in a forked child (which gets its own slot). When the region file cannot be used,
// one ERROR line is logged and, while a memory limit is set, allocations are refused (docs/vgpu.md
// "Failing closed"); other calls pass through. Without NVML there is no device map or throttling.
#ifndef HAMI_VGPU_RUNTIME_H_
#define HAMI_VGPU_RUNTIME_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "vgpu/alloc_table.h"
#include "vgpu/cuda_defs.h"
#include "vgpu/env.h"
#include "vgpu/limiter.h"
#include "vgpu/region.h"

namespace hami::vgpu {

enum AllocKind : int { kAllocPlain = 0, kAllocManaged = 1, kAllocAsync = 2, kAllocVmm = 3 };

struct Runtime {
  VgpuConfig config;
  Region region;
  bool accounting = false;     // region open and slot taken
  bool limits_broken = false;  // the limits file exists but cannot be used: refuse allocations
  AllocTable allocs;           // device pointer -> charge
  AllocTable vmm;              // imported external memory -> charge
  // VMM (docs/vgpu.md "VMM"): a physical allocation is charged once, under the handle
  // cuMemCreate returned (its id), and lives while a handle or a mapping refers to it, as in the
  // driver. vmm_allocs: id -> charge (`bytes`, `dev`) and references (`kind`); vmm_handles:
  // handle -> id (`aux`) and how many times it was handed out (`kind`: created, retained,
  // imported); vmm_maps: mapped address -> id (`bytes`) and mapping size (`aux`); vmm_exports:
  // identity of an exported shareable handle -> id. Guarded by vmm_mu.
  AllocTable vmm_allocs;
  AllocTable vmm_handles;
  AllocTable vmm_maps;
  AllocTable vmm_exports;
  // Memory pools: pool -> its device (`dev`) and release threshold (`bytes`); pool -> bytes
  // freed into it that it keeps (still charged); async pointer -> its pool (`bytes`). Guarded by
  // pool_mu.
  AllocTable pools;
  // Graphs: graph -> bytes its memory allocation nodes reserve (`dev`: their device); executable
  // graph -> what its instantiation was charged. graph_allocs is guarded by pool_mu.
  AllocTable graph_allocs;
  AllocTable graph_execs;
  AllocTable pool_kept;
  AllocTable async_pool;
  pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;  // guards the three tables above together
  AllocTable measured;  // array / context / module / context-limit handle -> measured charge
  pthread_mutex_t measure_mu = PTHREAD_MUTEX_INITIALIZER;  // one measured call at a time
  // Bytes charged minus bytes released by the exact (sized) paths, per device: subtracted from a
  // measured change so a concurrent cuMemAlloc in another thread is not counted twice.
  std::atomic<std::int64_t> exact_net[kMaxDevices] = {};
  std::atomic<bool> nvml_ready{false};
  int nvml_count = 0;
  int cuda_to_nvml[kMaxDevices];
  bool any_sm_limit = false;
  ComputeLimiter limiters[kMaxDevices];
  pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;  // guards ctx_charge / ctx_refs
  std::uint64_t ctx_charge[kMaxDevices];
  int ctx_refs[kMaxDevices];
  CUcontext primary_ctx[kMaxDevices];  // as cuDevicePrimaryCtxRetain handed it out
  // Contexts this process holds (primary ones retained, created ones alive): without any, it
  // holds no device memory whatever NVML lists.
  std::atomic<int> live_contexts{0};
  std::atomic<std::uint64_t> last_kernel_second{0};
  std::atomic<bool> watcher_started{false};
};

// Initialises on first use; never returns null. Cheap after the first call.
Runtime* Rt();
// Ensures NVML is loaded and the device map / region UUIDs are set (idempotent).
void EnsureNvml(Runtime* rt);

// Container (NVML) index of the current context's device; -1 when it cannot be determined.
int CurrentNvmlIndex(Runtime* rt);
// The current context (null when none or no driver).
CUcontext CurrentContext();

// The driver destroyed context `ctx` (cuCtxDestroy, the last primary-context release, a reset):
// the allocations, arrays and modules it owned are gone, and so are their charges.
void ForgetContext(Runtime* rt, CUcontext ctx);

// Container index of CUDA ordinal `dev`; -1 when out of range.
int NvmlIndexOf(Runtime* rt, CUdevice dev);

// This process's device memory on container device `dev` as the driver reports it (NVML's
// per-process used memory for our pid or host pid; 0 when the process holds no context); false
// when NVML cannot tell, or the process holds a context but is not listed (a PID namespace whose
// host pid is unknown): never a device-wide figure, which would book other tenants' memory.
bool ProcessUsedBytes(Runtime* rt, int dev, std::uint64_t* bytes);

// Under a memory limit, sets CUDA_MODULE_LOADING=EAGER before the driver reads it (at cuInit):
// lazily loaded modules commit their __device__ globals at a first launch, where nothing can
// measure or refuse them; eagerly loaded ones at the load, which is measured (docs/vgpu.md
// "Modules").
void ForceEagerModuleLoading(Runtime* rt);

// True when some device of this container has a memory limit (the trusted limits when the region
// is open, the configured ones when not), or the limits file is unusable.
bool AnyMemoryLimit(Runtime* rt);

// An allocation that cannot be accounted for (no region, no slot, a device outside the region's
// 16 entries, a full table, no measurement) is refused while a limit is set: failing open would
// hand out memory no other process of the container can see. Logs and returns
// CUDA_ERROR_OUT_OF_MEMORY.
CUresult RefuseUnaccounted(int dev, std::uint64_t bytes, const char* why);

// Monotonic clock in ns (the limiter's time base in production).
std::int64_t NowNs();

// Container index of the device `stream` runs on: its context's device (cuStreamGetCtx), which
// is not the current context's when the stream was made in another one; the current context's
// for the default streams (null, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). -1 when unknown.
int StreamNvmlIndex(Runtime* rt, CUstream stream);

// Throttles one launch of `cost` threads of the function (or graph) `fn` on `stream`'s device;
// returns when the launch may proceed. No allocation.
void BeforeLaunch(const void* fn, std::uint64_t cost, CUstream stream);

// The limiter's name for a kernel: its function (or graph) and its thread count (a function's
// time per launch depends on its grid). Never 0 for a function; 0 (no price) without one.
std::uint64_t KernelKey(const void* fn, std::uint64_t cost);

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_RUNTIME_H_
