// Fuzzes the device-config.yaml loader: never throws or crashes, and whatever loads also passes
// ValidateDeviceConfig (the loader applies the same checks).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "device/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto config = hami::device::LoadDeviceConfig(in);
  if (!config) return 0;
  if (!hami::device::ValidateDeviceConfig(*config)) std::abort();
  return 0;
}
