// Pod annotation hami.io/device-scoring-weights (docs/protocol.md#pod-annotations):
//   "slot=<int>,core=<int>,memory=<int>"
// Exactly three entries, each key once (any order), integers >= 0, not all zero. An invalid
// value makes Filter return an error, so every error names the problem and the value.
#ifndef HAMI_PROTOCOL_SCORING_WEIGHTS_H_
#define HAMI_PROTOCOL_SCORING_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hami::protocol {

struct ScoringWeights {
  int32_t slot = 0;
  int32_t core = 0;
  int32_t memory = 0;
  bool operator==(const ScoringWeights&) const = default;
};

// White space around entries, keys and values is ignored ("slot=1, core=1, memory=3").
Result<ScoringWeights> ParseScoringWeights(std::string_view value);

// "slot=<s>,core=<c>,memory=<m>" in that order.
std::string FormatScoringWeights(const ScoringWeights& weights);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_SCORING_WEIGHTS_H_
