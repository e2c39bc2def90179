// Our own declarations of the few NVML types the plugin uses, with nvml.h's C layout and struct
// tags (so a call through a dlsym'd pointer has exactly the callee's type; the fake library in
// tests/deviceplugin includes this header too). Global namespace on purpose: these are C types.
#ifndef HAMI_DEVICEPLUGIN_NVML_TYPES_H_
#define HAMI_DEVICEPLUGIN_NVML_TYPES_H_

extern "C" {

typedef int nvmlReturn_t;  // an enum in nvml.h; int-sized
typedef struct nvmlDevice_st* nvmlDevice_t;

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

}  // extern "C"

inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlErrorInvalidArgument = 2;
inline constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
inline constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kNvmlErrorGpuIsLost = 15;
inline constexpr unsigned kNvmlStringSize = 96;

#endif  // HAMI_DEVICEPLUGIN_NVML_TYPES_H_
