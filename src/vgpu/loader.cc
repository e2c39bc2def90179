// Real driver / NVML tables, the real dlsym, and the real-pointer -> hook mapping shared by the
// dlsym override and cuGetProcAddress.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
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

namespace {

struct SymbolQuery {
  const char* name;
  void* found;
};

// The dynamic section's pointers are relocated in place by glibc on most architectures and left
// as offsets on others (read-only .dynamic): both forms are accepted.
template <typename T>
const T* DynPtr(ElfW(Addr) base, ElfW(Addr) ptr) {
  return reinterpret_cast<const T*>(ptr < base ? ptr + base : ptr);
}

// Looks `name` up in one loaded object through its GNU hash table (every glibc since 2.5 has
// one). Any defined function of that name will do: glibc's dlsym/dlvsym versions share one body.
void* LookupInObject(const dl_phdr_info* info, const char* name) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (dyn == nullptr) return nullptr;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const std::uint32_t* gnu_hash = nullptr;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_SYMTAB) symtab = DynPtr<ElfW(Sym)>(info->dlpi_addr, dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_STRTAB) strtab = DynPtr<char>(info->dlpi_addr, dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_GNU_HASH) {
      gnu_hash = DynPtr<std::uint32_t>(info->dlpi_addr, dyn->d_un.d_ptr);
    }
  }
  if (symtab == nullptr || strtab == nullptr || gnu_hash == nullptr) return nullptr;
  std::uint32_t nbuckets = gnu_hash[0];
  std::uint32_t symoffset = gnu_hash[1];
  std::uint32_t bloom_size = gnu_hash[2];
  const auto* buckets = reinterpret_cast<const std::uint32_t*>(
      reinterpret_cast<const ElfW(Addr)*>(gnu_hash + 4) + bloom_size);
  const std::uint32_t* chain = buckets + nbuckets;
  std::uint32_t h = 5381;
  for (const char* c = name; *c != '\0'; ++c) h = h * 33 + static_cast<unsigned char>(*c);
  if (nbuckets == 0) return nullptr;
  for (std::uint32_t idx = buckets[h % nbuckets]; idx >= symoffset && idx != 0; ++idx) {
    std::uint32_t hash = chain[idx - symoffset];
    const ElfW(Sym)& sym = symtab[idx];
    if ((hash | 1) == (h | 1) && sym.st_shndx != SHN_UNDEF && sym.st_value != 0 &&
        ELF64_ST_TYPE(sym.st_info) == STT_FUNC && std::strcmp(strtab + sym.st_name, name) == 0) {
      return reinterpret_cast<void*>(info->dlpi_addr + sym.st_value);
    }
    if ((hash & 1) != 0) break;
  }
  return nullptr;
}

int FindInLibc(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* query = static_cast<SymbolQuery*>(data);
  const char* path = info->dlpi_name;
  if (path == nullptr) return 0;
  const char* base = std::strrchr(path, '/');
  base = base != nullptr ? base + 1 : path;
  // glibc >= 2.34 has dlsym/dlvsym in libc.so.6; older ones in libdl.so.2.
  if (std::strcmp(base, "libc.so.6") != 0 && std::strcmp(base, "libdl.so.2") != 0) return 0;
  query->found = LookupInObject(info, query->name);
  return query->found != nullptr ? 1 : 0;
}

// glibc's own definition of `name` (dlsym, dlvsym), found without dlsym/dlvsym: both are
// overridden here, and a versioned reference from this library would bind to the override.
void* LibcFunction(const char* name) {
  SymbolQuery query{name, nullptr};
  dl_iterate_phdr(FindInLibc, &query);
  return query.found;
}

std::atomic<DlvsymFn> g_real_dlvsym{nullptr};

}  // namespace

DlsymFn RealDlsym() {
  DlsymFn fn = g_real_dlsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  fn = reinterpret_cast<DlsymFn>(LibcFunction("dlsym"));
  g_real_dlsym.store(fn, std::memory_order_release);
  __atomic_store_n(&hami_vgpu_real_dlsym, reinterpret_cast<void*>(fn), __ATOMIC_RELEASE);
  return fn;
}

DlvsymFn RealDlvsym() {
  DlvsymFn fn = g_real_dlvsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  fn = reinterpret_cast<DlvsymFn>(LibcFunction("dlvsym"));
  g_real_dlvsym.store(fn, std::memory_order_release);
  return fn;
}

void ResetLoaderAfterFork() { pthread_mutex_init(&g_load_mu, nullptr); }

bool LoadCudaTable() {
  return LoadTable(&g_cuda_state, "libcuda.so.1", kCudaNames, kCudaFnCount, g_cuda_real);
}

bool LoadNvmlTable() {
  // NVML from the driver's own directory, by absolute path: a libnvidia-ml.so.1 placed earlier
  // on the library path (one that reports no utilisation) must not switch the SM limit off. The
  // search path is used only when the driver's location is unknown.
  char path[1024] = "libnvidia-ml.so.1";
  Dl_info info{};
  if (LoadCudaTable() && g_cuda_real[k_cuInit] != nullptr &&
      dladdr(g_cuda_real[k_cuInit], &info) != 0 && info.dli_fname != nullptr) {
    const char* slash = std::strrchr(info.dli_fname, '/');
    if (slash != nullptr && static_cast<std::size_t>(slash - info.dli_fname) + 20 < sizeof(path)) {
      std::snprintf(path, sizeof(path), "%.*s/libnvidia-ml.so.1",
                    static_cast<int>(slash - info.dli_fname), info.dli_fname);
    }
  }
  return LoadTable(&g_nvml_state, path, kNvmlNames, kNvmlFnCount, g_nvml_real);
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
  // Only cu[A-Z]* and nvml[A-Z]* are ours: cublas*, cudnn*, curand* are never touched. A hooked
  // name is answered with the hook whichever object defined it: a second copy of the driver
  // (dlmopen into a new namespace) or a library between the caller and the driver must not
  // reach device memory around the limiter.
  if (HasPrefixThenUpper(name, "cu", 2)) {
    for (int i = 0; i < kCudaHookCount; ++i) {
      if (std::strcmp(name, kCudaNames[i]) != 0) continue;
      return LoadCudaTable() && g_cuda_real[i] != nullptr ? kCudaHooks[i] : found;
    }
  } else if (HasPrefixThenUpper(name, "nvml", 4)) {
    for (int i = 0; i < kNvmlHookCount; ++i) {
      if (std::strcmp(name, kNvmlNames[i]) != 0) continue;
      return LoadNvmlTable() && g_nvml_real[i] != nullptr ? kNvmlHooks[i] : found;
    }
  } else if (std::strcmp(name, "dlsym") == 0 || std::strcmp(name, "dlvsym") == 0) {
    // glibc's own resolvers (dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34"), dlsym(libc, "dlsym"))
    // would look the real driver up unfiltered: hand out ours.
    return name[2] == 's' ? reinterpret_cast<void*>(&dlsym) : reinterpret_cast<void*>(&dlvsym);
  }
  return found;
}

}  // namespace hami::vgpu
