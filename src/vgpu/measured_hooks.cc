// Hooks of the driver calls that commit device memory without stating how much: CUDA arrays,
// contexts (green ones too), context limits (malloc heap, stack, printf FIFO), module and library
// globals (every loader). The charge is what NVML's per-process used memory says the driver
// committed around the call (docs/vgpu.md "Memory"); past the limit the object is destroyed again
// and the call returns CUDA_ERROR_OUT_OF_MEMORY, so a refusal leaves nothing allocated.
#include <pthread.h>

#include <type_traits>

#include "vgpu/charge.h"
#include "vgpu/hooks.h"
#include "vgpu/log.h"
#include "vgpu/runtime.h"

namespace hami::vgpu {
namespace {

// Set while this thread holds measure_mu. A driver that implements one measured entry by calling
// another (cuModuleLoad by cuModuleLoadData, a library load by a module load) re-enters our hook
// through its own symbol lookup: the inner call is covered by the outer measurement and passes
// through instead of waiting on a mutex its own thread holds.
thread_local bool t_measuring = false;

void LockMeasure(Runtime* rt) {
  pthread_mutex_lock(&rt->measure_mu);
  t_measuring = true;
}

void UnlockMeasure(Runtime* rt) {
  t_measuring = false;
  pthread_mutex_unlock(&rt->measure_mu);
}

struct Sample {
  bool ok = false;
  std::uint64_t used = 0;
  std::int64_t exact = 0;
};

Sample Take(Runtime* rt, int dev) {
  Sample s;
  s.exact = rt->exact_net[dev].load(std::memory_order_relaxed);
  s.ok = ProcessUsedBytes(rt, dev, &s.used);
  return s;
}

// What the process's device memory grew by between two samples, less what the exact (sized)
// paths charged meanwhile in other threads.
std::int64_t Growth(const Sample& before, const Sample& after) {
  std::int64_t grew =
      static_cast<std::int64_t>(after.used) - static_cast<std::int64_t>(before.used);
  return grew - (after.exact - before.exact);
}

// Charges `bytes` (measured) on dev; kOk, or a refusal already logged.
CUresult ChargeMeasured(Runtime* rt, int dev, std::uint64_t bytes, ChargeKind kind) {
  if (bytes == 0) return CUDA_SUCCESS;
  std::uint64_t usage = 0;
  std::uint64_t limit = 0;
  ChargeResult r = rt->region.Charge(dev, bytes, kind, &usage, &limit);
  if (r == ChargeResult::kOk) return CUDA_SUCCESS;
  if (r == ChargeResult::kOverLimit) {
    VGPU_ERROR("Device %d OOM %lu / %lu", dev, static_cast<unsigned long>(usage + bytes),
               static_cast<unsigned long>(limit));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return AnyMemoryLimit(rt) ? RefuseUnaccounted(dev, bytes, "device or slot not accounted")
                            : CUDA_SUCCESS;
}

// Runs `create` (which stores the new handle in *key), charges what the driver committed for it
// on container device `dev`, and remembers the charge under the handle. Past the limit, or when
// nothing can be measured while a limit is set, `undo(key)` destroys the object again.
template <typename Create, typename Undo>
CUresult MeasuredCreate(Runtime* rt, int dev, ChargeKind kind, Create create, Undo undo) {
  std::uint64_t key = 0;
  if (t_measuring) return create(&key);  // nested inside a measured call of this thread
  // Whole GPUs (no memory limit anywhere): nothing to refuse, so nothing is measured and no call
  // waits for another's measurement (NCCL and frameworks create contexts and load modules from
  // many threads at once).
  if (!AnyMemoryLimit(rt)) return create(&key);
  if (!rt->accounting || dev < 0) {
    if (AnyMemoryLimit(rt)) {
      return RefuseUnaccounted(dev, 0,
                               rt->accounting ? "device not accounted" : "shared region unusable");
    }
    return create(&key);
  }
  LockMeasure(rt);
  Sample before = Take(rt, dev);
  CUresult r = create(&key);
  if (r != CUDA_SUCCESS) {
    UnlockMeasure(rt);
    return r;
  }
  if (kind == ChargeKind::kContext) rt->live_contexts.fetch_add(1, std::memory_order_relaxed);
  Sample after = Take(rt, dev);
  std::int64_t grew = Growth(before, after);
  std::uint64_t charge = grew > 0 ? static_cast<std::uint64_t>(grew) : 0;
  CUresult verdict = CUDA_SUCCESS;
  if (!before.ok || !after.ok) {
    if (AnyMemoryLimit(rt)) verdict = RefuseUnaccounted(dev, 0, "NVML cannot measure the call");
    charge = 0;
  } else {
    verdict = ChargeMeasured(rt, dev, charge, kind);
  }
  // Arrays, modules and libraries live in the current context and go with it; a context is
  // its own key.
  std::uint64_t owner = kind == ChargeKind::kContext ? 0 : ContextKey(CurrentContext());
  if (verdict == CUDA_SUCCESS &&
      !rt->measured.Insert(AllocEntry{key, charge, dev, static_cast<std::int32_t>(kind), owner})) {
    rt->region.Uncharge(dev, charge, kind);
    verdict = RefuseUnaccounted(dev, charge, "allocation table full");
  }
  if (verdict != CUDA_SUCCESS) {
    undo(key);
    if (kind == ChargeKind::kContext) rt->live_contexts.fetch_sub(1, std::memory_order_relaxed);
  }
  UnlockMeasure(rt);
  return verdict;
}

// Forgets `key`'s charge around the real destruction (restored if the driver refuses). Under
// measure_mu: memory a destruction gives back while another thread measures a creation would
// make the new object look free.
template <typename Call>
CUresult MeasuredDestroy(Runtime* rt, std::uint64_t key, Call call) {
  if (!AnyMemoryLimit(rt)) return call();  // whole GPUs: nothing was measured (MeasuredCreate)
  const bool outer = !t_measuring;
  if (outer) LockMeasure(rt);
  AllocEntry entry{};
  bool tracked = rt->measured.Erase(key, &entry);
  CUresult r = call();
  if (tracked) {
    if (r == CUDA_SUCCESS) {
      rt->region.Uncharge(entry.dev, entry.bytes, static_cast<ChargeKind>(entry.kind));
      if (static_cast<ChargeKind>(entry.kind) == ChargeKind::kContext) {
        rt->live_contexts.fetch_sub(1, std::memory_order_relaxed);
      }
    } else {
      rt->measured.Insert(entry);
    }
  }
  if (outer) UnlockMeasure(rt);
  return r;
}

std::uint64_t Key(const void* handle) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(handle));
}

// The key of a context limit's charge: never a pointer (top bit set).
std::uint64_t LimitKey(CUcontext ctx, CUlimit limit) {
  return (Key(ctx) ^ (static_cast<std::uint64_t>(limit) + 1)) | (1ULL << 63);
}

constexpr CUlimit kChargedLimits[] = {CU_LIMIT_STACK_SIZE, CU_LIMIT_PRINTF_FIFO_SIZE,
                                      CU_LIMIT_MALLOC_HEAP_SIZE};

// A library loaded while no context is current is committed into each context created later,
// where the creation's measurement would book its globals as context memory (never refused).
// While a memory limit is set, such a load runs in the primary context of CUDA device 0, retained
// once for the rest of the process (the context cudart makes current first), so its globals are
// committed, measured and refused at the load itself.
class ContextForLoad {
 public:
  explicit ContextForLoad(Runtime* rt) {
    if (CurrentContext() != nullptr || !rt->accounting || !AnyMemoryLimit(rt)) return;
    static CUcontext pinned = nullptr;
    static pthread_mutex_t pin_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&pin_mu);
    if (pinned == nullptr && cuDevicePrimaryCtxRetain(&pinned, 0) != CUDA_SUCCESS) pinned = nullptr;
    CUcontext ctx = pinned;
    pthread_mutex_unlock(&pin_mu);
    auto push = VGPU_REAL_CUDA(cuCtxPushCurrent_v2);
    pushed_ = ctx != nullptr && push != nullptr && push(ctx) == CUDA_SUCCESS;
  }
  ~ContextForLoad() {
    auto pop = VGPU_REAL_CUDA(cuCtxPopCurrent_v2);
    CUcontext popped = nullptr;
    if (pushed_ && pop != nullptr) pop(&popped);
  }
  ContextForLoad(const ContextForLoad&) = delete;
  ContextForLoad& operator=(const ContextForLoad&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace

// A destroyed context's limits (heap, stack, FIFO) go with it.
void ForgetContextLimits(Runtime* rt, CUcontext ctx) {
  for (CUlimit limit : kChargedLimits) {
    AllocEntry entry{};
    if (rt->measured.Erase(LimitKey(ctx, limit), &entry)) {
      rt->region.Uncharge(entry.dev, entry.bytes, static_cast<ChargeKind>(entry.kind));
    }
  }
}

// The body of a hook whose driver call `name(args...)` creates the object *handle without stating
// its size: MeasuredCreate on NVML device `dev` (an expression that may use `rt`), keyed by the
// new handle, with the real `destroy` undoing a refusal.
#define VGPU_MEASURED_CREATE(name, destroy, dev, kind, handle, ...)                              \
  Runtime* rt = Rt();                                                                            \
  auto real = VGPU_REAL_CUDA(name);                                                              \
  if (real == nullptr) return kNoDriver;                                                         \
  return MeasuredCreate(                                                                         \
      rt, dev, kind,                                                                             \
      [&](std::uint64_t* key) {                                                                  \
        CUresult r = real(__VA_ARGS__);                                                          \
        if (r == CUDA_SUCCESS) *key = Key(*handle);                                              \
        return r;                                                                                \
      },                                                                                         \
      [](std::uint64_t key) {                                                                    \
        VGPU_REAL_CUDA(destroy)(reinterpret_cast<std::remove_pointer_t<decltype(handle)>>(key)); \
      })

// The body of the hook of `name(handle)`, the destruction of a measured object.
#define VGPU_MEASURED_DESTROY(name, handle) \
  Runtime* rt = Rt();                       \
  auto real = VGPU_REAL_CUDA(name);         \
  if (real == nullptr) return kNoDriver;    \
  return MeasuredDestroy(rt, Key(handle), [&] { return real(handle); })

extern "C" {

CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR_st* desc) {
  VGPU_MEASURED_CREATE(cuArrayCreate_v2, cuArrayDestroy, CurrentNvmlIndex(rt), ChargeKind::kData,
                       array, array, desc);
}

CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR_st* desc) {
  VGPU_MEASURED_CREATE(cuArray3DCreate_v2, cuArrayDestroy, CurrentNvmlIndex(rt), ChargeKind::kData,
                       array, array, desc);
}

CUresult cuArrayDestroy(CUarray array) { VGPU_MEASURED_DESTROY(cuArrayDestroy, array); }

CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR_st* desc,
                                unsigned int levels) {
  VGPU_MEASURED_CREATE(cuMipmappedArrayCreate, cuMipmappedArrayDestroy, CurrentNvmlIndex(rt),
                       ChargeKind::kData, array, array, desc, levels);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  VGPU_MEASURED_DESTROY(cuMipmappedArrayDestroy, array);
}

CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice dev) {
  VGPU_MEASURED_CREATE(cuCtxCreate_v2, cuCtxDestroy_v2, NvmlIndexOf(rt, dev), ChargeKind::kContext,
                       ctx, ctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext* ctx, void* params, int num_params, unsigned int flags,
                        CUdevice dev) {
  VGPU_MEASURED_CREATE(cuCtxCreate_v3, cuCtxDestroy_v2, NvmlIndexOf(rt, dev), ChargeKind::kContext,
                       ctx, ctx, params, num_params, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext* ctx, void* params, unsigned int flags, CUdevice dev) {
  VGPU_MEASURED_CREATE(cuCtxCreate_v4, cuCtxDestroy_v2, NvmlIndexOf(rt, dev), ChargeKind::kContext,
                       ctx, ctx, params, flags, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuCtxDestroy_v2);
  if (real == nullptr) return kNoDriver;
  CUresult r = MeasuredDestroy(rt, Key(ctx), [&] { return real(ctx); });
  if (r == CUDA_SUCCESS) ForgetContext(rt, ctx);
  return r;
}

// The CUDA 2.0 entries (dlsym, or cuGetProcAddress below their successors' cudaVersion): the
// same objects, measured alike.
CUresult cuCtxCreate(CUcontext* ctx, unsigned int flags, CUdevice dev) {
  VGPU_MEASURED_CREATE(cuCtxCreate, cuCtxDestroy_v2, NvmlIndexOf(rt, dev), ChargeKind::kContext,
                       ctx, ctx, flags, dev);
}

CUresult cuCtxDestroy(CUcontext ctx) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuCtxDestroy);
  if (real == nullptr) return kNoDriver;
  CUresult r = MeasuredDestroy(rt, Key(ctx), [&] { return real(ctx); });
  if (r == CUDA_SUCCESS) ForgetContext(rt, ctx);
  return r;
}

