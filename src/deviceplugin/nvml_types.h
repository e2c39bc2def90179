// Our own declarations of the few NVML types the plugin uses, with nvml.h's C layout and struct
// tags (so a call through a dlsym'd pointer has exactly the callee's type; the fake library in
// tests/deviceplugin includes this header too). Global namespace on purpose: these are C types.
#ifndef HAMI_DEVICEPLUGIN_NVML_TYPES_H_
#define HAMI_DEVICEPLUGIN_NVML_TYPES_H_

extern "C" {

typedef int nvmlReturn_t;  // an enum in nvml.h; int-sized
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;

struct nvmlMemory_st {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
};

struct nvmlUtilization_st {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of it device memory was read or written
};

struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // "00000000:3B:00.0"
};

// MIG (docs/MIG.md): GPU instance profiles, their placements, GPU and compute instances.
struct nvmlGpuInstancePlacement_st {
  unsigned int start;  // first memory slice
  unsigned int size;   // slices
};

struct nvmlGpuInstanceProfileInfo_st {
  unsigned int id;  // the profile id later calls take (NVML_GPU_INSTANCE_PROFILE_* on A100/H100)
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};

struct nvmlGpuInstanceInfo_st {
  nvmlDevice_t device;
  unsigned int id;  // GPU instance id, unique within the GPU
  unsigned int profileId;
  nvmlGpuInstancePlacement_st placement;
};

struct nvmlComputeInstanceProfileInfo_st {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

// nvmlComputeInstanceGetInfo_v2's layout (v1 lacks the placement).
struct nvmlComputeInstanceInfo_st {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;  // compute instance id, unique within its GPU instance
  unsigned int profileId;
  nvmlGpuInstancePlacement_st placement;
};

}  // extern "C"

inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlErrorInvalidArgument = 2;
inline constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
inline constexpr nvmlReturn_t kNvmlErrorNotFound = 6;
inline constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kNvmlErrorGpuIsLost = 15;
inline constexpr nvmlReturn_t kNvmlErrorInsufficientResources = 23;
inline constexpr unsigned kNvmlStringSize = 96;
inline constexpr unsigned kNvmlDeviceMigEnable = 1;  // nvmlDeviceGetMigMode's current mode
// NVML_GPU_INSTANCE_PROFILE_* and NVML_COMPUTE_INSTANCE_PROFILE_* share these values for the
// full-slice profiles: 1, 2, 3, 4, 7, 8 and 6 slices are 0..6 (mig_profiles.h).
inline constexpr unsigned kNvmlMigProfileCount = 7;
inline constexpr unsigned kNvmlComputeInstanceEngineProfileShared = 0;

#endif  // HAMI_DEVICEPLUGIN_NVML_TYPES_H_
