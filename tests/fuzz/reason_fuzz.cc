// Fuzzes the reason decoder: never crashes, and whatever decodes re-encodes to a value that
// decodes to the same counts.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/reason.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = hami::protocol::DecodeReason(in);
  if (!r) return 0;
  auto again =
      hami::protocol::DecodeReason(hami::protocol::EncodeReason(r->counts, r->devices_considered));
  if (!again) std::abort();
  for (const auto& [name, count] : r->counts) {
    if (count != 0 && again->counts[name] != count) std::abort();
  }
  return 0;
}
