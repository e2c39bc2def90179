// Test program run by preload_test.cc under LD_PRELOAD=libvgpu.so with the fake driver: calls
// the driver API directly (linked against the fake libcuda.so.1), through dlopen/dlsym and
// through cuGetProcAddress. argv[1] names a scenario; exit status 0 = every check passed,
// failures are printed to stderr.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
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
#include "vgpu/nvml_defs.h"

using namespace hami::vgpu;  // NOLINT: mirrors a C driver client.

extern "C" {
CUresult cuInit(unsigned int);
CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetCurrent(CUcontext*);
CUresult cuMemGetInfo_v2(size_t*, size_t*);
CUresult cuDeviceTotalMem_v2(size_t*, CUdevice);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocPitch_v2(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
CUresult cuMemAllocManaged(CUdeviceptr*, size_t, unsigned int);
CUresult cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemPoolCreate(CUmemoryPool*, const CUmemPoolProps*);
CUresult cuImportExternalMemory(CUexternalMemory*, const CudaExternalMemoryHandleDesc*);
CUresult cuDestroyExternalMemory(CUexternalMemory);
CUresult cuGraphAddMemAllocNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                CudaMemAllocNodeParams*);
CUresult cuGraphAddNode_v2(CUgraphNode*, CUgraph, const CUgraphNode*, const void*, size_t,
                           CudaGraphNodeParams*);
CUresult cuGraphInstantiateWithFlags(CUgraphExec*, CUgraph, unsigned long long);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphDestroy(CUgraph);
CUresult cuMemPoolSetAttribute(CUmemoryPool, int, void*);
CUresult cuMemPoolTrimTo(CUmemoryPool, size_t);
CUresult cuDeviceGetMemPool(CUmemoryPool*, CUdevice);
CUresult cuMemAllocAsync(CUdeviceptr*, size_t, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr*, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);
CUresult cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, int*);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void**, void**);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void**);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, CUstream, void**);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
int fake_cuda_calls(const char*);
unsigned long long fake_cuda_physical_used(int);
void* fake_cuda_lookup_next(const char*);
int fake_next_probe();
void* escape_lookup_next(const char*);
CUresult cuMemAlloc(unsigned int*, unsigned int);
CUresult cuMemFree(unsigned int);
CUresult cuArrayCreate_v2(void**, const void*);
CUresult cuArray3DCreate_v2(void**, const void*);
CUresult cuArrayDestroy(void*);
CUresult cuMipmappedArrayCreate(void**, const void*, unsigned int);
CUresult cuMipmappedArrayDestroy(void*);
CUresult cuCtxCreate_v4(CUcontext*, void*, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxSetLimit(int, size_t);
CUresult cuCtxGetLimit(size_t*, int);
CUresult cuModuleLoadData(void**, const void*);
CUresult cuModuleUnload(void*);
CUresult cuLibraryLoadData(void**, const void*, void*, void**, unsigned int, void*, void**,
                           unsigned int);
CUresult cuLibraryUnload(void*);
CUresult cuModuleLoad(void**, const char*);
CUresult cuModuleLoadDataEx(void**, const void*, unsigned int, void*, void**);
CUresult cuModuleLoadFatBinary(void**, const void*);
CUresult cuLibraryLoadFromFile(void**, const char*, void*, void**, unsigned int, void*, void**,
                               unsigned int);
CUresult cuDeviceGetDevResource(CUdevice, void*, int);
CUresult cuDevResourceGenerateDesc(void**, void*, unsigned int);
CUresult cuGreenCtxCreate(void**, void*, CUdevice, unsigned int);
CUresult cuGreenCtxDestroy(void*);
CUresult cuCtxFromGreenCtx(CUcontext*, void*);
CUresult cuLaunch(CUfunction);
CUresult cuLaunchGrid(CUfunction, int, int);
CUresult cuLaunchGridAsync(CUfunction, int, int, CUstream);
CUresult cuLaunchCooperativeKernelMultiDevice(void*, unsigned int, unsigned int);
}

namespace {

int g_failures = 0;

#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "CHECK failed %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                                \
    }                                                                              \
  } while (0)
#define CHECK_EQ(a, b)                                                                          \
  do {                                                                                          \
    auto va = (a);                                                                              \
    auto vb = (b);                                                                              \
    if (!(va == vb)) {                                                                          \
      std::fprintf(stderr, "CHECK_EQ failed %s:%d: %s = %llu, %s = %llu\n", __FILE__, __LINE__, \
                   #a, static_cast<unsigned long long>(va), #b,                                 \
                   static_cast<unsigned long long>(vb));                                        \
      ++g_failures;                                                                             \
    }                                                                                           \
  } while (0)

unsigned long long Arg(char** argv, int i) { return std::strtoull(argv[i], nullptr, 0); }

