// Consumable capacity (KEP-5075) as kube-scheduler's allocator computes it: exact amounts of a
// device's capacities, what one request consumes of a capacity after the capacity's
// requestPolicy, and the quantities written back into a claim's status (docs/DRA.md, "How claims
// are allocated").
#ifndef HAMI_DRA_CAPACITY_H_
#define HAMI_DRA_CAPACITY_H_

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "protocol/quantity.h"

namespace hami::dra {

// An exact amount in nano-units (10^-9), so byte counts up to far beyond any device's and
// Kubernetes' smallest fractions add and compare without rounding. `format` is how it is written
// back (the format of the quantity it came from).
struct Amount {
  __int128 nanos = 0;
  protocol::QuantityFormat format = protocol::QuantityFormat::kDecimalSI;
};

// `q` exactly; an error when it is finer than 10^-9 or beyond +-10^20 units.
Result<Amount> ToAmount(const protocol::Quantity& q);
// ParseQuantity then ToAmount; errors quote `text`.
Result<Amount> ParseAmount(std::string_view text);

// `a` as Kubernetes serializes a quantity (canonical form): BinarySI whole numbers of at least
// 1024 with the largest of Ki..Ei that divides them ("3000Mi", "40Gi"), anything else as
// DecimalSI with an exponent that is a multiple of 3 ("30", "100", "1500", "1k", "1500m").
std::string FormatAmount(const Amount& a);

// What one allocation consumes of one capacity of a device (resource.k8s.io/v1 DeviceCapacity:
// {value, requestPolicy{default, validValues | validRange{min, max, step}}}) for a request of
// `requested` (nullopt: the request names no amount of it):
//  * not requested: the policy's default, else all of the capacity's value;
//  * requested, no policy: the amount requested;
//  * validRange: below min -> min; with a step: min + ceil((req - min) / step) * step;
//  * validValues: the smallest valid value >= req.
// `violation` is non-empty when the device cannot serve the amount: above validRange.max, not
// one of validValues, or off the step (a default is always allowed).
struct Consumption {
  Amount amount;
  std::string violation;
};
Result<Consumption> ConsumedCapacity(const nlohmann::json& capacity,
                                     const std::optional<Amount>& requested);

}  // namespace hami::dra

#endif  // HAMI_DRA_CAPACITY_H_
