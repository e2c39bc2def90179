// A fake libcuda.so.1 for CPU-only tests: an in-process device model (N devices, bytes total,
// allocation map, primary contexts), a cuGetProcAddress that honours cudaVersion and the
// per-thread-default-stream flag by handing out distinct entry points, and per-entry-point call
// counters the tests read through fake_cuda_calls().
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/vgpu/fake_cuda_internal.h"
#include "tests/vgpu/fake_ids.h"
#include "vgpu/cuda_defs.h"

using namespace hami::vgpu;  // NOLINT: the fake mirrors the driver's C surface.
namespace fake = hami::vgpu::fake;

namespace {

constexpr int kMaxFakeDevices = 16;

struct Model {
  std::mutex mu;
  std::map<std::string, int> calls;
  std::map<unsigned long long, std::pair<int, unsigned long long>> allocs;  // ptr -> (phys, size)
  std::map<unsigned long long, unsigned long long> ctx_memory;  // created context -> its commit
  // (context, limit) -> (value, commit key)
  std::map<std::pair<unsigned long long, int>, std::pair<size_t, unsigned long long>> limits;
  unsigned long long used[kMaxFakeDevices] = {};
  int ctx_refs[kMaxFakeDevices] = {};
  int visible[kMaxFakeDevices];
  int visible_count = 0;
  unsigned long long next_ptr = 0x7f0000000000ULL;
  unsigned long long next_handle = 1;
  bool ready = false;
};

Model& M() {
  static Model model;
  return model;
}

thread_local int t_current = 0;

void Count(const char* name) {
  std::lock_guard<std::mutex> lock(M().mu);
  M().calls[name]++;
}

// CUDA_VISIBLE_DEVICES as the real driver applies it: ordinals or UUIDs of physical devices.
void EnsureModel() {
  Model& m = M();
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.ready) return;
  m.ready = true;
  int physical = fake::DeviceCount();
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (env == nullptr) {
    for (int i = 0; i < physical; ++i) m.visible[m.visible_count++] = i;
    return;
  }
  std::string list(env);
  std::size_t pos = 0;
  while (pos <= list.size() && m.visible_count < kMaxFakeDevices) {
    std::size_t comma = list.find(',', pos);
    std::string token = list.substr(pos, comma == std::string::npos ? comma : comma - pos);
    int index = -1;
    if (!token.empty() && token[0] >= '0' && token[0] <= '9') {
      index = std::atoi(token.c_str());
    } else {
      for (int i = 0; i < physical; ++i) {
        char uuid[96];
        fake::Uuid(i, uuid, sizeof(uuid));
        if (!token.empty() && std::strncmp(uuid, token.c_str(), token.size()) == 0) index = i;
      }
    }
    if (index < 0 || index >= physical) break;  // The driver stops at the first invalid entry.
    m.visible[m.visible_count++] = index;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

int Physical(int ordinal) {
  EnsureModel();
  return (ordinal >= 0 && ordinal < M().visible_count) ? M().visible[ordinal] : -1;
}

CUresult Allocate(const char* name, CUdeviceptr* dptr, unsigned long long bytes, int ordinal) {
  Count(name);
  int phys = Physical(ordinal);
  if (dptr == nullptr || phys < 0) return CUDA_ERROR_INVALID_VALUE;
  Model& m = M();
  std::lock_guard<std::mutex> lock(m.mu);
  unsigned long long capacity = fake::TotalBytes() - fake::EnvU64(fake::kOtherUsedEnv, 0);
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (m.used[phys] + bytes > capacity) return CUDA_ERROR_OUT_OF_MEMORY;
  m.used[phys] += bytes;
  *dptr = m.next_ptr;
  m.next_ptr += (bytes + 511) / 512 * 512 + 512;
  m.allocs[*dptr] = {phys, bytes};
  fake::NoteOwner(*dptr);
  return CUDA_SUCCESS;
}

CUresult Release(const char* name, unsigned long long key) {
  Count(name);
  Model& m = M();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.allocs.find(key);
  if (it == m.allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  m.used[it->second.first] -= it->second.second;
  m.allocs.erase(it);
  fake::ForgetOwner(key);
  return CUDA_SUCCESS;
}

}  // namespace

namespace hami::vgpu::fake {
CUresult ModelAllocate(const char* name, unsigned long long* key, unsigned long long bytes,
                       int ordinal) {
  return Allocate(name, key, bytes, ordinal);
}
CUresult ModelRelease(const char* name, unsigned long long key) { return Release(name, key); }
int CurrentOrdinal();
}  // namespace hami::vgpu::fake

extern "C" {

// ---- test probes ----
unsigned long long fake_cuda_physical_used(int physical) {
  if (physical < 0 || physical >= kMaxFakeDevices) return 0;
  std::lock_guard<std::mutex> lock(M().mu);
  return M().used[physical];
}
int fake_cuda_ctx_refs(int physical) {
  if (physical < 0 || physical >= kMaxFakeDevices) return 0;
  std::lock_guard<std::mutex> lock(M().mu);
  return M().ctx_refs[physical];
}
int fake_cuda_calls(const char* name) {
  std::lock_guard<std::mutex> lock(M().mu);
  auto it = M().calls.find(name);
  return it == M().calls.end() ? 0 : it->second;
}
int fake_next_probe() { return 1; }
extern std::atomic<unsigned long long> g_other_freed;
// FAKE_GPU_OTHER_ALLOCS_ON_RETAIN: another tenant allocates that many bytes while this process
// creates its primary context.
std::atomic<unsigned long long> g_other_added{0};
// Bytes the other tenants use now (FAKE_GPU_OTHER_USED plus what they allocated, less what they
// freed since).
unsigned long long fake_cuda_other_used() {
  unsigned long long other = fake::EnvU64(fake::kOtherUsedEnv, 0) + g_other_added.load();
  unsigned long long freed = g_other_freed.load();
  return other > freed ? other - freed : 0;
}  // Also defined (returning 2) by the fake NVML.
// dlsym(RTLD_NEXT) issued from inside this library: must find the NVML fake's definition (loaded
// later), not this library's own.
void* fake_cuda_lookup_next(const char* name) {
  void* found = dlsym(RTLD_NEXT, name);
  // Keeps the call a real call: as a tail call, dlsym would see our caller's return address.
  __asm__ volatile("" ::: "memory");
  return found;
}
// A cu-prefixed name that is not a driver entry point: never intercepted.
int cublasFakeEntry() { return 7; }

// ---- driver API ----
CUresult cuInit(unsigned int) {
  Count("cuInit");
  EnsureModel();
  fake::ReadModuleLoading();
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int* v) {
  if (v) *v = 13000;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* count) {
  EnsureModel();
  *count = M().visible_count;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (Physical(ordinal) < 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* value, int attr, CUdevice) {
  *value = attr == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 132 : 2048;
  return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (Physical(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = fake::TotalBytes();
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice* dev) {
  *dev = t_current;
  return CUDA_SUCCESS;
}
extern thread_local CUcontext t_ctx;
CUresult cuCtxSetCurrent(CUcontext ctx) {
  t_ctx = ctx;
  t_current = static_cast<int>(reinterpret_cast<std::uintptr_t>(ctx) & 0xff);
  return CUDA_SUCCESS;
}
// FAKE_GPU_PROC_DIR: processes holding a context are files named by pid there (the fake NVML of
// every process lists them), created as the context creation starts; FAKE_CUDA_CTX_DELAY_MS
// makes the creation take that long (a real driver takes 100s of ms).
void AnnounceContext() {
  const char* dir = std::getenv("FAKE_GPU_PROC_DIR");
  if (dir != nullptr) {
    std::string path = std::string(dir) + "/" + std::to_string(getpid());
    if (std::FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
  }
  unsigned long long delay_ms = fake::EnvU64("FAKE_CUDA_CTX_DELAY_MS", 0);
  if (delay_ms > 0) {
    timespec ts{static_cast<time_t>(delay_ms / 1000), static_cast<long>(delay_ms % 1000) * 1000000};
    nanosleep(&ts, nullptr);
  }
}

static CUresult RetainPrimary(CUcontext* ctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) { return RetainPrimary(ctx, dev); }
static CUresult RetainPrimary(CUcontext* ctx, CUdevice dev) {
  Count("cuDevicePrimaryCtxRetain");
  int phys = Physical(dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (fake_cuda_ctx_refs(phys) == 0) {
    AnnounceContext();
    g_other_added += fake::EnvU64("FAKE_GPU_OTHER_ALLOCS_ON_RETAIN", 0);
  }
  *ctx = reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000 + dev));
  bool created = false;
  {
    std::lock_guard<std::mutex> lock(M().mu);
    created = M().ctx_refs[phys]++ == 0;
    if (created) M().used[phys] += fake::EnvU64(fake::kCtxBytesEnv, 0);
  }
  if (created) fake::ContextCreated(*ctx, dev);  // eagerly loaded libraries commit into it
  return CUDA_SUCCESS;
}
// The last release or a reset destroys the primary context and everything it owns.
static CUresult ReleaseCtx(CUdevice dev, bool reset) {
  int phys = Physical(dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  bool destroyed = false;
  {
    std::lock_guard<std::mutex> lock(M().mu);
    if (M().ctx_refs[phys] > 0 && (reset || --M().ctx_refs[phys] == 0)) {
      M().ctx_refs[phys] = 0;
      M().used[phys] -= fake::EnvU64(fake::kCtxBytesEnv, 0);
      destroyed = true;
    }
  }
  if (destroyed) {
    fake::FreeOwned(reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000 + dev)));
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return ReleaseCtx(dev, false); }
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return ReleaseCtx(dev, true); }
// Created contexts: the handle's low byte is the ordinal (cuCtxSetCurrent reads it); each commits
// FAKE_GPU_CONTEXT_BYTES (default 0), given back by cuCtxDestroy_v2.
static CUresult CreateCtx(const char* name, CUcontext* ctx, CUdevice dev) {
  static std::atomic<unsigned long long> next{1};
  CUdeviceptr key = 0;
  unsigned long long bytes = fake::EnvU64(fake::kCtxBytesEnv, 0);
  CUresult r = bytes > 0 ? Allocate(name, &key, bytes, dev) : CUDA_SUCCESS;
  if (r != CUDA_SUCCESS) return r;
  unsigned long long handle = (0x100000ULL + next++ * 0x100) | static_cast<unsigned>(dev);
  if (key != 0) fake::Disown(key);  // the context's own memory, freed by its destroy
  {
    std::lock_guard<std::mutex> lock(M().mu);
    M().ctx_memory[handle] = key;
  }
  *ctx = reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(handle));
  fake::ContextCreated(*ctx, dev);
  return CUDA_SUCCESS;
}
CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int, CUdevice dev) {
  return CreateCtx("cuCtxCreate_v2", ctx, dev);
}
CUresult cuCtxCreate_v3(CUcontext* ctx, void*, int, unsigned int, CUdevice dev) {
  return CreateCtx("cuCtxCreate_v3", ctx, dev);
}
CUresult cuCtxCreate_v4(CUcontext* ctx, void*, unsigned int, CUdevice dev) {
  return CreateCtx("cuCtxCreate_v4", ctx, dev);
}
// Not through cuCtxDestroy_v2: libvgpu's hook of that name would take the call.
static CUresult DestroyCtx(CUcontext ctx) {
  unsigned long long key = 0;
  {
    std::lock_guard<std::mutex> lock(M().mu);
    auto it = M().ctx_memory.find(reinterpret_cast<std::uintptr_t>(ctx));
    if (it == M().ctx_memory.end()) return CUDA_ERROR_INVALID_VALUE;
    key = it->second;
    M().ctx_memory.erase(it);
  }
  // The context's limits (heap, stack, FIFO) go with it.
  std::vector<unsigned long long> limit_keys;
  {
    std::lock_guard<std::mutex> lock(M().mu);
    for (auto it = M().limits.begin(); it != M().limits.end();) {
      if (it->first.first != reinterpret_cast<std::uintptr_t>(ctx)) {
        ++it;
        continue;
      }
      if (it->second.second != 0) limit_keys.push_back(it->second.second);
      it = M().limits.erase(it);
    }
  }
  for (unsigned long long k : limit_keys) Release("cuCtxDestroy_v2", k);
  fake::FreeOwned(ctx);  // the allocations, arrays and modules made in it
  return key != 0 ? Release("cuCtxDestroy_v2", key) : CUDA_SUCCESS;
}
CUresult cuCtxDestroy_v2(CUcontext ctx) { return DestroyCtx(ctx); }
CUresult cuCtxDestroy(CUcontext ctx) { return DestroyCtx(ctx); }
CUresult cuCtxCreate(CUcontext* ctx, unsigned int, CUdevice dev) {
  return CreateCtx("cuCtxCreate", ctx, dev);
}
thread_local CUcontext t_ctx = nullptr;
CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }
// Green contexts: created contexts of their own (same handles, same FAKE_GPU_CONTEXT_BYTES); the
// resource and its descriptor are opaque tokens.
CUresult cuDeviceGetDevResource(CUdevice dev, void* resource, int) {
  if (Physical(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(resource, 0, 8);
  return CUDA_SUCCESS;
}
CUresult cuDevResourceGenerateDesc(void** desc, void*, unsigned int) {
  *desc = reinterpret_cast<void*>(static_cast<std::uintptr_t>(0xde5c));
  return CUDA_SUCCESS;
}
CUresult cuGreenCtxCreate(void** green, void* desc, CUdevice dev, unsigned int) {
  Count("cuGreenCtxCreate");
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateCtx("cuGreenCtxCreate", reinterpret_cast<CUcontext*>(green), dev);
}
CUresult cuGreenCtxDestroy(void* green) { return DestroyCtx(static_cast<CUcontext>(green)); }
CUresult cuCtxFromGreenCtx(CUcontext* ctx, void* green) {
  *ctx = static_cast<CUcontext>(green);
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = t_ctx;
  return CUDA_SUCCESS;
}
// Context limits commit memory: the heap and the FIFO their size, the stack its size for every
// resident thread (132 SMs x 2048 threads, the attributes cuDeviceGetAttribute reports), as the
// real driver does. Setting a limit again replaces its commit.
static unsigned long long LimitBytes(CUlimit limit, size_t value) {
  return limit == CU_LIMIT_STACK_SIZE ? value * 132ULL * 2048ULL : value;
}
CUresult cuCtxGetLimit(size_t* value, CUlimit limit) {
  std::lock_guard<std::mutex> lock(M().mu);
  auto it = M().limits.find({reinterpret_cast<std::uintptr_t>(t_ctx), limit});
  *value = it == M().limits.end() ? 0 : it->second.first;
  return CUDA_SUCCESS;
}
CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  std::pair<unsigned long long, int> id{reinterpret_cast<std::uintptr_t>(t_ctx), limit};
  std::pair<size_t, CUdeviceptr> old{0, 0};
  {
    std::lock_guard<std::mutex> lock(M().mu);
    auto it = M().limits.find(id);
    if (it != M().limits.end()) old = it->second;
  }
  CUdeviceptr key = 0;
  if (LimitBytes(limit, value) > 0) {
    CUresult r = Allocate("cuCtxSetLimit", &key, LimitBytes(limit, value), t_current);
    if (r != CUDA_SUCCESS) return r;
  }
  if (old.second != 0) Release("cuCtxSetLimit", old.second);
  std::lock_guard<std::mutex> lock(M().mu);
  M().limits[id] = {value, key};
  return CUDA_SUCCESS;
}

// Arrays commit their texel bytes rounded up to 2 MiB (the driver's granularity, so the measured
// charge is not the nominal size); mipmapped arrays twice the base level.
struct FakeArrayDesc {
  size_t Width;
  size_t Height;
  int Format;
  unsigned int NumChannels;
};
struct FakeArray3DDesc {
  size_t Width;
  size_t Height;
  size_t Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
};
static unsigned long long TexelBytes(int format) {
  switch (format) {
    case 0x01:
    case 0x08:
      return 1;
    case 0x02:
    case 0x09:
    case 0x10:
      return 2;
    default:
      return 4;
  }
}
static unsigned long long Round2M(unsigned long long n) {
  return (n + (2ULL << 20) - 1) / (2ULL << 20) * (2ULL << 20);
}
// FAKE_CUDA_CREATE_DELAY_MS: an array creation takes that long before committing its memory;
// FAKE_GPU_OTHER_FREES_ON_CREATE: another tenant frees that many bytes meanwhile.
// FAKE_CUDA_CREATE_RENDEZVOUS_MS: the first array creation waits (up to that long) until a second
// one is inside the driver too, and fails with CUDA_ERROR_INVALID_VALUE, saying so on stderr,
// when none comes: shows whether two creations may run at once.
std::atomic<unsigned long long> g_other_freed{0};
std::atomic<int> g_creating{0};
static CUresult CreateArray(const char* name, void** handle, unsigned long long bytes) {
  if (unsigned long long wait_ms = fake::EnvU64("FAKE_CUDA_CREATE_RENDEZVOUS_MS", 0)) {
    g_creating.fetch_add(1);
    timespec step{0, 1000000};
    for (unsigned long long waited = 0; g_creating.load() < 2; ++waited) {
      if (waited >= wait_ms) {
        std::fprintf(stderr, "fake cuda: %s: no second creation came within %llu ms\n", name,
                     wait_ms);
        return CUDA_ERROR_INVALID_VALUE;
      }
      nanosleep(&step, nullptr);
    }
  }
  unsigned long long delay_ms = fake::EnvU64("FAKE_CUDA_CREATE_DELAY_MS", 0);
  if (delay_ms > 0) {
    timespec ts{static_cast<time_t>(delay_ms / 1000), static_cast<long>(delay_ms % 1000) * 1000000};
    nanosleep(&ts, nullptr);
  }
  g_other_freed += fake::EnvU64("FAKE_GPU_OTHER_FREES_ON_CREATE", 0);
  CUdeviceptr key = 0;
  CUresult r = Allocate(name, &key, Round2M(bytes), t_current);
  if (r == CUDA_SUCCESS) *handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(key));
  return r;
}
CUresult cuArrayCreate_v2(void** array, const FakeArrayDesc* d) {
  unsigned long long h = d->Height == 0 ? 1 : d->Height;
  return CreateArray("cuArrayCreate_v2", array,
                     d->Width * h * d->NumChannels * TexelBytes(d->Format));
}
static unsigned long long Bytes3D(const FakeArray3DDesc* d) {
  return d->Width * (d->Height == 0 ? 1 : d->Height) * (d->Depth == 0 ? 1 : d->Depth) *
         d->NumChannels * TexelBytes(d->Format);
}
CUresult cuArray3DCreate_v2(void** array, const FakeArray3DDesc* d) {
  return CreateArray("cuArray3DCreate_v2", array, Bytes3D(d));
}
CUresult cuMipmappedArrayCreate(void** array, const FakeArray3DDesc* d, unsigned int) {
  return CreateArray("cuMipmappedArrayCreate", array, 2 * Bytes3D(d));
}
// The CUDA 2.0 descriptors: 32-bit sizes.
struct FakeArrayDescV1 {
  unsigned int Width, Height;
  int Format;
  unsigned int NumChannels;
};
struct FakeArray3DDescV1 {
  unsigned int Width, Height, Depth;
  int Format;
  unsigned int NumChannels, Flags;
};
CUresult cuArrayCreate(void** array, const FakeArrayDescV1* d) {
  unsigned long long h = d->Height == 0 ? 1 : d->Height;
  return CreateArray("cuArrayCreate", array,
                     1ULL * d->Width * h * d->NumChannels * TexelBytes(d->Format));
}
CUresult cuArray3DCreate(void** array, const FakeArray3DDescV1* d) {
  return CreateArray("cuArray3DCreate", array,
                     1ULL * d->Width * (d->Height == 0 ? 1 : d->Height) *
                         (d->Depth == 0 ? 1 : d->Depth) * d->NumChannels * TexelBytes(d->Format));
}
CUresult cuArrayDestroy(void* array) {
  return Release("cuArrayDestroy", reinterpret_cast<std::uintptr_t>(array));
}
CUresult cuMipmappedArrayDestroy(void* array) {
  return Release("cuMipmappedArrayDestroy", reinterpret_cast<std::uintptr_t>(array));
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  int phys = Physical(t_current);
  if (phys < 0 || free_bytes == nullptr || total_bytes == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(M().mu);
  *total_bytes = fake::TotalBytes();
  unsigned long long taken = M().used[phys] + fake::EnvU64(fake::kOtherUsedEnv, 0);
  *free_bytes = taken >= *total_bytes ? 0 : *total_bytes - taken;
  return CUDA_SUCCESS;
}
// The 32-bit v1 entries (CUDA < 3.2): the device pointer is the low 32 bits of the model's.
CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytes) {
  CUdeviceptr p = 0;
  CUresult r = Allocate("cuMemAlloc", &p, bytes, t_current);
  if (r == CUDA_SUCCESS) *dptr = static_cast<unsigned int>(p);
  return r;
}
CUresult cuMemFree(unsigned int dptr) {
  return Release("cuMemFree", (M().next_ptr & ~0xffffffffULL) | dptr);
}
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  return Allocate("cuMemAlloc_v2", dptr, bytes, t_current);
}
CUresult PoolFree(const char* name, CUdeviceptr d);
// A pointer from a pool goes back to it (as cuMemFreeAsync on the legacy stream, synchronised).
CUresult cuMemFree_v2(CUdeviceptr dptr) { return PoolFree("cuMemFree_v2", dptr); }
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int) {
  size_t p = (width + 511) / 512 * 512;
  CUresult r = Allocate("cuMemAllocPitch_v2", dptr, p * height, t_current);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}
CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pitch, unsigned int width,
                         unsigned int height, unsigned int) {
  unsigned int p = (width + 511) / 512 * 512;
  CUdeviceptr full = 0;
  CUresult r = Allocate("cuMemAllocPitch", &full, 1ULL * p * height, t_current);
  if (r == CUDA_SUCCESS) {
    *dptr = static_cast<unsigned int>(full);
    *pitch = p;
  }
  return r;
}
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int) {
  return Allocate("cuMemAllocManaged", dptr, bytes, t_current);
}
// Graphs: handles only (graph memory is not modelled); instantiations are counted.
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph, const CUgraphNode*, size_t,
                                CudaMemAllocNodeParams* params) {
  static std::atomic<unsigned long long> next{1};
  *node = reinterpret_cast<CUgraphNode>(static_cast<std::uintptr_t>(0x700000 + next++ * 64));
  params->dptr = 0x7e0000000000ULL;
  return CUDA_SUCCESS;
}
CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, const void*,
                           size_t n, CudaGraphNodeParams* params) {
  if (params->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    return cuGraphAddMemAllocNode(node, graph, deps, n, &params->alloc);
  }
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph, unsigned long long) {
  static std::atomic<unsigned long long> next{1};
  Count("cuGraphInstantiateWithFlags");
  *exec = reinterpret_cast<CUgraphExec>(static_cast<std::uintptr_t>(0x800000 + next++ * 64));
  return CUDA_SUCCESS;
}
CUresult cuGraphCreate(CUgraph* graph, unsigned int) {
  static std::atomic<unsigned long long> next{1};
  *graph = reinterpret_cast<CUgraph>(static_cast<std::uintptr_t>(0x600000 + next++ * 64));
  return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec) { return CUDA_SUCCESS; }
