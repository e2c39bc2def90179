// The fake driver's virtual memory management as cuda.h documents it: a physical allocation
// (cuMemCreate) lives while any handle to it or any mapping of it exists. Handles are created,
// retained from a mapped address (cuMemRetainAllocationHandle) or imported from a shareable
// handle (cuMemExportToShareableHandle gives a file descriptor whose open file identifies the
// allocation in any process it is passed to); cuMemRelease drops one handle reference and one
// cuMemUnmap drops every mapping in its range.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "tests/vgpu/fake_cuda_internal.h"

using namespace hami::vgpu;  // NOLINT: the fake mirrors the driver's C surface.
namespace fake = hami::vgpu::fake;

namespace {

constexpr int kPosixFd = 1;  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

struct Physical {
  unsigned long long size = 0;
  int refs = 0;  // handle references + mappings
};

std::mutex g_mu;
std::map<unsigned long long, Physical> g_physical;                           // model key -> state
std::map<unsigned long long, std::pair<unsigned long long, int>> g_handles;  // handle -> (key, n)
std::map<unsigned long long, std::pair<unsigned long long, size_t>> g_maps;  // va -> (key, size)
std::map<unsigned long long, unsigned long long> g_exports;                  // inode -> key
std::atomic<unsigned long long> g_next_handle{0x9000000000ULL};

// Drops one reference; frees the memory at zero. Call without g_mu held when it may free.
void Unref(unsigned long long key) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_physical.find(key);
    if (it == g_physical.end() || --it->second.refs > 0) return;
    g_physical.erase(it);
  }
  fake::ModelRelease("cuMemRelease", key);
}

unsigned long long NewHandle(unsigned long long key) {
  unsigned long long h = g_next_handle.fetch_add(8);
  g_handles[h] = {key, 1};
  ++g_physical[key].refs;
  return h;
}

unsigned long long Inode(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

}  // namespace

extern "C" {

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long) {
  if (prop == nullptr || handle == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long key = 0;
  CUresult r = fake::ModelAllocate("cuMemCreate", &key, size, prop->location.id);
  if (r != CUDA_SUCCESS) return r;
  fake::Disown(key);  // VMM memory is the process's, not a context's
  std::lock_guard<std::mutex> lock(g_mu);
  g_physical[key] = Physical{size, 0};
  *handle = NewHandle(key);
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  unsigned long long key = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_handles.find(handle);
    if (it == g_handles.end()) return CUDA_ERROR_INVALID_VALUE;
    key = it->second.first;
    if (--it->second.second == 0) g_handles.erase(it);
  }
  Unref(key);
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                             unsigned long long) {
  static std::atomic<unsigned long long> next{0x200000000ULL};
  *ptr = next.fetch_add((size + (2ULL << 20)) & ~((2ULL << 20) - 1));
  return CUDA_SUCCESS;
}
CUresult cuMemAddressFree(CUdeviceptr, size_t) { return CUDA_SUCCESS; }

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t, CUmemGenericAllocationHandle handle,
                  unsigned long long) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_handles.find(handle);
  if (it == g_handles.end() || g_maps.count(ptr) != 0) return CUDA_ERROR_INVALID_VALUE;
  g_maps[ptr] = {it->second.first, size};
  ++g_physical[it->second.first].refs;
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  std::vector<unsigned long long> keys;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_maps.lower_bound(ptr);
    if (it == g_maps.end() || it->first != ptr) return CUDA_ERROR_INVALID_VALUE;
    while (it != g_maps.end() && it->first < ptr + size) {
      keys.push_back(it->second.first);
      it = g_maps.erase(it);
    }
  }
  for (unsigned long long key : keys) Unref(key);
  return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [va, map] : g_maps) {
    if (a >= va && a < va + map.second) {
      *handle = NewHandle(map.first);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      int type, unsigned long long) {
  if (type != kPosixFd || shareable == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_handles.find(handle);
  if (it == g_handles.end()) return CUDA_ERROR_INVALID_VALUE;
  int fd = memfd_create("fake-vmm-export", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  g_exports[Inode(fd)] = it->second.first;
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        int type) {
  if (type != kPosixFd || handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_exports.find(Inode(fd));
  if (it == g_exports.end() || g_physical.count(it->second) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *handle = NewHandle(it->second);
  return CUDA_SUCCESS;
}

}  // extern "C"
