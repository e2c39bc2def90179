// The tokenizer of the CEL subset (cel_internal.h): identifiers, int literals, string literals
// with CEL's escapes, operators and // comments. Literals outside the subset (doubles, unsigned
// ints, bytes, raw and triple-quoted strings) are errors naming them.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "dra/cel_internal.h"

namespace hami::dra::cel {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  Result<std::vector<Token>> Run() {
    std::vector<Token> out;
    while (true) {
      while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' ||
                                s_[i_] == '\r' || s_[i_] == '\f' || s_[i_] == '\v')) {
        ++i_;
      }
      if (i_ >= s_.size()) break;
      if (s_.compare(i_, 2, "//") == 0) {  // a comment, to the end of the line
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
        continue;
      }
      auto token = Next();
      if (!token) return std::move(token).take_error();
      out.push_back(std::move(*token));
    }
    Token end;
    end.pos = end.end = s_.size();
    out.push_back(end);
    return out;
  }

 private:
  Error Unsupported(std::string_view what, size_t pos) const {
    return Error{"unsupported CEL construct " + Quote(what) + " at " + Where(s_, pos)};
  }
  Error Syntax(size_t pos, const std::string& message) const {
    return Error{"syntax error at " + Where(s_, pos) + ": " + message};
  }

  Result<Token> Next() {
    const size_t start = i_;
    const char c = s_[i_];
    Token t;
    t.pos = start;
    if (IsIdentStart(c)) {
      const bool prefix = (c == 'r' || c == 'R' || c == 'b' || c == 'B');
      if (prefix && i_ + 1 < s_.size() && (s_[i_ + 1] == '"' || s_[i_ + 1] == '\'')) {
        return Unsupported(c == 'r' || c == 'R' ? "raw string" : "bytes literal", start);
      }
      while (i_ < s_.size() && IsIdentChar(s_[i_])) ++i_;
      t.kind = Tok::kIdent;
      t.text = std::string(s_.substr(start, i_ - start));
    } else if (IsDigit(c) || (c == '.' && i_ + 1 < s_.size() && IsDigit(s_[i_ + 1]))) {
      auto number = Number(t);
      if (!number) return std::move(number).take_error();
    } else if (c == '"' || c == '\'') {
      auto string = String(t);
      if (!string) return std::move(string).take_error();
    } else {
      static constexpr std::string_view kTwo[] = {"==", "!=", "<=", ">=", "&&", "||"};
      for (std::string_view op : kTwo) {
        if (s_.compare(i_, 2, op) == 0) {
          t.kind = Tok::kOp;
          t.text = std::string(op);
          i_ += 2;
          t.end = i_;
          return t;
        }
      }
      static constexpr std::string_view kOne = "<>!()[],.-+*/%?:{}";
      if (kOne.find(c) == std::string_view::npos) {
        if (c == '=') return Syntax(start, "unexpected \"=\" (comparison is \"==\")");
        if (c == '&' || c == '|') {
          return Syntax(start, "unexpected " + Quote(std::string(1, c)) +
                                   " (logical operators are" + " \"&&\" and \"||\")");
        }
        return Syntax(start, "unexpected character " + Quote(std::string(1, c)));
      }
      t.kind = Tok::kOp;
      t.text = std::string(1, c);
      ++i_;
    }
    t.end = i_;
    return t;
  }

  // An int literal: decimal or 0x hex. Doubles and unsigned literals are outside the subset.
  Status Number(Token& t) {
    const size_t start = i_;
    uint64_t value = 0;
    bool overflow = false;
    auto add = [&](int base, int digit) {
      if (value > (UINT64_MAX - digit) / base) overflow = true;
      value = value * base + digit;
    };
    if (s_.compare(i_, 2, "0x") == 0 || s_.compare(i_, 2, "0X") == 0) {
      i_ += 2;
      if (i_ >= s_.size() || !IsHex(s_[i_])) return Syntax(start, "hex literal without digits");
      while (i_ < s_.size() && IsHex(s_[i_])) add(16, HexValue(s_[i_++]));
    } else {
      while (i_ < s_.size() && IsDigit(s_[i_])) add(10, s_[i_++] - '0');
    }
    const bool fraction = i_ + 1 < s_.size() && s_[i_] == '.' && IsDigit(s_[i_ + 1]);
    if (fraction || (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) ||
        (start < s_.size() && s_[start] == '.')) {
      while (i_ < s_.size() && (IsIdentChar(s_[i_]) || s_[i_] == '.')) ++i_;
      return Unsupported(s_.substr(start, i_ - start), start);  // a double
    }
    if (i_ < s_.size() && (s_[i_] == 'u' || s_[i_] == 'U')) {
      return Unsupported(s_.substr(start, i_ + 1 - start), start);  // an unsigned int
    }
    if (i_ < s_.size() && IsIdentChar(s_[i_])) {
      return Syntax(i_, "unexpected " + Quote(std::string(1, s_[i_])) + " after a number");
    }
    if (overflow || value > static_cast<uint64_t>(INT64_MAX) + 1) {
      return Syntax(start, "int literal " + Quote(s_.substr(start, i_ - start)) + " out of range");
    }
    t.kind = Tok::kInt;
    t.int_value = value;
    return OkStatus();
  }

  Status String(Token& t) {
    const size_t start = i_;
    const char quote = s_[i_];
    if (i_ + 2 < s_.size() && s_[i_ + 1] == quote && s_[i_ + 2] == quote) {
      return Unsupported("triple-quoted string", start);
    }
    ++i_;
    std::string value;
    while (true) {
      if (i_ >= s_.size()) return Syntax(start, "unterminated string literal");
      const char c = s_[i_];
      if (c == quote) break;
      if (c == '\n' || c == '\r') return Syntax(i_, "newline in string literal");
      if (c != '\\') {
        value += c;
        ++i_;
        continue;
      }
      auto escape = Escape(value);
      if (!escape) return escape;
    }
    ++i_;
    t.kind = Tok::kString;
    t.text = std::move(value);
    return OkStatus();
  }

  // One escape sequence at i_ (a backslash), appended to `out` as UTF-8.
  Status Escape(std::string& out) {
    const size_t start = i_;
    if (i_ + 1 >= s_.size()) return Syntax(start, "unterminated string literal");
    const char c = s_[i_ + 1];
    i_ += 2;
    switch (c) {
      case '\\':
      case '?':
      case '"':
      case '\'':
      case '`':
        out += c;
        return OkStatus();
      case 'a':
        out += '\a';
        return OkStatus();
      case 'b':
        out += '\b';
        return OkStatus();
      case 'f':
        out += '\f';
        return OkStatus();
      case 'n':
        out += '\n';
        return OkStatus();
      case 'r':
        out += '\r';
        return OkStatus();
      case 't':
        out += '\t';
        return OkStatus();
      case 'v':
        out += '\v';
        return OkStatus();
      default:
        break;
    }
    int digits = 0;
    int base = 16;
    if (c == 'x' || c == 'X') {
      digits = 2;
    } else if (c == 'u') {
      digits = 4;
    } else if (c == 'U') {
      digits = 8;
    } else if (c >= '0' && c <= '3') {
      digits = 2;
      base = 8;
    } else {
      return Syntax(start, "invalid escape sequence " + Quote(s_.substr(start, 2)));
    }
    uint32_t cp = base == 8 ? static_cast<uint32_t>(c - '0') : 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      const bool ok =
          i_ < s_.size() && (base == 16 ? IsHex(s_[i_]) : (s_[i_] >= '0' && s_[i_] <= '7'));
      if (!ok) return Syntax(start, "invalid escape sequence");
      cp = cp * base + static_cast<uint32_t>(HexValue(s_[i_]));
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Syntax(start, "escape sequence " + Quote(s_.substr(start, i_ - start)) +
                               " is not a Unicode code point");
    }
    AppendUtf8(out, cp);
    return OkStatus();
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

// "column 7", or "line 2, column 3" past the first line of a multi-line expression.
std::string Where(std::string_view expr, size_t pos) {
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < pos && i < expr.size(); ++i) {
    if (expr[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const std::string column = "column " + std::to_string(pos - line_start + 1);
  return line == 1 ? column : "line " + std::to_string(line) + ", " + column;
}

Result<std::vector<Token>> Tokenize(std::string_view expression) { return Lexer(expression).Run(); }

}  // namespace hami::dra::cel