CUresult cuArrayCreate(CUarray* array, const CUDA_ARRAY_DESCRIPTOR_st* desc) {
  VGPU_MEASURED_CREATE(cuArrayCreate, cuArrayDestroy, CurrentNvmlIndex(rt), ChargeKind::kData,
                       array, array, desc);
}

CUresult cuArray3DCreate(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR_st* desc) {
  VGPU_MEASURED_CREATE(cuArray3DCreate, cuArrayDestroy, CurrentNvmlIndex(rt), ChargeKind::kData,
                       array, array, desc);
}

// Green contexts (CUDA 12.4) commit context memory like created contexts.
CUresult cuGreenCtxCreate(CUgreenCtx* ctx, CUdevResourceDesc desc, CUdevice dev,
                          unsigned int flags) {
  VGPU_MEASURED_CREATE(cuGreenCtxCreate, cuGreenCtxDestroy, NvmlIndexOf(rt, dev),
                       ChargeKind::kContext, ctx, ctx, desc, dev, flags);
}

CUresult cuGreenCtxDestroy(CUgreenCtx green) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGreenCtxDestroy);
  if (real == nullptr) return kNoDriver;
  // Limits were set through the green context's CUcontext (cuCtxFromGreenCtx): asked before the
  // green context is gone.
  CUcontext as_ctx = nullptr;
  auto from_green = VGPU_REAL_CUDA(cuCtxFromGreenCtx);
  if (from_green == nullptr || from_green(&as_ctx, green) != CUDA_SUCCESS) as_ctx = nullptr;
  CUresult r = MeasuredDestroy(rt, Key(green), [&] { return real(green); });
  if (r == CUDA_SUCCESS && as_ctx != nullptr) ForgetContext(rt, as_ctx);
  return r;
}

