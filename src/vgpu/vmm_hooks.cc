// Hooks of the virtual memory management API (cuMemCreate & co.): a physical allocation is
// charged once, at cuMemCreate, on the device of its location, and the charge lives exactly as
// long as the driver keeps the memory: while any handle to it (created, retained, imported) or
// any mapping of it exists. docs/vgpu.md "VMM".
//
// An allocation exported as a shareable handle (a file descriptor, a fabric handle) may be
// imported by another process, which libvgpu cannot follow: its charge stays with this process
// until it exits (never refunded while another process may hold the memory). Imports of
// shareable handles this process exported are references to the same allocation.
#include <pthread.h>
#include <sys/stat.h>

#include <cstdint>

#include "vgpu/charge.h"
#include "vgpu/hooks.h"
#include "vgpu/log.h"
#include "vgpu/runtime.h"

namespace hami::vgpu {
namespace {

constexpr int kPosixFdHandle = 1;  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

class VmmLock {
 public:
  explicit VmmLock(Runtime* rt) : rt_(rt) { pthread_mutex_lock(&rt_->vmm_mu); }
  ~VmmLock() { pthread_mutex_unlock(&rt_->vmm_mu); }
  VmmLock(const VmmLock&) = delete;
  VmmLock& operator=(const VmmLock&) = delete;

 private:
  Runtime* rt_;
};

// Adds `delta` references to allocation `id`; at zero its charge is given back. Under vmm_mu.
void Reference(Runtime* rt, std::uint64_t id, int delta) {
  AllocEntry alloc{};
  if (!rt->vmm_allocs.Erase(id, &alloc)) return;
  alloc.kind += delta;
  if (alloc.kind > 0) {
    rt->vmm_allocs.Insert(alloc);
    return;
  }
  rt->region.Uncharge(alloc.dev, alloc.bytes, ChargeKind::kData);
  rt->exact_net[alloc.dev].fetch_sub(static_cast<std::int64_t>(alloc.bytes),
                                     std::memory_order_relaxed);
}

// Records one more hand-out of `handle` as a reference to allocation `id`. Under vmm_mu.
void AddHandle(Runtime* rt, std::uint64_t handle, std::uint64_t id) {
  AllocEntry entry{handle, 0, 0, 0, id};
  if (rt->vmm_handles.Erase(handle, &entry) && entry.aux != id) {
    Reference(rt, entry.aux, -entry.kind);  // a stale record of a recycled handle value
    entry = AllocEntry{handle, 0, 0, 0, id};
  }
  entry.aux = id;
  ++entry.kind;
  rt->vmm_handles.Insert(entry);
  Reference(rt, id, 1);
}

// The allocation a mapping at `addr` (anywhere inside it) belongs to; 0 when unknown.
struct Inside {
  std::uint64_t addr;
  std::uint64_t id;
};

bool ContainsAddr(const AllocEntry& map, const void* arg) {
  auto* in = static_cast<Inside*>(const_cast<void*>(arg));
  if (in->addr >= map.key && in->addr - map.key < map.aux) in->id = map.bytes;
  return false;  // never erases: a lookup
}

std::uint64_t MappedAllocation(Runtime* rt, std::uint64_t addr) {
  AllocEntry map{};
  if (rt->vmm_maps.Find(addr, &map)) return map.bytes;
  Inside in{addr, 0};
  rt->vmm_maps.EraseWhere(
      ContainsAddr, &in, [](const AllocEntry&, void*) {}, nullptr);
  return in.id;
}

// The identity of a shareable handle: the open file behind a file descriptor (the same in every
// process it is passed to, whatever its number), else the handle's value.
std::uint64_t ShareableKey(const void* shareable, int type) {
  if (type == kPosixFdHandle) {
    int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(shareable));
    struct stat st;
    if (fstat(fd, &st) == 0) {
      return (static_cast<std::uint64_t>(st.st_dev) << 40) ^ static_cast<std::uint64_t>(st.st_ino) ^
             (1ULL << 63);
    }
    return static_cast<std::uint64_t>(fd) + 1;
  }
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(shareable));
}

struct Range {
  std::uint64_t begin;
  std::uint64_t end;
};

bool MappedIn(const AllocEntry& map, const void* arg) {
  const auto* range = static_cast<const Range*>(arg);
  return map.key >= range->begin && map.key < range->end;
}

void Unmapped(const AllocEntry& map, void* arg) {
  Reference(static_cast<Runtime*>(arg), map.bytes, -1);
}

}  // namespace

