// Fuzzes the JSON node register decoder: never crashes; whatever decodes lists no non-empty id
// twice (an empty id is Go's zero value; the vendor backends refuse it with require_id) and
// re-encodes to a value that decodes to the same devices and encodes to the same bytes again.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "protocol/node_register.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = hami::protocol::DecodeNodeRegister(in);
  if (!r) return 0;
  std::set<std::string> ids;
  for (const auto& d : *r) {
    if (!d.id.empty() && !ids.insert(d.id).second) std::abort();
  }
  std::string enc = hami::protocol::EncodeNodeRegister(*r);
  auto again = hami::protocol::DecodeNodeRegister(enc);
  if (!again || *again != *r) std::abort();
  if (hami::protocol::EncodeNodeRegister(*again) != enc) std::abort();
  return 0;
}