// A limit's memory is charged to the current context; setting it again charges (or gives back)
// the difference. Over the limit, the previous value is restored and the call refused.
CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuCtxSetLimit);
  if (real == nullptr) return kNoDriver;
  bool charged_limit = false;
  for (CUlimit l : kChargedLimits) charged_limit = charged_limit || l == limit;
  int dev = CurrentNvmlIndex(rt);
  CUcontext ctx = nullptr;
  auto current = VGPU_REAL_CUDA(cuCtxGetCurrent);
  auto get = VGPU_REAL_CUDA(cuCtxGetLimit);
  size_t old_value = 0;
  if (!charged_limit || current == nullptr || current(&ctx) != CUDA_SUCCESS || ctx == nullptr ||
      get == nullptr || get(&old_value, limit) != CUDA_SUCCESS || !rt->accounting || dev < 0) {
    if (charged_limit && AnyMemoryLimit(rt)) {
      return RefuseUnaccounted(dev, value, "context limit cannot be accounted");
    }
    return real(limit, value);
  }
  if (t_measuring || !AnyMemoryLimit(rt)) return real(limit, value);
  LockMeasure(rt);
  Sample before = Take(rt, dev);
  CUresult r = real(limit, value);
  if (r != CUDA_SUCCESS) {
    UnlockMeasure(rt);
    return r;
  }
  Sample after = Take(rt, dev);
  std::int64_t grew = Growth(before, after);
  AllocEntry entry{LimitKey(ctx, limit), 0, dev, static_cast<std::int32_t>(ChargeKind::kData)};
  rt->measured.Erase(entry.key, &entry);
  CUresult verdict = CUDA_SUCCESS;
  if (!before.ok || !after.ok) {
    if (AnyMemoryLimit(rt)) verdict = RefuseUnaccounted(dev, value, "NVML cannot measure the call");
  } else if (grew > 0) {
    verdict = ChargeMeasured(rt, dev, static_cast<std::uint64_t>(grew), ChargeKind::kData);
    if (verdict == CUDA_SUCCESS) entry.bytes += static_cast<std::uint64_t>(grew);
  } else if (grew < 0) {
    std::uint64_t back = static_cast<std::uint64_t>(-grew);
    if (back > entry.bytes) back = entry.bytes;
    rt->region.Uncharge(entry.dev, back, ChargeKind::kData);
    entry.bytes -= back;
  }
  if (verdict != CUDA_SUCCESS) real(limit, old_value);
  if (entry.bytes > 0 && !rt->measured.Insert(entry)) {
    rt->region.Uncharge(entry.dev, entry.bytes, ChargeKind::kData);
    if (verdict == CUDA_SUCCESS) {
      real(limit, old_value);
      verdict = RefuseUnaccounted(dev, value, "allocation table full");
    }
  }
  UnlockMeasure(rt);
  return verdict;
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  VGPU_MEASURED_CREATE(cuModuleLoadData, cuModuleUnload, CurrentNvmlIndex(rt), ChargeKind::kModule,
                       module, module, image);
}

