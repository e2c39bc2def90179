// The exported dlsym override.
//
// dlsym(handle, name) is answered by glibc's dlsym; when the answer is the real driver/NVML entry
// point of an intercepted name (or our own hook), the hook is returned instead. RTLD_NEXT keeps
// its meaning relative to the *caller* (calling glibc's dlsym(RTLD_NEXT) from a C function here
// would search after libvgpu instead): on x86_64 an assembly entry tail-jumps into glibc with the
// caller's return address intact; elsewhere (and before the real dlsym is known) the objects
// loaded after the caller's object are searched in load order. Interposers stacked on top of us
// and repeated lookups behave as without libvgpu.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cstdint>
#include <cstring>

#include "vgpu/hooks.h"

namespace hami::vgpu {
namespace {

constexpr int kMaxObjects = 512;

struct LoadedObject {
  ElfW(Addr) base;
  const ElfW(Phdr) * phdr;
  ElfW(Half) phnum;
  const char* name;
};

struct ObjectList {
  LoadedObject objects[kMaxObjects];
  int count;
};

int CollectObject(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* list = static_cast<ObjectList*>(data);
  if (list->count >= kMaxObjects) return 1;
  list->objects[list->count++] = {info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum,
                                  info->dlpi_name};
  return 0;
}

bool Contains(const LoadedObject& object, const void* address) {
  auto addr = reinterpret_cast<std::uintptr_t>(address);
  for (int i = 0; i < object.phnum; ++i) {
    const ElfW(Phdr)& ph = object.phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    std::uintptr_t start = object.base + ph.p_vaddr;
    if (addr >= start && addr < start + ph.p_memsz) return true;
  }
  return false;
}

// dlsym, or dlvsym when a version is given (glibc's own, never the overrides).
void* Resolve(void* handle, const char* name, const char* version) {
  if (version == nullptr) {
    DlsymFn real = RealDlsym();
    return real != nullptr ? real(handle, name) : nullptr;
  }
  DlvsymFn real = RealDlvsym();
  return real != nullptr ? real(handle, name, version) : nullptr;
}

void* SearchAfter(const void* caller, const char* name, const char* version, ObjectList* out);

void* NextAfter(const void* caller, const char* name, const char* version) {
  // One shared list (16 KiB is too much for small thread stacks and for every thread's TLS);
  // RTLD_NEXT lookups are rare, so serialising them costs nothing.
  static ObjectList list;
  static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&list_mu);
  void* result = SearchAfter(caller, name, version, &list);
  pthread_mutex_unlock(&list_mu);
  return result;
}

void* SearchAfter(const void* caller, const char* name, const char* version, ObjectList* out) {
  ObjectList& list = *out;
  list.count = 0;
  dl_iterate_phdr(CollectObject, &list);
  int first = -1;
  for (int i = 0; i < list.count && first < 0; ++i) {
    if (Contains(list.objects[i], caller)) first = i + 1;
  }
  if (first < 0) return Resolve(RTLD_DEFAULT, name, version);
  for (int i = first; i < list.count; ++i) {
    const char* path = (i == 0) ? nullptr : list.objects[i].name;
    if (i != 0 && (path == nullptr || path[0] == '\0')) continue;
    void* handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* sym = Resolve(handle, name, version);
    dlclose(handle);
    if (sym != nullptr && Contains(list.objects[i], sym)) return sym;
  }
  return nullptr;
}

}  // namespace
}  // namespace hami::vgpu

// The C part of dlsym; `caller` is the return address of the application's call.
extern "C" __attribute__((visibility("hidden"))) void* hami_vgpu_dlsym_impl(void* handle,
                                                                            const char* name,
                                                                            const void* caller) {
  using namespace hami::vgpu;
  DlsymFn real = RealDlsym();
  if (real == nullptr) return nullptr;
  void* found = (handle == RTLD_NEXT) ? NextAfter(caller, name, nullptr) : real(handle, name);
  return InterceptResolved(name, found);
}

// dlvsym: the same interception (dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34") would otherwise
// hand out glibc's unfiltered dlsym). Always the C path: versioned lookups are rare.
extern "C" VGPU_EXPORT void* dlvsym(void* handle, const char* name, const char* version) noexcept {
  using namespace hami::vgpu;
  const void* caller = __builtin_return_address(0);
  void* found =
      (handle == RTLD_NEXT) ? NextAfter(caller, name, version) : Resolve(handle, name, version);
  return InterceptResolved(name, found);
}

#if defined(__x86_64__)
// dlsym(RTLD_NEXT, ...) tail-jumps into glibc's dlsym, so glibc sees the application's return
// address and resolves "next" relative to the caller, exactly, without allocating or taking any
// lock of ours (malloc interposers call it from inside malloc). Names starting "cu" or "nv" (the
// driver's and NVML's) and every other handle go to the C part, which answers hooked names with
// the hooks: a library between the caller and the driver must not hand out the real entry. Before
// the real dlsym is known, RTLD_NEXT takes the C path (NextAfter) once.
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  endbr64
  cmpq $-1, %rdi
  jne 1f
  movq hami_vgpu_real_dlsym(%rip), %rax
  testq %rax, %rax
  jz 1f
  testq %rsi, %rsi
  jz 3f
  movzbl (%rsi), %ecx
  cmpb $0x63, %cl
  jne 2f
  cmpb $0x75, 1(%rsi)
  je 1f
2:
  cmpb $0x6e, %cl
  jne 3f
  cmpb $0x76, 1(%rsi)
  je 1f
3:
  jmp *%rax
1:
  movq (%rsp), %rdx
  jmp hami_vgpu_dlsym_impl
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#else
// Same signature (and exception specification) as glibc's declaration in <dlfcn.h>.
extern "C" VGPU_EXPORT void* dlsym(void* handle, const char* name) noexcept {
  return hami_vgpu_dlsym_impl(handle, name, __builtin_return_address(0));
}
#endif
