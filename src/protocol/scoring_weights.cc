#include "protocol/scoring_weights.h"

#include <optional>
#include <vector>

#include "common/strings.h"
#include "protocol/keys.h"

namespace hami::protocol {

// HAMi's words (pkg/util/device_scoring_weights.go), which operators search for: `invalid
// hami.io/device-scoring-weights annotation "<value>": "core" weight must not be negative`.
// HAMi checks, per entry in order: key=value shape, duplicate key, integer, negative, known key.
Result<ScoringWeights> ParseScoringWeights(std::string_view value) {
  auto fail = [&](const std::string& why) {
    return Error{"invalid " + std::string(kDeviceScoringWeightsKey) + " annotation " +
                 Quote(value) + ": " + why};
  };
  auto entries = Split(value, ',');
  if (entries.size() != 3) return fail("expected slot, core, and memory weights");
  std::optional<int32_t> slot, core, memory;
  std::vector<std::string_view> seen;
  for (std::string_view raw : entries) {
    std::string_view entry = Trim(raw);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) return fail("expected key=value entries");
    std::string_view key = Trim(entry.substr(0, eq));
    std::string_view text = Trim(entry.substr(eq + 1));
    for (std::string_view k : seen) {
      if (k == key) return fail("duplicate " + Quote(key) + " weight");
    }
    auto n = ParseInt32(text);
    if (!n) return fail(Quote(key) + " weight must be an integer");
    if (*n < 0) return fail(Quote(key) + " weight must not be negative");
    std::optional<int32_t>* slot_for_key = key == "slot"     ? &slot
                                           : key == "core"   ? &core
                                           : key == "memory" ? &memory
                                                             : nullptr;
    if (slot_for_key == nullptr) return fail("unknown weight " + Quote(key));
    *slot_for_key = *n;
    seen.push_back(key);
  }
  // Three distinct known keys were seen, so all three are set.
  ScoringWeights w{*slot, *core, *memory};
  if (w.slot == 0 && w.core == 0 && w.memory == 0) {
    return fail("at least one weight must be positive");
  }
  return w;
}

std::string FormatScoringWeights(const ScoringWeights& weights) {
  return "slot=" + std::to_string(weights.slot) + ",core=" + std::to_string(weights.core) +
         ",memory=" + std::to_string(weights.memory);
}

}  // namespace hami::protocol
