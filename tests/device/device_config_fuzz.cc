// Fuzzes the device-config.yaml loader: never throws or crashes, and whatever loads also passes
// ValidateDeviceConfig (the loader applies the same checks).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "device/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto config = hami::device::LoadDeviceConfig(in);
  if (!config) return 0;
  if (auto valid = hami::device::ValidateDeviceConfig(*config); !valid) {
    std::fprintf(stderr, "loaded but invalid: %s\n", valid.error().c_str());
    std::abort();
  }
  return 0;
}
