// Fuzzes the legacy colon node register decoder: never crashes, and whatever decodes to at least
// one device re-encodes (always 9 fields) to a value that decodes to the same devices.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/node_register.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = hami::protocol::DecodeNodeRegisterLegacy(in);
  if (!r) return 0;
  std::string enc = hami::protocol::EncodeNodeRegisterLegacy(*r);
  // No devices encode as "", which has no ':' and so is not a valid legacy value.
  if (r->empty()) {
    if (!enc.empty()) std::abort();
    return 0;
  }
  auto again = hami::protocol::DecodeNodeRegisterLegacy(enc);
  if (!again || *again != *r) std::abort();
  if (hami::protocol::EncodeNodeRegisterLegacy(*again) != enc) std::abort();
  return 0;
}
