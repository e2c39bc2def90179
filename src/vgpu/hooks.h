// The exported interposition surface of libvgpu.so and the tables that bind each hook to the
// real driver / NVML entry point it wraps.
//
// Every hook is exported under its exact (versioned) driver ABI name. A name listed in
// VGPU_CUDA_HOOKS / VGPU_NVML_HOOKS is intercepted on all three paths: direct symbol binding,
// dlsym (any handle, RTLD_NEXT included) and cuGetProcAddress[_v2]. The *_REAL_ONLY lists are
// entry points libvgpu itself calls but does not intercept.
#ifndef HAMI_VGPU_HOOKS_H_
#define HAMI_VGPU_HOOKS_H_

#include <cstddef>

#include "vgpu/cuda_defs.h"
#include "vgpu/nvml_defs.h"

#define VGPU_EXPORT __attribute__((visibility("default")))

// X(name, return type, parameter list)
#define VGPU_CUDA_HOOKS(X)                                                                         \
  X(cuInit, CUresult, (unsigned int flags))                                                        \
  X(cuDriverGetVersion, CUresult, (int* version))                                                  \
  X(cuGetProcAddress, CUresult,                                                                    \
    (const char* symbol, void** pfn, int cuda_version, cuuint64_t flags))                          \
  X(cuGetProcAddress_v2, CUresult,                                                                 \
    (const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,                           \
     CUdriverProcAddressQueryResult* status))                                                      \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr * dptr, size_t bytes))                                   \
  X(cuMemFree_v2, CUresult, (CUdeviceptr dptr))                                                    \
  X(cuMemAllocPitch_v2, CUresult,                                                                  \
    (CUdeviceptr * dptr, size_t * pitch, size_t width, size_t height, unsigned int elem))          \
  X(cuMemAllocManaged, CUresult, (CUdeviceptr * dptr, size_t bytes, unsigned int flags))           \
  X(cuMemCreate, CUresult,                                                                         \
    (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp* prop,          \
     unsigned long long flags))                                                                    \
  X(cuMemRelease, CUresult, (CUmemGenericAllocationHandle handle))                                 \
  X(cuMemMap, CUresult,                                                                            \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,             \
     unsigned long long flags))                                                                    \
  X(cuMemUnmap, CUresult, (CUdeviceptr ptr, size_t size))                                          \
  X(cuMemRetainAllocationHandle, CUresult, (CUmemGenericAllocationHandle * handle, void* addr))    \
  X(cuMemExportToShareableHandle, CUresult,                                                        \
    (void* shareable, CUmemGenericAllocationHandle handle, int type, unsigned long long flags))    \
  X(cuMemImportFromShareableHandle, CUresult,                                                      \
    (CUmemGenericAllocationHandle * handle, void* os_handle, int type))                            \
  X(cuImportExternalMemory, CUresult,                                                              \
    (CUexternalMemory * ext, const CudaExternalMemoryHandleDesc* desc))                            \
  X(cuDestroyExternalMemory, CUresult, (CUexternalMemory ext))                                     \
  X(cuGraphAddMemAllocNode, CUresult,                                                              \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode* deps, size_t num_deps,                  \
     CudaMemAllocNodeParams* params))                                                              \
  X(cuGraphAddNode, CUresult,                                                                      \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode* deps, size_t num_deps,                  \
     CudaGraphNodeParams* params))                                                                 \
  X(cuGraphAddNode_v2, CUresult,                                                                   \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode* deps, const void* edge_data,            \
     size_t num_deps, CudaGraphNodeParams* params))                                                \
  X(cuGraphInstantiateWithFlags, CUresult,                                                         \
    (CUgraphExec * exec, CUgraph graph, unsigned long long flags))                                 \
  X(cuGraphInstantiateWithParams, CUresult, (CUgraphExec * exec, CUgraph graph, void* params))     \
  X(cuGraphInstantiateWithParams_ptsz, CUresult,                                                   \
    (CUgraphExec * exec, CUgraph graph, void* params))                                             \
  X(cuGraphInstantiate, CUresult,                                                                  \
    (CUgraphExec * exec, CUgraph graph, CUgraphNode * error_node, char* log, size_t log_size))     \
  X(cuGraphInstantiate_v2, CUresult,                                                               \
    (CUgraphExec * exec, CUgraph graph, CUgraphNode * error_node, char* log, size_t log_size))     \
  X(cuGraphExecDestroy, CUresult, (CUgraphExec exec))                                              \
  X(cuGraphDestroy, CUresult, (CUgraph graph))                                                     \
  X(cuMemPoolCreate, CUresult, (CUmemoryPool * pool, const CUmemPoolProps* props))                 \
  X(cuMemPoolDestroy, CUresult, (CUmemoryPool pool))                                               \
  X(cuMemPoolSetAttribute, CUresult, (CUmemoryPool pool, int attr, void* value))                   \
  X(cuMemPoolTrimTo, CUresult, (CUmemoryPool pool, size_t keep))                                   \
  X(cuDeviceGetDefaultMemPool, CUresult, (CUmemoryPool * pool, CUdevice dev))                      \
  X(cuDeviceGetMemPool, CUresult, (CUmemoryPool * pool, CUdevice dev))                             \
  X(cuMemGetDefaultMemPool, CUresult, (CUmemoryPool * pool, CUmemLocation * location, int type))   \
  X(cuMemGetMemPool, CUresult, (CUmemoryPool * pool, CUmemLocation * location, int type))          \
  X(cuMemAllocAsync, CUresult, (CUdeviceptr * dptr, size_t bytes, CUstream stream))                \
  X(cuMemAllocAsync_ptsz, CUresult, (CUdeviceptr * dptr, size_t bytes, CUstream stream))           \
  X(cuMemAllocFromPoolAsync, CUresult,                                                             \
    (CUdeviceptr * dptr, size_t bytes, CUmemoryPool pool, CUstream stream))                        \
  X(cuMemAllocFromPoolAsync_ptsz, CUresult,                                                        \
    (CUdeviceptr * dptr, size_t bytes, CUmemoryPool pool, CUstream stream))                        \
  X(cuMemFreeAsync, CUresult, (CUdeviceptr dptr, CUstream stream))                                 \
  X(cuMemFreeAsync_ptsz, CUresult, (CUdeviceptr dptr, CUstream stream))                            \
  X(cuMemGetInfo_v2, CUresult, (size_t * free_bytes, size_t * total_bytes))                        \
  X(cuDeviceTotalMem_v2, CUresult, (size_t * bytes, CUdevice dev))                                 \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext * ctx, CUdevice dev))                           \
  X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice dev))                                        \
  X(cuDevicePrimaryCtxReset_v2, CUresult, (CUdevice dev))                                          \
  X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice dev))                                           \
  X(cuDevicePrimaryCtxReset, CUresult, (CUdevice dev))                                             \
  X(cuMemMapArrayAsync, CUresult, (void* map_info, unsigned int count, CUstream stream))           \
  X(cuMemMapArrayAsync_ptsz, CUresult, (void* map_info, unsigned int count, CUstream stream))      \
  X(cuLaunchKernel, CUresult,                                                                      \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void** params,         \
     void** extra))                                                                                \
  X(cuLaunchKernel_ptsz, CUresult,                                                                 \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void** params,         \
     void** extra))                                                                                \
  X(cuLaunchKernelEx, CUresult,                                                                    \
    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra))                     \
  X(cuLaunchKernelEx_ptsz, CUresult,                                                               \
    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra))                     \
  X(cuLaunchCooperativeKernel, CUresult,                                                           \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void** params))        \
  X(cuLaunchCooperativeKernel_ptsz, CUresult,                                                      \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void** params))        \
  X(cuGraphLaunch, CUresult, (CUgraphExec exec, CUstream stream))                                  \
  X(cuGraphLaunch_ptsz, CUresult, (CUgraphExec exec, CUstream stream))                             \
  X(cuLaunch, CUresult, (CUfunction f))                                                            \
  X(cuLaunchGrid, CUresult, (CUfunction f, int grid_width, int grid_height))                       \
  X(cuLaunchGridAsync, CUresult, (CUfunction f, int grid_width, int grid_height, CUstream stream)) \
  X(cuLaunchCooperativeKernelMultiDevice, CUresult,                                                \
    (CUDA_LAUNCH_PARAMS_st * params, unsigned int num_devices, unsigned int flags))                \
  X(cuMemAlloc, CUresult, (unsigned int* dptr, unsigned int bytes))                                \
  X(cuMemFree, CUresult, (unsigned int dptr))                                                      \
  X(cuMemAllocPitch, CUresult,                                                                     \
    (unsigned int* dptr, unsigned int* pitch, unsigned int width, unsigned int height,             \
     unsigned int elem))                                                                           \
  X(cuArrayCreate, CUresult, (CUarray * array, const CUDA_ARRAY_DESCRIPTOR_st* desc))              \
  X(cuArray3DCreate, CUresult, (CUarray * array, const CUDA_ARRAY3D_DESCRIPTOR_st* desc))          \
  X(cuCtxCreate, CUresult, (CUcontext * ctx, unsigned int flags, CUdevice dev))                    \
  X(cuCtxDestroy, CUresult, (CUcontext ctx))                                                       \
  X(cuArrayCreate_v2, CUresult, (CUarray * array, const CUDA_ARRAY_DESCRIPTOR_st* desc))           \
  X(cuArray3DCreate_v2, CUresult, (CUarray * array, const CUDA_ARRAY3D_DESCRIPTOR_st* desc))       \
  X(cuArrayDestroy, CUresult, (CUarray array))                                                     \
  X(cuMipmappedArrayCreate, CUresult,                                                              \
    (CUmipmappedArray * array, const CUDA_ARRAY3D_DESCRIPTOR_st* desc, unsigned int levels))       \
  X(cuMipmappedArrayDestroy, CUresult, (CUmipmappedArray array))                                   \
  X(cuCtxCreate_v2, CUresult, (CUcontext * ctx, unsigned int flags, CUdevice dev))                 \
  X(cuCtxCreate_v3, CUresult,                                                                      \
    (CUcontext * ctx, void* params, int num_params, unsigned int flags, CUdevice dev))             \
  X(cuCtxCreate_v4, CUresult, (CUcontext * ctx, void* params, unsigned int flags, CUdevice dev))   \
  X(cuCtxDestroy_v2, CUresult, (CUcontext ctx))                                                    \
  X(cuCtxSetLimit, CUresult, (CUlimit limit, size_t value))                                        \
  X(cuModuleLoadData, CUresult, (CUmodule * module, const void* image))                            \
  X(cuModuleUnload, CUresult, (CUmodule module))                                                   \
  X(cuLibraryLoadData, CUresult,                                                                   \
    (CUlibrary * library, const void* code, void* jit_options, void** jit_values,                  \
     unsigned int num_jit, void* lib_options, void** lib_values, unsigned int num_lib))            \
  X(cuLibraryUnload, CUresult, (CUlibrary library))                                                \
  X(cuModuleLoad, CUresult, (CUmodule * module, const char* path))                                 \
  X(cuModuleLoadDataEx, CUresult,                                                                  \
    (CUmodule * module, const void* image, unsigned int num_options, void* options,                \
     void** values))                                                                               \
  X(cuModuleLoadFatBinary, CUresult, (CUmodule * module, const void* fat_cubin))                   \
  X(cuLibraryLoadFromFile, CUresult,                                                               \
    (CUlibrary * library, const char* path, void* jit_options, void** jit_values,                  \
     unsigned int num_jit, void* lib_options, void** lib_values, unsigned int num_lib))            \
  X(cuGreenCtxCreate, CUresult,                                                                    \
    (CUgreenCtx * ctx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags))                  \
  X(cuGreenCtxDestroy, CUresult, (CUgreenCtx ctx))

