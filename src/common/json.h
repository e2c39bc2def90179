// Every JSON read in the tree goes through ParseJson, which refuses documents nested deeper than
// kMaxJsonDepth before nlohmann builds them. nlohmann parses iteratively, but copying, comparing,
// dumping and destroying a value recurse once per level, so a 100,000-deep `[[[...]]]` (200 KB,
// under the 256 KiB annotation limit) would overflow the stack wherever the value is used.
// Kubernetes' decoders stop at the same depth (docs/INPUT_LIMITS.md).
#ifndef HAMI_COMMON_JSON_H_
#define HAMI_COMMON_JSON_H_

#include <cstddef>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hami {

// kube-apiserver's limit on JSON nesting (arrays and objects together).
inline constexpr size_t kMaxJsonDepth = 10000;
// An API server's answers wrap objects it accepted at kMaxJsonDepth: a list in two more levels
// (the list and its items), a watch event in one. Its clients read those with this limit, or one
// pod at the limit would make every LIST of pods fail.
inline constexpr size_t kMaxJsonListDepth = kMaxJsonDepth + 2;

// OK when no array or object in `text` opens more than `max_depth` levels deep. Brackets inside
// strings (escapes included) do not count. A linear scan that allocates nothing; it does not
// check that `text` is valid JSON. The error reads "nested deeper than N levels at byte B".
Status CheckJsonDepth(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Parses `text` as one JSON document of type J (nlohmann::json or nlohmann::ordered_json).
// Errors: "nested deeper than 10000 levels at byte B" or "not valid JSON". Callers prefix what
// they were reading, e.g. "node register: " + error. `max_depth` is kMaxJsonDepth except where
// the text wraps objects that were themselves held to it (kMaxJsonListDepth).
template <typename J = nlohmann::json>
Result<J> ParseJson(std::string_view text, size_t max_depth = kMaxJsonDepth) {
  if (Status depth = CheckJsonDepth(text, max_depth); !depth) {
    return std::move(depth).take_error();
  }
  J j = J::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"not valid JSON"};
  return j;
}

// ParseJson for callers that treat every unreadable text alike: null when ParseJson fails.
template <typename J = nlohmann::json>
J ParseJsonOrNull(std::string_view text, size_t max_depth = kMaxJsonDepth) {
  Result<J> j = ParseJson<J>(text, max_depth);
  return j ? std::move(*j) : J();
}

}  // namespace hami

#endif  // HAMI_COMMON_JSON_H_
