// The fake driver's contexts as cuda.h documents them: a context owns the allocations, arrays and
// modules made while it was current, and destroying it (cuCtxDestroy, the last primary-context
// release, cuDevicePrimaryCtxReset) frees them. And module loading as CUDA_MODULE_LOADING selects
// it (LAZY by default since CUDA 12.2): a lazily loaded module commits its __device__ globals at
// first use (cuModuleGetGlobal, cuLibraryGetGlobal, cuModuleGetFunction), an eagerly loaded one at
// the load; a library loaded while no context exists commits into each context created later.
//
// Images: the text "globals=<bytes>", or PTX whose `.global` arrays (`.global .align 8 .b8
// name[<bytes>];`) add up to the bytes. FAKE_CUDA_NESTED_LOAD=1: cuModuleLoad and
// cuLibraryLoadFromFile read the file and call cuModuleLoadData / cuLibraryLoadData through the
// dynamic linker (as a driver implementing one entry by another does), so an interposer's hooks
// are re-entered from inside its own hook.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/vgpu/fake_cuda_internal.h"
#include "tests/vgpu/fake_ids.h"

using namespace hami::vgpu;  // NOLINT: the fake mirrors the driver's C surface.
namespace fake = hami::vgpu::fake;

namespace {

constexpr CUresult kInvalidContext = 201;  // CUDA_ERROR_INVALID_CONTEXT
constexpr CUresult kFileNotFound = 301;    // CUDA_ERROR_FILE_NOT_FOUND
constexpr CUresult kInvalidHandle = 400;   // CUDA_ERROR_INVALID_HANDLE

std::mutex g_mu;
std::map<unsigned long long, unsigned long long> g_owner;  // allocation -> owning context

struct Module {
  unsigned long long bytes = 0;
  bool library = false;
  std::map<unsigned long long, unsigned long long> committed;  // context -> model key
};
std::map<unsigned long long, Module> g_modules;  // handle -> module
std::atomic<unsigned long long> g_next_module{0x4000000};
std::atomic<bool> g_eager{false};

unsigned long long Key(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

unsigned long long ImageBytes(const char* text, bool* ok) {
  *ok = true;
  if (std::strncmp(text, "globals=", 8) == 0) return std::strtoull(text + 8, nullptr, 10);
  if (std::strncmp(text, ".version", 8) != 0) {
    *ok = false;
    return 0;
  }
  unsigned long long bytes = 0;
  for (const char* g = std::strstr(text, ".global"); g != nullptr;
       g = std::strstr(g + 1, ".global")) {
    const char* end = std::strchr(g, ';');
    const char* open = std::strchr(g, '[');
    if (end != nullptr && open != nullptr && open < end) {
      bytes += std::strtoull(open + 1, nullptr, 10);
    }
  }
  return bytes;
}

// Commits module `handle`'s globals into context `ctx` (device `ordinal`) once.
CUresult Commit(unsigned long long handle, CUcontext ctx, int ordinal) {
  unsigned long long bytes = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_modules.find(handle);
    if (it == g_modules.end()) return kInvalidHandle;
    if (it->second.committed.count(Key(ctx)) != 0 || it->second.bytes == 0) return CUDA_SUCCESS;
    bytes = it->second.bytes;
  }
  unsigned long long key = 0;
  CUresult r = fake::ModelAllocate(
      "module globals", &key, (bytes + (2ULL << 20) - 1) / (2ULL << 20) * (2ULL << 20), ordinal);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_mu);
  g_modules[handle].committed[Key(ctx)] = key;
  g_owner[key] = Key(ctx);
  return CUDA_SUCCESS;
}

CUresult Load(void** handle, const void* image, bool library) {
  if (image == nullptr || handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool ok = false;
  unsigned long long bytes = ImageBytes(static_cast<const char*>(image), &ok);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = fake::CurrentContext();
  if (ctx == nullptr && !library) return kInvalidContext;
  unsigned long long h = g_next_module.fetch_add(64);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_modules[h] = Module{bytes, library, {}};
  }
  if (g_eager.load() && ctx != nullptr) {
    CUresult r = Commit(h, ctx, static_cast<int>(Key(ctx) & 0xff));
    if (r != CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(g_mu);
      g_modules.erase(h);
      return r;
    }
  }
  *handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(h));
  return CUDA_SUCCESS;
}

