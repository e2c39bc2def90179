#include "protocol/scoring_weights.h"

#include <optional>

#include "common/strings.h"
#include "protocol/keys.h"

namespace hami::protocol {

Result<ScoringWeights> ParseScoringWeights(std::string_view value) {
  auto fail = [&](const std::string& why) {
    return Error{std::string(kDeviceScoringWeightsKey) + " " + Quote(value) + ": " + why +
                 " (want \"slot=<int>,core=<int>,memory=<int>\")"};
  };
  auto entries = Split(value, ',');
  if (entries.size() != 3) {
    return fail("has " + std::to_string(entries.size()) + " entries, want exactly 3");
  }
  std::optional<int32_t> slot, core, memory;
  for (std::string_view raw : entries) {
    std::string_view entry = Trim(raw);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) return fail("entry " + Quote(entry) + " has no '='");
    std::string_view key = Trim(entry.substr(0, eq));
    std::string_view text = Trim(entry.substr(eq + 1));
    std::optional<int32_t>* slot_for_key = key == "slot"     ? &slot
                                           : key == "core"   ? &core
                                           : key == "memory" ? &memory
                                                             : nullptr;
    if (slot_for_key == nullptr) return fail("unknown key " + Quote(key));
    if (slot_for_key->has_value()) return fail("duplicate key " + Quote(key));
    auto n = ParseInt32(text);
    if (!n) return fail("value of " + Quote(key) + " is not an integer: " + Quote(text));
    if (*n < 0) return fail("value of " + Quote(key) + " is negative: " + Quote(text));
    *slot_for_key = *n;
  }
  // Three distinct known keys were seen, so all three are set.
  ScoringWeights w{*slot, *core, *memory};
  if (w.slot == 0 && w.core == 0 && w.memory == 0) return fail("all weights are zero");
  return w;
}

std::string FormatScoringWeights(const ScoringWeights& weights) {
  return "slot=" + std::to_string(weights.slot) + ",core=" + std::to_string(weights.core) +
         ",memory=" + std::to_string(weights.memory);
}

}  // namespace hami::protocol
