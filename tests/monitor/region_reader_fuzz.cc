// monitor::ParseRegion over arbitrary bytes: random, truncated and oversized regions never crash
// or read out of bounds. Inputs shorter than a region are padded from a valid v1 or v0 region
// so the fuzzer also reaches the slot sums.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "monitor/region_reader.h"
#include "vgpu/shared_region.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string raw(reinterpret_cast<const char*>(data), size);
  (void)hami::monitor::ParseRegion(raw, nullptr);
  if (size < 2) return 0;
  // A region of the size the first byte picks, the rest of the input laid over its start and
  // over its proc_num / last slots.
  const bool v1 = (data[0] & 1) != 0;
  std::string region(v1 ? HAMI_REGION_FILE_SIZE : hami::monitor::kRegionV0Size + 1, '\0');
  const int32_t magic = HAMI_REGION_MAGIC;
  std::memcpy(region.data(), &magic, sizeof(magic));
  const std::size_t n = std::min(size - 1, region.size());
  std::memcpy(region.data() + 4, data + 1, std::min(n, region.size() - 4));
  std::memcpy(region.data() + region.size() - n, data + 1, n);
  (void)hami::monitor::ParseRegion(region, [](int32_t pid) { return pid % 2 == 0; });
  (void)hami::monitor::ParseRegion(std::string_view(region).substr(0, region.size() - data[1]),
                                   nullptr);
  return 0;
}