CUresult Unload(void* handle) {
  std::vector<unsigned long long> keys;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_modules.find(Key(handle));
    if (it == g_modules.end()) return kInvalidHandle;
    for (auto& [ctx, key] : it->second.committed) keys.push_back(key);
    g_modules.erase(it);
  }
  for (unsigned long long key : keys) fake::ModelRelease("module unload", key);
  return CUDA_SUCCESS;
}

// First use in the current context commits the globals (lazy loading).
CUresult Use(void* handle) {
  CUcontext ctx = fake::CurrentContext();
  if (ctx == nullptr) return kInvalidContext;
  return Commit(Key(handle), ctx, static_cast<int>(Key(ctx) & 0xff));
}

std::string ReadImage(const char* path) {
  std::string text;
  if (std::FILE* f = path ? std::fopen(path, "rb") : nullptr) {
    char buf[65536];
    size_t n = std::fread(buf, 1, sizeof(buf), f);
    text.assign(buf, n);
    std::fclose(f);
  }
  return text;
}

bool Nested() { return fake::EnvU64("FAKE_CUDA_NESTED_LOAD", 0) != 0; }

}  // namespace

namespace hami::vgpu::fake {

void NoteOwner(unsigned long long key) {
  CUcontext ctx = CurrentContext();
  if (ctx == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_owner[key] = Key(ctx);
}

void ForgetOwner(unsigned long long key) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_owner.erase(key);
}

void Disown(unsigned long long key) { ForgetOwner(key); }

void FreeOwned(CUcontext ctx) {
  std::vector<unsigned long long> keys;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = g_owner.begin(); it != g_owner.end();) {
      if (it->second == Key(ctx)) {
        keys.push_back(it->first);
        it = g_owner.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& [h, m] : g_modules) m.committed.erase(Key(ctx));
  }
  for (unsigned long long key : keys) ModelRelease("context destroyed", key);
}

void ReadModuleLoading() {
  const char* mode = std::getenv("CUDA_MODULE_LOADING");
  g_eager.store(mode != nullptr && std::strcmp(mode, "EAGER") == 0);
}

void ContextCreated(CUcontext ctx, int ordinal) {
  if (!g_eager.load()) return;
  std::vector<unsigned long long> libraries;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto& [h, m] : g_modules) {
      if (m.library) libraries.push_back(h);
    }
  }
  for (unsigned long long h : libraries) Commit(h, ctx, ordinal);
}

}  // namespace hami::vgpu::fake

extern "C" {

// Test probe: bytes of globals module `handle` committed in all contexts.
unsigned long long fake_cuda_module_committed(void* handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_modules.find(Key(handle));
  return it == g_modules.end() ? 0 : it->second.committed.size() * it->second.bytes;
}

CUresult cuModuleLoadData(void** module, const void* image) { return Load(module, image, false); }
CUresult cuModuleLoadDataEx(void** module, const void* image, unsigned int, void*, void**) {
  return Load(module, image, false);
}
CUresult cuModuleLoadFatBinary(void** module, const void* image) {
  return Load(module, image, false);
}
CUresult cuModuleLoad(void** module, const char* path) {
  std::string text = ReadImage(path);
  if (text.empty()) return kFileNotFound;
  if (Nested()) return cuModuleLoadData(module, text.c_str());  // through the dynamic linker
  return Load(module, text.c_str(), false);
}
CUresult cuModuleUnload(void* module) { return Unload(module); }
CUresult cuLibraryLoadData(void** library, const void* code, void*, void**, unsigned int, void*,
                           void**, unsigned int) {
  return Load(library, code, true);
}
CUresult cuLibraryLoadFromFile(void** library, const char* path, void*, void**, unsigned int, void*,
                               void**, unsigned int) {
  std::string text = ReadImage(path);
  if (text.empty()) return kFileNotFound;
  if (Nested()) {
    return cuLibraryLoadData(library, text.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  }
  return Load(library, text.c_str(), true);
}
CUresult cuLibraryUnload(void* library) { return Unload(library); }

CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, void* module, const char*) {
  CUresult r = Use(module);
  if (r == CUDA_SUCCESS && dptr != nullptr) *dptr = 0x7d0000000000ULL;
  if (r == CUDA_SUCCESS && bytes != nullptr) *bytes = 8;
  return r;
}
CUresult cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, void* library, const char* name) {
  return cuModuleGetGlobal_v2(dptr, bytes, library, name);
}
CUresult cuModuleGetFunction(CUfunction* fn, void* module, const char*) {
  CUresult r = Use(module);
  if (r == CUDA_SUCCESS && fn != nullptr) *fn = reinterpret_cast<CUfunction>(module);
  return r;
}

}  // extern "C"
