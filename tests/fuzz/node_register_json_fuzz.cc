// Fuzzes the JSON node register decoder: never crashes, and whatever decodes re-encodes to a value
// that decodes to the same devices and encodes to the same bytes again.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/node_register.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = hami::protocol::DecodeNodeRegister(in);
  if (!r) return 0;
  std::string enc = hami::protocol::EncodeNodeRegister(*r);
  auto again = hami::protocol::DecodeNodeRegister(enc);
  if (!again || *again != *r) std::abort();
  if (hami::protocol::EncodeNodeRegister(*again) != enc) std::abort();
  return 0;
}
