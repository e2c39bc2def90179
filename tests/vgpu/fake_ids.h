// Identifiers shared by the fake libcuda.so.1, the fake libnvidia-ml.so.1 and the tests.
#ifndef HAMI_TESTS_VGPU_FAKE_IDS_H_
#define HAMI_TESTS_VGPU_FAKE_IDS_H_

#include <cstdio>
#include <cstdlib>

namespace hami::vgpu::fake {

// Environment knobs of the fakes.
inline constexpr char kDevicesEnv[] = "FAKE_GPU_DEVICES";         // default 2
inline constexpr char kTotalEnv[] = "FAKE_GPU_TOTAL_BYTES";       // default 8 GiB
inline constexpr char kOtherUsedEnv[] = "FAKE_GPU_OTHER_USED";    // bytes used by others
inline constexpr char kCtxBytesEnv[] = "FAKE_GPU_CONTEXT_BYTES";  // primary context footprint
inline constexpr char kSmUtilEnv[] = "FAKE_NVML_SM_UTIL";         // percent for every sample

inline unsigned long long EnvU64(const char* name, unsigned long long fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 0) : fallback;
}

inline int DeviceCount() { return static_cast<int>(EnvU64(kDevicesEnv, 2)); }
inline unsigned long long TotalBytes() { return EnvU64(kTotalEnv, 8ULL << 30); }

// "GPU-fa4e0000-0000-0000-0000-0000000000NN" for physical device NN.
inline void Uuid(int index, char* out, std::size_t cap) {
  std::snprintf(out, cap, "GPU-fa4e0000-0000-0000-0000-%012d", index);
}

}  // namespace hami::vgpu::fake

#endif  // HAMI_TESTS_VGPU_FAKE_IDS_H_
