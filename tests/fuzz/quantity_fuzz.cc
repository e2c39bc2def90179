// Fuzzes the quantity parsers: never crash; a parsed quantity written as "<mantissa>e<exp>"
// parses to the same value, and MiB / count results written back as plain integers (and MiB as
// "<n>Mi") parse to the same number.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto q = hami::protocol::ParseQuantity(in);
  if (q && q->exp2 == 0) {
    std::string text =
        (q->negative ? "-" : "") + std::to_string(q->mantissa) + "e" + std::to_string(q->exp10);
    auto again = hami::protocol::ParseQuantity(text);
    if (!again || again->mantissa != q->mantissa || again->exp10 != q->exp10) std::abort();
  }
  auto mib = hami::protocol::ParseMemoryMiB("mem", in);
  if (mib) {
    auto plain = hami::protocol::ParseMemoryMiB("mem", std::to_string(*mib));
    auto binary = hami::protocol::ParseMemoryMiB("mem", std::to_string(*mib) + "Mi");
    if (!plain || *plain != *mib || !binary || *binary != *mib) std::abort();
  }
  auto count = hami::protocol::ParseDeviceCount("count", in);
  if (count) {
    auto again = hami::protocol::ParseDeviceCount("count", std::to_string(*count));
    if (!again || *again != *count) std::abort();
  }
  return 0;
}