CUresult cuGraphDestroy(CUgraph) { return CUDA_SUCCESS; }

// Imported external memory (allocated by Vulkan & co. outside this model): a handle only.
CUresult cuImportExternalMemory(CUexternalMemory* ext, const CudaExternalMemoryHandleDesc* desc) {
  static std::atomic<unsigned long long> next{1};
  if (desc == nullptr || desc->size == 0) return CUDA_ERROR_INVALID_VALUE;
  *ext = reinterpret_cast<CUexternalMemory>(static_cast<std::uintptr_t>(0x500000 + next++ * 64));
  Count("cuImportExternalMemory");
  return CUDA_SUCCESS;
}
CUresult cuDestroyExternalMemory(CUexternalMemory) { return CUDA_SUCCESS; }

// Streams and pools: a stream handle is its context's handle (0x1000 + ordinal, as primary
// contexts), a pool handle 0x3000 + ordinal; the default streams (0, 1, 2) belong to the current
// context. Asynchronous allocations land on the stream's or the pool's device.
int StreamDevice(CUstream stream) {
  auto h = reinterpret_cast<std::uintptr_t>(stream);
  return h > 2 ? static_cast<int>(h & 0xff) : t_current;
}
CUresult cuStreamGetCtx(CUstream stream, CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000 + StreamDevice(stream)));
  return CUDA_SUCCESS;
}
thread_local CUcontext t_ctx_stack[8];
thread_local int t_ctx_depth = 0;
extern thread_local CUcontext t_ctx;
CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (t_ctx_depth == 8) return CUDA_ERROR_INVALID_VALUE;
  t_ctx_stack[t_ctx_depth++] = t_ctx;
  return cuCtxSetCurrent(ctx);
}
CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (t_ctx_depth == 0) return CUDA_ERROR_INVALID_VALUE;
  if (ctx != nullptr) *ctx = t_ctx;
  return cuCtxSetCurrent(t_ctx_stack[--t_ctx_depth]);
}
// Pools keep freed memory up to their release threshold (the driver still holds it) and reuse it
// for their next allocations; cuMemPoolTrimTo gives it back.
struct FakePool {
  unsigned long long threshold = 0;
  unsigned long long kept = 0;
};
std::map<unsigned long long, FakePool> g_pools;               // pool handle -> state
std::map<unsigned long long, unsigned long long> g_ptr_pool;  // async pointer -> its pool
unsigned long long PoolOf(CUmemoryPool pool, CUstream stream) {
  auto h = reinterpret_cast<std::uintptr_t>(pool);
  return h != 0 ? h : 0x3000 + static_cast<unsigned>(StreamDevice(stream));
}
CUresult PoolAllocate(const char* name, CUdeviceptr* d, size_t n, unsigned long long pool) {
  if ((pool & fake::kHostPoolBit) != 0) {  // host memory: no device bytes
    static std::atomic<unsigned long long> next_host{0x5a0000000000ULL};
    *d = next_host.fetch_add((n + 4095) / 4096 * 4096 + 4096);
    std::lock_guard<std::mutex> lock(M().mu);
    g_ptr_pool[*d] = pool;
    return CUDA_SUCCESS;
  }
  int phys = Physical(static_cast<int>(pool & 0xff));
  if (phys < 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long reuse = 0;
  {
    std::lock_guard<std::mutex> lock(M().mu);
    FakePool& p = g_pools[pool];
    reuse = p.kept < n ? p.kept : n;
    p.kept -= reuse;
    M().used[phys] -= reuse;
  }
  CUresult r = Allocate(name, d, n, static_cast<int>(pool & 0xff));
  std::lock_guard<std::mutex> lock(M().mu);
  if (r != CUDA_SUCCESS) {
    g_pools[pool].kept += reuse;
    M().used[phys] += reuse;
  } else {
    g_ptr_pool[*d] = pool;
    fake::Disown(*d);  // owned by the pool, not the context
  }
  return r;
}
CUresult PoolFree(const char* name, CUdeviceptr d) {
  unsigned long long pool = 0, size = 0;
  {
    std::lock_guard<std::mutex> lock(M().mu);
    auto it = g_ptr_pool.find(d);
    if (it != g_ptr_pool.end() && (it->second & fake::kHostPoolBit) != 0) {
      g_ptr_pool.erase(it);
      return CUDA_SUCCESS;
    }
    auto alloc = M().allocs.find(d);
    if (it != g_ptr_pool.end() && alloc != M().allocs.end()) {
      pool = it->second;
      size = alloc->second.second;
      g_ptr_pool.erase(it);
    }
  }
  CUresult r = Release(name, d);
  if (r != CUDA_SUCCESS || pool == 0) return r;
  int phys = Physical(static_cast<int>(pool & 0xff));  // before the lock: it takes it too
  std::lock_guard<std::mutex> lock(M().mu);
  FakePool& p = g_pools[pool];
  unsigned long long room = p.threshold > p.kept ? p.threshold - p.kept : 0;
  unsigned long long keep = room < size ? room : size;
  p.kept += keep;
  M().used[phys] += keep;
  return r;
}
void TrimPool(unsigned long long pool, unsigned long long keep) {
  int phys = Physical(static_cast<int>(pool & 0xff));
  std::lock_guard<std::mutex> lock(M().mu);
  FakePool& p = g_pools[pool];
  unsigned long long excess = p.kept > keep ? p.kept - keep : 0;
  p.kept -= excess;
  M().used[phys] -= excess;
}
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void* value) {
  if (attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) return CUDA_SUCCESS;
  auto h = reinterpret_cast<std::uintptr_t>(pool);
  unsigned long long threshold = *static_cast<cuuint64_t*>(value);
  {
    std::lock_guard<std::mutex> lock(M().mu);
    g_pools[h].threshold = threshold;
  }
  TrimPool(h, threshold);
  return CUDA_SUCCESS;
}
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  TrimPool(reinterpret_cast<std::uintptr_t>(pool), keep);
  return CUDA_SUCCESS;
}
// Created pools: 0x3000 + ordinal + 0x100 * n (the low byte stays the ordinal).
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  static std::atomic<unsigned> next{1};
  unsigned long long host =
      props->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? 0 : fake::kHostPoolBit;
  *pool = reinterpret_cast<CUmemoryPool>(
      static_cast<std::uintptr_t>((0x3000 + 0x100 * next++ + props->location.id) | host));
  return CUDA_SUCCESS;
}
CUresult cuMemPoolDestroy(CUmemoryPool) { return CUDA_SUCCESS; }
CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  *pool = reinterpret_cast<CUmemoryPool>(static_cast<std::uintptr_t>(0x3000 + dev));
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  return cuDeviceGetMemPool(pool, dev);
}
CUresult cuMemAllocAsync(CUdeviceptr* d, size_t n, CUstream stream) {
  return PoolAllocate("cuMemAllocAsync", d, n, PoolOf(nullptr, stream));
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* d, size_t n, CUstream stream) {
  return PoolAllocate("cuMemAllocAsync_ptsz", d, n, PoolOf(nullptr, stream));
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* d, size_t n, CUmemoryPool pool, CUstream stream) {
  return PoolAllocate("cuMemAllocFromPoolAsync", d, n, PoolOf(pool, stream));
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* d, size_t n, CUmemoryPool pool,
                                      CUstream stream) {
  return PoolAllocate("cuMemAllocFromPoolAsync_ptsz", d, n, PoolOf(pool, stream));
}
CUresult cuMemFreeAsync(CUdeviceptr d, CUstream) { return PoolFree("cuMemFreeAsync", d); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream) { return PoolFree("cuMemFreeAsync_ptsz", d); }

