#include "common/strings.h"

#include <algorithm>
#include <charconv>

#include "common/utf8.h"

namespace hami {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::vector<std::string_view> SplitNonEmpty(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (std::string_view part : Split(s, sep)) {
    std::string_view item = Trim(part);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

namespace {
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

template <typename T>
std::optional<T> ParseNumber(std::string_view s) {
  if (s.empty()) return std::nullopt;
  if (s[0] == '+') return std::nullopt;
  T value{};
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 10);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return value;
}
}  // namespace

std::string_view Trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out.append(sep);
    out.append(parts[i]);
  }
  return out;
}

std::optional<int32_t> ParseInt32(std::string_view s) { return ParseNumber<int32_t>(s); }
std::optional<int64_t> ParseInt64(std::string_view s) { return ParseNumber<int64_t>(s); }
std::optional<uint64_t> ParseUint64(std::string_view s) {
  if (!s.empty() && s[0] == '-') return std::nullopt;
  return ParseNumber<uint64_t>(s);
}

std::optional<bool> ParseBool(std::string_view s) {
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return true;
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") {
    return false;
  }
  return std::nullopt;
}

std::string Quote(std::string_view s) {
  static constexpr size_t kMax = 120;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > kMax) out += "...";
  out += '"';
  return out;
}

std::string EscapeTerminal(std::string_view text, bool keep_newlines) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto plain = [&](unsigned char c) {
    return (c >= 0x20 && c < 0x7f) || (c == '\n' && keep_newlines);
  };
  if (std::all_of(text.begin(), text.end(), [&](char c) { return plain(c); })) {
    return std::string(text);
  }
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (plain(c)) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {  // C0 or DEL
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else {
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
      ++i;
      continue;
    }
    size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      unsigned char cp = static_cast<unsigned char>(text[i + 1]);  // U+0080-U+009F: C1
      out += "\\u00";
      out += kHex[cp >> 4];
      out += kHex[cp & 15];
      i += 2;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace hami
