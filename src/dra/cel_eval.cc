// CelProgram::Eval (cel.h): a tree-walking evaluator of the tree cel.cc builds, with CEL's
// runtime semantics (commutative && and || that absorb an error when the other side decides,
// heterogeneous equality, no implicit conversions).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/strings.h"
#include "dra/cel.h"
#include "dra/cel_internal.h"

namespace hami::dra {
namespace cel {

const char* TypeName(Type type) {
  switch (type) {
    case Type::kDyn:
      return "dyn";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kString:
      return "string";
    case Type::kList:
      return "list";
    case Type::kQuantity:
      return "quantity";
    case Type::kSemver:
      return "semver";
    case Type::kDevice:
      return "device";
    case Type::kAttributeDomains:
    case Type::kAttributes:
    case Type::kCapacityDomains:
    case Type::kCapacities:
      return "map";
  }
  return "dyn";
}

const char* OpName(Op op) {
  switch (op) {
    case Op::kEq:
      return "==";
    case Op::kNe:
      return "!=";
    case Op::kLt:
      return "<";
    case Op::kLe:
      return "<=";
    case Op::kGt:
      return ">";
    case Op::kGe:
      return ">=";
  }
  return "==";
}

const char* MethodName(Method m) {
  switch (m) {
    case Method::kStartsWith:
      return "startsWith";
    case Method::kEndsWith:
      return "endsWith";
    case Method::kContains:
      return "contains";
    case Method::kCompareTo:
      return "compareTo";
    case Method::kIsGreaterThan:
      return "isGreaterThan";
    case Method::kIsLessThan:
      return "isLessThan";
  }
  return "";
}

std::string Snippet(std::string_view text) {
  constexpr size_t kMax = 120;
  std::string out;
  bool space = false;
  for (size_t i = 0; i < text.size() && out.size() < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      if (!space) out += ' ';
      space = true;
      continue;
    }
    space = false;
    if (c < 0x20 || c == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out.size() >= kMax) out += "...";
  return out;
}

}  // namespace cel

namespace {

using cel::Method;
using cel::Op;
using cel::Type;
using Node = CelProgram::Node;
using Kind = Node::Kind;

using Attributes = std::map<std::string, AttributeValue>;
using AttributeDomains = std::map<std::string, Attributes>;
using Capacities = std::map<std::string, protocol::Quantity>;
using CapacityDomains = std::map<std::string, Capacities>;

// One of the device's maps; nullptr for a domain the device has nothing in (CEL sees an empty
// map there, as kube-scheduler's does, so has() on it is false rather than an error).
using MapRef = std::variant<const AttributeDomains*, const Attributes*, const CapacityDomains*,
                            const Capacities*>;

struct Value;
using List = std::shared_ptr<const std::vector<Value>>;

// A value during evaluation. Strings are views: every string of the subset is a literal of the
// tree or a value of the device, both of which outlive an Eval.
struct Value {
  std::variant<bool, int64_t, std::string_view, List, protocol::Quantity, cel::Version, MapRef,
               const CelDevice*>
      v;
};

Type TypeOf(const Value& value) {
  switch (value.v.index()) {
    case 0:
      return Type::kBool;
    case 1:
      return Type::kInt;
    case 2:
      return Type::kString;
    case 3:
      return Type::kList;
    case 4:
      return Type::kQuantity;
    case 5:
      return Type::kSemver;
    case 6: {
      static constexpr Type kMaps[] = {Type::kAttributeDomains, Type::kAttributes,
                                       Type::kCapacityDomains, Type::kCapacities};
      return kMaps[std::get<MapRef>(value.v).index()];
    }
    default:
      return Type::kDevice;
  }
}

const char* TypeNameOf(const Value& value) { return cel::TypeName(TypeOf(value)); }

class Evaluator {
 public:
  explicit Evaluator(const CelDevice& device) : device_(device) {}

  Result<Value> Eval(const Node& n) {
    switch (n.kind) {
      case Kind::kBool:
        return Value{n.bool_value};
      case Kind::kInt:
        return Value{n.int_value};
      case Kind::kString:
        return Value{std::string_view(n.string_value)};
      case Kind::kDevice:
        return Value{&device_};
      case Kind::kList:
        return EvalList(n);
      case Kind::kSelect:
        return EvalSelect(n);
      case Kind::kIndex:
        return EvalIndex(n);
      case Kind::kHas:
        return EvalHas(n);
      case Kind::kNot:
        return EvalNot(n);
      case Kind::kNeg:
        return EvalNeg(n);
      case Kind::kAnd:
        return EvalLogical(n, /*is_or=*/false);
      case Kind::kOr:
        return EvalLogical(n, /*is_or=*/true);
      case Kind::kCompare:
        return EvalCompare(n);
      case Kind::kIn:
        return EvalIn(n);
      case Kind::kQuantity:
        return EvalQuantity(n);
      case Kind::kSemver:
        return EvalSemver(n);
      case Kind::kMethod:
        return EvalMethod(n);
    }
    return Error{"internal error: unknown node in " + cel::Snippet(n.text)};
  }

