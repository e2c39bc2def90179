// Small, total string helpers used by the codecs. None of them throws or reads out of bounds.
#ifndef HAMI_COMMON_STRINGS_H_
#define HAMI_COMMON_STRINGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hami {

// Splits on `sep`, keeping every segment, empty ones included: Split("a;;", ';') = {"a","",""}.
// Split("", ';') = {""}.
std::vector<std::string_view> Split(std::string_view s, char sep);

// The trimmed, non-empty items of a list such as an annotation's "a, b,,c": {"a","b","c"}.
std::vector<std::string_view> SplitNonEmpty(std::string_view s, char sep);

// Removes ASCII white space (space, \t, \n, \r, \f, \v) from both ends.
std::string_view Trim(std::string_view s);

std::string ToLower(std::string_view s);

std::string Join(const std::vector<std::string>& parts, std::string_view sep);

// Strict decimal parsers: an optional leading '-' (signed only), digits, nothing else, no
// white space, in range. Return nullopt otherwise.
std::optional<int32_t> ParseInt32(std::string_view s);
std::optional<int64_t> ParseInt64(std::string_view s);
std::optional<uint64_t> ParseUint64(std::string_view s);

// Go strconv.ParseBool's set: 1 t T TRUE true True 0 f F FALSE false False.
std::optional<bool> ParseBool(std::string_view s);

// Quotes a value for an error message: printable ASCII as is, other bytes as \xNN, cut after
// 120 bytes with "...". Quote("a\"b") = "\"a\\\"b\"".
std::string Quote(std::string_view s);

}  // namespace hami

#endif  // HAMI_COMMON_STRINGS_H_