#define FAKE_LAUNCH(name, ...) \
  CUresult name(__VA_ARGS__) { \
    Count(#name);              \
    return CUDA_SUCCESS;       \
  }
FAKE_LAUNCH(cuLaunchKernel, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
            unsigned, CUstream, void**, void**)
FAKE_LAUNCH(cuLaunchKernel_ptsz, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
            unsigned, unsigned, CUstream, void**, void**)
FAKE_LAUNCH(cuLaunchKernelEx, const CUlaunchConfig*, CUfunction, void**, void**)
FAKE_LAUNCH(cuLaunchKernelEx_ptsz, const CUlaunchConfig*, CUfunction, void**, void**)
FAKE_LAUNCH(cuLaunchCooperativeKernel, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
            unsigned, unsigned, CUstream, void**)
FAKE_LAUNCH(cuLaunchCooperativeKernel_ptsz, CUfunction, unsigned, unsigned, unsigned, unsigned,
            unsigned, unsigned, unsigned, CUstream, void**)
FAKE_LAUNCH(cuGraphLaunch, CUgraphExec, CUstream)
FAKE_LAUNCH(cuGraphLaunch_ptsz, CUgraphExec, CUstream)
FAKE_LAUNCH(cuLaunch, CUfunction)
FAKE_LAUNCH(cuLaunchGrid, CUfunction, int, int)
FAKE_LAUNCH(cuLaunchGridAsync, CUfunction, int, int, CUstream)
FAKE_LAUNCH(cuLaunchCooperativeKernelMultiDevice, void*, unsigned, unsigned)
#undef FAKE_LAUNCH

// Defined in fake_cuda_ctx.cc / fake_cuda_vmm.cc.
CUresult cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuModuleLoad(void**, const char*);
CUresult cuModuleLoadDataEx(void**, const void*, unsigned int, void*, void**);
CUresult cuModuleLoadFatBinary(void**, const void*);
CUresult cuLibraryLoadFromFile(void**, const char*, void*, void**, unsigned int, void*, void**,
                               unsigned int);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle*, void*);
