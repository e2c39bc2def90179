// Fuzzes the device-scoring-weights parser: never crashes; what parses re-formats to a value that
// parses to the same weights.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/scoring_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto w = hami::protocol::ParseScoringWeights(in);
  if (!w) return 0;
  auto again = hami::protocol::ParseScoringWeights(hami::protocol::FormatScoringWeights(*w));
  if (!again || !(*again == *w)) std::abort();
  return 0;
}
