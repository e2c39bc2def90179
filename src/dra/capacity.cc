#include "dra/capacity.h"

#include <algorithm>
#include <vector>

#include "common/strings.h"

namespace hami::dra {
namespace {

using protocol::QuantityFormat;
using u128 = unsigned __int128;

constexpr __int128 kNanosPerUnit = 1000000000;

u128 Pow10(int n) {
  u128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

std::string ToString(u128 v) {
  if (v == 0) return "0";
  std::string out;
  while (v > 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

Result<Amount> Field(const nlohmann::json& obj, const char* name, const std::string& path) {
  const auto it = obj.find(name);
  if (it == obj.end()) return Error{path + "." + name + ": missing"};
  if (!it->is_string()) {
    return Error{path + "." + name + ": want a quantity string, got " + it->dump()};
  }
  auto a = ParseAmount(it->get<std::string>());
  if (!a) return Error{path + "." + name + ": " + a.error()};
  return a;
}

// ceil(a / b) for b > 0.
__int128 CeilDiv(__int128 a, __int128 b) {
  __int128 q = a / b;
  if (a % b != 0 && (a > 0)) ++q;
  return q;
}

}  // namespace

Result<Amount> ToAmount(const protocol::Quantity& q) {
  // |value| <= 10^20 units keeps every sum of a few thousand amounts far inside 128 bits.
  const u128 limit = Pow10(29);
  u128 n = q.mantissa;
  auto too_large = [] { return Error{"quantity beyond 10^20"}; };
  for (int i = 0; i < q.exp2 && n != 0; ++i) {
    n <<= 1;
    if (n > limit) return too_large();
  }
  const int e10 = q.exp10 + 9;
  for (int i = 0; i < e10 && n != 0; ++i) {
    n *= 10;
    if (n > limit) return too_large();
  }
  for (int i = 0; i < -e10 && n != 0; ++i) {
    if (n % 10 != 0) return Error{"quantity finer than 10^-9"};
    n /= 10;
  }
  Amount a;
  a.nanos = q.negative ? -static_cast<__int128>(n) : static_cast<__int128>(n);
  a.format = q.format;
  return a;
}

Result<Amount> ParseAmount(std::string_view text) {
  auto q = protocol::ParseQuantity(text);
  if (!q) return Error{Quote(text) + ": " + q.error()};
  auto a = ToAmount(*q);
  if (!a) return Error{Quote(text) + ": " + a.error()};
  return a;
}

std::string FormatAmount(const Amount& a) {
  if (a.nanos == 0) return "0";
  const bool negative = a.nanos < 0;
  const u128 nanos = static_cast<u128>(negative ? -a.nanos : a.nanos);
  const std::string sign = negative ? "-" : "";
  const bool whole = nanos % static_cast<u128>(kNanosPerUnit) == 0;
  if (whole && a.format == QuantityFormat::kBinarySI) {
    u128 v = nanos / static_cast<u128>(kNanosPerUnit);
    if (v >= 1024) {
      static constexpr const char* kSuffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
      int s = 0;
      while (s < 6 && v % 1024 == 0) {
        v /= 1024;
        ++s;
      }
      return sign + ToString(v) + kSuffixes[s];
    }
  }
  // DecimalSI: the largest exponent (a multiple of 3, from n to E) that keeps an integer.
  static constexpr const char* kDecimal[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
  u128 v = nanos;
  int s = 0;
  while (s < 9 && v % 1000 == 0) {
    v /= 1000;
    ++s;
  }
  return sign + ToString(v) + kDecimal[s];
}

Result<Consumption> ConsumedCapacity(const nlohmann::json& capacity,
                                     const std::optional<Amount>& requested) {
  if (!capacity.is_object()) return Error{"capacity: want an object, got " + capacity.dump()};
  auto value = Field(capacity, "value", "capacity");
  if (!value) return std::move(value).take_error();
  const auto pit = capacity.find("requestPolicy");
  const nlohmann::json* policy = pit != capacity.end() && pit->is_object() ? &*pit : nullptr;
  std::optional<Amount> def;
  if (policy != nullptr && policy->contains("default")) {
    auto d = Field(*policy, "default", "requestPolicy");
    if (!d) return std::move(d).take_error();
    def = *d;
  }
  Consumption out;
  if (!requested) {
    out.amount = def ? *def : *value;
  } else {
    out.amount = *requested;
  }
  if (policy == nullptr) return out;

  const auto rit = policy->find("validRange");
  const auto vit = policy->find("validValues");
  if (rit != policy->end() && rit->is_object()) {
    const nlohmann::json& range = *rit;
    std::optional<Amount> min, max, step;
    if (range.contains("min")) {
      auto m = Field(range, "min", "requestPolicy.validRange");
      if (!m) return std::move(m).take_error();
      min = *m;
    }
    if (range.contains("max")) {
      auto m = Field(range, "max", "requestPolicy.validRange");
      if (!m) return std::move(m).take_error();
      max = *m;
    }
    if (range.contains("step")) {
      auto s = Field(range, "step", "requestPolicy.validRange");
      if (!s) return std::move(s).take_error();
      if (s->nanos <= 0) return Error{"requestPolicy.validRange.step: must be positive"};
      step = *s;
    }
    if (requested && min) {
      if (requested->nanos < min->nanos) {
        out.amount = *min;
      } else if (step) {
        const __int128 n = CeilDiv(requested->nanos - min->nanos, step->nanos);
        out.amount = Amount{min->nanos + n * step->nanos, step->format};
      }
    }
    if (def && out.amount.nanos == def->nanos) return out;
    if (max && out.amount.nanos > max->nanos) {
      out.violation = "above the requestPolicy's validRange.max " + FormatAmount(*max);
    } else if (step && min && (out.amount.nanos - min->nanos) % step->nanos != 0) {
      out.violation =
          "not min " + FormatAmount(*min) + " plus a multiple of the step " + FormatAmount(*step);
    }
    return out;
  }
  if (vit != policy->end() && vit->is_array() && !vit->empty()) {
    std::vector<Amount> valid;
    for (size_t i = 0; i < vit->size(); ++i) {
      if (!(*vit)[i].is_string()) {
        return Error{"requestPolicy.validValues[" + std::to_string(i) + "]: want a quantity"};
      }
      auto v = ParseAmount((*vit)[i].get<std::string>());
      if (!v) return Error{"requestPolicy.validValues[" + std::to_string(i) + "]: " + v.error()};
      valid.push_back(*v);
    }
    if (requested) {
      for (const Amount& v : valid) {
        if (requested->nanos <= v.nanos) {
          out.amount = v;
          break;
        }
      }
    }
    if (def && out.amount.nanos == def->nanos) return out;
    const bool listed = std::any_of(valid.begin(), valid.end(),
                                    [&](const Amount& v) { return v.nanos == out.amount.nanos; });
    if (!listed) {
      std::vector<std::string> names;
      for (const Amount& v : valid) names.push_back(FormatAmount(v));
      out.violation = "not one of the requestPolicy's validValues (" + Join(names, ", ") + ")";
    }
  }
  return out;
}

}  // namespace hami::dra
