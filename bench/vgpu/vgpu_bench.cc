// Added cost of libvgpu per cuMemAlloc_v2 + cuMemFree_v2 pair and per cuLaunchKernel, against
// the fake driver, side by side in one run: the process re-executes itself under
// LD_PRELOAD=libvgpu.so, then compares the hooks (the exported symbols) with the fake driver's
// own entry points (fetched without dlsym, so not intercepted).
//
//   build-rel/bench/vgpu_bench            (or with --benchmark_filter=...)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "vgpu/cuda_defs.h"

using namespace hami::vgpu;  // NOLINT: driver API client.

extern "C" {
CUresult cuInit(unsigned int);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void**, void**);
void* fake_cuda_entry(const char* name);
}

namespace {

using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using FreeFn = CUresult (*)(CUdeviceptr);
using LaunchFn = decltype(&cuLaunchKernel);

void AllocFree(benchmark::State& state, AllocFn alloc, FreeFn release) {
  for (auto _ : state) {
    CUdeviceptr p = 0;
    alloc(&p, 1 << 20);
    release(p);
  }
}

void Launch(benchmark::State& state, LaunchFn launch) {
  for (auto _ : state) launch(nullptr, 64, 1, 1, 256, 1, 1, 0, nullptr, nullptr, nullptr);
}

void BM_AllocFree_Driver(benchmark::State& s) {
  AllocFree(s, reinterpret_cast<AllocFn>(fake_cuda_entry("cuMemAlloc_v2")),
            reinterpret_cast<FreeFn>(fake_cuda_entry("cuMemFree_v2")));
}
void BM_AllocFree_Libvgpu(benchmark::State& s) { AllocFree(s, &cuMemAlloc_v2, &cuMemFree_v2); }
void BM_Launch_Driver(benchmark::State& s) {
  Launch(s, reinterpret_cast<LaunchFn>(fake_cuda_entry("cuLaunchKernel")));
}
void BM_Launch_Libvgpu(benchmark::State& s) { Launch(s, &cuLaunchKernel); }

BENCHMARK(BM_AllocFree_Driver);
BENCHMARK(BM_AllocFree_Libvgpu);
BENCHMARK(BM_Launch_Driver);
BENCHMARK(BM_Launch_Libvgpu);

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("VGPU_BENCH_CHILD") == nullptr) {
    std::string cache = "/tmp/vgpu_bench." + std::to_string(getpid()) + ".cache";
    setenv("VGPU_BENCH_CHILD", "1", 1);
    setenv("LD_PRELOAD", VGPU_LIB_FILE, 1);
    setenv("LD_LIBRARY_PATH", VGPU_FAKES_DIR, 1);
    setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", cache.c_str(), 1);
    setenv("CUDA_DEVICE_MEMORY_LIMIT", "4g", 0);
    execv("/proc/self/exe", argv);
    return 127;
  }
  cuInit(0);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  unlink(std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"));
  return 0;
}
