// Fuzzes the pair-score decoder: never crashes, and whatever decodes re-encodes to a value that
// decodes to the same scores.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/pair_score.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = hami::protocol::DecodePairScores(in);
  if (!r) return 0;
  std::string enc = hami::protocol::EncodePairScores(*r);
  auto again = hami::protocol::DecodePairScores(enc);
  if (!again || *again != *r) std::abort();
  if (hami::protocol::EncodePairScores(*again) != enc) std::abort();
  return 0;
}
