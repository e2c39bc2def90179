// Fuzzes the bind-phase and bind-time parsers: never crash; what parses re-formats to the same
// value.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/bind.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto phase = hami::protocol::ParseBindPhase(in);
  if (phase && hami::protocol::FormatBindPhase(*phase) != in) std::abort();
  auto t = hami::protocol::ParseBindTime(in);
  if (t) {
    auto again = hami::protocol::ParseBindTime(hami::protocol::FormatBindTime(*t));
    if (!again || *again != *t) std::abort();
  }
  return 0;
}
