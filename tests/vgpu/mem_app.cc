// Test program of the memory audit (issue 29): run by memory_audit_test.cc under
// LD_PRELOAD=libvgpu.so with the fake driver (fake_cuda*.cc, which follows cuda.h: contexts own
// their allocations, lazy module loading, reference-counted VMM handles, pools that keep freed
// memory). argv[1] names a scenario, argv[2] is the container's limit in bytes; exit status 0 =
// every check passed, failures are printed to stderr.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "vgpu/cuda_defs.h"

using namespace hami::vgpu;  // NOLINT: mirrors a C driver client.

extern "C" {
CUresult cuInit(unsigned int);
CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetCurrent(CUcontext*);
CUresult cuCtxCreate(CUcontext*, unsigned int, CUdevice);
CUresult cuCtxCreate_v4(CUcontext*, void*, unsigned int, CUdevice);
CUresult cuCtxDestroy(CUcontext);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuMemGetInfo_v2(size_t*, size_t*);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemAddressReserve(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle*, void*);
CUresult cuMemExportToShareableHandle(void*, CUmemGenericAllocationHandle, int, unsigned long long);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle*, void*, int);
CUresult cuMemPoolCreate(CUmemoryPool*, const CUmemPoolProps*);
CUresult cuMemPoolSetAttribute(CUmemoryPool, int, void*);
CUresult cuDeviceGetMemPool(CUmemoryPool*, CUdevice);
CUresult cuMemAllocAsync(CUdeviceptr*, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuModuleLoadData(void**, const void*);
CUresult cuModuleLoad(void**, const char*);
CUresult cuModuleGetGlobal_v2(CUdeviceptr*, size_t*, void*, const char*);
CUresult cuLibraryLoadData(void**, const void*, void*, void**, unsigned int, void*, void**,
                           unsigned int);
CUresult cuLibraryGetGlobal(CUdeviceptr*, size_t*, void*, const char*);
CUresult cuArrayCreate_v2(void**, const void*);
CUresult cuArrayDestroy(void*);
CUresult cuLaunchCooperativeKernelMultiDevice(void*, unsigned int, unsigned int);
unsigned long long fake_cuda_physical_used(int);
void* fake_cuda_entry(const char* name);
CUresult cuGraphCreate(CUgraph*, unsigned int);
CUresult cuGraphAddMemAllocNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                CudaMemAllocNodeParams*);
CUresult cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, int*);
}

namespace {

int g_failures = 0;
unsigned long long g_limit = 0;
constexpr unsigned long long kMiB = 1ULL << 20;

#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "CHECK failed %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                                \
    }                                                                              \
  } while (0)
#define CHECK_EQ(a, b)                                                                          \
  do {                                                                                          \
    auto va_ = (a);                                                                             \
    auto vb_ = (b);                                                                             \
    if (!(va_ == vb_)) {                                                                        \
      std::fprintf(stderr, "CHECK_EQ failed %s:%d: %s = %llu, %s = %llu\n", __FILE__, __LINE__, \
                   #a, static_cast<unsigned long long>(va_), #b,                                \
                   static_cast<unsigned long long>(vb_));                                       \
      ++g_failures;                                                                             \
    }                                                                                           \
  } while (0)

// Never more held on the device than the limit.
#define CHECK_HELD() CHECK(fake_cuda_physical_used(0) <= g_limit)

CUcontext UseDevice(int dev) {
  CUcontext ctx = nullptr;
  CHECK_EQ(cuInit(0), CUDA_SUCCESS);
  CHECK_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  CHECK_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  return ctx;
}

CUmemAllocationProp DeviceProp() {
  CUmemAllocationProp prop{};
  prop.type = 1;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  return prop;
}

// A legal allocation of 0.9x the limit, which must succeed when nothing else is held.
void MustFit(const char* after) {
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc_v2(&p, g_limit * 9 / 10);
  if (r != CUDA_SUCCESS) std::fprintf(stderr, "after %s: a legal allocation was refused\n", after);
  CHECK_EQ(r, CUDA_SUCCESS);
  if (r == CUDA_SUCCESS) CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
}

