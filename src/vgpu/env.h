// The environment contract of HAMi-core (docs/vgpu.md#environment-hami-core-compatible), parsed
// into one VgpuConfig.
//
// Parsing is pure: the lookup function is injected so tests need no setenv. Invalid values are
// reported through `on_error` (message names the variable and the quoted value) and treated as
// unset, never as a reason to stop the host program.
#ifndef HAMI_VGPU_ENV_H_
#define HAMI_VGPU_ENV_H_

#include <cstddef>
#include <cstdint>

#include "vgpu/shared_region.h"

namespace hami::vgpu {

inline constexpr char kDefaultCachePath[] = "/tmp/cudevshr.cache";
inline constexpr int kMaxDevices = HAMI_REGION_MAX_DEVICES;

enum UtilizationPolicy : int { kPolicyDefault = 0, kPolicyForce = 1, kPolicyDisable = 2 };

struct VgpuConfig {
  std::uint64_t memory_limit[kMaxDevices];  // bytes, 0 = unlimited
  std::uint64_t sm_limit[kMaxDevices];      // percent, 100 = unlimited
  char cache_path[512];
  int policy;
  int priority;
  int log_level;
  int record_kernel_interval_s;
  // Limits, policy, priority and cache path came from the read-only limits file (the device
  // plugin's), not from the environment: they override whatever the region file holds.
  bool from_limits_file;
};

// The limits file sits beside libvgpu.so (the device plugin mounts it read-only at
// <hook>/vgpu/vgpu.limits). Format in docs/vgpu.md "Limits file".
inline constexpr char kLimitsFileName[] = "vgpu.limits";
inline constexpr std::size_t kLimitsFileMaxBytes = 16384;
inline constexpr int kLimitsFileMaxEntries = 64;

struct LimitsFile {
  int count;
  char names[kLimitsFileMaxEntries][48];
  char values[kLimitsFileMaxEntries][512];
};

// True for the variables the limits file may carry and that, when the file exists, are never
// read from the environment: CUDA_DEVICE_MEMORY_LIMIT[_<i>], CUDA_DEVICE_SM_LIMIT[_<i>],
// CUDA_DEVICE_MEMORY_SHARED_CACHE, GPU_CORE_UTILIZATION_POLICY, CUDA_TASK_PRIORITY.
bool IsLimitVariable(const char* name);

// Parses the limits file: NAME=VALUE lines, '#' comments and blank lines; NAME must be a limit
// variable, each at most once. On error returns false with a message naming the line number and
// quoting it; *out is then unspecified.
bool ParseLimitsFile(const char* text, std::size_t len, LimitsFile* out, char* err,
                     std::size_t errcap);

// Lookup for LoadConfig: limit variables from `file` only (absent = unset), every other variable
// (LIBCUDA_LOG_LEVEL, RECORD_KERNEL_INTERVAL) from the process environment. ctx is the LimitsFile.
const char* LimitsFileLookup(void* ctx, const char* name);

using EnvLookup = const char* (*)(void* ctx, const char* name);
using ErrorSink = void (*)(void* ctx, const char* message);

// Parses "<integer>[kKmMgG]". The integer uses C's base auto-detection (0x.. hex, leading-0
// octal) like HAMi-core; k = 2^10, m = 2^20, g = 2^30, none = bytes. Leading/trailing blanks,
// empty digits, other suffixes, negative values and overflow are errors: returns false and
// writes a message naming `name` and the quoted value into err.
bool ParseSize(const char* name, const char* text, std::uint64_t* out, char* err,
               std::size_t errcap);

// Reads every variable of docs/vgpu.md#environment-hami-core-compatible through `lookup`. Errors go
// to `on_error` (may be null).
void LoadConfig(EnvLookup lookup, void* lookup_ctx, ErrorSink on_error, void* error_ctx,
                VgpuConfig* out);

// Convenience wrapper over getenv, logging errors with VGPU_ERROR.
void LoadConfigFromProcessEnv(VgpuConfig* out);
// The same over a parsed limits file (sets from_limits_file).
void LoadConfigFromLimitsFile(const LimitsFile& file, VgpuConfig* out);

// CUDA_VISIBLE_DEVICES entry → container NVML index. `uuids` holds `count` NVML UUID strings.
// Integer entries are indices; "GPU-..." entries match a UUID by prefix (as CUDA does); anything
// else (MIG-..., unknown UUID, out of range) yields -1.
int ResolveVisibleDevice(const char* token, const char (*uuids)[HAMI_REGION_UUID_LEN], int count);

// Splits CUDA_VISIBLE_DEVICES into at most `max` tokens of at most 95 characters; returns the
// count. Blanks around tokens are dropped; an empty string yields 0.
int SplitVisibleDevices(const char* text, char (*tokens)[HAMI_REGION_UUID_LEN], int max);

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_ENV_H_
