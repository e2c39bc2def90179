// NVML hooks: initialisation (so libvgpu learns the container's devices early) and the
// virtualised memory queries. Everything else in NVML is not exported here and therefore
// reaches the real library untouched.
#include "vgpu/hooks.h"
#include "vgpu/memory_math.h"
#include "vgpu/runtime.h"

namespace hami::vgpu {
namespace {

constexpr nvmlReturn_t kNoNvml = NVML_ERROR_UNINITIALIZED;

nvmlReturn_t AfterInit(nvmlReturn_t r) {
  if (r == NVML_SUCCESS) EnsureNvml(Rt());
  return r;
}

// Applies the container view to one NVML device's figures. False when not limited.
bool Virtualise(nvmlDevice_t device, MemoryView* view) {
  Runtime* rt = Rt();
  auto get_index = VGPU_REAL_NVML(nvmlDeviceGetIndex);
  unsigned int index = 0;
  if (!rt->accounting || get_index == nullptr || get_index(device, &index) != NVML_SUCCESS ||
      index >= static_cast<unsigned>(kMaxDevices)) {
    return false;
  }
  std::uint64_t limit = rt->region.Limit(static_cast<int>(index));
  if (limit == 0) return false;
  *view = VirtualMemory(limit, rt->region.Usage(static_cast<int>(index)), *view);
  return true;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit(void) {
  Rt();
  if (!LoadNvmlTable()) return kNoNvml;
  auto real = VGPU_REAL_NVML(nvmlInit);
  return real ? AfterInit(real()) : kNoNvml;
}

nvmlReturn_t nvmlInit_v2(void) {
  Rt();
  if (!LoadNvmlTable()) return kNoNvml;
  auto real = VGPU_REAL_NVML(nvmlInit_v2);
  return real ? AfterInit(real()) : kNoNvml;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  Rt();
  if (!LoadNvmlTable()) return kNoNvml;
  auto real = VGPU_REAL_NVML(nvmlInitWithFlags);
  return real ? AfterInit(real(flags)) : kNoNvml;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* mem) {
  if (!LoadNvmlTable()) return kNoNvml;
  auto real = VGPU_REAL_NVML(nvmlDeviceGetMemoryInfo);
  if (real == nullptr) return kNoNvml;
  nvmlReturn_t r = real(device, mem);
  if (r != NVML_SUCCESS || mem == nullptr) return r;
  MemoryView view{mem->total, mem->free, mem->used};
  if (Virtualise(device, &view)) {
    mem->total = view.total;
    mem->free = view.free;
    mem->used = view.used;
  }
  return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* mem) {
  if (!LoadNvmlTable()) return kNoNvml;
  auto real = VGPU_REAL_NVML(nvmlDeviceGetMemoryInfo_v2);
  if (real == nullptr) return kNoNvml;
  nvmlReturn_t r = real(device, mem);
  if (r != NVML_SUCCESS || mem == nullptr) return r;
  MemoryView view{mem->total, mem->free, mem->total - mem->free};
  if (Virtualise(device, &view)) {
    // The driver's reservation is inside the container's total; report it as used so that
    // used + free == total still holds.
    mem->total = view.total;
    mem->free = view.free;
    mem->used = view.used;
    mem->reserved = 0;
  }
  return r;
}

}  // extern "C"
}  // namespace hami::vgpu