void UseDevice(int dev) {
  CUcontext ctx = nullptr;
  CHECK_EQ(cuInit(0), CUDA_SUCCESS);
  CHECK_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  CHECK_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

size_t FreeBytes() {
  size_t free_bytes = 0, total = 0;
  CHECK_EQ(cuMemGetInfo_v2(&free_bytes, &total), CUDA_SUCCESS);
  return free_bytes;
}

void* Hook(const char* name) {
  void* self = dlopen(std::getenv("VGPU_LIB_PATH"), RTLD_LAZY | RTLD_NOLOAD);
  void* fn = self ? dlsym(self, name) : nullptr;
  if (fn == nullptr) std::fprintf(stderr, "no hook %s\n", name);
  return fn;
}

void* CudaSym(const char* name) {
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  return cuda ? dlsym(cuda, name) : nullptr;
}

void WaitForEof() {
  char buf[64];
  while (read(STDIN_FILENO, buf, sizeof(buf)) > 0) {
  }
}

// info <dev> <expected total>
void Info(char** argv) {
  int dev = static_cast<int>(Arg(argv, 2));
  UseDevice(dev);
  size_t free_bytes = 0, total = 0, dev_total = 0;
  CHECK_EQ(cuMemGetInfo_v2(&free_bytes, &total), CUDA_SUCCESS);
  CHECK_EQ(total, Arg(argv, 3));
  CHECK(free_bytes <= total);
  CHECK_EQ(cuDeviceTotalMem_v2(&dev_total, dev), CUDA_SUCCESS);
  CHECK_EQ(dev_total, Arg(argv, 3));
  std::printf("total=%zu free=%zu\n", total, free_bytes);
}

// oom <limit>: fill to exactly the limit, then one byte more is CUDA_ERROR_OUT_OF_MEMORY.
void Oom(char** argv) {
  unsigned long long limit = Arg(argv, 2);
  UseDevice(0);
  CUdeviceptr a = 0, b = 0, c = 0;
  CHECK_EQ(cuMemAlloc_v2(&a, limit / 2), CUDA_SUCCESS);
  CHECK_EQ(cuMemAlloc_v2(&b, limit - limit / 2), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), 0u);
  CHECK_EQ(cuMemAlloc_v2(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit / 2);
  CHECK_EQ(cuMemAlloc_v2(&c, 1), CUDA_SUCCESS);
  CHECK_EQ(cuMemFree_v2(c), CUDA_SUCCESS);
  CHECK_EQ(cuMemFree_v2(b), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit);
  // A pointer the library never saw still reaches the real driver (its error comes back).
  CHECK_EQ(cuMemFree_v2(0x1234), CUDA_ERROR_INVALID_VALUE);
}

// families <limit>: every allocation family is charged and released.
void Families(char** argv) {
  unsigned long long limit = Arg(argv, 2);
  unsigned long long half = limit / 2;
  UseDevice(0);
  struct Family {
    const char* name;
    CUresult (*alloc)(unsigned long long* key, size_t bytes);
    CUresult (*release)(unsigned long long key);
  };
  static const Family kFamilies[] = {
      {"pitch",
       [](unsigned long long* k, size_t n) {
         size_t pitch = 0;
         return cuMemAllocPitch_v2(k, &pitch, (n + 15) / 16, 16, 4);  // pitch rounds up
       },
       [](unsigned long long k) { return cuMemFree_v2(k); }},
      {"managed", [](unsigned long long* k, size_t n) { return cuMemAllocManaged(k, n, 1); },
       [](unsigned long long k) { return cuMemFree_v2(k); }},
      {"vmm",
       [](unsigned long long* k, size_t n) {
         CUmemAllocationProp prop{};
         prop.type = 1;
         prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
         prop.location.id = 0;
         return cuMemCreate(k, n, &prop, 0);
       },
       [](unsigned long long k) { return cuMemRelease(k); }},
      {"async", [](unsigned long long* k, size_t n) { return cuMemAllocAsync(k, n, nullptr); },
       [](unsigned long long k) { return cuMemFreeAsync(k, nullptr); }},
      {"async_ptsz",
       [](unsigned long long* k, size_t n) { return cuMemAllocAsync_ptsz(k, n, nullptr); },
       [](unsigned long long k) { return cuMemFreeAsync_ptsz(k, nullptr); }},
      {"pool",
       [](unsigned long long* k, size_t n) {
         return cuMemAllocFromPoolAsync(k, n, nullptr, nullptr);
       },
       [](unsigned long long k) { return cuMemFreeAsync(k, nullptr); }},
      {"pool_ptsz",
       [](unsigned long long* k, size_t n) {
         return cuMemAllocFromPoolAsync_ptsz(k, n, nullptr, nullptr);
       },
       [](unsigned long long k) { return cuMemFree_v2(k); }},
  };
  for (const Family& f : kFamilies) {
    std::fprintf(stderr, "family %s\n", f.name);
    unsigned long long key = 0;
    CUdeviceptr extra = 0;
    CHECK_EQ(f.alloc(&key, half), CUDA_SUCCESS);
    CHECK_EQ(FreeBytes(), limit - half);
    CHECK_EQ(cuMemAlloc_v2(&extra, limit - half + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(f.alloc(&extra, limit - half + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(f.release(key), CUDA_SUCCESS);
    CHECK_EQ(FreeBytes(), limit);
  }
}

// refuse <bytes>: every allocation family answers CUDA_ERROR_OUT_OF_MEMORY and the driver holds
// nothing afterwards.
void Refuse(char** argv) {
  size_t bytes = static_cast<size_t>(Arg(argv, 2));
  UseDevice(0);
  CUdeviceptr p = 0;
  size_t pitch = 0;
  CHECK_EQ(cuMemAlloc_v2(&p, bytes), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(cuMemAllocPitch_v2(&p, &pitch, bytes, 1, 4), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(cuMemAllocManaged(&p, bytes, 1), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(cuMemAllocAsync(&p, bytes, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(cuMemAllocFromPoolAsync(&p, bytes, nullptr, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  CUmemAllocationProp prop{};
  prop.type = 1;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle handle = 0;
  CHECK_EQ(cuMemCreate(&handle, bytes, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(fake_cuda_physical_used(0), 0u);
}

// tablefull <chunk>: allocate until refused; print how many were granted and the driver's use.
void TableFull(char** argv) {
  size_t chunk = static_cast<size_t>(Arg(argv, 2));
  UseDevice(0);
  std::vector<CUdeviceptr> held;
  CUresult r;
  for (;;) {
    CUdeviceptr p = 0;
    r = cuMemAlloc_v2(&p, chunk);
    if (r != CUDA_SUCCESS) break;
    held.push_back(p);
  }
  CHECK_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(fake_cuda_physical_used(0), held.size() * chunk);
  std::printf("count=%zu\n", held.size());
  for (CUdeviceptr p : held) CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
}

// setenv <bytes>: before its first CUDA call the program lifts every limit in its own
// environment and points the region elsewhere; an allocation of <bytes> must still be refused.
void Setenv(char** argv) {
  setenv("CUDA_DEVICE_MEMORY_LIMIT", "0", 1);
  setenv("CUDA_DEVICE_MEMORY_LIMIT_0", "0", 1);
  setenv("CUDA_DEVICE_SM_LIMIT", "0", 1);
  setenv("GPU_CORE_UTILIZATION_POLICY", "disable", 1);
  std::string fresh = std::string(std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE")) + ".fresh";
  setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", fresh.c_str(), 1);
  UseDevice(0);
  CUdeviceptr p = 0;
  CHECK_EQ(cuMemAlloc_v2(&p, static_cast<size_t>(Arg(argv, 2))), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(access(fresh.c_str(), F_OK) != 0);
}

// tamper <bytes>: with the region open, zero every limit in it (the file is writable by the
// container); an allocation of <bytes> must still be refused.
void Tamper(char** argv) {
  UseDevice(0);
  CUdeviceptr p = 0;
  CHECK_EQ(cuMemAlloc_v2(&p, 1), CUDA_SUCCESS);  // the region is open and joined
  int fd = open(std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), O_RDWR);
  CHECK(fd >= 0);
  void* map = mmap(nullptr, 2008952, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(map != MAP_FAILED);
  auto* limits = reinterpret_cast<volatile std::uint64_t*>(static_cast<char*>(map) + 1600);
  for (int i = 0; i < 16; ++i) limits[i] = 0;
  CUdeviceptr q = 0;
  CHECK_EQ(cuMemAlloc_v2(&q, static_cast<size_t>(Arg(argv, 2))), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
}

// nvml <alloc bytes> <expected total> <expected used>
void Nvml(char** argv) {
  UseDevice(0);
  CUdeviceptr p = 0;
  CHECK_EQ(cuMemAlloc_v2(&p, Arg(argv, 2)), CUDA_SUCCESS);
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  CHECK(lib != nullptr);
  auto init = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto by_index = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
      dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto info = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(
      dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto info2 = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*)>(
      dlsym(lib, "nvmlDeviceGetMemoryInfo_v2"));
  CHECK(info == Hook("nvmlDeviceGetMemoryInfo"));
  CHECK_EQ(init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  CHECK_EQ(by_index(0, &dev), NVML_SUCCESS);
  nvmlMemory_t mem{};
  CHECK_EQ(info(dev, &mem), NVML_SUCCESS);
  CHECK_EQ(mem.total, Arg(argv, 3));
  CHECK_EQ(mem.used, Arg(argv, 4));
  CHECK_EQ(mem.used + mem.free, mem.total);
  nvmlMemory_v2_t mem2{};
  CHECK_EQ(info2(dev, &mem2), NVML_SUCCESS);
  CHECK_EQ(mem2.total, Arg(argv, 3));
  CHECK_EQ(mem2.used + mem2.free, mem2.total);
  std::printf("total=%llu used=%llu free=%llu\n", mem.total, mem.used, mem.free);
}

void ProcAddress() {
  UseDevice(0);
  struct Case {
    const char* symbol;
    int version;
    cuuint64_t flags;
    const char* expect_hook;  // null: pass-through, expect `expect_real`
    const char* expect_real;
  };
  static const Case kCases[] = {
      {"cuMemAlloc", 11040, 0, "cuMemAlloc_v2", nullptr},
      {"cuMemAlloc", 12000, 0, "cuMemAlloc_v2", nullptr},
      {"cuMemAlloc", 13000, 0, "cuMemAlloc_v2", nullptr},
      {"cuMemAlloc", 3010, 0, "cuMemAlloc", nullptr},  // the v1 allocator is charged too
      {"cuMemFree", 12000, 0, "cuMemFree_v2", nullptr},
      {"cuMemGetInfo", 13000, 0, "cuMemGetInfo_v2", nullptr},
      {"cuDeviceTotalMem", 11040, 0, "cuDeviceTotalMem_v2", nullptr},
      {"cuMemCreate", 12000, 0, "cuMemCreate", nullptr},
      {"cuMemAllocAsync", 12000, 2, "cuMemAllocAsync_ptsz", nullptr},
      {"cuMemFreeAsync", 12000, 1, "cuMemFreeAsync", nullptr},
      {"cuDevicePrimaryCtxRelease", 12000, 0, "cuDevicePrimaryCtxRelease_v2", nullptr},
      {"cuLaunchKernel", 11040, 0, "cuLaunchKernel", nullptr},
      {"cuLaunchKernel", 12000, 2, "cuLaunchKernel_ptsz", nullptr},
      {"cuLaunchKernelEx", 13000, 2, "cuLaunchKernelEx_ptsz", nullptr},
      {"cuLaunchCooperativeKernel", 13000, 2, "cuLaunchCooperativeKernel_ptsz", nullptr},
      {"cuGraphLaunch", 12000, 0, "cuGraphLaunch", nullptr},
      {"cuGraphLaunch", 12000, 2, "cuGraphLaunch_ptsz", nullptr},
      {"cuGetProcAddress", 12000, 0, "cuGetProcAddress", nullptr},
      {"cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2", nullptr},
      {"cuCtxCreate", 11040, 0, "cuCtxCreate_v3", nullptr},
      {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4", nullptr},
      {"cuGreenCtxCreate", 12040, 0, "cuGreenCtxCreate", nullptr},
      {"cuModuleLoad", 12000, 0, "cuModuleLoad", nullptr},
      {"cuModuleLoadDataEx", 12000, 0, "cuModuleLoadDataEx", nullptr},
      {"cuModuleLoadFatBinary", 12000, 0, "cuModuleLoadFatBinary", nullptr},
      {"cuLibraryLoadFromFile", 12000, 0, "cuLibraryLoadFromFile", nullptr},
      {"cuCtxGetDevice", 13000, 0, nullptr, "cuCtxGetDevice"},
  };
  for (const Case& c : kCases) {
    for (int api = 0; api < 2; ++api) {
      void* fn = nullptr;
      int status = -1;
      CUresult r = api == 0 ? cuGetProcAddress(c.symbol, &fn, c.version, c.flags)
                            : cuGetProcAddress_v2(c.symbol, &fn, c.version, c.flags, &status);
      void* want = c.expect_hook ? Hook(c.expect_hook) : CudaSym(c.expect_real);
      if (r != CUDA_SUCCESS || fn != want || want == nullptr) {
        std::fprintf(stderr, "cuGetProcAddress%s(%s, %d, %llu): r=%d fn=%p want=%p\n",
                     api ? "_v2" : "", c.symbol, c.version,
                     static_cast<unsigned long long>(c.flags), r, fn, want);
        ++g_failures;
      }
      if (api == 1) CHECK_EQ(status, 0);
    }
  }
  // The resolved per-thread-stream launch reaches the real _ptsz entry, not the legacy one.
  void* fn = nullptr;
  CHECK_EQ(cuGetProcAddress("cuLaunchKernel", &fn, 12000, 2), CUDA_SUCCESS);
  int legacy = fake_cuda_calls("cuLaunchKernel");
  int ptsz = fake_cuda_calls("cuLaunchKernel_ptsz");
  reinterpret_cast<decltype(&cuLaunchKernel)>(fn)(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr,
                                                  nullptr);
  CHECK_EQ(fake_cuda_calls("cuLaunchKernel"), legacy);
  CHECK_EQ(fake_cuda_calls("cuLaunchKernel_ptsz"), ptsz + 1);
  // A resolved allocator is the accounting hook: the limit holds through it.
  CHECK_EQ(cuGetProcAddress("cuMemAlloc", &fn, 13000, 0), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  size_t too_big = static_cast<size_t>(std::strtoull(std::getenv("TEST_LIMIT"), nullptr, 0)) + 1;
  CHECK_EQ(reinterpret_cast<decltype(&cuMemAlloc_v2)>(fn)(&p, too_big), CUDA_ERROR_OUT_OF_MEMORY);
  // Re-fetching the resolver through itself stays intercepted.
  void* resolver = nullptr;
  CHECK_EQ(cuGetProcAddress("cuGetProcAddress", &resolver, 12000, 0), CUDA_SUCCESS);
  CHECK_EQ(reinterpret_cast<decltype(&cuGetProcAddress)>(resolver)("cuMemAlloc", &fn, 12000, 0),
           CUDA_SUCCESS);
  CHECK(fn == Hook("cuMemAlloc_v2"));
}

void Dlsym() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(cuda != nullptr);
  void* hook = Hook("cuMemAlloc_v2");
  CHECK(hook != nullptr);
  CHECK(dlsym(cuda, "cuMemAlloc_v2") == hook);
  CHECK(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") == hook);
  CHECK(dlsym(RTLD_NEXT, "cuMemAlloc_v2") == hook);
  CHECK(dlsym(cuda, "cuLaunchKernel_ptsz") == Hook("cuLaunchKernel_ptsz"));
  // Not intercepted: unknown driver entries and cu-prefixed non-driver names.
  CHECK(dlsym(cuda, "cuCtxGetDevice") != nullptr);
  CHECK(dlsym(cuda, "cuCtxGetDevice") != Hook("cuCtxGetDevice"));
  auto blas = reinterpret_cast<int (*)()>(dlsym(cuda, "cublasFakeEntry"));
  CHECK(blas != nullptr && blas() == 7);
  CHECK(dlsym(cuda, "cuNoSuchEntry") == nullptr);
  // RTLD_NEXT is relative to the caller. From the program: the next object with the symbol is
  // the fake libcuda (linked) -> 1. From inside the fake libcuda: the NVML fake loaded later
  // -> 2; a dlsym that forwarded RTLD_NEXT from libvgpu's position would answer 1.
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
  CHECK(nvml != nullptr);
  for (int repeat = 0; repeat < 3; ++repeat) {
    auto from_main = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "fake_next_probe"));
    CHECK(from_main != nullptr && from_main() == 1);
    auto from_cuda = reinterpret_cast<int (*)()>(fake_cuda_lookup_next("fake_next_probe"));
    CHECK(from_cuda != nullptr && from_cuda() == 2);
  }
  CHECK(dlsym(RTLD_NEXT, "puts") == reinterpret_cast<void*>(&puts));
  CHECK(dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2") == Hook("nvmlDeviceGetMemoryInfo_v2"));
  CHECK(dlsym(nvml, "nvmlDeviceGetUUID") != nullptr);
  CHECK(dlsym(nvml, "nvmlDeviceGetUUID") != Hook("nvmlDeviceGetUUID"));
}

// escapes <limit>: every way around the hooks to the real cuMemAlloc_v2 ends at the hook, and
// the limit holds through it.
void Escapes(char** argv) {
  size_t too_big = static_cast<size_t>(Arg(argv, 2)) + 1;
  UseDevice(0);
  void* hook = Hook("cuMemAlloc_v2");
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(cuda != nullptr);
  using DlsymFn = void* (*)(void*, const char*);
  struct Way {
    const char* name;
    void* fn;
  };
  std::vector<Way> ways;
  // glibc's dlsym fetched through dlvsym, then asked for the driver entry.
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5"}) {
    auto libc_dlsym = reinterpret_cast<DlsymFn>(dlvsym(RTLD_DEFAULT, "dlsym", version));
    if (libc_dlsym != nullptr) ways.push_back({version, libc_dlsym(cuda, "cuMemAlloc_v2")});
  }
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  auto libc_dlsym = reinterpret_cast<DlsymFn>(dlsym(libc, "dlsym"));
  ways.push_back(
      {"dlsym(libc, \"dlsym\")", libc_dlsym ? libc_dlsym(cuda, "cuMemAlloc_v2") : nullptr});
  // A second copy of the driver in a new link-map namespace.
  void* second = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW);
  if (second == nullptr) std::fprintf(stderr, "dlmopen: %s\n", dlerror());
  CHECK(second != nullptr);
  ways.push_back({"dlmopen+dlsym", second ? dlsym(second, "cuMemAlloc_v2") : nullptr});
  // RTLD_NEXT from a library that the driver comes after.
  ways.push_back({"RTLD_NEXT from a library before libcuda", escape_lookup_next("cuMemAlloc_v2")});
  for (const Way& way : ways) {
    if (way.fn != hook) {
      std::fprintf(stderr, "%s: %p is not the hook %p\n", way.name, way.fn, hook);
      ++g_failures;
      if (way.fn == nullptr) continue;
    }
    CUdeviceptr p = 0;
    CUresult r = reinterpret_cast<decltype(&cuMemAlloc_v2)>(way.fn)(&p, too_big);
    if (r != CUDA_ERROR_OUT_OF_MEMORY) {
      std::fprintf(stderr, "%s: allocation past the limit returned %d\n", way.name, r);
      ++g_failures;
    }
  }
  CHECK(dlvsym(RTLD_DEFAULT, "dlvsym", "GLIBC_2.34") == Hook("dlvsym"));
  // Names we do not hook keep glibc's answer through dlvsym too.
  CHECK(dlvsym(RTLD_DEFAULT, "puts", "GLIBC_2.2.5") == reinterpret_cast<void*>(&puts));
}

struct ArrayDesc {
  size_t Width;
  size_t Height;
  int Format;
  unsigned int NumChannels;
};
struct Array3DDesc {
  size_t Width;
  size_t Height;
  size_t Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
};
constexpr int kFloat = 0x20;

// measured <limit>: calls that do not state their size are charged what the driver committed;
// past the limit they return CUDA_ERROR_OUT_OF_MEMORY and the driver holds nothing more.
void Measured(char** argv) {
  const unsigned long long limit = Arg(argv, 2);
  const unsigned long long kMiB = 1ULL << 20;
  UseDevice(0);
  const unsigned long long used = fake_cuda_physical_used(0);
  auto refused = [&](const char* what, CUresult r) {
    if (r != CUDA_ERROR_OUT_OF_MEMORY || fake_cuda_physical_used(0) != used) {
      std::fprintf(stderr, "%s: rc=%d, driver holds %llu more bytes\n", what, r,
                   fake_cuda_physical_used(0) - used);
      ++g_failures;
    }
  };
  void* h = nullptr;
  ArrayDesc big{32768, 16384, kFloat, 1};  // 2 GiB
  refused("cuArrayCreate_v2", cuArrayCreate_v2(&h, &big));
  Array3DDesc big3{1024, 1024, 512, kFloat, 1, 0};  // 2 GiB
  refused("cuArray3DCreate_v2", cuArray3DCreate_v2(&h, &big3));
  Array3DDesc mip{1024, 1024, 160, kFloat, 1, 0};  // 640 MiB base, 1.25 GiB with its levels
  refused("cuMipmappedArrayCreate", cuMipmappedArrayCreate(&h, &mip, 4));
  refused("cuModuleLoadData", cuModuleLoadData(&h, "globals=2147483648"));
  refused("cuLibraryLoadData",
          cuLibraryLoadData(&h, "globals=2147483648", nullptr, nullptr, 0, nullptr, nullptr, 0));
  refused("cuModuleLoadDataEx", cuModuleLoadDataEx(&h, "globals=2147483648", 0, nullptr, nullptr));
  refused("cuModuleLoadFatBinary", cuModuleLoadFatBinary(&h, "globals=2147483648"));
  // The same images as files.
  char big_file[] = "/tmp/vgpu-module-XXXXXX";
  char small_file[] = "/tmp/vgpu-module-XXXXXX";
  for (auto [path, text] : {std::pair<char*, const char*>{big_file, "globals=2147483648"},
                            std::pair<char*, const char*>{small_file, "globals=10485760"}}) {
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, text, std::strlen(text) + 1), static_cast<ssize_t>(std::strlen(text) + 1));
    close(fd);
  }
  refused("cuModuleLoad", cuModuleLoad(&h, big_file));
  refused("cuLibraryLoadFromFile",
          cuLibraryLoadFromFile(&h, big_file, nullptr, nullptr, 0, nullptr, nullptr, 0));
  refused("cuCtxSetLimit(MALLOC_HEAP_SIZE)", cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 2ULL << 30));
  // 8 KiB for each of the 132 x 2048 resident threads: 2.06 GiB.
  refused("cuCtxSetLimit(STACK_SIZE)", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 8192));
  refused("cuCtxSetLimit(PRINTF_FIFO_SIZE)", cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 2ULL << 30));
  size_t value = 1;
  CHECK_EQ(cuCtxGetLimit(&value, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  CHECK_EQ(value, 0u);  // the refused value was not left in place
  unsigned int p32 = 0;
  refused("cuMemAlloc (v1)", cuMemAlloc(&p32, 2U << 30));
  CHECK_EQ(FreeBytes(), limit);
  // Within the limit: charged what the driver committed (arrays round up to 2 MiB), given back.
  ArrayDesc small{5000, 5000, kFloat, 1};  // 100,000,000 bytes -> 96 MiB
  CHECK_EQ(cuArrayCreate_v2(&h, &small), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - 96 * kMiB);
  CHECK_EQ(cuArrayDestroy(h), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit);
  CHECK_EQ(cuModuleLoadData(&h, "globals=10485760"), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - 10 * kMiB);
  CHECK_EQ(cuModuleUnload(h), CUDA_SUCCESS);
  // Every other loader: charged 10 MiB, given back at the unload.
  struct Loader {
    const char* name;
    std::function<CUresult(void**)> load;
    bool library;
  };
  const Loader loaders[] = {
      {"cuModuleLoadDataEx",
       [](void** m) { return cuModuleLoadDataEx(m, "globals=10485760", 0, nullptr, nullptr); },
       false},
      {"cuModuleLoadFatBinary",
       [](void** m) { return cuModuleLoadFatBinary(m, "globals=10485760"); }, false},
      {"cuModuleLoad", [&](void** m) { return cuModuleLoad(m, small_file); }, false},
      {"cuLibraryLoadFromFile",
       [&](void** l) {
         return cuLibraryLoadFromFile(l, small_file, nullptr, nullptr, 0, nullptr, nullptr, 0);
       },
       true},
  };
  for (const Loader& loader : loaders) {
    std::fprintf(stderr, "loader %s\n", loader.name);
    CHECK_EQ(loader.load(&h), CUDA_SUCCESS);
    CHECK_EQ(FreeBytes(), limit - 10 * kMiB);
    CHECK_EQ(loader.library ? cuLibraryUnload(h) : cuModuleUnload(h), CUDA_SUCCESS);
    CHECK_EQ(FreeBytes(), limit);
  }
  unlink(big_file);
  unlink(small_file);
  CHECK_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 256 * kMiB), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - 256 * kMiB);
  CHECK_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 128 * kMiB), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - 128 * kMiB);
  CHECK_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 0), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit);
  CHECK_EQ(cuMemAlloc(&p32, 64 * kMiB), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - 64 * kMiB);
  CHECK_EQ(cuMemFree(p32), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit);
}

// contexts <limit>: created contexts are charged what they commit; the ones past the limit are
// refused; destroying them gives the charge back.
void Contexts(char** argv) {
  const unsigned long long limit = Arg(argv, 2);
  UseDevice(0);
  std::vector<CUcontext> made;
  int refused = 0;
  for (int i = 0; i < 8; ++i) {
    CUcontext ctx = nullptr;
    CUresult r = cuCtxCreate_v4(&ctx, nullptr, 0, 0);
    if (r == CUDA_SUCCESS) {
      made.push_back(ctx);
    } else {
      CHECK_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
      ++refused;
    }
    CHECK(fake_cuda_physical_used(0) <= limit);
  }
  std::printf("contexts=%zu refused=%d\n", made.size(), refused);
  for (CUcontext ctx : made) CHECK_EQ(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - fake_cuda_physical_used(0));
  // Green contexts alike (a resource descriptor of the device's SMs).
  alignas(16) unsigned char resource[1024] = {};
  void* desc = nullptr;
  CHECK_EQ(cuDeviceGetDevResource(0, resource, 1), CUDA_SUCCESS);  // CU_DEV_RESOURCE_TYPE_SM
  CHECK_EQ(cuDevResourceGenerateDesc(&desc, resource, 1), CUDA_SUCCESS);
  std::vector<void*> green;
  refused = 0;
  for (int i = 0; i < 8; ++i) {
    void* g = nullptr;
    CUresult r = cuGreenCtxCreate(&g, desc, 0, 1);  // CU_GREEN_CTX_DEFAULT_STREAM
    if (r == CUDA_SUCCESS) {
      green.push_back(g);
    } else {
      CHECK_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
      ++refused;
    }
    CHECK(fake_cuda_physical_used(0) <= limit);
  }
  std::printf("green=%zu refused=%d\n", green.size(), refused);
  for (void* g : green) CHECK_EQ(cuGreenCtxDestroy(g), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - fake_cuda_physical_used(0));
  // A limit set in a green context (as a CUcontext) goes with the green context.
  const unsigned long long before = FreeBytes();
  void* g = nullptr;
  CUcontext as_ctx = nullptr, primary = nullptr;
  CHECK_EQ(cuCtxGetCurrent(&primary), CUDA_SUCCESS);
  CHECK_EQ(cuGreenCtxCreate(&g, desc, 0, 1), CUDA_SUCCESS);
  CHECK_EQ(cuCtxFromGreenCtx(&as_ctx, g), CUDA_SUCCESS);
  CHECK_EQ(cuCtxSetCurrent(as_ctx), CUDA_SUCCESS);
  CHECK_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 100ULL << 20), CUDA_SUCCESS);
  CHECK_EQ(cuCtxSetCurrent(primary), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - fake_cuda_physical_used(0));
  CHECK(FreeBytes() < before);
  CHECK_EQ(cuGreenCtxDestroy(g), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), before);
}

// legacylaunch: the pre-4.0 and multi-device launch entries pass through the limiter (it marks
// recent_kernel = 2 in the region on every launch it sees) and reach their own real entry.
void LegacyLaunch() {
  UseDevice(0);
  int fd = open(std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), O_RDWR);
  CHECK(fd >= 0);
  void* map = mmap(nullptr, 2008952, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(map != MAP_FAILED);
  auto* recent = reinterpret_cast<volatile std::int32_t*>(static_cast<char*>(map) + 2008904);
  CudaLaunchParams params[2] = {};
  for (CudaLaunchParams& p : params)
    p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  struct Step {
    const char* name;
    std::function<void()> call;
  };
  const Step steps[] = {
      {"cuLaunch", [] { cuLaunch(nullptr); }},
      {"cuLaunchGrid", [] { cuLaunchGrid(nullptr, 4, 4); }},
      {"cuLaunchGridAsync", [] { cuLaunchGridAsync(nullptr, 4, 4, nullptr); }},
      {"cuLaunchCooperativeKernelMultiDevice",
       [&] { cuLaunchCooperativeKernelMultiDevice(params, 2, 0); }},
  };
  for (const Step& step : steps) {
    *recent = 0;
    int before = fake_cuda_calls(step.name);
    step.call();
    if (*recent != 2) {
      std::fprintf(stderr, "%s did not pass through the limiter\n", step.name);
      ++g_failures;
    }
    CHECK_EQ(fake_cuda_calls(step.name), before + 1);
  }
}

// bigkernel: one launch of 2^30 threads, then exit (no second launch that could wait).
void BigKernel() {
  UseDevice(0);
  CHECK_EQ(cuLaunchKernel(nullptr, 1 << 20, 1, 1, 1024, 1, 1, 0, nullptr, nullptr, nullptr),
           CUDA_SUCCESS);
}

// limitertruncate: after a throttled launch (the limiter side file mapped), the side file is
// truncated, as any process of the container may do; the next launches read the bucket through
// the mapping and must not die of SIGBUS.
void LimiterTruncate() {
  UseDevice(0);
  CHECK_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  const char* cache = std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  CHECK(cache != nullptr);
  if (cache == nullptr) return;
  CHECK_EQ(truncate((std::string(cache) + ".limiter").c_str(), 0), 0);
  for (int i = 0; i < 10; ++i) {
    CHECK_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr),
             CUDA_SUCCESS);
  }
  std::printf("survived\n");
}

// streamkernel: from device 0's context, one 2^30-thread launch on a stream of device 1's context
// (the fake's stream handle is its context's handle); the current context stays device 0's.
void StreamKernel() {
  UseDevice(0);
  CUcontext ctx0 = nullptr;
  CHECK_EQ(cuCtxGetCurrent(&ctx0), CUDA_SUCCESS);
  CUcontext ctx1 = nullptr;
  CHECK_EQ(cuDevicePrimaryCtxRetain(&ctx1, 1), CUDA_SUCCESS);
  CHECK_EQ(cuLaunchKernel(nullptr, 1 << 20, 1, 1, 1024, 1, 1, 0, reinterpret_cast<CUstream>(ctx1),
                          nullptr, nullptr),
           CUDA_SUCCESS);
  CUcontext after = nullptr;
  CHECK_EQ(cuCtxGetCurrent(&after), CUDA_SUCCESS);
  CHECK_EQ(reinterpret_cast<std::uintptr_t>(after), reinterpret_cast<std::uintptr_t>(ctx0));
}

// releasemapped <limit>: a VMM handle released while mapped stays charged until its last unmap
// (the driver keeps the memory until then).
void ReleaseMapped(char** argv) {
  const unsigned long long limit = Arg(argv, 2);
  const size_t chunk = static_cast<size_t>(limit * 6 / 10);
  UseDevice(0);
  CUmemAllocationProp prop{};
  prop.type = 1;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle a = 0, b = 0;
  CHECK_EQ(cuMemCreate(&a, chunk, &prop, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemMap(0x200000000ULL, chunk, 0, a, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemMap(0x400000000ULL, chunk, 0, a, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemRelease(a), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - chunk);
  CHECK_EQ(cuMemCreate(&b, chunk, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(cuMemUnmap(0x200000000ULL, chunk), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - chunk);  // one mapping left: still held
  CHECK_EQ(cuMemUnmap(0x400000000ULL, chunk), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit);
  CHECK_EQ(fake_cuda_physical_used(0), 0u);
  CHECK_EQ(cuMemCreate(&b, chunk, &prop, 0), CUDA_SUCCESS);
  CHECK_EQ(cuMemRelease(b), CUDA_SUCCESS);  // unmapped: given back at once
  CHECK_EQ(FreeBytes(), limit);
}

// asyncdevice: with the current context on device 0 (1 GiB), asynchronous allocations on a
// device-1 stream or from a device-1 pool are charged to device 1 (2 GiB), where they live.
void AsyncDevice() {
  const unsigned long long kMiB = 1ULL << 20;
  UseDevice(0);
  auto stream1 = reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(0x1001));
  CUdeviceptr p = 0, q = 0, r = 0;
  CHECK_EQ(cuMemAllocAsync(&p, 1536 * kMiB, stream1), CUDA_SUCCESS);
  CUmemPoolProps props{};
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 1;
  CUmemoryPool pool = nullptr;
  CHECK_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
  CHECK_EQ(cuMemAllocFromPoolAsync(&q, 400 * kMiB, pool, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemAllocFromPoolAsync(&r, 200 * kMiB, pool, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(cuMemAllocAsync(&r, 200 * kMiB, stream1), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(fake_cuda_physical_used(1), 1936 * kMiB);
  CHECK_EQ(FreeBytes(), 1024 * kMiB);                                 // device 0 untouched
  CHECK_EQ(cuMemAllocAsync(&r, 1000 * kMiB, nullptr), CUDA_SUCCESS);  // device 0's own
  CHECK_EQ(cuMemFreeAsync(p, stream1), CUDA_SUCCESS);
  CHECK_EQ(cuMemFreeAsync(q, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemFreeAsync(r, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemAllocAsync(&p, 1900 * kMiB, stream1), CUDA_SUCCESS);  // device 1 given back
}

// asyncfirst: asynchronous allocations and frees as the process's very first driver calls are
// served (their hooks read the driver table only after initialising it).
void AsyncFirst() {
  CUdeviceptr p = 0, q = 0;
  CHECK_EQ(cuMemAllocAsync(&p, 1ULL << 20, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemAllocAsync(&q, 1ULL << 20, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemFreeAsync(q, nullptr), CUDA_SUCCESS);
}

// poolkeep <limit>: a pool with the release threshold at its maximum keeps freed memory; the
// charge stays until the pool reuses, trims or lowers its threshold.
void PoolKeep(char** argv) {
  const unsigned long long limit = Arg(argv, 2);
  const size_t chunk = static_cast<size_t>(limit * 6 / 10);
  UseDevice(0);
  CUmemoryPool pool = nullptr, other = nullptr;
  CHECK_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  cuuint64_t max = ~cuuint64_t{0};
  CHECK_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max), CUDA_SUCCESS);
  CUdeviceptr p = 0, q = 0;
  CHECK_EQ(cuMemAllocAsync(&p, chunk, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), chunk);  // the pool keeps it
  CHECK_EQ(FreeBytes(), limit - chunk);
  // The same pool reuses what it keeps; another pool cannot have it.
  CHECK_EQ(cuMemAllocAsync(&p, chunk, nullptr), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - chunk);
  CHECK_EQ(cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
  CUmemPoolProps props{};
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CHECK_EQ(cuMemPoolCreate(&other, &props), CUDA_SUCCESS);
  CHECK_EQ(cuMemAllocFromPoolAsync(&q, chunk, other, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(fake_cuda_physical_used(0), chunk);
  CHECK_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  CHECK_EQ(fake_cuda_physical_used(0), 0u);
  CHECK_EQ(FreeBytes(), limit);
  CHECK_EQ(cuMemAllocFromPoolAsync(&q, chunk, other, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemFreeAsync(q, nullptr), CUDA_SUCCESS);  // threshold 0: given back at once
  CHECK_EQ(FreeBytes(), limit);
  // Lowering the threshold gives back what is kept above it.
  CHECK_EQ(cuMemAllocAsync(&p, chunk, nullptr), CUDA_SUCCESS);
  CHECK_EQ(cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - chunk);
  cuuint64_t zero = 0;
  CHECK_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit);
}

// import <limit>: external memory imported into CUDA is charged at its size while imported.
void Import(char** argv) {
  const unsigned long long limit = Arg(argv, 2);
  UseDevice(0);
  CudaExternalMemoryHandleDesc desc{};
  desc.type = 1;  // opaque fd
  desc.handle.fd = 3;
  desc.size = 2 * limit;
  CUexternalMemory ext = nullptr;
  int before = fake_cuda_calls("cuImportExternalMemory");
  CHECK_EQ(cuImportExternalMemory(&ext, &desc), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(fake_cuda_calls("cuImportExternalMemory"), before);  // nothing imported
  desc.size = limit / 4;
  CHECK_EQ(cuImportExternalMemory(&ext, &desc), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - limit / 4);
  CHECK_EQ(cuDestroyExternalMemory(ext), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit);
}

// graphmem <limit>: every instantiation of a graph is charged its allocation nodes' bytes; the
// one past the limit is refused before the driver instantiates it.
void GraphMem(char** argv) {
  const unsigned long long limit = Arg(argv, 2);
  UseDevice(0);
  auto graph = reinterpret_cast<CUgraph>(static_cast<std::uintptr_t>(0x900000));
  CudaMemAllocNodeParams params{};
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = 0;
  params.bytesize = limit * 4 / 10;
  CUgraphNode node = nullptr;
  CHECK_EQ(cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &params), CUDA_SUCCESS);
  CUgraphExec e1 = nullptr, e2 = nullptr, e3 = nullptr;
  CHECK_EQ(cuGraphInstantiateWithFlags(&e1, graph, 0), CUDA_SUCCESS);
  CHECK_EQ(cuGraphInstantiateWithFlags(&e2, graph, 0), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit - 2 * params.bytesize);
  int before = fake_cuda_calls("cuGraphInstantiateWithFlags");
  CHECK_EQ(cuGraphInstantiateWithFlags(&e3, graph, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(fake_cuda_calls("cuGraphInstantiateWithFlags"), before);
  CHECK_EQ(cuGraphExecDestroy(e1), CUDA_SUCCESS);
  CHECK_EQ(cuGraphInstantiateWithFlags(&e3, graph, 0), CUDA_SUCCESS);
  CHECK_EQ(cuGraphExecDestroy(e2), CUDA_SUCCESS);
  CHECK_EQ(cuGraphExecDestroy(e3), CUDA_SUCCESS);
  CHECK_EQ(FreeBytes(), limit);
  CHECK_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  // The generic node API: a memory allocation node of 1.2x the limit.
  auto other = reinterpret_cast<CUgraph>(static_cast<std::uintptr_t>(0x910000));
  CudaGraphNodeParams generic{};
  generic.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  generic.alloc = params;
  generic.alloc.bytesize = limit * 12 / 10;
  CHECK_EQ(cuGraphAddNode_v2(&node, other, nullptr, nullptr, 0, &generic), CUDA_SUCCESS);
  CHECK_EQ(cuGraphInstantiateWithFlags(&e1, other, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(FreeBytes(), limit);
}

void Launch() {
  UseDevice(0);
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  struct Step {
    const char* name;
    void (*call)(const CUlaunchConfig*);
  };
  static const Step kSteps[] = {
      {"cuLaunchKernel",
       [](const CUlaunchConfig*) {
         cuLaunchKernel(nullptr, 2, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr);
       }},
      {"cuLaunchKernel_ptsz",
       [](const CUlaunchConfig*) {
         cuLaunchKernel_ptsz(nullptr, 2, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr);
       }},
      {"cuLaunchKernelEx",
       [](const CUlaunchConfig* c) { cuLaunchKernelEx(c, nullptr, nullptr, nullptr); }},
      {"cuLaunchKernelEx_ptsz",
       [](const CUlaunchConfig* c) { cuLaunchKernelEx_ptsz(c, nullptr, nullptr, nullptr); }},
      {"cuLaunchCooperativeKernel",
       [](const CUlaunchConfig*) {
         cuLaunchCooperativeKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr);
       }},
      {"cuLaunchCooperativeKernel_ptsz",
       [](const CUlaunchConfig*) {
         cuLaunchCooperativeKernel_ptsz(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr);
       }},
      {"cuGraphLaunch", [](const CUlaunchConfig*) { cuGraphLaunch(nullptr, nullptr); }},
      {"cuGraphLaunch_ptsz", [](const CUlaunchConfig*) { cuGraphLaunch_ptsz(nullptr, nullptr); }},
  };
  for (const Step& s : kSteps) {
    int before = fake_cuda_calls(s.name);
    for (int i = 0; i < 10; ++i) s.call(&config);
    CHECK_EQ(fake_cuda_calls(s.name), before + 10);
  }
}

// hold <bytes> die|wait
void Hold(char** argv) {
  UseDevice(0);
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc_v2(&p, Arg(argv, 2));
  std::printf("rc=%d\n", r);
  std::fflush(stdout);
  if (std::strcmp(argv[3], "die") == 0) raise(SIGKILL);
  WaitForEof();
  if (r == CUDA_SUCCESS) cuMemFree_v2(p);
}

// fill <chunk>: allocate until the limit says no, report, hold until stdin closes.
void Fill(char** argv) {
  UseDevice(0);
  unsigned long long chunk = Arg(argv, 2);
  std::vector<CUdeviceptr> held;
  CUresult r;
  for (;;) {
    CUdeviceptr p = 0;
    r = cuMemAlloc_v2(&p, chunk);
    if (r != CUDA_SUCCESS) break;
    held.push_back(p);
  }
  std::printf("count=%zu rc=%d\n", held.size(), r);
  std::fflush(stdout);
  WaitForEof();
  for (CUdeviceptr p : held) cuMemFree_v2(p);
}

// fork <bytes> <limit>: parent and child each hold bytes; both count against one limit.
void Fork(char** argv) {
  unsigned long long bytes = Arg(argv, 2);
  unsigned long long limit = Arg(argv, 3);
  UseDevice(0);
  CUdeviceptr p = 0;
  CHECK_EQ(cuMemAlloc_v2(&p, bytes), CUDA_SUCCESS);
  pid_t child = fork();
  if (child == 0) {
    UseDevice(0);
    CUdeviceptr q = 0;
    CHECK_EQ(cuMemAlloc_v2(&q, bytes), CUDA_SUCCESS);
    CHECK_EQ(FreeBytes(), limit - 2 * bytes);
    CHECK_EQ(cuMemAlloc_v2(&q, limit - 2 * bytes + 1), CUDA_ERROR_OUT_OF_MEMORY);
    _exit(g_failures == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The child's exit gave its share back (its slot is reclaimed lazily, on our next OOM check).
  CUdeviceptr q = 0;
  CHECK_EQ(cuMemAlloc_v2(&q, limit - bytes), CUDA_SUCCESS);
}

// threads <limit>: 8 threads allocate and free concurrently; the books balance afterwards.
void Threads(char** argv) {
  unsigned long long limit = Arg(argv, 2);
  UseDevice(0);
  std::atomic<int> oom{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      UseDevice(0);
      for (int i = 0; i < 2000; ++i) {
        CUdeviceptr p = 0;
        CUresult r = cuMemAlloc_v2(&p, limit / 4);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
          ++oom;
        } else if (r != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS) {
          ++other;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK_EQ(other.load(), 0);
  CHECK_EQ(FreeBytes(), limit);
  std::printf("oom=%d\n", oom.load());
}

// watch <expected>: launch until the utilisation watcher has published a sample in the region
// (slot 0's device_util[0].sm_util), which proves the watcher → NVML → limiter path runs.
void Watch(char** argv) {
  UseDevice(0);
  int fd = open(std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), O_RDONLY);
  CHECK(fd >= 0);
  void* map = mmap(nullptr, 2008952, PROT_READ, MAP_SHARED, fd, 0);
  CHECK(map != MAP_FAILED);
  const auto* sm_util = reinterpret_cast<const volatile std::uint64_t*>(
      static_cast<const char*>(map) + 1856 + 1160 + 16);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (*sm_util == 0 && std::chrono::steady_clock::now() < deadline) {
    cuLaunchKernel(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
  }
  CHECK_EQ(*sm_util, Arg(argv, 2));
}

// ---- attack <limit> [group]: the escape attempts of issue 20 against any driver ----
// Written against the real driver API only, every entry looked up by name in libcuda.so.1 (a
// driver without it skips that path), so that tests/gpu/run.sh runs it on a GPU and
// preload_test.cc on the fake driver. One line per path on stdout:
//   attack: <path>: refused|held|ESCAPED|ERROR|skipped (<detail>)
// refused: CUDA_ERROR_OUT_OF_MEMORY and the process holds at most the limit; held: the call
// succeeded and the process still holds at most the limit (calls that need not commit memory);
// ESCAPED: the process held more than the limit (NVML's per-process used memory, after a kernel
// launch that makes lazily committed memory real), or a call that commits more than the limit
// succeeded, or a lookup returned the driver's own entry; ERROR: another error code. Exit status
// 1 on any ESCAPED or ERROR. [group] runs one group of paths (hooks, dlmopen, arrays, contexts,
// limits, modules, graph, import, vmm, pool, untested), so that a driver crash costs one group
// only.
namespace attack {

void* g_cuda = nullptr;
void* g_nvml = nullptr;
unsigned long long g_limit = 0;
int g_bad = 0;
CUcontext g_primary = nullptr;
CUfunction g_nop = nullptr;  // real drivers only: launched to make lazy commits happen

template <typename F>
F Sym(const char* name) {
  return g_cuda == nullptr ? nullptr : reinterpret_cast<F>(dlsym(g_cuda, name));
}
template <typename F>
F NvmlSym(const char* name) {
  return g_nvml == nullptr ? nullptr : reinterpret_cast<F>(dlsym(g_nvml, name));
}

// What the driver holds for this process on device 0 (NVML, not virtualised by libvgpu): our
// entry, or, in a PID namespace where NVML lists host PIDs, the only process listed (a test
// machine's GPU runs nothing else); -1 when that cannot be told or NVML does not say.
long long ProcessUsed() {
  using ListFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
  auto by_index =
      NvmlSym<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2");
  auto list = NvmlSym<ListFn>("nvmlDeviceGetComputeRunningProcesses");
  nvmlDevice_t dev = nullptr;
  nvmlProcessInfo_v1_t infos[64];
  unsigned int count = 64;
  if (by_index == nullptr || list == nullptr || by_index(0, &dev) != NVML_SUCCESS ||
      list(dev, &count, infos) != NVML_SUCCESS) {
    return -1;
  }
  const nvmlProcessInfo_v1_t* ours = count == 1 ? &infos[0] : nullptr;
  for (unsigned int i = 0; i < count && i < 64; ++i) {
    if (infos[i].pid == static_cast<unsigned>(getpid())) ours = &infos[i];
  }
  if (ours == nullptr || ours->usedGpuMemory >= (1ULL << 62)) return -1;
  return static_cast<long long>(ours->usedGpuMemory);
}

void Synchronize() {
  if (auto sync = Sym<CUresult (*)()>("cuCtxSynchronize")) sync();
}

// One attempt: the codes the calls returned and the most the process held.
struct Outcome {
  int oom = 0;
  int ok = 0;
  CUresult other = CUDA_SUCCESS;
  long long max_used = -1;
  std::string detail;
  std::string escaped;  // set: ESCAPED for this reason, whatever the codes

  void Add(CUresult r) {
    if (r == CUDA_SUCCESS) {
      ++ok;
    } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      ++oom;
    } else if (other == CUDA_SUCCESS) {
      other = r;
    }
  }
  // Launches a kernel in the primary context (memory a call set up lazily becomes real), then
  // samples what the process holds.
  void Measure() {
    auto set_current = Sym<CUresult (*)(CUcontext)>("cuCtxSetCurrent");
    if (set_current != nullptr) set_current(g_primary);
    if (g_nop != nullptr) {
      cuLaunchKernel(g_nop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
      Synchronize();
    }
    long long used = ProcessUsed();
    if (used > max_used) max_used = used;
  }
};

std::string MiB(long long bytes) {
  return bytes < 0 ? std::string("unknown") : std::to_string(bytes >> 20) + " MiB";
}

// must_refuse: a success means more than the limit was committed.
void Report(const char* path, const Outcome& o, bool must_refuse) {
  std::string verdict;
  std::string why;
  if (!o.escaped.empty()) {
    verdict = "ESCAPED";
    why = o.escaped;
  } else if (o.max_used > static_cast<long long>(g_limit)) {
    verdict = "ESCAPED";
    why = "the process held " + MiB(o.max_used);
  } else if (must_refuse && o.ok > 0) {
    verdict = "ESCAPED";
    why = "a call past the limit succeeded";
  } else if (o.other != CUDA_SUCCESS) {
    verdict = "ERROR";
    why = "rc=" + std::to_string(o.other);
  } else if (o.oom > 0) {
    verdict = "refused";
  } else {
    verdict = "held";
  }
  if (verdict == "ESCAPED" || verdict == "ERROR") ++g_bad;
  std::string detail = why;
  if (!o.detail.empty()) detail += (detail.empty() ? "" : "; ") + o.detail;
  detail += (detail.empty() ? "" : "; ") + std::string("max held ") + MiB(o.max_used);
  std::printf("attack: %s: %s (%s)\n", path, verdict.c_str(), detail.c_str());
  std::fflush(stdout);
}

void Skip(const char* path, const std::string& why) {
  std::printf("attack: %s: skipped (%s)\n", path, why.c_str());
  std::fflush(stdout);
}

using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using FreeFn = CUresult (*)(CUdeviceptr);

// Twice the limit through `alloc`, which must be libvgpu's hook.
void SizedAlloc(const char* path, void* alloc, void* hook) {
  if (alloc == nullptr) return Skip(path, "lookup found nothing");
  Outcome o;
  if (alloc != hook) {
    o.escaped = "the lookup returned the driver's own entry, not libvgpu's hook";
    return Report(path, o, true);
  }
  CUdeviceptr p = 0;
  CUresult r = reinterpret_cast<AllocFn>(alloc)(&p, 2 * g_limit);
  o.Add(r);
  o.Measure();
  if (r == CUDA_SUCCESS) Sym<FreeFn>("cuMemFree_v2")(p);
  Report(path, o, true);
}

void HookEscapes(void* hook) {
  using DlsymFn = void* (*)(void*, const char*);
  SizedAlloc("cuMemAlloc_v2 of 2x the limit (baseline)", Sym<void*>("cuMemAlloc_v2"), hook);
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5"}) {
    std::string path = std::string("dlvsym(RTLD_DEFAULT, \"dlsym\", \"") + version + "\") + dlsym";
    auto libc_dlsym = reinterpret_cast<DlsymFn>(dlvsym(RTLD_DEFAULT, "dlsym", version));
    if (libc_dlsym == nullptr) {
      Skip(path.c_str(), "no such version in this glibc");
      continue;
    }
    SizedAlloc(path.c_str(), libc_dlsym(g_cuda, "cuMemAlloc_v2"), hook);
  }
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  auto libc_dlsym = libc ? reinterpret_cast<DlsymFn>(dlsym(libc, "dlsym")) : nullptr;
  SizedAlloc("dlsym(libc, \"dlsym\") + dlsym",
             libc_dlsym ? libc_dlsym(g_cuda, "cuMemAlloc_v2") : nullptr, hook);
  SizedAlloc("dlsym(RTLD_NEXT) from a library loaded before libcuda",
             escape_lookup_next("cuMemAlloc_v2"), hook);
  auto resolve =
      Sym<CUresult (*)(const char*, void**, int, cuuint64_t, int*)>("cuGetProcAddress_v2");
  void* fn = nullptr;
  int status = 0;
  const char* future = "cuGetProcAddress_v2(\"cuMemAlloc\", cudaVersion 99000)";
  if (resolve == nullptr || resolve("cuMemAlloc", &fn, 99000, 0, &status) != CUDA_SUCCESS) {
    Skip(future, "the driver does not resolve it");
  } else {
    SizedAlloc(future, fn, hook);
  }
  // The legacy v1 allocator (32-bit sizes), by name and through the resolver below 3020.
  using V1AllocFn = CUresult (*)(unsigned int*, unsigned int);
  using V1FreeFn = CUresult (*)(unsigned int);
  auto v1 = [&](const char* path, void* alloc) {
    if (alloc == nullptr) return Skip(path, "the driver has no v1 cuMemAlloc");
    Outcome o;
    unsigned int p = 0;
    unsigned int bytes = g_limit < (1ULL << 31) ? static_cast<unsigned int>(2 * g_limit) : ~0U;
    CUresult r = reinterpret_cast<V1AllocFn>(alloc)(&p, bytes);
    o.Add(r);
    o.Measure();
    if (r == CUDA_SUCCESS) {
      if (auto release = Sym<V1FreeFn>("cuMemFree")) release(p);
    }
    Report(path, o, true);
  };
  v1("cuMemAlloc (v1) through dlsym", Sym<void*>("cuMemAlloc"));
  fn = nullptr;
  auto resolve_v1 = Sym<CUresult (*)(const char*, void**, int, cuuint64_t)>("cuGetProcAddress");
  if (resolve_v1 != nullptr && resolve_v1("cuMemAlloc", &fn, 3010, 0) == CUDA_SUCCESS) {
    v1("cuMemAlloc (v1) through cuGetProcAddress(cudaVersion 3010)", fn);
  } else {
    Skip("cuMemAlloc (v1) through cuGetProcAddress(cudaVersion 3010)",
         "the driver does not resolve it");
  }
}

// A second copy of the driver in a new link-map namespace (its own group: a driver may not
// survive being loaded twice).
void SecondDriver(void* hook) {
  const char* path = "dlmopen(LM_ID_NEWLM, \"libcuda.so.1\") + dlsym";
  void* second = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW);
  if (second == nullptr) {
    const char* err = dlerror();
    return Skip(path, err ? err : "dlmopen failed");
  }
  SizedAlloc(path, dlsym(second, "cuMemAlloc_v2"), hook);
}

struct Array2D {
  size_t Width, Height;
  int Format;
  unsigned int NumChannels;
};
struct Array3D {
  size_t Width, Height, Depth;
  int Format;
  unsigned int NumChannels, Flags;
};

void Arrays() {
  using CreateFn = CUresult (*)(void**, const void*);
  using DestroyFn = CUresult (*)(void*);
  const size_t floats = 2 * g_limit / 4;  // 2x the limit of 4-byte texels
  Array2D a2{32768, floats / 32768, kFloat, 1};
  Array3D a3{1024, 1024, floats / (1024 * 1024), kFloat, 1, 0};
  struct Case {
    const char* path;
    const void* desc;
    const char* destroy;
  } cases[] = {{"cuArrayCreate_v2", &a2, "cuArrayDestroy"},
               {"cuArray3DCreate_v2", &a3, "cuArrayDestroy"},
               {"cuMipmappedArrayCreate", &a3, "cuMipmappedArrayDestroy"}};
  for (const Case& c : cases) {
    void* create = Sym<void*>(c.path);
    if (create == nullptr) {
      Skip(c.path, "not in this driver");
      continue;
    }
    Outcome o;
    void* h = nullptr;
    CUresult r =
        std::strcmp(c.path, "cuMipmappedArrayCreate") == 0
            ? reinterpret_cast<CUresult (*)(void**, const void*, unsigned)>(create)(&h, c.desc, 2)
            : reinterpret_cast<CreateFn>(create)(&h, c.desc);
    o.Add(r);
    o.Measure();
    if (r == CUDA_SUCCESS) Sym<DestroyFn>(c.destroy)(h);
    Report(c.path, o, true);
  }
}

void Contexts() {
  const char* path = "cuCtxCreate x8";
  auto v4 = Sym<CUresult (*)(CUcontext*, void*, unsigned, CUdevice)>("cuCtxCreate_v4");
  auto v3 = Sym<CUresult (*)(CUcontext*, void*, int, unsigned, CUdevice)>("cuCtxCreate_v3");
  auto v2 = Sym<CUresult (*)(CUcontext*, unsigned, CUdevice)>("cuCtxCreate_v2");
  auto destroy = Sym<CUresult (*)(CUcontext)>("cuCtxDestroy_v2");
  if ((v4 == nullptr && v3 == nullptr && v2 == nullptr) || destroy == nullptr) {
    return Skip(path, "not in this driver");
  }
  Outcome o;
  o.detail = v4 ? "_v4" : v3 ? "_v3" : "_v2";
  std::vector<CUcontext> made;
  for (int i = 0; i < 8; ++i) {
    CUcontext ctx = nullptr;
    CUresult r = v4 ? v4(&ctx, nullptr, 0, 0) : v3 ? v3(&ctx, nullptr, 0, 0, 0) : v2(&ctx, 0, 0);
    o.Add(r);
    if (r == CUDA_SUCCESS) made.push_back(ctx);
    o.Measure();
  }
  o.detail += ", " + std::to_string(made.size()) + " created";
  for (CUcontext ctx : made) destroy(ctx);
  Report(path, o, false);
}

void GreenContexts() {
  const char* path = "cuGreenCtxCreate x8 (all SMs)";
  auto resource = Sym<CUresult (*)(CUdevice, void*, int)>("cuDeviceGetDevResource");
  auto generate = Sym<CUresult (*)(void**, void*, unsigned)>("cuDevResourceGenerateDesc");
  auto create = Sym<CUresult (*)(void**, void*, CUdevice, unsigned)>("cuGreenCtxCreate");
  auto destroy = Sym<CUresult (*)(void*)>("cuGreenCtxDestroy");
  if (!resource || !generate || !create || !destroy) return Skip(path, "not in this driver");
  // CUdevResource is 144 bytes in CUDA 12.x/13.0; room to spare.
  alignas(16) unsigned char sm[4096] = {};
  void* desc = nullptr;
  CUresult r = resource(0, sm, 1);  // CU_DEV_RESOURCE_TYPE_SM
  if (r == CUDA_SUCCESS) r = generate(&desc, sm, 1);
  if (r != CUDA_SUCCESS) return Skip(path, "no SM resource descriptor: rc=" + std::to_string(r));
  Outcome o;
  std::vector<void*> made;
  for (int i = 0; i < 8; ++i) {
    void* green = nullptr;
    r = create(&green, desc, 0, 1);  // CU_GREEN_CTX_DEFAULT_STREAM
    o.Add(r);
    if (r == CUDA_SUCCESS) made.push_back(green);
    o.Measure();
  }
  o.detail = std::to_string(made.size()) + " created";
  for (void* green : made) destroy(green);
  Report(path, o, false);
}

void ContextLimits() {
  auto get = Sym<CUresult (*)(size_t*, CUlimit)>("cuCtxGetLimit");
  auto set = Sym<CUresult (*)(CUlimit, size_t)>("cuCtxSetLimit");
  auto attr = Sym<CUresult (*)(int*, int, CUdevice)>("cuDeviceGetAttribute");
  if (get == nullptr || set == nullptr || attr == nullptr) {
    return Skip("cuCtxSetLimit", "not in this driver");
  }
  int sms = 0, threads = 0;
  attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
  attr(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0);
  unsigned long long resident = sms > 0 && threads > 0 ? 1ULL * sms * threads : 1;
  // The stack limit is per thread, committed for every resident thread.
  size_t stack = static_cast<size_t>((2 * g_limit / resident + 15) / 16 * 16);
  struct Case {
    const char* path;
    CUlimit limit;
    size_t value;
  } cases[] = {
      {"cuCtxSetLimit(MALLOC_HEAP_SIZE, 2x the limit)", CU_LIMIT_MALLOC_HEAP_SIZE, 2 * g_limit},
      {"cuCtxSetLimit(STACK_SIZE, 2x the limit over all resident threads)", CU_LIMIT_STACK_SIZE,
       stack},
      {"cuCtxSetLimit(PRINTF_FIFO_SIZE, 2x the limit)", CU_LIMIT_PRINTF_FIFO_SIZE, 2 * g_limit},
  };
  for (const Case& c : cases) {
    Outcome o;
    size_t old = 0;
    get(&old, c.limit);
    CUresult r = set(c.limit, c.value);
    o.Add(r);
    o.Measure();
    if (r == CUDA_SUCCESS) set(c.limit, old);
    Report(c.path, o, false);
  }
}

// PTX with two __device__ arrays of the limit each (2x the limit of globals).
std::string BigGlobalsPtx() {
  char text[512];
  std::snprintf(text, sizeof(text),
                ".version 7.0\n.target sm_50\n.address_size 64\n"
                ".global .align 8 .b8 g0[%llu];\n.global .align 8 .b8 g1[%llu];\n",
                g_limit, g_limit);
  return text;
}

void Modules() {
  const std::string ptx = BigGlobalsPtx();
  char file[] = "/tmp/vgpu-attack-XXXXXX";
  int fd = mkstemp(file);
  bool have_file =
      fd >= 0 && write(fd, ptx.c_str(), ptx.size()) == static_cast<ssize_t>(ptx.size());
  if (fd >= 0) close(fd);
  using Lib = CUresult (*)(void**, const void*, void*, void**, unsigned, void*, void**, unsigned);
  using LibFile =
      CUresult (*)(void**, const char*, void*, void**, unsigned, void*, void**, unsigned);
  auto module_global =
      Sym<CUresult (*)(CUdeviceptr*, size_t*, void*, const char*)>("cuModuleGetGlobal_v2");
  auto library_global =
      Sym<CUresult (*)(CUdeviceptr*, size_t*, void*, const char*)>("cuLibraryGetGlobal");
  auto module_unload = Sym<CUresult (*)(void*)>("cuModuleUnload");
  auto library_unload = Sym<CUresult (*)(void*)>("cuLibraryUnload");
  struct Case {
    const char* path;
    bool library;
    bool fatbin;  // the image is PTX, which a driver may not take as a fat binary
    std::function<CUresult(void**)> load;
  };
  const Case cases[] = {
      {"cuModuleLoadData (2x the limit of __device__ globals)", false, false,
       [&](void** h) {
         return Sym<CUresult (*)(void**, const void*)>("cuModuleLoadData")(h, ptx.c_str());
       }},
      {"cuModuleLoadDataEx", false, false,
       [&](void** h) {
         return Sym<CUresult (*)(void**, const void*, unsigned, void*, void**)>(
             "cuModuleLoadDataEx")(h, ptx.c_str(), 0, nullptr, nullptr);
       }},
      {"cuModuleLoad (file)", false, false,
       [&](void** h) { return Sym<CUresult (*)(void**, const char*)>("cuModuleLoad")(h, file); }},
      {"cuModuleLoadFatBinary", false, true,
       [&](void** h) {
         return Sym<CUresult (*)(void**, const void*)>("cuModuleLoadFatBinary")(h, ptx.c_str());
       }},
      {"cuLibraryLoadData", true, false,
       [&](void** h) {
         return Sym<Lib>("cuLibraryLoadData")(h, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr,
                                              0);
       }},
      {"cuLibraryLoadFromFile", true, false,
       [&](void** h) {
         return Sym<LibFile>("cuLibraryLoadFromFile")(h, file, nullptr, nullptr, 0, nullptr,
                                                      nullptr, 0);
       }},
  };
  const char* entries[] = {"cuModuleLoadData",      "cuModuleLoadDataEx", "cuModuleLoad",
                           "cuModuleLoadFatBinary", "cuLibraryLoadData",  "cuLibraryLoadFromFile"};
  for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); ++i) {
    const Case& c = cases[i];
    if (Sym<void*>(entries[i]) == nullptr) {
      Skip(c.path, "not in this driver");
      continue;
    }
    if (std::strstr(entries[i], "File") != nullptr ||
        std::strcmp(entries[i], "cuModuleLoad") == 0) {
      if (!have_file) {
        Skip(c.path, "cannot write the PTX file");
        continue;
      }
    }
    Outcome o;
    void* h = nullptr;
    CUresult r = c.load(&h);
    if (c.fatbin && r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY) {
      Skip(c.path, "the driver takes no PTX image as a fat binary: rc=" + std::to_string(r));
      continue;
    }
    o.Add(r);
    if (r == CUDA_SUCCESS) {
      // Lazy loading (CUDA_MODULE_LOADING=LAZY) commits globals on first use: use them.
      auto global = c.library ? library_global : module_global;
      CUdeviceptr d = 0;
      size_t n = 0;
      if (global != nullptr) {
        global(&d, &n, h, "g0");
        global(&d, &n, h, "g1");
      }
    }
    o.Measure();
    if (r == CUDA_SUCCESS) (c.library ? library_unload : module_unload)(h);
    Report(c.path, o, true);
  }
  if (fd >= 0) unlink(file);
}

size_t Headroom() {
  size_t free_bytes = 0, total = 0;
  Sym<CUresult (*)(size_t*, size_t*)>("cuMemGetInfo_v2")(&free_bytes, &total);
  return free_bytes;
}

constexpr size_t kGranule = 2 << 20;

void GraphMemory() {
  const char* path = "cuGraphAddMemAllocNode, 3 instantiations of 0.4x the headroom";
  using GraphCreateFn = CUresult (*)(CUgraph*, unsigned);
  auto create = Sym<GraphCreateFn>("cuGraphCreate");
  auto add = Sym<decltype(&cuGraphAddMemAllocNode)>("cuGraphAddMemAllocNode");
  auto instantiate = Sym<decltype(&cuGraphInstantiateWithFlags)>("cuGraphInstantiateWithFlags");
  auto launch = Sym<decltype(&cuGraphLaunch)>("cuGraphLaunch");
  auto exec_destroy = Sym<decltype(&cuGraphExecDestroy)>("cuGraphExecDestroy");
  auto destroy = Sym<decltype(&cuGraphDestroy)>("cuGraphDestroy");
  auto trim = Sym<CUresult (*)(CUdevice)>("cuDeviceGraphMemTrim");
  auto free_async = Sym<decltype(&cuMemFreeAsync)>("cuMemFreeAsync");
  if (!create || !add || !instantiate || !launch || !exec_destroy || !destroy) {
    return Skip(path, "not in this driver");
  }
  Outcome o;
  const size_t bytes = Headroom() * 4 / 10 / kGranule * kGranule;
  // Three graphs instantiated once each: a driver may allow one instantiation of a graph with
  // memory nodes at a time.
  struct Made {
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    CUdeviceptr dptr = 0;
    bool launched = false;
  } made[3];
  for (Made& m : made) {
    if (create(&m.graph, 0) != CUDA_SUCCESS) continue;
    CudaMemAllocNodeParams params{};
    params.poolProps.allocType = 1;  // pinned
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.poolProps.location.id = 0;
    params.bytesize = bytes;
    CUgraphNode node = nullptr;
    CUresult r = add(&node, m.graph, nullptr, 0, &params);
    if (r != CUDA_SUCCESS) {
      o.Add(r);
      continue;
    }
    m.dptr = params.dptr;
    r = instantiate(&m.exec, m.graph, 0);
    o.Add(r);
    if (r != CUDA_SUCCESS) {
      m.exec = nullptr;
      continue;
    }
    m.launched = launch(m.exec, nullptr) == CUDA_SUCCESS;
    Synchronize();
    o.Measure();
  }
  o.Measure();
  for (Made& m : made) {
    // Memory a launched graph allocated and never freed is freed like any stream allocation
    // (real drivers only: the fake does not model graph memory).
    if (m.launched && trim != nullptr && free_async != nullptr) free_async(m.dptr, nullptr);
    if (m.exec != nullptr) exec_destroy(m.exec);
    if (m.graph != nullptr) destroy(m.graph);
  }
  Synchronize();
  if (trim != nullptr) trim(0);
  Report(path, o, false);
}

void ImportExternal() {
  const char* path = "cuImportExternalMemory of 2x the limit";
  auto import = Sym<decltype(&cuImportExternalMemory)>("cuImportExternalMemory");
  auto destroy = Sym<decltype(&cuDestroyExternalMemory)>("cuDestroyExternalMemory");
  if (import == nullptr || destroy == nullptr) return Skip(path, "not in this driver");
  // No Vulkan here: an opaque fd that is not one. libvgpu refuses by the stated size before the
  // driver looks at the fd; without that refusal the driver answers an error of its own.
  CudaExternalMemoryHandleDesc desc{};
  desc.type = 1;  // CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD
  desc.handle.fd = -1;
  desc.size = 2 * g_limit;
  Outcome o;
  CUexternalMemory ext = nullptr;
  CUresult r = import(&ext, &desc);
  o.Add(r);
  o.Measure();
  if (r == CUDA_SUCCESS) destroy(ext);
  Report(path, o, true);
}

CUmemAllocationProp DeviceProp() {
  CUmemAllocationProp prop{};
  prop.type = 1;  // pinned
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  return prop;
}

void ReleaseWhileMapped() {
  const char* path = "cuMemRelease while mapped, then cuMemCreate of 0.6x the headroom";
  auto reserve = Sym<CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long)>(
      "cuMemAddressReserve");
  auto address_free = Sym<CUresult (*)(CUdeviceptr, size_t)>("cuMemAddressFree");
  auto create = Sym<decltype(&cuMemCreate)>("cuMemCreate");
  auto release = Sym<decltype(&cuMemRelease)>("cuMemRelease");
  auto map = Sym<decltype(&cuMemMap)>("cuMemMap");
  auto unmap = Sym<decltype(&cuMemUnmap)>("cuMemUnmap");
  if (!reserve || !address_free || !create || !release || !map || !unmap) {
    return Skip(path, "not in this driver");
  }
  CUmemAllocationProp prop = DeviceProp();
  size_t granule = kGranule;
  if (auto gran = Sym<CUresult (*)(size_t*, const CUmemAllocationProp*, int)>(
          "cuMemGetAllocationGranularity")) {
    size_t g = 0;
    if (gran(&g, &prop, 0) == CUDA_SUCCESS && g > 0) granule = g;
  }
  const size_t chunk = Headroom() * 6 / 10 / granule * granule;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle a = 0, b = 0;
  CUresult r = reserve(&va, chunk, 0, 0, 0);
  if (r != CUDA_SUCCESS) return Skip(path, "cuMemAddressReserve: rc=" + std::to_string(r));
  // The first handle is legal (0.6x the headroom): mapped, then released while mapped.
  r = create(&a, chunk, &prop, 0);
  if (r != CUDA_SUCCESS) {
    address_free(va, chunk);
    Outcome o;
    o.Add(r == CUDA_ERROR_OUT_OF_MEMORY ? CUDA_ERROR_INVALID_VALUE : r);
    o.detail = "the first cuMemCreate, within the limit, failed: rc=" + std::to_string(r);
    return Report(path, o, true);
  }
  r = map(va, chunk, 0, a, 0);
  release(a);
  Outcome o;
  if (r != CUDA_SUCCESS) {
    o.Add(r);
    o.detail = "cuMemMap of the first handle failed";
  } else {
    // Its memory is still held: a second handle of the same size is past the limit.
    r = create(&b, chunk, &prop, 0);
    o.Add(r);
    o.Measure();
    if (r == CUDA_SUCCESS) release(b);
    unmap(va, chunk);
  }
  address_free(va, chunk);
  Report(path, o, true);
}

void PoolKeeps() {
  const char* path = "pool at RELEASE_THRESHOLD max, cuMemFreeAsync, then 0.6x the headroom again";
  auto get_pool = Sym<decltype(&cuDeviceGetMemPool)>("cuDeviceGetMemPool");
  auto set_attr = Sym<decltype(&cuMemPoolSetAttribute)>("cuMemPoolSetAttribute");
  auto trim = Sym<decltype(&cuMemPoolTrimTo)>("cuMemPoolTrimTo");
  auto alloc_async = Sym<decltype(&cuMemAllocAsync)>("cuMemAllocAsync");
  auto free_async = Sym<decltype(&cuMemFreeAsync)>("cuMemFreeAsync");
  if (!get_pool || !set_attr || !trim || !alloc_async || !free_async) {
    return Skip(path, "not in this driver");
  }
  CUmemoryPool pool = nullptr;
  Outcome o;
  CUresult r = get_pool(&pool, 0);
  if (r != CUDA_SUCCESS) {
    o.Add(r);
    return Report(path, o, true);
  }
  cuuint64_t max = ~cuuint64_t{0}, zero = 0;
  set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max);
  const size_t chunk = Headroom() * 6 / 10 / kGranule * kGranule;
  CUdeviceptr p = 0, q = 0;
  r = alloc_async(&p, chunk, nullptr);
  if (r == CUDA_SUCCESS) {
    free_async(p, nullptr);
    Synchronize();
    r = Sym<AllocFn>("cuMemAlloc_v2")(&q, chunk);
    o.Add(r);
    o.Measure();
    if (r == CUDA_SUCCESS) Sym<FreeFn>("cuMemFree_v2")(q);
  } else {
    o.Add(r);
  }
  set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero);
  trim(pool, 0);
  Report(path, o, true);
}

void Run(int argc, char** argv) {
  g_limit = Arg(argv, 2);
  const char* group = argc > 3 ? argv[3] : nullptr;
  UseDevice(0);
  g_cuda = dlopen("libcuda.so.1", RTLD_NOW);
  g_nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (auto init = NvmlSym<nvmlReturn_t (*)()>("nvmlInit_v2")) init();
  Sym<CUresult (*)(CUcontext*)>("cuCtxGetCurrent")(&g_primary);
  // A kernel that does nothing, for Outcome::Measure (drivers that JIT PTX; not the fake).
  auto get_function = Sym<CUresult (*)(CUfunction*, void*, const char*)>("cuModuleGetFunction");
  void* nop_module = nullptr;
  if (get_function != nullptr &&
      cuModuleLoadData(&nop_module,
                       ".version 7.0\n.target sm_50\n.address_size 64\n"
                       ".visible .entry nop()\n{\nret;\n}\n") == CUDA_SUCCESS) {
    get_function(&g_nop, nop_module, "nop");
  }
  std::printf("attack: limit %s, process holds %s at start, %s\n", MiB(g_limit).c_str(),
              MiB(ProcessUsed()).c_str(), g_nop ? "kernel launches after each call" : "no kernel");
  struct Group {
    const char* name;
    std::function<void()> run;
  };
  const Group groups[] = {
      {"hooks", [] { HookEscapes(Hook("cuMemAlloc_v2")); }},
      {"dlmopen", [] { SecondDriver(Hook("cuMemAlloc_v2")); }},
      {"arrays", Arrays},
      {"contexts",
       [] {
         Contexts();
         GreenContexts();
       }},
      {"limits", ContextLimits},
      {"modules", Modules},
      {"graph", GraphMemory},
      {"import", ImportExternal},
      {"vmm", ReleaseWhileMapped},
      {"pool", PoolKeeps},
      {"untested",
       [] {
         Skip("allocation table full", "3.67M live allocations; the fake-driver test covers it");
         Skip("asynchronous allocation on another device's stream",
              "needs two GPUs; the fake-driver test covers it");
       }},
  };
  bool known = group == nullptr;
  for (const Group& g : groups) {
    if (group != nullptr && std::strcmp(group, g.name) != 0) continue;
    known = true;
    g.run();
  }
  if (!known) {
    std::fprintf(stderr, "unknown attack group %s\n", group);
    ++g_failures;
  }
  if (g_bad > 0) ++g_failures;
}

}  // namespace attack

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string s = argv[1];
  if (s == "info" && argc == 4) {
    Info(argv);
  } else if (s == "oom" && argc == 3) {
    Oom(argv);
  } else if (s == "setenv" && argc == 3) {
    Setenv(argv);
  } else if (s == "tamper" && argc == 3) {
    Tamper(argv);
  } else if (s == "refuse" && argc == 3) {
    Refuse(argv);
  } else if (s == "tablefull" && argc == 3) {
    TableFull(argv);
  } else if (s == "families" && argc == 3) {
    Families(argv);
  } else if (s == "nvml" && argc == 5) {
    Nvml(argv);
  } else if (s == "procaddr") {
    ProcAddress();
  } else if (s == "dlsym") {
    Dlsym();
  } else if (s == "escapes" && argc == 3) {
    Escapes(argv);
  } else if (s == "measured" && argc == 3) {
    Measured(argv);
  } else if (s == "contexts" && argc == 3) {
    Contexts(argv);
  } else if (s == "legacylaunch") {
    LegacyLaunch();
  } else if (s == "releasemapped" && argc == 3) {
    ReleaseMapped(argv);
  } else if (s == "asyncdevice") {
    AsyncDevice();
  } else if (s == "asyncfirst") {
    AsyncFirst();
  } else if (s == "poolkeep" && argc == 3) {
    PoolKeep(argv);
  } else if (s == "import" && argc == 3) {
    Import(argv);
  } else if (s == "attack" && (argc == 3 || argc == 4)) {
    attack::Run(argc, argv);
  } else if (s == "graphmem" && argc == 3) {
    GraphMem(argv);
  } else if (s == "bigkernel") {
    BigKernel();
  } else if (s == "limitertruncate") {
    LimiterTruncate();
  } else if (s == "streamkernel") {
    StreamKernel();
  } else if (s == "launch") {
    Launch();
  } else if (s == "hold" && argc == 4) {
    Hold(argv);
  } else if (s == "fill" && argc == 3) {
    Fill(argv);
  } else if (s == "watch" && argc == 3) {
    Watch(argv);
  } else if (s == "threads" && argc == 3) {
    Threads(argv);
  } else if (s == "fork" && argc == 4) {
    Fork(argv);
  } else {
    std::fprintf(stderr, "unknown scenario\n");
    return 2;
  }
  return g_failures == 0 ? 0 : 1;
}
