// Internals shared by the files of the fake libcuda.so.1 (fake_cuda.cc, fake_cuda_ctx.cc,
// fake_cuda_vmm.cc): the device model's allocator and the ownership of its allocations.
#ifndef HAMI_TESTS_VGPU_FAKE_CUDA_INTERNAL_H_
#define HAMI_TESTS_VGPU_FAKE_CUDA_INTERNAL_H_

#include "vgpu/cuda_defs.h"

namespace hami::vgpu::fake {

// Pool handles with this bit are pools in host memory (CU_MEM_LOCATION_TYPE_HOST & co.).
inline constexpr unsigned long long kHostPoolBit = 0x40000000ULL;

// The model's allocator (fake_cuda.cc): `bytes` on CUDA ordinal `ordinal`, counted under `name`;
// the allocation is owned by the calling thread's current context.
CUresult ModelAllocate(const char* name, unsigned long long* key, unsigned long long bytes,
                       int ordinal);
CUresult ModelRelease(const char* name, unsigned long long key);

// Ownership (fake_cuda_ctx.cc): an allocation belongs to the context current when it was made,
// unless disowned (VMM, pools, a context's own memory); destroying a context frees what it owns.
void NoteOwner(unsigned long long key);
void ForgetOwner(unsigned long long key);
void Disown(unsigned long long key);
void FreeOwned(CUcontext ctx);
CUcontext CurrentContext();

// Modules (fake_cuda_ctx.cc): CUDA_MODULE_LOADING as cuInit reads it (LAZY unless EAGER), and a
// new context into which eagerly loaded libraries commit their globals.
void ReadModuleLoading();
void ContextCreated(CUcontext ctx, int ordinal);

}  // namespace hami::vgpu::fake

#endif  // HAMI_TESTS_VGPU_FAKE_CUDA_INTERNAL_H_
