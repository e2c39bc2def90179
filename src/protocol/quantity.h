// Kubernetes resource quantities in container device requests
// (docs/protocol.md#resource-names-and-vendor-keys), e.g. limits {nvidia.com/gpu: 2,
// nvidia.com/gpumem: 3000, nvidia.com/gpucores: 30}.
//
// HAMi reads every device quantity with Quantity.Value() and treats gpumem as MiB, so "3Gi"
// (3221225472 > MaxInt32) silently drops the pod from HAMi scheduling. We report errors instead
// and read unit-suffixed memory as bytes. The rule (ParseMemoryMiB) is:
//   * no suffix, "k", "m" or a decimal exponent ("3e3"): a count of MiB that must be a whole
//     number. This must stay so: the API server rewrites a plain integer into canonical form,
//     so a user's "3000" reaches us as "3k", and "1500" stays "1500".
//   * binary suffixes Ki Mi Gi Ti Pi Ei and decimal M G T P E: bytes, converted to MiB and
//     rounded UP to a whole MiB (a request never gets less than it asked for):
//     "1.5Gi" -> 1536, "3Gi" -> 3072, "3000Mi" -> 3000, "3G" -> 2862 (2861.02...).
//     (The API server never produces these suffixes from a plain integer below 10^6, i.e. any
//     realistic MiB count.)
// The result must fit int32 MiB (HAMi's field type). Every error names the resource and value.
#ifndef HAMI_PROTOCOL_QUANTITY_H_
#define HAMI_PROTOCOL_QUANTITY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hami::protocol {

enum class QuantityFormat { kDecimalSI, kBinarySI, kDecimalExponent };

// An exact quantity: (negative ? -1 : 1) * mantissa * 10^exp10 * 2^exp2.
struct Quantity {
  bool negative = false;
  uint64_t mantissa = 0;  // significant digits, no trailing zeros; 0 for zero
  int32_t exp10 = 0;
  int32_t exp2 = 0;  // 10, 20, ... 60 for Ki .. Ei
  QuantityFormat format = QuantityFormat::kDecimalSI;
  std::string suffix;  // as written: "", "m", "k", "Mi", "e3", ...
};

// Kubernetes' grammar: [+-] (digits | digits. | .digits | digits.digits) then one of "",
// Ki Mi Gi Ti Pi Ei, m k M G T P E, or [eE][+-]digits. No white space. At most 19 significant
// digits and exponents within +-999 (else an error rather than a rounded value).
Result<Quantity> ParseQuantity(std::string_view text);

// -1, 0 or 1 as `a` is less than, equal to or greater than `b`, exactly (no rounding at any
// magnitude): "1Gi" == "1073741824", "1.5Gi" > "1.5G", "-0" == "0". Kubernetes' Quantity.Cmp.
int CompareQuantities(const Quantity& a, const Quantity& b);

// `q` as a whole number of 10^`unit_exp10` units (0: units, -3: milli-units), or nullopt when it
// is not a whole number of them or does not fit int64: ("1Mi", 0) = 1048576, ("1.5", -3) = 1500,
// ("1.5", 0) = nullopt, ("0.0001", -3) = nullopt.
std::optional<int64_t> ExactScaledValue(const Quantity& q, int unit_exp10);

// Device memory in MiB by the rule above; `resource` (e.g. "nvidia.com/gpumem") names the field
// in errors. Negative, empty, fractional MiB counts, garbage or > 2147483647 MiB are errors.
Result<int32_t> ParseMemoryMiB(std::string_view resource, std::string_view value);

// A whole, non-negative count or percentage that fits int32 ("2", "30", "2e0", "1k"); "500m",
// "1.5", negatives and garbage are errors naming `resource` and the value.
Result<int32_t> ParseDeviceCount(std::string_view resource, std::string_view value);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_QUANTITY_H_