#define VGPU_CUDA_REAL_ONLY(X)                                        \
  X(cuCtxGetLimit, CUresult, (size_t * value, CUlimit limit))         \
  X(cuStreamGetCtx, CUresult, (CUstream stream, CUcontext * ctx))     \
  X(cuCtxPushCurrent_v2, CUresult, (CUcontext ctx))                   \
  X(cuCtxPopCurrent_v2, CUresult, (CUcontext * ctx))                  \
  X(cuCtxGetCurrent, CUresult, (CUcontext * ctx))                     \
  X(cuCtxFromGreenCtx, CUresult, (CUcontext * ctx, CUgreenCtx green)) \
  X(cuCtxGetDevice, CUresult, (CUdevice * dev))                       \
  X(cuDeviceGetCount, CUresult, (int* count))                         \
  X(cuDeviceGetAttribute, CUresult, (int* value, CUdevice_attribute attr, CUdevice dev))

#define VGPU_NVML_HOOKS(X)                                                            \
  X(nvmlInit, nvmlReturn_t, (void))                                                   \
  X(nvmlInit_v2, nvmlReturn_t, (void))                                                \
  X(nvmlInitWithFlags, nvmlReturn_t, (unsigned int flags))                            \
  X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_t * mem)) \
  X(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_v2_t * mem))