 private:
  static Error NoOverload(std::string_view op, const Value& a, const Node& n) {
    return Error{"no such overload: " + Quote(op) + " applied to " + TypeNameOf(a) + " in " +
                 cel::Snippet(n.text)};
  }
  static Error NoOverload(std::string_view op, const Value& a, const Value& b, const Node& n) {
    return Error{"no such overload: " + Quote(op) + " applied to (" + TypeNameOf(a) + ", " +
                 TypeNameOf(b) + ") in " + cel::Snippet(n.text)};
  }

  Result<Value> EvalList(const Node& n) {
    auto list = std::make_shared<std::vector<Value>>();
    list->reserve(n.children.size());
    for (const auto& c : n.children) {
      auto e = Eval(*c);
      if (!e) return e;
      list->push_back(std::move(*e));
    }
    return Value{List(std::move(list))};
  }

  // container[key] / container.key; nullopt when a map lacks the key. A domain the device has
  // nothing in reads as an empty map (kube-scheduler's default), but is absent for `presence`
  // (has() and in).
  Result<std::optional<Value>> Lookup(const Value& container, std::string_view key,
                                      const Node& container_node, std::string_view op,
                                      bool presence = false) {
    if (const auto* device = std::get_if<const CelDevice*>(&container.v)) {
      if (key == "driver") return std::optional<Value>(Value{std::string_view((*device)->driver)});
      if (key == "attributes") return std::optional<Value>(Value{MapRef(&(*device)->attributes)});
      if (key == "capacity") return std::optional<Value>(Value{MapRef(&(*device)->capacity)});
      if (key == "allowMultipleAllocations") {
        return std::optional<Value>(Value{(*device)->allow_multiple_allocations});
      }
      return Error{"no such field: " + Quote(key) + " in " + cel::Snippet(container_node.text)};
    }
    const auto* map = std::get_if<MapRef>(&container.v);
    if (map == nullptr) return NoOverload(op, container, container_node);
    const std::string k(key);
    if (const auto* domains = std::get_if<const AttributeDomains*>(map)) {
      auto it = (*domains)->find(k);
      if (presence && it == (*domains)->end()) return std::optional<Value>();
      return std::optional<Value>(Value{MapRef(it == (*domains)->end() ? nullptr : &it->second)});
    }
    if (const auto* domains = std::get_if<const CapacityDomains*>(map)) {
      auto it = (*domains)->find(k);
      if (presence && it == (*domains)->end()) return std::optional<Value>();
      return std::optional<Value>(Value{
          MapRef(it == (*domains)->end() ? static_cast<const Capacities*>(nullptr) : &it->second)});
    }
    if (const auto* caps = std::get_if<const Capacities*>(map)) {
      if (*caps == nullptr) return std::optional<Value>();
      auto it = (*caps)->find(k);
      if (it == (*caps)->end()) return std::optional<Value>();
      return std::optional<Value>(Value{it->second});
    }
    const Attributes* attrs = std::get<const Attributes*>(*map);
    if (attrs == nullptr) return std::optional<Value>();
    auto it = attrs->find(k);
    if (it == attrs->end()) return std::optional<Value>();
    return FromAttribute(it->second, container_node, key);
  }

  static Result<std::optional<Value>> FromAttribute(const AttributeValue& a, const Node& container,
                                                    std::string_view key) {
    if (const auto* i = std::get_if<int64_t>(&a)) return std::optional<Value>(Value{*i});
    if (const auto* b = std::get_if<bool>(&a)) return std::optional<Value>(Value{*b});
    if (const auto* s = std::get_if<std::string>(&a)) {
      return std::optional<Value>(Value{std::string_view(*s)});
    }
    auto v = cel::ParseVersion(std::get<Semver>(a).text);
    if (!v) {
      return Error{v.error() + " in " + cel::Snippet(container.text) + "." + std::string(key)};
    }
    return std::optional<Value>(Value{std::move(*v)});
  }

  Result<Value> Found(Result<std::optional<Value>> found, std::string_view key,
                      const Node& container) {
    if (!found) return std::move(found).take_error();
    if (!*found) {
      return Error{"no such key: " + Quote(key) + " in " + cel::Snippet(container.text)};
    }
    return std::move(**found);
  }

  Result<Value> EvalSelect(const Node& n) {
    const Node& container = *n.children[0];
    auto c = Eval(container);
    if (!c) return c;
    return Found(Lookup(*c, n.string_value, container, "." + n.string_value), n.string_value,
                 container);
  }

