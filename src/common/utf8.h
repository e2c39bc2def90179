#ifndef HAMI_COMMON_UTF8_H_
#define HAMI_COMMON_UTF8_H_

#include <cstddef>
#include <optional>
#include <string_view>

namespace hami {

// The length of the UTF-8 sequence that starts at text[i]: 1 for ASCII, 2 to 4 for a well-formed
// multi-byte sequence, 0 when the bytes there are not UTF-8 (a stray continuation byte, a cut
// sequence, an overlong form, a surrogate, or above U+10FFFF).
size_t Utf8SequenceLength(std::string_view text, size_t i);

// The offset of the first byte of `text` that is not UTF-8, or nullopt when all of it is.
std::optional<size_t> FirstNonUtf8(std::string_view text);

}  // namespace hami

#endif  // HAMI_COMMON_UTF8_H_
