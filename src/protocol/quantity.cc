#include "protocol/quantity.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

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

// A non-negative integer of any size, base 2^32, least significant word first, no leading zero
// words (zero is empty).
using BigNat = std::vector<uint32_t>;

void MultiplySmall(BigNat& n, uint32_t k) {
  uint64_t carry = 0;
  for (uint32_t& w : n) {
    uint64_t v = uint64_t{w} * k + carry;
    w = static_cast<uint32_t>(v);
    carry = v >> 32;
  }
  if (carry != 0) n.push_back(static_cast<uint32_t>(carry));
}

// mantissa * 5^pow5 * 2^pow2 (both powers non-negative).
BigNat Magnitude(uint64_t mantissa, int pow5, int pow2) {
  BigNat n;
  for (uint64_t m = mantissa; m != 0; m >>= 32) n.push_back(static_cast<uint32_t>(m));
  if (n.empty()) return n;
  constexpr uint32_t k5to13 = 1220703125;  // 5^13, the largest power of 5 in a word
  for (; pow5 >= 13; pow5 -= 13) MultiplySmall(n, k5to13);
  for (; pow5 > 0; --pow5) MultiplySmall(n, 5);
  for (; pow2 >= 31; pow2 -= 31) MultiplySmall(n, uint32_t{1} << 31);
  if (pow2 > 0) MultiplySmall(n, uint32_t{1} << pow2);
  return n;
}

int CompareNat(const BigNat& a, const BigNat& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t i = a.size(); i-- > 0;) {
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return 0;
}

}  // namespace

int CompareQuantities(const Quantity& a, const Quantity& b) {
  const int sign_a = a.mantissa == 0 ? 0 : (a.negative ? -1 : 1);
  const int sign_b = b.mantissa == 0 ? 0 : (b.negative ? -1 : 1);
  if (sign_a != sign_b || sign_a == 0) return sign_a < sign_b ? -1 : (sign_a > sign_b ? 1 : 0);
  // Magnitudes more than a factor of 10 apart need no exact arithmetic (and a hostile "1e999"
  // against "1e-999" no 4,600-bit integers): log10 of each is within 1e-9 of the truth here.
  auto log10_of = [](const Quantity& q) {
    return std::log10(static_cast<long double>(q.mantissa)) + q.exp10 + q.exp2 * std::log10(2.0L);
  };
  const long double gap = log10_of(a) - log10_of(b);
  if (gap > 1 || gap < -1) return sign_a * (gap > 0 ? 1 : -1);
  // Within a factor of 10 the exponents differ by at most ~40 (powers of 5) and ~100 (of 2).
  // m * 10^e10 * 2^e2 = m * 5^e10 * 2^(e10 + e2): divide both sides by the smaller power of 5
  // and of 2 so every exponent is non-negative, then compare the integers.
  const int a5 = a.exp10, a2 = a.exp10 + a.exp2;
  const int b5 = b.exp10, b2 = b.exp10 + b.exp2;
  const int p5 = std::min(a5, b5), p2 = std::min(a2, b2);
  int magnitude =
      CompareNat(Magnitude(a.mantissa, a5 - p5, a2 - p2), Magnitude(b.mantissa, b5 - p5, b2 - p2));
  return sign_a * magnitude;
}

std::optional<int64_t> ExactScaledValue(const Quantity& q, int unit_exp10) {
  constexpr u128 kLimit = u128{1} << 63;  // |value| <= 2^63 - 1, or 2^63 when negative
  u128 n = q.mantissa;
  if (n == 0) return 0;
  n <<= q.exp2;  // mantissa < 10^19 < 2^64 and exp2 <= 60: fits
  int e = q.exp10 - unit_exp10;
  for (; e < 0; ++e) {
    if (n % 10 != 0) return std::nullopt;
    n /= 10;
  }
  for (; e > 0; --e) {
    n *= 10;
    if (n > kLimit) return std::nullopt;
  }
  if (n > kLimit || (n == kLimit && !q.negative)) return std::nullopt;
  if (q.negative) return n == kLimit ? INT64_MIN : -static_cast<int64_t>(n);
  return static_cast<int64_t>(n);
}

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