  Result<Value> EvalIndex(const Node& n) {
    const Node& container = *n.children[0];
    auto c = Eval(container);
    if (!c) return c;
    auto index = Eval(*n.children[1]);
    if (!index) return index;
    if (const auto* list = std::get_if<List>(&c->v)) {
      const auto* i = std::get_if<int64_t>(&index->v);
      if (i == nullptr) return NoOverload("[]", *c, *index, n);
      if (*i < 0 || static_cast<uint64_t>(*i) >= (*list)->size()) {
        return Error{"index " + std::to_string(*i) + " out of range in " + cel::Snippet(n.text)};
      }
      return (**list)[static_cast<size_t>(*i)];
    }
    const auto* key = std::get_if<std::string_view>(&index->v);
    if (key == nullptr) return NoOverload("[]", *c, *index, n);
    return Found(Lookup(*c, *key, container, "[]"), *key, container);
  }

  Result<Value> EvalHas(const Node& n) {
    const Node& container = *n.children[0];
    auto c = Eval(container);
    if (!c) return c;
    auto found = Lookup(*c, n.string_value, container, "has", true);
    if (!found) return std::move(found).take_error();
    return Value{found->has_value()};
  }

  Result<Value> EvalNot(const Node& n) {
    auto x = Eval(*n.children[0]);
    if (!x) return x;
    const auto* b = std::get_if<bool>(&x->v);
    if (b == nullptr) return NoOverload("!", *x, n);
    return Value{!*b};
  }

  Result<Value> EvalNeg(const Node& n) {
    auto x = Eval(*n.children[0]);
    if (!x) return x;
    const auto* i = std::get_if<int64_t>(&x->v);
    if (i == nullptr) return NoOverload("-", *x, n);
    if (*i == INT64_MIN) return Error{"int overflow in " + cel::Snippet(n.text)};
    return Value{-*i};
  }

  // CEL's && and ||: false (true) from any operand decides, even when another is an error;
  // otherwise the first error is the result.
  Result<Value> EvalLogical(const Node& n, bool is_or) {
    std::optional<Error> error;
    for (const auto& c : n.children) {
      auto x = Eval(*c);
      if (!x) {
        if (!error) error = std::move(x).take_error();
        continue;
      }
      const auto* b = std::get_if<bool>(&x->v);
      if (b == nullptr) {
        if (!error) error = NoOverload(is_or ? "||" : "&&", *x, *c);
        continue;
      }
      if (*b == is_or) return Value{is_or};
    }
    if (error) return std::move(*error);
    return Value{!is_or};
  }

  // CEL's heterogeneous equality: values of different types are not equal.
  Result<bool> Equal(const Value& a, const Value& b, const Node& n) {
    if (a.v.index() != b.v.index()) return false;
    if (const auto* x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v);
    if (const auto* x = std::get_if<int64_t>(&a.v)) return *x == std::get<int64_t>(b.v);
    if (const auto* x = std::get_if<std::string_view>(&a.v)) {
      return *x == std::get<std::string_view>(b.v);
    }
    if (const auto* x = std::get_if<protocol::Quantity>(&a.v)) {
      return protocol::CompareQuantities(*x, std::get<protocol::Quantity>(b.v)) == 0;
    }
    if (const auto* x = std::get_if<cel::Version>(&a.v)) {
      return cel::CompareVersions(*x, std::get<cel::Version>(b.v)) == 0;
    }
    if (const auto* x = std::get_if<List>(&a.v)) {
      const auto& y = std::get<List>(b.v);
      if ((*x)->size() != y->size()) return false;
      for (size_t i = 0; i < (*x)->size(); ++i) {
        auto e = Equal((**x)[i], (*y)[i], n);
        if (!e) return e;
        if (!*e) return false;
      }
      return true;
    }
    return NoOverload("==", a, b, n);  // maps and the device
  }

  Result<Value> EvalCompare(const Node& n) {
    auto a = Eval(*n.children[0]);
    if (!a) return a;
    auto b = Eval(*n.children[1]);
    if (!b) return b;
    if (n.op == Op::kEq || n.op == Op::kNe) {
      auto eq = Equal(*a, *b, n);
      if (!eq) return std::move(eq).take_error();
      return Value{*eq == (n.op == Op::kEq)};
    }
    int c = 0;
    if (a->v.index() != b->v.index()) return NoOverload(cel::OpName(n.op), *a, *b, n);
    if (const auto* x = std::get_if<int64_t>(&a->v)) {
      const int64_t y = std::get<int64_t>(b->v);
      c = *x < y ? -1 : (*x > y ? 1 : 0);
    } else if (const auto* x = std::get_if<std::string_view>(&a->v)) {
      c = x->compare(std::get<std::string_view>(b->v));  // bytes of UTF-8: code point order
    } else if (const auto* x = std::get_if<bool>(&a->v)) {
      c = static_cast<int>(*x) - static_cast<int>(std::get<bool>(b->v));
    } else {
      return NoOverload(cel::OpName(n.op), *a, *b, n);
    }
    switch (n.op) {
      case Op::kLt:
        return Value{c < 0};
      case Op::kLe:
        return Value{c <= 0};
      case Op::kGt:
        return Value{c > 0};
      default:
        return Value{c >= 0};
    }
  }

