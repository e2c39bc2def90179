// The subset of CEL that DeviceClass and ResourceClaim selectors use in practice
// (resource.k8s.io/v1 `selectors[].cel.expression`), evaluated against one device of a
// ResourceSlice as kube-scheduler's structured allocator does (docs/DRA.md, "Selectors (CEL)").
//
// Supported: the variable `device` and its fields `driver` (string), `attributes` and `capacity`
// (maps by domain, e.g. device.attributes["hami-core-gpu.project-hami.io"].uuid, also with a
// field name after the index: .productName, or ["productName"]), `allowMultipleAllocations`
// (bool); literals (int, string in double or single quotes, true, false, lists [a, b]); `==`,
// `!=` (values of different types are unequal, as in CEL), `<`, `<=`, `>`, `>=` on two ints,
// strings or bools; `in` (a value in a list, a key in a map); `&&`, `||` (commutative: a side
// that decides absorbs an error on the other), `!`, unary `-`, parentheses, a list's `[i]`; the
// functions `quantity("10Gi")` and `semver("1.2.3")` and the methods `compareTo(x)` (-1, 0, 1),
// `isGreaterThan(x)`, `isLessThan(x)` and `==` of quantities and of versions, `.startsWith(s)`,
// `.endsWith(s)`, `.contains(s)` of a string, and `has(device.attributes["d"].name)`.
// An attribute value of a slice is an int, bool, string or version ("1.2.3"); a capacity value is
// a quantity. A domain the device has nothing in reads as an empty map.
//
// Anything else fails to compile with an error naming the construct and its column, e.g.
// `unsupported CEL construct "matches" at column 34`; so do operands whose types are known to be
// wrong (`1 == "a"`), expressions over 10 KiB and nesting over 64 levels. Evaluation errors (a
// missing attribute without has(), comparing a string to an int with `<`) are errors naming the
// part of the expression, as CEL's runtime errors are for kube-scheduler (the claim is then
// unschedulable with that reason).
#ifndef HAMI_DRA_CEL_H_
#define HAMI_DRA_CEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "protocol/quantity.h"

namespace hami::dra {

// A semantic version (semver 2.0: major.minor.patch[-pre][+build]), as an attribute `version`.
struct Semver {
  std::string text;
};

// One attribute value of a device: int, bool, string or version.
using AttributeValue = std::variant<int64_t, bool, std::string, Semver>;

// A device as CEL sees it.
struct CelDevice {
  std::string driver;
  // domain -> name -> value. A slice's attribute "uuid" (no domain) is in the driver's domain.
  std::map<std::string, std::map<std::string, AttributeValue>> attributes;
  // domain -> name -> quantity (the capacity's `value`).
  std::map<std::string, std::map<std::string, protocol::Quantity>> capacity;
  bool allow_multiple_allocations = false;
};

// `device` (an entry of a ResourceSlice's spec.devices) of a slice whose spec.driver is
// `driver`, as CEL sees it. A qualified name "domain/name" goes to that domain; entries that
// are malformed (no value of a known kind, an unparsable quantity) are left out.
CelDevice DeviceFromSlice(const nlohmann::json& device, std::string_view driver);

// A compiled expression. Copyable; Eval is const and thread-safe.
class CelProgram {
 public:
  // Parses and checks `expression`: errors name the construct and the column (1-based).
  static Result<CelProgram> Compile(std::string_view expression);
  // Whether `device` matches. Errors: the expression's runtime errors.
  Result<bool> Eval(const CelDevice& device) const;
  const std::string& expression() const { return expression_; }

  struct Node;  // the syntax tree (cel.cc)

 private:
  std::string expression_;
  std::shared_ptr<const Node> root_;
};

}  // namespace hami::dra

#endif  // HAMI_DRA_CEL_H_
