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

// Text from cluster objects made safe for an operator's terminal (docs/SECURITY.md, "Terminal
// output of kubectl-hami and hamictl"): C0 controls (U+0000-U+001F), DEL and C1 controls
// (U+0080-U+009F, as UTF-8) become JSON-style escapes (\n, \r, \t, \u001b, \u007f, \u009b) and
// bytes that are not UTF-8 become \xNN, so no escape sequence, bell or carriage return reaches the
// terminal. With `keep_newlines`, '\n' stays (text that is multi-line by design). Everything else
// (printable ASCII, UTF-8 from U+00A0) is unchanged, and JSON text stays valid JSON.
std::string EscapeTerminal(std::string_view text, bool keep_newlines = false);

}  // namespace hami

#endif  // HAMI_COMMON_STRINGS_H_
