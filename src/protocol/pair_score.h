// Pair-score annotation `hami.io/node-nvidia-score` (docs/protocol.md#pair-scores): how well each
// GPU of a node talks to each other one (NVLink 100 per link, same board 60, ... cross-CPU 10):
//   [{"uuid":"GPU-a","score":{"GPU-b":200,"GPU-c":20}},{"uuid":"GPU-b","score":{...}}]
// All functions here are pure and total.
#ifndef HAMI_PROTOCOL_PAIR_SCORE_H_
#define HAMI_PROTOCOL_PAIR_SCORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hami::protocol {

struct DevicePairScore {
  std::string uuid{};
  // Other device's UUID -> score. std::map keeps the keys in byte order, which is the order Go
  // writes map keys in.
  std::map<std::string, int64_t> score{};
  bool operator==(const DevicePairScore&) const = default;
};

using PairScores = std::vector<DevicePairScore>;

// Compact JSON as Go writes it: keys uuid, score; score keys sorted; an empty score map as {}; an
// empty list as [].
std::string EncodePairScores(const PairScores& scores);

// "" and "null" decode to an empty list. Unknown keys are ignored; a null score is an empty map;
// a repeated score key keeps the last value. Wrong types and out-of-range numbers are errors
// naming the entry and field, e.g. `device 0: field "score.GPU-b": want an integer, got "x"`.
Result<PairScores> DecodePairScores(std::string_view value);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_PAIR_SCORE_H_