  Result<Value> EvalIn(const Node& n) {
    auto a = Eval(*n.children[0]);
    if (!a) return a;
    auto b = Eval(*n.children[1]);
    if (!b) return b;
    if (const auto* list = std::get_if<List>(&b->v)) {
      for (const Value& e : **list) {
        auto eq = Equal(*a, e, n);
        if (!eq) return std::move(eq).take_error();
        if (*eq) return Value{true};
      }
      return Value{false};
    }
    if (std::holds_alternative<MapRef>(b->v)) {
      const auto* key = std::get_if<std::string_view>(&a->v);
      if (key == nullptr) return Value{false};  // a map of the device has string keys only
      auto found = Lookup(*b, *key, *n.children[1], "in", true);
      if (!found) return std::move(found).take_error();
      return Value{found->has_value()};
    }
    return NoOverload("in", *a, *b, n);
  }

  Result<Value> EvalQuantity(const Node& n) {
    if (n.quantity) return Value{*n.quantity};
    auto arg = Eval(*n.children[0]);
    if (!arg) return arg;
    const auto* s = std::get_if<std::string_view>(&arg->v);
    if (s == nullptr) return NoOverload("quantity", *arg, n);
    auto q = protocol::ParseQuantity(*s);
    if (!q) return Error{"invalid quantity " + Quote(*s) + " in " + cel::Snippet(n.text)};
    return Value{std::move(*q)};
  }

  Result<Value> EvalSemver(const Node& n) {
    if (n.version) return Value{*n.version};
    auto arg = Eval(*n.children[0]);
    if (!arg) return arg;
    const auto* s = std::get_if<std::string_view>(&arg->v);
    if (s == nullptr) return NoOverload("semver", *arg, n);
    auto v = cel::ParseVersion(*s);
    if (!v) return Error{v.error() + " in " + cel::Snippet(n.text)};
    return Value{std::move(*v)};
  }

  Result<Value> EvalMethod(const Node& n) {
    auto r = Eval(*n.children[0]);
    if (!r) return r;
    auto a = Eval(*n.children[1]);
    if (!a) return a;
    const char* name = cel::MethodName(n.method);
    if (n.method == Method::kStartsWith || n.method == Method::kEndsWith ||
        n.method == Method::kContains) {
      const auto* s = std::get_if<std::string_view>(&r->v);
      const auto* x = std::get_if<std::string_view>(&a->v);
      if (s == nullptr || x == nullptr) return NoOverload(name, *r, *a, n);
      if (n.method == Method::kStartsWith) return Value{s->substr(0, x->size()) == *x};
      if (n.method == Method::kEndsWith) {
        return Value{s->size() >= x->size() && s->substr(s->size() - x->size()) == *x};
      }
      return Value{s->find(*x) != std::string_view::npos};
    }
    int c = 0;
    const auto* q = std::get_if<protocol::Quantity>(&r->v);
    const auto* qa = std::get_if<protocol::Quantity>(&a->v);
    const auto* v = std::get_if<cel::Version>(&r->v);
    const auto* va = std::get_if<cel::Version>(&a->v);
    if (q != nullptr && qa != nullptr) {
      c = protocol::CompareQuantities(*q, *qa);
    } else if (v != nullptr && va != nullptr) {
      c = cel::CompareVersions(*v, *va);
    } else {
      return NoOverload(name, *r, *a, n);
    }
    if (n.method == Method::kCompareTo) return Value{static_cast<int64_t>(c)};
    return Value{n.method == Method::kIsGreaterThan ? c > 0 : c < 0};
  }

  const CelDevice& device_;
};

}  // namespace

Result<bool> CelProgram::Eval(const CelDevice& device) const {
  if (root_ == nullptr) return Error{"empty CEL program (not compiled)"};
  auto result = Evaluator(device).Eval(*root_);
  if (!result) return std::move(result).take_error();
  const auto* b = std::get_if<bool>(&result->v);
  if (b == nullptr) {
    return Error{"expression evaluated to " + std::string(TypeNameOf(*result)) + ", not bool"};
  }
  return *b;
}

}  // namespace hami::dra
