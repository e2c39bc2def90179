// Our own minimal CUDA declarations (src/vgpu/cuda_defs.h) must agree with NVIDIA's cuda.h.
// Compiled only where /usr/local/cuda/include/cuda.h exists (HAMI_HAVE_CUDA_H).
#ifdef HAMI_HAVE_CUDA_H
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "vgpu/cuda_defs.h"

namespace v = hami::vgpu;

static_assert(v::CUDA_SUCCESS == ::CUDA_SUCCESS);
static_assert(v::CUDA_ERROR_INVALID_VALUE == ::CUDA_ERROR_INVALID_VALUE);
static_assert(v::CUDA_ERROR_OUT_OF_MEMORY == ::CUDA_ERROR_OUT_OF_MEMORY);
static_assert(v::CUDA_ERROR_NOT_INITIALIZED == ::CUDA_ERROR_NOT_INITIALIZED);
static_assert(v::CUDA_ERROR_INVALID_DEVICE == ::CUDA_ERROR_INVALID_DEVICE);
static_assert(v::CUDA_ERROR_NOT_FOUND == ::CUDA_ERROR_NOT_FOUND);
static_assert(v::CU_GET_PROC_ADDRESS_DEFAULT == ::CU_GET_PROC_ADDRESS_DEFAULT);
static_assert(v::CU_GET_PROC_ADDRESS_LEGACY_STREAM == ::CU_GET_PROC_ADDRESS_LEGACY_STREAM);
static_assert(v::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ==
              ::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
static_assert(v::CU_GET_PROC_ADDRESS_SUCCESS == ::CU_GET_PROC_ADDRESS_SUCCESS);
static_assert(v::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND == ::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
static_assert(v::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ==
              ::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(v::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR ==
              ::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
static_assert(v::CU_MEM_LOCATION_TYPE_DEVICE == ::CU_MEM_LOCATION_TYPE_DEVICE);
static_assert(sizeof(v::CUresult) == sizeof(::CUresult));
static_assert(sizeof(v::CUdevice) == sizeof(::CUdevice));
static_assert(sizeof(v::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(sizeof(v::CUmemGenericAllocationHandle) == sizeof(::CUmemGenericAllocationHandle));
static_assert(sizeof(v::CUmemAllocationProp) == sizeof(::CUmemAllocationProp));
static_assert(offsetof(v::CUmemAllocationProp, location) ==
              offsetof(::CUmemAllocationProp, location));
static_assert(offsetof(v::CUmemAllocationProp, allocFlags) ==
              offsetof(::CUmemAllocationProp, allocFlags));
static_assert(sizeof(v::CUlaunchConfig) == sizeof(::CUlaunchConfig));
static_assert(offsetof(v::CUlaunchConfig, blockDimZ) == offsetof(::CUlaunchConfig, blockDimZ));
static_assert(offsetof(v::CUlaunchConfig, hStream) == offsetof(::CUlaunchConfig, hStream));
static_assert(offsetof(v::CUlaunchConfig, numAttrs) == offsetof(::CUlaunchConfig, numAttrs));
static_assert(offsetof(v::CUmemPoolProps, location) == offsetof(::CUmemPoolProps, location));
static_assert(v::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD == ::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
static_assert(sizeof(v::CudaExternalMemoryHandleDesc) ==
              sizeof(::CUDA_EXTERNAL_MEMORY_HANDLE_DESC));
static_assert(offsetof(v::CudaExternalMemoryHandleDesc, size) ==
              offsetof(::CUDA_EXTERNAL_MEMORY_HANDLE_DESC, size));
static_assert(sizeof(v::CudaMemPoolPropsFull) == sizeof(::CUmemPoolProps));
static_assert(sizeof(v::CudaMemAllocNodeParams) == sizeof(::CUDA_MEM_ALLOC_NODE_PARAMS));
static_assert(offsetof(v::CudaMemAllocNodeParams, bytesize) ==
              offsetof(::CUDA_MEM_ALLOC_NODE_PARAMS, bytesize));
static_assert(sizeof(v::CudaGraphNodeParams) == sizeof(::CUgraphNodeParams));
static_assert(offsetof(v::CudaGraphNodeParams, alloc) == offsetof(::CUgraphNodeParams, alloc));
static_assert(v::CU_GRAPH_NODE_TYPE_MEM_ALLOC == ::CU_GRAPH_NODE_TYPE_MEM_ALLOC);
static_assert(v::CU_LIMIT_STACK_SIZE == ::CU_LIMIT_STACK_SIZE);
static_assert(v::CU_LIMIT_PRINTF_FIFO_SIZE == ::CU_LIMIT_PRINTF_FIFO_SIZE);
static_assert(v::CU_LIMIT_MALLOC_HEAP_SIZE == ::CU_LIMIT_MALLOC_HEAP_SIZE);
static_assert(sizeof(v::CUlimit) == sizeof(::CUlimit));
static_assert(sizeof(v::CudaLaunchParams) == sizeof(::CUDA_LAUNCH_PARAMS));
static_assert(offsetof(v::CudaLaunchParams, blockDimZ) ==
              offsetof(::CUDA_LAUNCH_PARAMS, blockDimZ));
static_assert(offsetof(v::CudaLaunchParams, hStream) == offsetof(::CUDA_LAUNCH_PARAMS, hStream));

TEST(CudaAbiCheckTest, HeaderVersionSupportsEveryHookedEntry) {
  // cuLaunchKernelEx and cuGetProcAddress_v2 exist from 12.0 / 12.5 on; the build header must
  // be at least that new for the static asserts above to mean anything.
  EXPECT_GE(CUDA_VERSION, 12050);
}
#endif  // HAMI_HAVE_CUDA_H
