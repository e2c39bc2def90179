// Fuzzes the MIG allocation decoder: never crashes, and whatever decodes re-encodes to a value
// that decodes to the same allocations.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/mig_allocations.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = hami::protocol::DecodeMigAllocations(in);
  if (!r) return 0;
  std::string enc = hami::protocol::EncodeMigAllocations(*r);
  auto again = hami::protocol::DecodeMigAllocations(enc);
  if (!again || *again != *r) std::abort();
  if (hami::protocol::EncodeMigAllocations(*again) != enc) std::abort();
  return 0;
}