#define VGPU_NVML_REAL_ONLY(X)                                                                    \
  X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int* count))                                   \
  X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int index, nvmlDevice_t* device))      \
  X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t device, char* uuid, unsigned int length))      \
  X(nvmlDeviceGetIndex, nvmlReturn_t, (nvmlDevice_t device, unsigned int* index))                 \
  X(nvmlDeviceGetProcessUtilization, nvmlReturn_t,                                                \
    (nvmlDevice_t device, nvmlProcessUtilizationSample_t * samples, unsigned int* count,          \
     unsigned long long last_seen))                                                               \
  X(nvmlDeviceGetUtilizationRates, nvmlReturn_t, (nvmlDevice_t device, nvmlUtilization_t * util)) \
  X(nvmlDeviceGetComputeRunningProcesses, nvmlReturn_t,                                           \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v1_t* infos))

namespace hami::vgpu {

#define VGPU_ENUM_ENTRY(name, ret, params) k_##name,
enum CudaFn : int {
  VGPU_CUDA_HOOKS(VGPU_ENUM_ENTRY) kCudaHookCount,
  kCudaRealOnlyBefore = kCudaHookCount - 1,
  VGPU_CUDA_REAL_ONLY(VGPU_ENUM_ENTRY) kCudaFnCount
};
enum NvmlFn : int {
  VGPU_NVML_HOOKS(VGPU_ENUM_ENTRY) kNvmlHookCount,
  kNvmlRealOnlyBefore = kNvmlHookCount - 1,
  VGPU_NVML_REAL_ONLY(VGPU_ENUM_ENTRY) kNvmlFnCount
};
#undef VGPU_ENUM_ENTRY

#define VGPU_TYPEDEF_ENTRY(name, ret, params) using name##_fn = ret(*) params;
VGPU_CUDA_HOOKS(VGPU_TYPEDEF_ENTRY)
VGPU_CUDA_REAL_ONLY(VGPU_TYPEDEF_ENTRY)
VGPU_NVML_HOOKS(VGPU_TYPEDEF_ENTRY)
VGPU_NVML_REAL_ONLY(VGPU_TYPEDEF_ENTRY)
#undef VGPU_TYPEDEF_ENTRY

// Real entry points (null until loaded / when absent) and names, indexed by CudaFn / NvmlFn.
extern void* g_cuda_real[kCudaFnCount];
extern const char* const kCudaNames[kCudaFnCount];
extern void* const kCudaHooks[kCudaHookCount];
extern void* g_nvml_real[kNvmlFnCount];
extern const char* const kNvmlNames[kNvmlFnCount];
extern void* const kNvmlHooks[kNvmlHookCount];

// dlsym as glibc implements it (never our override). Also published, once known, in
// hami_vgpu_real_dlsym for the assembly entry of the override (dlsym_hook.cc).
using DlsymFn = void* (*)(void*, const char*);
using DlvsymFn = void* (*)(void*, const char*, const char*);
DlsymFn RealDlsym();
DlvsymFn RealDlvsym();
extern "C" void* hami_vgpu_real_dlsym;

// Loads libcuda.so.1 / libnvidia-ml.so.1 with dlopen and fills the real tables. Idempotent,
// thread-safe; false when the library cannot be opened.
bool LoadCudaTable();
bool LoadNvmlTable();
// In a fork child: re-initialises the loader's lock (a parent thread may have held it).
void ResetLoaderAfterFork();

// With a name: the hook when `name` is intercepted (whichever object `found` came from: a second
// copy of the driver in another namespace included) and the driver has it; our dlsym/dlvsym for
// "dlsym"/"dlvsym"; otherwise `found` unchanged. With a null name (cuGetProcAddress, where the
// name does not carry the version): the hook when `found` is a real entry point's address.
void* InterceptResolved(const char* name, void* found);

// The hooks themselves: C linkage (the symbol is the bare driver name), declared in this
// namespace only so the C++ types above resolve.
extern "C" {
#define VGPU_DECLARE_HOOK(name, ret, params) VGPU_EXPORT ret name params;
VGPU_CUDA_HOOKS(VGPU_DECLARE_HOOK)
VGPU_NVML_HOOKS(VGPU_DECLARE_HOOK)
#undef VGPU_DECLARE_HOOK
}

}  // namespace hami::vgpu

#define VGPU_REAL_CUDA(name) \
  reinterpret_cast<::hami::vgpu::name##_fn>(::hami::vgpu::g_cuda_real[::hami::vgpu::k_##name])
#define VGPU_REAL_NVML(name) \
  reinterpret_cast<::hami::vgpu::name##_fn>(::hami::vgpu::g_nvml_real[::hami::vgpu::k_##name])

#endif  // HAMI_VGPU_HOOKS_H_
