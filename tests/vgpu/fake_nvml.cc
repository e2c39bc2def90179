// A fake libnvidia-ml.so.1: the devices of the fake driver (same FAKE_GPU_* knobs), used memory
// read from the fake libcuda's model, and a constant scripted SM utilisation.
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "tests/vgpu/fake_ids.h"
#include "vgpu/nvml_defs.h"

using namespace hami::vgpu;  // NOLINT: the fake mirrors NVML's C surface.
namespace fake = hami::vgpu::fake;

namespace hami::vgpu {
struct nvmlDevice_st {
  int index;
};
}  // namespace hami::vgpu

namespace {

nvmlDevice_st g_devices[16] = {{0}, {1}, {2},  {3},  {4},  {5},  {6},  {7},
                               {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};

unsigned long long CudaUsed(int index) {
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (cuda == nullptr) return 0;
  auto probe =
      reinterpret_cast<unsigned long long (*)(int)>(dlsym(cuda, "fake_cuda_physical_used"));
  unsigned long long used = probe ? probe(index) : 0;
  dlclose(cuda);
  return used;
}

// What the other tenants use (the fake driver's view: they may free while we create).
unsigned long long OtherUsed() {
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  auto probe = cuda
                   ? reinterpret_cast<unsigned long long (*)()>(dlsym(cuda, "fake_cuda_other_used"))
                   : nullptr;
  unsigned long long used = probe ? probe() : fake::EnvU64(fake::kOtherUsedEnv, 0);
  if (cuda) dlclose(cuda);
  return used;
}

// The SM utilisation to report: FAKE_NVML_SM_UTIL_SCRIPT="a,b,c" yields a, b, c, c, ... on
// successive queries (a scripted curve); otherwise the constant FAKE_NVML_SM_UTIL (default 0).
unsigned int NextSmUtil() {
  const char* script = std::getenv("FAKE_NVML_SM_UTIL_SCRIPT");
  if (script == nullptr || *script == '\0') {
    return static_cast<unsigned>(fake::EnvU64(fake::kSmUtilEnv, 0));
  }
  static std::atomic<int> step{0};
  int want = step.fetch_add(1);
  const char* p = script;
  for (int i = 0; i < want; ++i) {
    const char* comma = std::strchr(p, ',');
    if (comma == nullptr) break;  // hold the last value
    p = comma + 1;
  }
  return static_cast<unsigned>(std::strtoul(p, nullptr, 10));
}

bool Valid(nvmlDevice_t d) {
  return d != nullptr && d->index >= 0 && d->index < fake::DeviceCount();
}

}  // namespace

extern "C" {

int fake_next_probe() { return 2; }

nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
nvmlReturn_t nvmlInitWithFlags(unsigned int) { return NVML_SUCCESS; }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
const char* nvmlErrorString(nvmlReturn_t) { return "fake nvml error"; }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned>(fake::DeviceCount());
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return nvmlDeviceGetCount_v2(count); }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= static_cast<unsigned>(fake::DeviceCount())) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  if (!Valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned>(device->index);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (!Valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  fake::Uuid(device->index, uuid, length);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* mem) {
  if (!Valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  mem->total = fake::TotalBytes();
  mem->used = CudaUsed(device->index) + OtherUsed();
  mem->free = mem->used >= mem->total ? 0 : mem->total - mem->used;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* mem) {
  nvmlMemory_t v1;
  nvmlReturn_t r = nvmlDeviceGetMemoryInfo(device, &v1);
  if (r != NVML_SUCCESS) return r;
  mem->total = v1.total;
  mem->reserved = 0;
  mem->used = v1.used;
  mem->free = v1.free;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* samples,
                                             unsigned int* count, unsigned long long) {
  if (!Valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  if (samples == nullptr || *count < 1) {
    *count = 1;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::memset(samples, 0, sizeof(*samples));
  samples[0].pid = static_cast<unsigned>(getpid());
  samples[0].smUtil = NextSmUtil();
  *count = 1;
  return NVML_SUCCESS;
}
// Processes with a context: this one once the fake driver holds a primary context (reported as
// getpid() + FAKE_NVML_PID_OFFSET, a host PID seen from inside a PID namespace), plus
// FAKE_NVML_OTHER_PID when set (another tenant).
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  nvmlProcessInfo_v1_t* infos) {
  if (!Valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  constexpr unsigned kMaxListed = 16;
  unsigned int n = 0;
  nvmlProcessInfo_v1_t list[kMaxListed];
  unsigned long long other = fake::EnvU64("FAKE_NVML_OTHER_PID", 0);
  if (other != 0) list[n++] = {static_cast<unsigned>(other), 1 << 20};
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  auto refs = cuda ? reinterpret_cast<int (*)(int)>(dlsym(cuda, "fake_cuda_ctx_refs")) : nullptr;
  const unsigned offset = static_cast<unsigned>(fake::EnvU64("FAKE_NVML_PID_OFFSET", 0));
  const char* proc_dir = std::getenv("FAKE_GPU_PROC_DIR");
  if (proc_dir != nullptr) {
    // Every process of the test that announced a context (fake_cuda.cc AnnounceContext).
    if (DIR* d = opendir(proc_dir)) {
      while (dirent* e = readdir(d)) {
        unsigned pid = static_cast<unsigned>(std::strtoul(e->d_name, nullptr, 10));
        if (pid != 0 && n < kMaxListed) list[n++] = {pid + offset, 0};
      }
      closedir(d);
    }
  } else if (fake::EnvU64("FAKE_NVML_HIDE_SELF", 0) != 0) {
    // A PID namespace whose host PID nothing can tell: this process is not recognisable.
  } else if (refs != nullptr && refs(device->index) > 0) {
    list[n++] = {static_cast<unsigned>(getpid()) + offset, CudaUsed(device->index)};
  }
  if (cuda) dlclose(cuda);
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < n; ++i) infos[i] = list[i];
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  if (!Valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  util->gpu = NextSmUtil();
  util->memory = 0;
  return NVML_SUCCESS;
}

}  // extern "C"
