// The syntax tree of a compiled CEL selector and the helpers its parser (cel.cc) and evaluator
// (cel_eval.cc) share. Private to src/dra.
#ifndef HAMI_DRA_CEL_INTERNAL_H_
#define HAMI_DRA_CEL_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "dra/cel.h"
#include "protocol/quantity.h"

namespace hami::dra::cel {

// The types of the subset. kDyn: known only at run time (an attribute's value).
enum class Type {
  kDyn,
  kBool,
  kInt,
  kString,
  kList,
  kQuantity,
  kSemver,
  kDevice,
  kAttributeDomains,  // device.attributes: domain -> kAttributes
  kAttributes,        // device.attributes["d"]: name -> attribute value
  kCapacityDomains,   // device.capacity: domain -> kCapacities
  kCapacities,        // device.capacity["d"]: name -> quantity
};

// A token of an expression.
enum class Tok { kIdent, kInt, kString, kOp, kEnd };

struct Token {
  Tok kind = Tok::kEnd;
  size_t pos = 0;    // first byte
  size_t end = 0;    // one past the last byte
  std::string text;  // an identifier, an operator, or a string literal's value
  uint64_t int_value = 0;
};

// The tokens of `expression`, the last one kEnd at its end. Errors: `syntax error at column 7: ...`
// or `unsupported CEL construct "1.5" at column 3`.
Result<std::vector<Token>> Tokenize(std::string_view expression);

// "column 7", or "line 2, column 3" past the first line of a multi-line expression (1-based,
// bytes).
std::string Where(std::string_view expression, size_t pos);

// CEL's name of a type, for messages: "int", "string", "map", ...
const char* TypeName(Type type);

// A parsed semantic version (semver 2.0). Numbers are kept as their digits (no leading zeros),
// so that any length compares correctly.
struct Version {
  std::string major, minor, patch;
  std::vector<std::string> pre;  // pre-release identifiers
};

// Strict semver 2.0: MAJOR.MINOR.PATCH[-pre][+build], no leading zeros in numbers.
Result<Version> ParseVersion(std::string_view text);

// -1, 0, 1 by semver 2.0 precedence (build metadata ignored, 1.0.0-rc.1 < 1.0.0).
int CompareVersions(const Version& a, const Version& b);

enum class Op { kEq, kNe, kLt, kLe, kGt, kGe };
const char* OpName(Op op);

enum class Method { kStartsWith, kEndsWith, kContains, kCompareTo, kIsGreaterThan, kIsLessThan };
const char* MethodName(Method m);

// `text` made fit for an error message: white space runs become one space, other control bytes
// \xNN, cut after 120 bytes with "...".
std::string Snippet(std::string_view text);

}  // namespace hami::dra::cel

namespace hami::dra {

struct CelProgram::Node {
  enum class Kind {
    kBool,      // bool_value
    kInt,       // int_value
    kString,    // string_value
    kList,      // children: the elements
    kDevice,    // the variable `device`
    kSelect,    // children[0].name
    kIndex,     // children[0][children[1]]
    kHas,       // has(children[0].name)
    kNot,       // !children[0]
    kNeg,       // -children[0]
    kAnd,       // children[0] && children[1] && ...
    kOr,        // children[0] || children[1] || ...
    kCompare,   // children[0] op children[1]
    kIn,        // children[0] in children[1]
    kQuantity,  // quantity(children[0]); `quantity` when the argument is a literal
    kSemver,    // semver(children[0]); `version` when the argument is a literal
    kMethod,    // children[0].method(children[1])
  };
  Kind kind = Kind::kBool;
  std::string text;  // the source of this subexpression, for runtime errors
  cel::Type type = cel::Type::kDyn;
  int depth = 1;  // of the tree below and including this node
  bool bool_value = false;
  int64_t int_value = 0;
  std::string string_value;  // a string literal, or the field name of kSelect / kHas
  cel::Op op = cel::Op::kEq;
  cel::Method method = cel::Method::kStartsWith;
  std::optional<protocol::Quantity> quantity;
  std::optional<cel::Version> version;
  std::vector<std::unique_ptr<Node>> children;
};

}  // namespace hami::dra

#endif  // HAMI_DRA_CEL_INTERNAL_H_
