// Minimal declarations of the CUDA driver API types and values that libvgpu needs.
//
// Written from the public driver API documentation so the build does not depend on
// /usr/local/cuda. Everything lives in namespace hami::vgpu so a TU can include this header next
// to the real cuda.h (tests/vgpu/cuda_abi_check_test.cc does, and pins every value below).
#ifndef HAMI_VGPU_CUDA_DEFS_H_
#define HAMI_VGPU_CUDA_DEFS_H_

#include <cstddef>
#include <cstdint>

namespace hami::vgpu {

using CUresult = int;  // cudaError_enum; an int in the C ABI.
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;
using cuuint64_t = std::uint64_t;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUfunction = struct CUfunc_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;
using CUarray = struct CUarray_st*;
using CUmipmappedArray = struct CUmipmappedArray_st*;
using CUmodule = struct CUmod_st*;
using CUlibrary = struct CUlib_st*;
using CUgreenCtx = struct CUgreenCtx_st*;
using CUdevResourceDesc = struct CUdevResourceDesc_st*;
using CUlimit = int;  // CUlimit enum
inline constexpr CUlimit CU_LIMIT_STACK_SIZE = 0;
inline constexpr CUlimit CU_LIMIT_PRINTF_FIFO_SIZE = 1;
inline constexpr CUlimit CU_LIMIT_MALLOC_HEAP_SIZE = 2;
// Descriptors and parameter blocks libvgpu only passes through (sizes are measured, not read).
struct CUDA_ARRAY_DESCRIPTOR_st;
struct CUDA_ARRAY3D_DESCRIPTOR_st;
struct CUDA_LAUNCH_PARAMS_st;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

// cuGetProcAddress flags.
inline constexpr std::uint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr std::uint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1;
inline constexpr std::uint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2;

// CUdriverProcAddressQueryResult.
using CUdriverProcAddressQueryResult = int;
inline constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
inline constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;

// CUdevice_attribute values read by the limiter.
using CUdevice_attribute = int;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;

inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;

struct CUmemLocation {
  int type;  // CUmemLocationType
  int id;
};

// CUDA_EXTERNAL_MEMORY_HANDLE_DESC (cuImportExternalMemory), read for the imported size.
using CUexternalMemory = struct CUextMemory_st*;
struct CudaExternalMemoryHandleDesc {
  int type;
  union {
    int fd;
    struct {
      void* handle;
      const void* name;
    } win32;
    const void* nvSciBufObject;
  } handle;
  unsigned long long size;
  unsigned int flags;
  unsigned int reserved[16];
};

// Graphs. CUDA_MEM_ALLOC_NODE_PARAMS and CUgraphNodeParams, read for the bytes a memory
// allocation node reserves (the pool properties in full here: the node parameters embed them).
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
inline constexpr int CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10;
struct CudaMemPoolPropsFull {
  int allocType;
  int handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};
struct CudaMemAllocNodeParams {
  CudaMemPoolPropsFull poolProps;
  const void* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;
};
struct CudaGraphNodeParams {
  int type;
  int reserved0[3];
  union {
    long long reserved1[29];
    CudaMemAllocNodeParams alloc;
  };
  long long reserved2;
};

// CUmemPool_attribute: bytes a pool keeps after a free (cuuint64_t).
inline constexpr int CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;

// The leading fields of CUmemPoolProps (libvgpu reads only the location).
struct CUmemPoolProps {
  int allocType;
  int handleTypes;
  CUmemLocation location;
};

struct CUmemAllocationProp {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

// CUDA_LAUNCH_PARAMS (cuLaunchCooperativeKernelMultiDevice), read for the launch cost.
struct CudaLaunchParams {
  CUfunction function;
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  void** kernelParams;
};

struct CUlaunchAttribute;  // Only passed through.

struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_CUDA_DEFS_H_
