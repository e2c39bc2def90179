// Fuzzes the wall-clock and RFC 3339 parsers: never crash; what parses re-formats to text that
// parses to the same instant (to the second) and offset.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/time_format.h"

using hami::SystemTime;
using hami::Zone;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const Zone zone = Zone::Fixed(-(9 * 3600 + 45 * 60));
  auto wall = hami::ParseDateTime(in, zone);
  if (wall) {
    auto again = hami::ParseDateTime(hami::FormatDateTime(*wall, zone), zone);
    if (!again || *again != std::chrono::floor<std::chrono::seconds>(*wall)) std::abort();
  }
  auto rfc = hami::ParseRfc3339(in);
  if (rfc) {
    auto again = hami::ParseRfc3339(hami::FormatRfc3339(*rfc));
    if (!again || again->offset_seconds != rfc->offset_seconds ||
        again->instant != std::chrono::floor<std::chrono::seconds>(rfc->instant)) {
      std::abort();
    }
  }
  return 0;
}