// ctxdestroy: a destroyed context's allocations are freed by the driver, so their charges go
// (finding 8): the primary context's reset, its last release, cuCtxDestroy_v2 and the v1
// cuCtxDestroy of a context with live allocations.
void CtxDestroy() {
  const size_t big = g_limit * 9 / 10;
  CUdeviceptr p = 0;
  UseDevice(0);
  CHECK_EQ(cuMemAlloc_v2(&p, big), CUDA_SUCCESS);
  CHECK_EQ(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), 0u);
  UseDevice(0);
  MustFit("cuDevicePrimaryCtxReset_v2");
  CHECK_EQ(cuMemAlloc_v2(&p, big), CUDA_SUCCESS);
  CHECK_EQ(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);  // the last reference
  CHECK_EQ(fake_cuda_physical_used(0), 0u);
  CUcontext primary = UseDevice(0);
  MustFit("the last cuDevicePrimaryCtxRelease_v2");
  struct Way {
    const char* name;
    std::function<CUresult(CUcontext*)> create;
    std::function<CUresult(CUcontext)> destroy;
  } ways[] = {
      {"cuCtxDestroy_v2", [](CUcontext* c) { return cuCtxCreate_v4(c, nullptr, 0, 0); },
       cuCtxDestroy_v2},
      {"cuCtxDestroy (v1)", [](CUcontext* c) { return cuCtxCreate(c, 0, 0); }, cuCtxDestroy},
  };
  for (const Way& way : ways) {
    CUcontext ctx = nullptr;
    CHECK_EQ(way.create(&ctx), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_EQ(cuMemAlloc_v2(&p, big), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSetCurrent(primary), CUDA_SUCCESS);
    CHECK_EQ(way.destroy(ctx), CUDA_SUCCESS);
    CHECK_EQ(fake_cuda_physical_used(0), 0u);
    MustFit(way.name);
  }
}

