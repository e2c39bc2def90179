// Real driver / NVML tables, the real dlsym, and the real-pointer -> hook mapping shared by the
// dlsym override and cuGetProcAddress.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstring>

#include "vgpu/hooks.h"
#include "vgpu/log.h"

namespace hami::vgpu {

#define VGPU_NAME_ENTRY(name, ret, params) #name,
#define VGPU_HOOK_ENTRY(name, ret, params) reinterpret_cast<void*>(&name),
const char* const kCudaNames[kCudaFnCount] = {VGPU_CUDA_HOOKS(VGPU_NAME_ENTRY)
                                                  VGPU_CUDA_REAL_ONLY(VGPU_NAME_ENTRY)};
void* const kCudaHooks[kCudaHookCount] = {VGPU_CUDA_HOOKS(VGPU_HOOK_ENTRY)};
const char* const kNvmlNames[kNvmlFnCount] = {VGPU_NVML_HOOKS(VGPU_NAME_ENTRY)
                                                  VGPU_NVML_REAL_ONLY(VGPU_NAME_ENTRY)};
void* const kNvmlHooks[kNvmlHookCount] = {VGPU_NVML_HOOKS(VGPU_HOOK_ENTRY)};
#undef VGPU_NAME_ENTRY
#undef VGPU_HOOK_ENTRY

void* g_cuda_real[kCudaFnCount] = {};
extern "C" {
void* hami_vgpu_real_dlsym = nullptr;
}
void* g_nvml_real[kNvmlFnCount] = {};

namespace {

std::atomic<DlsymFn> g_real_dlsym{nullptr};
pthread_mutex_t g_load_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<int> g_cuda_state{0};  // 0 = not tried, 1 = loaded, 2 = failed
std::atomic<int> g_nvml_state{0};
thread_local bool t_loading = false;

// Loads `path` and fills `table` by name. Runs once per library; re-entrant calls from the
// library's own constructors (which may call dlsym) see "not loaded yet".
bool LoadTable(std::atomic<int>* state, const char* path, const char* const* names, int count,
               void** table) {
  int s = state->load(std::memory_order_acquire);
  if (s != 0) return s == 1;
  if (t_loading) return false;
  pthread_mutex_lock(&g_load_mu);
  if (state->load(std::memory_order_relaxed) == 0) {
    t_loading = true;
    void* handle = dlopen(path, RTLD_NOW | RTLD_NODELETE);
    DlsymFn real = RealDlsym();
    if (handle == nullptr || real == nullptr) {
      const char* why = dlerror();
      VGPU_ERROR("cannot load %s: %s", path, why ? why : "no dlsym");
      state->store(2, std::memory_order_release);
    } else {
      for (int i = 0; i < count; ++i) table[i] = real(handle, names[i]);
      state->store(1, std::memory_order_release);
    }
    t_loading = false;
  }
  pthread_mutex_unlock(&g_load_mu);
  return state->load(std::memory_order_acquire) == 1;
}

bool HasPrefixThenUpper(const char* name, const char* prefix, std::size_t len) {
  return std::strncmp(name, prefix, len) == 0 && name[len] >= 'A' && name[len] <= 'Z';
}

}  // namespace

DlsymFn RealDlsym() {
  DlsymFn fn = g_real_dlsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17",
                                          "GLIBC_2.3",  "GLIBC_2.4",   "GLIBC_2.0"};
  for (const char* version : kVersions) {
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (fn != nullptr) break;
  }
  if (fn == nullptr) {
    void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    for (const char* version : kVersions) {
      if (libc == nullptr || fn != nullptr) break;
      fn = reinterpret_cast<DlsymFn>(dlvsym(libc, "dlsym", version));
    }
  }
  g_real_dlsym.store(fn, std::memory_order_release);
  __atomic_store_n(&hami_vgpu_real_dlsym, reinterpret_cast<void*>(fn), __ATOMIC_RELEASE);
  return fn;
}

void ResetLoaderAfterFork() { pthread_mutex_init(&g_load_mu, nullptr); }

bool LoadCudaTable() {
  return LoadTable(&g_cuda_state, "libcuda.so.1", kCudaNames, kCudaFnCount, g_cuda_real);
}

bool LoadNvmlTable() {
  return LoadTable(&g_nvml_state, "libnvidia-ml.so.1", kNvmlNames, kNvmlFnCount, g_nvml_real);
}

void* InterceptResolved(const char* name, void* found) {
  if (found == nullptr) return nullptr;
  if (name == nullptr) {
    if (!LoadCudaTable()) return found;
    for (int i = 0; i < kCudaHookCount; ++i) {
      if (g_cuda_real[i] == found) return kCudaHooks[i];
    }
    return found;
  }
  // Only cu[A-Z]* and nvml[A-Z]* are ours: cublas*, cudnn*, curand* are never touched.
  if (HasPrefixThenUpper(name, "cu", 2)) {
    for (int i = 0; i < kCudaHookCount; ++i) {
      if (std::strcmp(name, kCudaNames[i]) != 0) continue;
      if (found == kCudaHooks[i]) return found;
      if (LoadCudaTable() && found == g_cuda_real[i]) return kCudaHooks[i];
      return found;
    }
  } else if (HasPrefixThenUpper(name, "nvml", 4)) {
    for (int i = 0; i < kNvmlHookCount; ++i) {
      if (std::strcmp(name, kNvmlNames[i]) != 0) continue;
      if (found == kNvmlHooks[i]) return found;
      if (LoadNvmlTable() && found == g_nvml_real[i]) return kNvmlHooks[i];
      return found;
    }
  }
  return found;
}

}  // namespace hami::vgpu