// Graph instantiation with parameters (the per-thread variant is what --default-stream
// per-thread builds call).
CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph, void*) {
  static std::atomic<unsigned long long> next{1};
  Count("cuGraphInstantiateWithParams");
  *exec = reinterpret_cast<CUgraphExec>(static_cast<std::uintptr_t>(0x880000 + next++ * 64));
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph, void*) {
  static std::atomic<unsigned long long> next{1};
  Count("cuGraphInstantiateWithParams_ptsz");
  *exec = reinterpret_cast<CUgraphExec>(static_cast<std::uintptr_t>(0x8c0000 + next++ * 64));
  return CUDA_SUCCESS;
}
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status);

}  // extern "C"

namespace {

struct ProcEntry {
  const char* name;
  int min_version;  // the entry applies from this cudaVersion on (the latest match wins)
  bool ptsz;        // chosen only with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
  void* fn;
};

#define E(name, symbol, version, ptsz) \
  { name, version, ptsz, reinterpret_cast<void*>(&symbol) }
const ProcEntry kProcTable[] = {
    E("cuInit", cuInit, 2000, false),
    E("cuDriverGetVersion", cuDriverGetVersion, 2020, false),
    E("cuGetProcAddress", cuGetProcAddress, 11030, false),
    E("cuGetProcAddress", cuGetProcAddress_v2, 12050, false),
    E("cuMemAlloc", cuMemAlloc, 2000, false),
    E("cuMemAlloc", cuMemAlloc_v2, 3020, false),
    E("cuMemFree", cuMemFree_v2, 3020, false),
    E("cuMemAllocPitch", cuMemAllocPitch_v2, 3020, false),
    E("cuMemAllocManaged", cuMemAllocManaged, 6000, false),
    E("cuMemGetInfo", cuMemGetInfo_v2, 3020, false),
    E("cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020, false),
    E("cuMemCreate", cuMemCreate, 10020, false),
    E("cuMemRelease", cuMemRelease, 10020, false),
    E("cuMemAllocAsync", cuMemAllocAsync, 11020, false),
    E("cuMemAllocAsync", cuMemAllocAsync_ptsz, 11020, true),
    E("cuMemFreeAsync", cuMemFreeAsync, 11020, false),
    E("cuMemFreeAsync", cuMemFreeAsync_ptsz, 11020, true),
    E("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, 11020, false),
    E("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync_ptsz, 11020, true),
    E("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000, false),
    E("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000, false),
    E("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2, 11000, false),
    E("cuCtxCreate", cuCtxCreate, 2000, false),
    E("cuCtxCreate", cuCtxCreate_v2, 3020, false),
    E("cuCtxDestroy", cuCtxDestroy, 2000, false),
    E("cuCtxDestroy", cuCtxDestroy_v2, 4000, false),
    E("cuArrayCreate", cuArrayCreate, 2000, false),
    E("cuArrayCreate", cuArrayCreate_v2, 3020, false),
    E("cuMemAllocPitch", cuMemAllocPitch, 2000, false),
    E("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle, 11000, false),
    E("cuGraphInstantiateWithParams", cuGraphInstantiateWithParams, 12000, false),
    E("cuGraphInstantiateWithParams", cuGraphInstantiateWithParams_ptsz, 12000, true),
    E("cuCtxCreate", cuCtxCreate_v3, 11040, false),
    E("cuCtxCreate", cuCtxCreate_v4, 12050, false),
    E("cuCtxGetDevice", cuCtxGetDevice, 2000, false),
    E("cuGreenCtxCreate", cuGreenCtxCreate, 12040, false),
    E("cuModuleLoad", cuModuleLoad, 2000, false),
    E("cuModuleLoadDataEx", cuModuleLoadDataEx, 2010, false),
    E("cuModuleLoadFatBinary", cuModuleLoadFatBinary, 2000, false),
    E("cuLibraryLoadFromFile", cuLibraryLoadFromFile, 12000, false),
    E("cuLaunchKernel", cuLaunchKernel, 4000, false),
    E("cuLaunchKernel", cuLaunchKernel_ptsz, 7000, true),
    E("cuLaunchKernelEx", cuLaunchKernelEx, 11060, false),
    E("cuLaunchKernelEx", cuLaunchKernelEx_ptsz, 11060, true),
    E("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel, 9000, false),
    E("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel_ptsz, 9000, true),
    E("cuGraphLaunch", cuGraphLaunch, 10000, false),
    E("cuGraphLaunch", cuGraphLaunch_ptsz, 10000, true),
};
#undef E

// FAKE_CUDA_PROC_ALIASES=1: the resolver returns internal aliases (not the exported
// functions) for cuMemAlloc and the per-thread cuLaunchKernel, as a driver may.
CUresult AliasMemAlloc(CUdeviceptr* dptr, size_t bytes) {
  return Allocate("cuMemAlloc_v2", dptr, bytes, t_current);
}
CUresult AliasArrayCreate(void** array, const FakeArrayDesc* d) {
  unsigned long long h = d->Height == 0 ? 1 : d->Height;
  return CreateArray("cuArrayCreate_v2", array,
                     d->Width * h * d->NumChannels * TexelBytes(d->Format));
}
CUresult AliasInstantiateWithParamsPtsz(CUgraphExec* exec, CUgraph, void*) {
  Count("cuGraphInstantiateWithParams_ptsz");
  *exec = reinterpret_cast<CUgraphExec>(static_cast<std::uintptr_t>(0x8e0000));
  return CUDA_SUCCESS;
}
CUresult AliasLaunchPtsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, CUstream, void**, void**) {
  Count("cuLaunchKernel_ptsz");
  return CUDA_SUCCESS;
}

CUresult Resolve(const char* symbol, void** pfn, int version, cuuint64_t flags, int* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const ProcEntry* best = nullptr;
  bool name_known = false;
  for (const ProcEntry& e : kProcTable) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    name_known = true;
    if (e.min_version > version) continue;
    if (e.ptsz && !want_ptsz) continue;
    if (best == nullptr || e.min_version > best->min_version || (e.ptsz && !best->ptsz)) best = &e;
  }
  *pfn = best ? best->fn : nullptr;
  if (status) *status = best ? 0 : (name_known ? 2 : 1);
  if (best != nullptr && fake::EnvU64("FAKE_CUDA_PROC_ALIASES", 0) != 0) {
    if (best->fn == reinterpret_cast<void*>(&cuMemAlloc_v2)) {
      *pfn = reinterpret_cast<void*>(&AliasMemAlloc);
    } else if (best->fn == reinterpret_cast<void*>(&cuLaunchKernel_ptsz)) {
      *pfn = reinterpret_cast<void*>(&AliasLaunchPtsz);
    } else if (best->fn == reinterpret_cast<void*>(&cuArrayCreate_v2)) {
      *pfn = reinterpret_cast<void*>(&AliasArrayCreate);
    } else if (best->fn == reinterpret_cast<void*>(&cuGraphInstantiateWithParams_ptsz)) {
      *pfn = reinterpret_cast<void*>(&AliasInstantiateWithParamsPtsz);
    }
  }
  return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // namespace

extern "C" {
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  Count("cuGetProcAddress");
  return Resolve(symbol, pfn, version, flags, nullptr);
}
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  Count("cuGetProcAddress_v2");
  return Resolve(symbol, pfn, version, flags, status);
}
}  // extern "C"

// The fake's own entry points by exact name, bypassing symbol interposition (inside this
// library `&cuMemAlloc_v2` would resolve to libvgpu's hook): the benchmark's "no preload"
// baseline inside a preloaded process.
namespace {
CUresult DirectAlloc(CUdeviceptr* dptr, size_t bytes) {
  return Allocate("cuMemAlloc_v2", dptr, bytes, t_current);
}
CUresult DirectFree(CUdeviceptr dptr) { return Release("cuMemFree_v2", dptr); }
CUresult DirectLaunch(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, CUstream, void**, void**) {
  Count("cuLaunchKernel");
  return CUDA_SUCCESS;
}
}  // namespace

extern "C" void* fake_cuda_entry(const char* name) {
  if (std::strcmp(name, "cuMemAlloc_v2") == 0) return reinterpret_cast<void*>(&DirectAlloc);
  if (std::strcmp(name, "cuMemFree_v2") == 0) return reinterpret_cast<void*>(&DirectFree);
  if (std::strcmp(name, "cuLaunchKernel") == 0) return reinterpret_cast<void*>(&DirectLaunch);
  // A retain no interposer sees (cudart reaches the driver through private tables too).
  if (std::strcmp(name, "cuDevicePrimaryCtxRetain") == 0) {
    return reinterpret_cast<void*>(&RetainPrimary);
  }
  return nullptr;
}

namespace hami::vgpu::fake {
CUcontext CurrentContext() { return t_ctx; }
int CurrentOrdinal() { return t_current; }
}  // namespace hami::vgpu::fake