CUresult cuModuleUnload(CUmodule module) { VGPU_MEASURED_DESTROY(cuModuleUnload, module); }

CUresult cuLibraryLoadData(CUlibrary* library, const void* code, void* jit_options,
                           void** jit_values, unsigned int num_jit, void* lib_options,
                           void** lib_values, unsigned int num_lib) {
  ContextForLoad load_context(Rt());
  VGPU_MEASURED_CREATE(cuLibraryLoadData, cuLibraryUnload, CurrentNvmlIndex(rt),
                       ChargeKind::kModule, library, library, code, jit_options, jit_values,
                       num_jit, lib_options, lib_values, num_lib);
}

CUresult cuLibraryUnload(CUlibrary library) { VGPU_MEASURED_DESTROY(cuLibraryUnload, library); }

// The other module and library loaders commit their globals alike.
CUresult cuModuleLoad(CUmodule* module, const char* path) {
  VGPU_MEASURED_CREATE(cuModuleLoad, cuModuleUnload, CurrentNvmlIndex(rt), ChargeKind::kModule,
                       module, module, path);
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int num_options,
                            void* options, void** values) {
  VGPU_MEASURED_CREATE(cuModuleLoadDataEx, cuModuleUnload, CurrentNvmlIndex(rt),
                       ChargeKind::kModule, module, module, image, num_options, options, values);
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin) {
  VGPU_MEASURED_CREATE(cuModuleLoadFatBinary, cuModuleUnload, CurrentNvmlIndex(rt),
                       ChargeKind::kModule, module, module, fat_cubin);
}

CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* path, void* jit_options,
                               void** jit_values, unsigned int num_jit, void* lib_options,
                               void** lib_values, unsigned int num_lib) {
  ContextForLoad load_context(Rt());
  VGPU_MEASURED_CREATE(cuLibraryLoadFromFile, cuLibraryUnload, CurrentNvmlIndex(rt),
                       ChargeKind::kModule, library, library, path, jit_options, jit_values,
                       num_jit, lib_options, lib_values, num_lib);
}

}  // extern "C"

#undef VGPU_MEASURED_CREATE
#undef VGPU_MEASURED_DESTROY

}  // namespace hami::vgpu
