#include "protocol/quantity.h"

#include <optional>

#include "common/strings.h"

namespace hami::protocol {
namespace {

using u128 = unsigned __int128;

constexpr int kMaxSignificantDigits = 19;
constexpr int kMaxExponent = 999;
constexpr int64_t kInt32Max = 2147483647;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Applies the suffix to `q`. Returns false for an unknown suffix.
bool ApplySuffix(std::string_view suffix, Quantity* q) {
  static constexpr std::string_view kBinary[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  for (int i = 0; i < 6; ++i) {
    if (suffix == kBinary[i]) {
      q->format = QuantityFormat::kBinarySI;
      q->exp2 = 10 * (i + 1);
      return true;
    }
  }
  static constexpr std::string_view kDecimal[] = {"k", "M", "G", "T", "P", "E"};
  for (int i = 0; i < 6; ++i) {
    if (suffix == kDecimal[i]) {
      q->exp10 += 3 * (i + 1);
      return true;
    }
  }
  if (suffix == "m") {
    q->exp10 -= 3;
    return true;
  }
  if (suffix.empty()) return true;
  if (suffix[0] != 'e' && suffix[0] != 'E') return false;
  std::string_view e = suffix.substr(1);
  bool neg = false;
  if (!e.empty() && (e[0] == '+' || e[0] == '-')) {
    neg = e[0] == '-';
    e.remove_prefix(1);
  }
  if (e.empty() || e.size() > 3) return false;
  int v = 0;
  for (char c : e) {
    if (!IsDigit(c)) return false;
    v = v * 10 + (c - '0');
  }
  q->format = QuantityFormat::kDecimalExponent;
  q->exp10 += neg ? -v : v;
  return true;
}

// mantissa * 10^exp10 * 2^(exp2 + extra_exp2), rounded down or up; nullopt when it is certainly
// at least 2^80 (far beyond any int32 result).
std::optional<u128> Scaled(const Quantity& q, int extra_exp2, bool round_up) {
  u128 n = q.mantissa;
  const u128 cap = u128{1} << 100;
  for (int i = 0; i < q.exp10 && n != 0; ++i) {
    n *= 10;
    if (n > cap) return std::nullopt;
  }
  int e2 = q.exp2 + extra_exp2;
  for (int i = 0; i < e2 && n != 0; ++i) {
    if (n >= (u128{1} << 126)) return std::nullopt;
    n <<= 1;
  }
  // Dividing step by step rounds exactly: ceil(ceil(x/a)/b) == ceil(x/(a*b)), same for floor.
  // Once n is 0 (down) or 1 (up) further division cannot change it.
  const u128 fixed_point = round_up ? 1 : 0;
  auto divide = [&](u128 d) { n = round_up ? (n + d - 1) / d : n / d; };
  for (int i = 0; i < -q.exp10 && n > fixed_point; ++i) divide(10);
  for (int i = 0; i < -e2 && n > fixed_point; ++i) divide(2);
  return n;
}

}  // namespace

Result<Quantity> ParseQuantity(std::string_view text) {
  auto fail = [&](std::string_view why) {
    return Error{"quantity " + Quote(text) + ": " + std::string(why)};
  };
  Quantity q;
  size_t pos = 0;
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    q.negative = text[pos] == '-';
    ++pos;
  }
  std::string digits;
  int frac_digits = 0;
  bool seen_dot = false;
  for (; pos < text.size(); ++pos) {
    char c = text[pos];
    if (IsDigit(c)) {
      digits.push_back(c);
      if (seen_dot) ++frac_digits;
    } else if (c == '.' && !seen_dot) {
      seen_dot = true;
    } else {
      break;
    }
  }
  if (digits.empty()) return fail("no digits");
  q.suffix = std::string(text.substr(pos));
  size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    digits.clear();
  } else {
    digits.erase(0, first);
  }
  q.exp10 = -frac_digits;
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
    ++q.exp10;
  }
  if (static_cast<int>(digits.size()) > kMaxSignificantDigits) {
    return fail("more than 19 significant digits");
  }
  for (char c : digits) q.mantissa = q.mantissa * 10 + static_cast<uint64_t>(c - '0');
  if (!ApplySuffix(q.suffix, &q)) return fail("unknown suffix " + Quote(q.suffix));
  if (q.mantissa == 0) q.exp10 = 0;
  if (q.exp10 > kMaxExponent || q.exp10 < -kMaxExponent) return fail("exponent out of range");
  return q;
}

Result<int32_t> ParseMemoryMiB(std::string_view resource, std::string_view value) {
  auto fail = [&](const std::string& why) {
    return Error{"resource " + std::string(resource) + " value " + Quote(value) + ": " + why};
  };
  auto q = ParseQuantity(value);
  if (!q) return fail(q.error());
  if (q->negative && q->mantissa != 0) return fail("negative");
  const std::string& s = q->suffix;
  bool bytes = q->format == QuantityFormat::kBinarySI || s == "M" || s == "G" || s == "T" ||
               s == "P" || s == "E";
  if (bytes) {
    auto mib = Scaled(*q, -20, /*round_up=*/true);
    if (!mib || *mib > kInt32Max) return fail("more than 2147483647 MiB");
    return static_cast<int32_t>(*mib);
  }
  auto lo = Scaled(*q, 0, false);
  auto hi = Scaled(*q, 0, true);
  if (!lo || *lo > kInt32Max) return fail("more than 2147483647 MiB");
  if (*lo != *hi) return fail("not a whole number of MiB");
  return static_cast<int32_t>(*lo);
}

Result<int32_t> ParseDeviceCount(std::string_view resource, std::string_view value) {
  auto fail = [&](const std::string& why) {
    return Error{"resource " + std::string(resource) + " value " + Quote(value) + ": " + why};
  };
  auto q = ParseQuantity(value);
  if (!q) return fail(q.error());
  if (q->negative && q->mantissa != 0) return fail("negative");
  auto lo = Scaled(*q, 0, false);
  auto hi = Scaled(*q, 0, true);
  if (!lo || *lo > kInt32Max) return fail("more than 2147483647");
  if (*lo != *hi) return fail("not a whole number");
  return static_cast<int32_t>(*lo);
}

}  // namespace hami::protocol