// unmaprange: one cuMemUnmap over two mappings of released handles frees both (finding 8).
void UnmapRange() {
  UseDevice(0);
  CUmemAllocationProp prop = DeviceProp();
  const size_t chunk = g_limit * 4 / 10 / (2 * kMiB) * (2 * kMiB);
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle a = 0, b = 0;
  CHECK_EQ(cuMemAddressReserve(&va, 2 * chunk, 0, 0, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemCreate(&a, chunk, &prop, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemCreate(&b, chunk, &prop, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemMap(va, chunk, 0, a, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemMap(va + chunk, chunk, 0, b, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemRelease(a), CUDA_SUCCESS);
  CHECK_EQ(cuMemRelease(b), CUDA_SUCCESS);
  CHECK_EQ(cuMemUnmap(va, 2 * chunk), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), 0u);
  MustFit("one cuMemUnmap of two mappings");
}

// hostpool: a pool located in host memory holds no device memory (finding 8).
void HostPool() {
  UseDevice(0);
  CUmemPoolProps props{};
  props.allocType = 1;
  props.location.type = 2;  // CU_MEM_LOCATION_TYPE_HOST
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  CHECK_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  CHECK_EQ(cuMemAllocFromPoolAsync(&p, g_limit * 9 / 10, pool, nullptr), CUDA_SUCCESS);
  MustFit("an allocation from a host pool");
}

// retain: a handle retained from a mapping keeps the memory alive after the original handle is
// released and the mapping gone (finding 4); its release gives the charge back.
void Retain() {
  UseDevice(0);
  CUmemAllocationProp prop = DeviceProp();
  const size_t chunk = g_limit * 6 / 10 / (2 * kMiB) * (2 * kMiB);
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle a = 0, kept = 0, b = 0;
  CHECK_EQ(cuMemAddressReserve(&va, chunk, 0, 0, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemCreate(&a, chunk, &prop, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemMap(va, chunk, 0, a, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemRetainAllocationHandle(&kept, reinterpret_cast<void*>(va + 4096)), CUDA_SUCCESS);
  CHECK_EQ(cuMemRelease(a), CUDA_SUCCESS);
  CHECK_EQ(cuMemUnmap(va, chunk), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), chunk);  // alive through the retained handle
  CHECK_EQ(cuMemCreate(&b, chunk, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_HELD();
  CHECK_EQ(cuMemRelease(kept), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), 0u);
  MustFit("the retained handle's release");
}

// exportimport: an exported and re-imported allocation outlives the original handle (finding 4).
void ExportImport() {
  UseDevice(0);
  CUmemAllocationProp prop = DeviceProp();
  prop.requestedHandleTypes = 1;  // POSIX file descriptor
  const size_t chunk = g_limit * 6 / 10 / (2 * kMiB) * (2 * kMiB);
  CUmemGenericAllocationHandle a = 0, imported = 0, b = 0;
  CHECK_EQ(cuMemCreate(&a, chunk, &prop, 0), CUDA_SUCCESS);
  int fd = -1;
  CHECK_EQ(cuMemExportToShareableHandle(&fd, a, 1, 0), CUDA_SUCCESS);
  // What a peer does with the fd it received (the same open file, another number).
  int peer_fd = dup(fd);
  CHECK_EQ(cuMemImportFromShareableHandle(
               &imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(peer_fd)), 1),
           CUDA_SUCCESS);
  CHECK_EQ(cuMemRelease(a), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), chunk);  // alive through the imported handle
  CHECK_EQ(cuMemCreate(&b, chunk, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_HELD();
  CHECK_EQ(cuMemRelease(imported), CUDA_SUCCESS);
}

// poolfree: cuMemFree_v2 of a pool allocation returns it to the pool, which keeps it up to its
// release threshold: that part stays charged (finding 4).
void PoolFree() {
  UseDevice(0);
  CUmemoryPool pool = nullptr;
  CHECK_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  cuuint64_t max = ~cuuint64_t{0};
  CHECK_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max), CUDA_SUCCESS);
  const size_t chunk = g_limit * 6 / 10;
  CUdeviceptr p = 0, q = 0;
  CHECK_EQ(cuMemAllocAsync(&p, chunk, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), chunk);  // the pool keeps it
  CHECK_EQ(cuMemAlloc_v2(&q, chunk), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_HELD();
}

// lazy: modules loaded lazily (the driver's default) commit their globals at first use; under
// a limit they are refused at the load, never held past the limit (finding 2).
void Lazy() {
  UseDevice(0);
  std::string image = "globals=" + std::to_string(g_limit * 9 / 4);
  void* module = nullptr;
  CUresult r = cuModuleLoadData(&module, image.c_str());
  if (r == CUDA_SUCCESS) {
    CUdeviceptr d = 0;
    size_t n = 0;
    cuModuleGetGlobal_v2(&d, &n, module, "g");
  }
  CHECK_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_HELD();
}

// precontext: a library loaded before any context, then a context (finding 2): its globals
// are refused at the load, not committed by the context's creation.
void PreContext() {
  CHECK_EQ(cuInit(0), CUDA_SUCCESS);
  std::string image = "globals=" + std::to_string(g_limit * 9 / 4);
  void* library = nullptr;
  CUresult r = cuLibraryLoadData(&library, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  UseDevice(0);
  if (r == CUDA_SUCCESS) {
    CUdeviceptr d = 0;
    size_t n = 0;
    cuLibraryGetGlobal(&d, &n, library, "g");
  }
  CHECK_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_HELD();
  MustFit("a refused library");
}

// nested: a driver entry implemented by another hooked entry (FAKE_CUDA_NESTED_LOAD) completes
// and is charged (finding 9).
void Nested() {
  UseDevice(0);
  char path[] = "/tmp/vgpu-nested-XXXXXX";
  int fd = mkstemp(path);
  std::string image = "globals=" + std::to_string(g_limit / 2);
  CHECK(fd >= 0 && write(fd, image.c_str(), image.size()) == static_cast<ssize_t>(image.size()));
  close(fd);
  alarm(10);  // a deadlock fails the test instead of hanging it
  void* module = nullptr;
  CHECK_EQ(cuModuleLoad(&module, path), CUDA_SUCCESS);
  alarm(0);
  unlink(path);
  size_t free_bytes = 0, total = 0;
  CHECK_EQ(cuMemGetInfo_v2(&free_bytes, &total), CUDA_SUCCESS);
  CHECK(free_bytes <= g_limit - g_limit / 2);
}

// multidevice: a count past the list's end is the driver's to reject; nothing reads past it
// (finding 9). The list ends at a page that cannot be read.
void MultiDevice() {
  UseDevice(0);
  long page = sysconf(_SC_PAGESIZE);
  auto* mem = static_cast<char*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  CHECK(mem != MAP_FAILED);
  mprotect(mem + page, page, PROT_NONE);
  auto* list = reinterpret_cast<CudaLaunchParams*>(mem + page - 2 * sizeof(CudaLaunchParams));
  std::memset(static_cast<void*>(list), 0, 2 * sizeof(CudaLaunchParams));
  cuLaunchCooperativeKernelMultiDevice(list, 64, 0);
  std::printf("survived\n");
}

// racedestroy: an array destroyed while another thread creates one (FAKE_CUDA_CREATE_DELAY_MS)
// does not make the new array look free (finding 6).
void RaceDestroy() {
  UseDevice(0);
  struct Desc {
    size_t Width, Height;
    int Format;
    unsigned int NumChannels;
  } desc{16384, g_limit * 4 / 10 / 16384 / 4, 3 /* float */, 1};
  void* first = nullptr;
  CHECK_EQ(cuArrayCreate_v2(&first, &desc), CUDA_SUCCESS);
  size_t free_before = 0, total = 0;
  CHECK_EQ(cuMemGetInfo_v2(&free_before, &total), CUDA_SUCCESS);
  void* second = nullptr;
  CUcontext ctx = nullptr;
  cuCtxGetCurrent(&ctx);
  std::thread creator([&] {
    cuCtxSetCurrent(ctx);
    CHECK_EQ(cuArrayCreate_v2(&second, &desc), CUDA_SUCCESS);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  CHECK_EQ(cuArrayDestroy(first), CUDA_SUCCESS);
  creator.join();
  size_t free_after = 0;
  CHECK_EQ(cuMemGetInfo_v2(&free_after, &total), CUDA_SUCCESS);
  CHECK_EQ(free_after, free_before);  // one array held before and after
}

// overlap: two threads create an array at once; the fake driver (FAKE_CUDA_CREATE_RENDEZVOUS_MS)
// lets the first finish only once the second is inside it too. Both succeed unless libvgpu
// makes one wait for the other (its measurement under a memory limit; issue 29 item 5).
void Overlap() {
  UseDevice(0);
  struct Desc {
    size_t Width, Height;
    int Format;
    unsigned int NumChannels;
  } desc{1024, 1024, 3 /* float */, 1};
  CUcontext ctx = nullptr;
  cuCtxGetCurrent(&ctx);
  void* arrays[2] = {nullptr, nullptr};
  CUresult results[2] = {CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE};
  std::thread threads[2];
  for (int i = 0; i < 2; ++i) {
    threads[i] = std::thread([&, i] {
      cuCtxSetCurrent(ctx);
      results[i] = cuArrayCreate_v2(&arrays[i], &desc);
    });
  }
  for (auto& t : threads) t.join();
  CHECK_EQ(results[0], CUDA_SUCCESS);
  CHECK_EQ(results[1], CUDA_SUCCESS);
  for (void* a : arrays) {
    if (a != nullptr) CHECK_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  }
}

// pidns: this process is not recognisable in NVML (FAKE_NVML_HIDE_SELF) while another tenant
// frees memory during our creation: nothing may be measured from the device-wide figure
// (finding 6).
void PidNamespace() {
  UseDevice(0);
  struct Desc {
    size_t Width, Height;
    int Format;
    unsigned int NumChannels;
  } desc{16384, g_limit * 3 / 2 / 16384 / 4, 3 /* float */, 1};
  void* array = nullptr;
  CUresult r = cuArrayCreate_v2(&array, &desc);
  CHECK_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_HELD();
}

// legacy: the entries of finding 3, reached the ways applications reach them: the per-thread
// graph instantiation through cuGetProcAddress, the CUDA 2.0 entries through dlsym and through
// cuGetProcAddress(cudaVersion 2000). Each must be libvgpu's hook and refuse 2x the limit.
void Legacy() {
  UseDevice(0);
  void* self = dlopen(std::getenv("VGPU_LIB_PATH"), RTLD_LAZY | RTLD_NOLOAD);
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  CHECK(self != nullptr && cuda != nullptr);
  if (self == nullptr || cuda == nullptr) return;
  auto hooked = [&](const char* what, const char* hook, void* fn) {
    void* want = dlsym(self, hook);
    if (fn == nullptr || fn != want) {
      std::fprintf(stderr, "%s: %p is not libvgpu's %s (%p)\n", what, fn, hook, want);
      ++g_failures;
      return false;
    }
    return true;
  };
  void* fn = nullptr;
  int status = 0;
  CHECK_EQ(cuGetProcAddress_v2("cuGraphInstantiateWithParams", &fn, 12000,
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
           CUDA_SUCCESS);
  if (hooked("cuGraphInstantiateWithParams, per-thread", "cuGraphInstantiateWithParams_ptsz", fn)) {
    CUgraph graph = nullptr;
    CHECK_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
    CudaMemAllocNodeParams params{};
    params.poolProps.allocType = 1;
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.bytesize = 2 * g_limit;
    CUgraphNode node = nullptr;
    CHECK_EQ(cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &params), CUDA_SUCCESS);
    CUgraphExec exec = nullptr;
    CHECK_EQ(
        reinterpret_cast<CUresult (*)(CUgraphExec*, CUgraph, void*)>(fn)(&exec, graph, nullptr),
        CUDA_ERROR_OUT_OF_MEMORY);
  }
  struct V1 {
    const char* name;
    std::function<CUresult(void*)> call;
  } v1[] = {
      {"cuMemAllocPitch",
       [](void* f) {
         unsigned int p = 0, pitch = 0;
         return reinterpret_cast<CUresult (*)(unsigned*, unsigned*, unsigned, unsigned, unsigned)>(
             f)(&p, &pitch, 65536, static_cast<unsigned>(2 * g_limit / 65536), 4);
       }},
      {"cuArrayCreate",
       [](void* f) {
         struct {
           unsigned int Width, Height;
           int Format;
           unsigned int NumChannels;
         } desc{65536, static_cast<unsigned>(2 * g_limit / 65536 / 4), 3, 1};
         void* array = nullptr;
         return reinterpret_cast<CUresult (*)(void**, const void*)>(f)(&array, &desc);
       }},
      {"cuCtxCreate",
       [](void* f) {
         CUcontext ctx = nullptr;
         CUresult r = reinterpret_cast<CUresult (*)(CUcontext*, unsigned, CUdevice)>(f)(&ctx, 0, 0);
         if (r == CUDA_SUCCESS) cuCtxDestroy_v2(ctx);
         return r == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : r;  // hooked is what matters
       }},
  };
  for (const V1& entry : v1) {
    void* by_dlsym = dlsym(cuda, entry.name);
    void* by_resolver = nullptr;
    cuGetProcAddress_v2(entry.name, &by_resolver, 2000, 0, &status);
    for (void* f : {by_dlsym, by_resolver}) {
      if (!hooked(entry.name, entry.name, f)) continue;
      CHECK_EQ(entry.call(f), CUDA_ERROR_OUT_OF_MEMORY);
      CHECK_HELD();
    }
  }
}

// refused: with another process of the container holding 0.9x the limit, 0.5x is refused.
void Refused() {
  UseDevice(0);
  CUdeviceptr p = 0;
  CHECK_EQ(cuMemAlloc_v2(&p, g_limit / 2), CUDA_ERROR_OUT_OF_MEMORY);
}

// hold: holds 0.9x the limit until stdin closes, then frees it (exit status 0: it survived);
// meanwhile a thread reads the region continuously (cuMemGetInfo), as a busy process does.
void Hold() {
  CUcontext ctx = UseDevice(0);
  CUdeviceptr p = 0;
  CHECK_EQ(cuMemAlloc_v2(&p, g_limit * 9 / 10), CUDA_SUCCESS);
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    cuCtxSetCurrent(ctx);
    while (!stop.load()) {
      size_t free_bytes = 0, total = 0;
      cuMemGetInfo_v2(&free_bytes, &total);
    }
  });
  std::printf("holding\n");
  std::fflush(stdout);
  char buf[64];
  while (read(STDIN_FILENO, buf, sizeof(buf)) > 0) {
  }
  stop.store(true);
  reader.join();
  CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
}

// resolver: for every entry point of VGPU_ENTRY_POINTS (its base name, without version or
// per-thread suffix), at cudaVersion 2000, 3020, 11000, 12000 and 13000, with and without the
// per-thread flag, what libvgpu's cuGetProcAddress_v2 hands out is never a driver entry point
// libvgpu hooks (the fake driver resolves the families it implements).
void Resolver() {
  CHECK_EQ(cuInit(0), CUDA_SUCCESS);
  void* self = dlopen(std::getenv("VGPU_LIB_PATH"), RTLD_LAZY | RTLD_NOLOAD);
  CHECK(self != nullptr);
  std::FILE* f = std::fopen(std::getenv("VGPU_ENTRY_POINTS"), "r");
  CHECK(f != nullptr);
  if (f == nullptr || self == nullptr) return;
  Dl_info lib{};
  dladdr(dlsym(self, "cuMemAlloc_v2"), &lib);
  std::vector<std::string> bases;
  char line[256];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    std::string name(line);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    if (name.empty() || name[0] == '#') continue;
    for (const char* suffix : {"_ptsz", "_ptds"}) {
      if (name.size() > 5 && name.compare(name.size() - 5, 5, suffix) == 0)
        name.resize(name.size() - 5);
    }
    std::size_t v = name.rfind("_v");
    if (v != std::string::npos && v + 2 < name.size() &&
        name.find_first_not_of("0123456789", v + 2) == std::string::npos) {
      name.resize(v);
    }
    if (bases.empty() || bases.back() != name) bases.push_back(name);
  }
  std::fclose(f);
  int resolved = 0;
  for (const std::string& base : bases) {
    for (int version : {2000, 3020, 11000, 12000, 13000}) {
      for (cuuint64_t flags : {cuuint64_t{0}, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) {
        void* fn = nullptr;
        int status = 0;
        if (cuGetProcAddress_v2(base.c_str(), &fn, version, flags, &status) != CUDA_SUCCESS ||
            fn == nullptr) {
          continue;
        }
        ++resolved;
        Dl_info where{};
        if (dladdr(fn, &where) == 0 || where.dli_fbase == lib.dli_fbase ||
            where.dli_sname == nullptr) {
          continue;  // a hook, or an internal alias with no exported name
        }
        if (dlsym(self, where.dli_sname) != nullptr &&
            dladdr(dlsym(self, where.dli_sname), &where) != 0 && where.dli_fbase == lib.dli_fbase) {
          std::fprintf(stderr, "cuGetProcAddress(%s, %d, %llu) -> the driver's own %s\n",
                       base.c_str(), version, static_cast<unsigned long long>(flags),
                       where.dli_sname);
          ++g_failures;
        }
      }
    }
  }
  std::printf("%zu names, %d resolutions checked\n", bases.size(), resolved);
  CHECK(resolved > 50);
}

// aliases (FAKE_CUDA_PROC_ALIASES=1: the resolver hands out internal aliases): the by-name
// fallback covers every hooked family, not only the counted and throttled ones of old.
void Aliases() {
  UseDevice(0);
  void* self = dlopen(std::getenv("VGPU_LIB_PATH"), RTLD_LAZY | RTLD_NOLOAD);
  CHECK(self != nullptr);
  if (self == nullptr) return;
  struct Case {
    const char* symbol;
    int version;
    cuuint64_t flags;
    const char* hook;
  } cases[] = {
      {"cuArrayCreate", 3020, 0, "cuArrayCreate_v2"},
      {"cuGraphInstantiateWithParams", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
       "cuGraphInstantiateWithParams_ptsz"},
  };
  for (const Case& c : cases) {
    void* fn = nullptr;
    int status = 0;
    CHECK_EQ(cuGetProcAddress_v2(c.symbol, &fn, c.version, c.flags, &status), CUDA_SUCCESS);
    if (fn != dlsym(self, c.hook)) {
      std::fprintf(stderr, "cuGetProcAddress(%s): %p, not libvgpu's %s\n", c.symbol, fn, c.hook);
      ++g_failures;
    }
  }
}

// otherpod: another tenant allocates 0.9x the limit while this process creates its primary
// context (FAKE_GPU_OTHER_ALLOCS_ON_RETAIN): it is not booked as our context (finding 8).
void OtherPod() {
  UseDevice(0);
  MustFit("another tenant's allocation during our context creation");
}

// resetunseen: a primary context retained where no hook saw it (as cudart's private tables do)
// and reset: its allocations' charges go with it.
void ResetUnseen() {
  CHECK_EQ(cuInit(0), CUDA_SUCCESS);
  auto retain = reinterpret_cast<CUresult (*)(CUcontext*, CUdevice)>(
      fake_cuda_entry("cuDevicePrimaryCtxRetain"));
  CHECK(retain != nullptr);
  if (retain == nullptr) return;
  CUcontext ctx = nullptr;
  CHECK_EQ(retain(&ctx, 0), CUDA_SUCCESS);
  CHECK_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  CHECK_EQ(cuMemAlloc_v2(&p, g_limit * 9 / 10), CUDA_SUCCESS);
  CHECK_EQ(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), 0u);
  UseDevice(0);
  MustFit("a reset of a context retained unseen");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_limit = std::strtoull(argv[2], nullptr, 0);
  const std::string s = argv[1];
  struct Scenario {
    const char* name;
    void (*run)();
  } scenarios[] = {
      {"ctxdestroy", CtxDestroy},
      {"unmaprange", UnmapRange},
      {"hostpool", HostPool},
      {"retain", Retain},
      {"exportimport", ExportImport},
      {"poolfree", PoolFree},
      {"lazy", Lazy},
      {"precontext", PreContext},
      {"nested", Nested},
      {"multidevice", MultiDevice},
      {"racedestroy", RaceDestroy},
      {"overlap", Overlap},
      {"pidns", PidNamespace},
      {"legacy", Legacy},
      {"refused", Refused},
      {"hold", Hold},
      {"resolver", Resolver},
      {"aliases", Aliases},
      {"otherpod", OtherPod},
      {"resetunseen", ResetUnseen},
  };
  for (const Scenario& sc : scenarios) {
    if (s == sc.name) {
      sc.run();
      return g_failures == 0 ? 0 : 1;
    }
  }
  std::fprintf(stderr, "unknown scenario\n");
  return 2;
}