extern "C" {

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
  bool charged = false;
  CUresult r = Precharge(rt, dev, size, &charged);
  if (r != CUDA_SUCCESS) return r;
  r = real(handle, size, prop, flags);
  if (!charged) return r;
  if (r != CUDA_SUCCESS) {
    rt->region.Uncharge(dev, size, ChargeKind::kData);
    return r;
  }
  VmmLock lock(rt);
  if (!rt->vmm_allocs.Insert(AllocEntry{*handle, size, dev, 0, 0})) {
    VGPU_REAL_CUDA(cuMemRelease)(*handle);
    rt->region.Uncharge(dev, size, ChargeKind::kData);
    return RefuseUnaccounted(dev, size, "allocation table full");
  }
  rt->exact_net[dev].fetch_add(static_cast<std::int64_t>(size), std::memory_order_relaxed);
  AddHandle(rt, *handle, *handle);
  return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemRelease);
  if (real == nullptr) return kNoDriver;
  VmmLock lock(rt);
  CUresult r = real(handle);
  AllocEntry entry{};
  if (r == CUDA_SUCCESS && rt->vmm_handles.Erase(handle, &entry)) {
    if (--entry.kind > 0) rt->vmm_handles.Insert(entry);
    Reference(rt, entry.aux, -1);
  }
  return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemMap);
  if (real == nullptr) return kNoDriver;
  VmmLock lock(rt);
  CUresult r = real(ptr, size, offset, handle, flags);
  AllocEntry entry{};
  if (r == CUDA_SUCCESS && rt->vmm_handles.Find(handle, &entry) &&
      rt->vmm_maps.Insert(AllocEntry{ptr, entry.aux, 0, 0, size})) {
    Reference(rt, entry.aux, 1);
  }
  return r;
}

// One unmap may cover several mappings (a range is unmapped whole): each gives its reference
// back.
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemUnmap);
  if (real == nullptr) return kNoDriver;
  VmmLock lock(rt);
  CUresult r = real(ptr, size);
  if (r != CUDA_SUCCESS) return r;
  AllocEntry map{};
  if (rt->vmm_maps.Erase(ptr, &map)) {
    Reference(rt, map.bytes, -1);
    if (map.aux >= size) return r;  // the common case: exactly one mapping
  }
  Range range{ptr, ptr + size};
  rt->vmm_maps.EraseWhere(MappedIn, &range, Unmapped, rt);
  return r;
}

// A retained handle is one more reference to the mapped allocation (released by cuMemRelease).
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemRetainAllocationHandle);
  if (real == nullptr) return kNoDriver;
  VmmLock lock(rt);
  CUresult r = real(handle, addr);
  if (r != CUDA_SUCCESS || handle == nullptr) return r;
  std::uint64_t id = MappedAllocation(rt, reinterpret_cast<std::uintptr_t>(addr));
  if (id != 0) AddHandle(rt, *handle, id);
  return r;
}

// Exported memory may be held by another process from now on: one reference is kept until
// this process exits.
CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      int type, unsigned long long flags) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemExportToShareableHandle);
  if (real == nullptr) return kNoDriver;
  VmmLock lock(rt);
  CUresult r = real(shareable, handle, type, flags);
  AllocEntry entry{};
  if (r != CUDA_SUCCESS || shareable == nullptr || !rt->vmm_handles.Find(handle, &entry)) return r;
  const void* value =
      type == kPosixFdHandle
          ? reinterpret_cast<void*>(static_cast<std::intptr_t>(*static_cast<const int*>(shareable)))
          : *static_cast<void* const*>(shareable);
  AllocEntry exported{ShareableKey(value, type), 0, 0, 0, entry.aux};
  AllocEntry old{};
  if (rt->vmm_exports.Erase(exported.key, &old)) {
    rt->vmm_exports.Insert(old);  // exported before: already pinned
  } else if (rt->vmm_exports.Insert(exported)) {
    Reference(rt, entry.aux, 1);
  }
  return r;
}

// An import of a handle this process exported refers to the same allocation (no new charge);
// one exported elsewhere is charged to its exporter.
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        int type) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuMemImportFromShareableHandle);
  if (real == nullptr) return kNoDriver;
  VmmLock lock(rt);
  CUresult r = real(handle, os_handle, type);
  AllocEntry exported{};
  if (r == CUDA_SUCCESS && handle != nullptr &&
      rt->vmm_exports.Find(ShareableKey(os_handle, type), &exported)) {
    AddHandle(rt, *handle, exported.aux);
  }
  return r;
}

}  // extern "C"
}  // namespace hami::vgpu
