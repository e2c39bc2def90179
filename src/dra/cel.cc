// CelProgram::Compile (cel.h): a recursive-descent parser of the CEL subset's tokens
// (cel_lexer.cc) into a small tree (cel_internal.h), with CEL's compile-time checks where the
// types are known statically. The evaluator is cel_eval.cc. Formats of the errors: docs/DRA.md,
// "Selectors (CEL)".
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "dra/cel.h"
#include "dra/cel_internal.h"

namespace hami::dra {
namespace {

using cel::Method;
using cel::Op;
using cel::Tok;
using cel::Token;
using cel::Type;
using cel::Where;
using Node = CelProgram::Node;
using NodePtr = std::unique_ptr<Node>;

// kube-apiserver's limit on a selector's expression.
constexpr size_t kMaxLength = 10 * 1024;
// Nesting of parentheses, lists, calls and operators; deeper is an error, not a deep recursion.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(std::string_view expr, std::vector<Token> tokens) : s_(expr), t_(std::move(tokens)) {}

  Result<NodePtr> Parse() {
    auto root = Expr();
    if (!root) return root;
    if (Peek().kind != Tok::kEnd) return Unexpected(Peek(), "end of expression");
    if ((*root)->type != Type::kDyn && (*root)->type != Type::kBool) {
      return Error{"expression must be bool, is " + std::string(cel::TypeName((*root)->type))};
    }
    return root;
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == Tok::kOp && Peek(ahead).text == op;
  }
  const Token& Take() {
    const Token& t = t_[k_];
    if (k_ + 1 < t_.size()) ++k_;
    end_ = t.end;
    return t;
  }

  Error Unsupported(std::string_view what, size_t pos) const {
    return Error{"unsupported CEL construct " + Quote(what) + " at " + Where(s_, pos)};
  }
  Error Syntax(size_t pos, const std::string& message) const {
    return Error{"syntax error at " + Where(s_, pos) + ": " + message};
  }
  Error Unexpected(const Token& t, const std::string& expected) const {
    if (t.kind == Tok::kOp) {
      static constexpr std::string_view kUnsupported[] = {"+", "-", "*", "/", "%", "?", "{"};
      for (std::string_view op : kUnsupported) {
        if (t.text == op) return Unsupported(op, t.pos);
      }
    }
    const std::string found =
        t.kind == Tok::kEnd ? "end of expression" : Quote(s_.substr(t.pos, t.end - t.pos));
    return Syntax(t.pos, "expected " + expected + ", found " + found);
  }
  Status Expect(std::string_view op) {
    if (!IsOp(op)) return Unexpected(Peek(), Quote(op));
    Take();
    return OkStatus();
  }

  // A node of `kind` over `children`, its text from `start` to the last token taken.
  Result<NodePtr> Make(Node::Kind kind, size_t start, size_t at, std::vector<NodePtr> children,
                       Type type) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->text = std::string(s_.substr(start, end_ - start));
    n->type = type;
    for (const NodePtr& c : children) n->depth = std::max(n->depth, c->depth + 1);
    if (n->depth > kMaxDepth) {
      return TooDeep(at);
    }
    n->children = std::move(children);
    return n;
  }

  Error TooDeep(size_t at) const {
    return Error{"expression nested too deeply at " + Where(s_, at) + " (at most " +
                 std::to_string(kMaxDepth) + " levels)"};
  }
  Error TypeError(std::string_view op, size_t at, Type a, Type b) const {
    return Error{"no matching overload for " + Quote(op) + " applied to (" + cel::TypeName(a) +
                 ", " + cel::TypeName(b) + ") at " + Where(s_, at)};
  }
  Error TypeError(std::string_view op, size_t at, Type a) const {
    return Error{"no matching overload for " + Quote(op) + " applied to " + cel::TypeName(a) +
                 " at " + Where(s_, at)};
  }

  // Guards the recursion of Expr (parentheses, lists, indexes, arguments).
  struct Nesting {
    explicit Nesting(int& depth) : d(depth) { ++d; }
    ~Nesting() { --d; }
    int& d;
  };

  Result<NodePtr> Expr() {
    Nesting nesting(nesting_);
    if (nesting_ > kMaxDepth) {
      return TooDeep(Peek().pos);
    }
    auto e = Logical(/*is_or=*/true);
    if (e && IsOp("?")) return Unsupported("?:", Peek().pos);
    return e;
  }

  // a || b || ... (is_or) or a && b && ..., one node with n children (CEL's logic is commutative).
  Result<NodePtr> Logical(bool is_or) {
    const size_t start = Peek().pos;
    const std::string_view op = is_or ? "||" : "&&";
    std::vector<NodePtr> operands;
    while (true) {
      const size_t at = Peek().pos;
      auto operand = is_or ? Logical(false) : Relation();
      if (!operand) return operand;
      const Type t = (*operand)->type;
      if (t != Type::kDyn && t != Type::kBool && (operands.size() > 0 || IsOp(op))) {
        return TypeError(op, at, t);
      }
      operands.push_back(std::move(*operand));
      if (!IsOp(op)) break;
      Take();
    }
    if (operands.size() == 1) return std::move(operands[0]);
    return Make(is_or ? Node::Kind::kOr : Node::Kind::kAnd, start, start, std::move(operands),
                Type::kBool);
  }

  Result<NodePtr> Relation() {
    const size_t start = Peek().pos;
    auto left = Unary();
    if (!left) return left;
    while (true) {
      const Token& t = Peek();
      if (t.kind == Tok::kOp &&
          (t.text == "+" || t.text == "-" || t.text == "*" || t.text == "/" || t.text == "%")) {
        return Unsupported(t.text, t.pos);
      }
      std::optional<Op> op;
      static constexpr std::pair<std::string_view, Op> kOps[] = {{"==", Op::kEq}, {"!=", Op::kNe},
                                                                 {"<", Op::kLt},  {"<=", Op::kLe},
                                                                 {">", Op::kGt},  {">=", Op::kGe}};
      for (const auto& [text, o] : kOps) {
        if (t.kind == Tok::kOp && t.text == text) op = o;
      }
      const bool in = t.kind == Tok::kIdent && t.text == "in";
      if (!op && !in) return left;
      const size_t at = t.pos;
      Take();
      auto right = Unary();
      if (!right) return right;
      const Type a = (*left)->type;
      const Type b = (*right)->type;
      std::vector<NodePtr> children;
      children.push_back(std::move(*left));
      children.push_back(std::move(*right));
      if (in) {
        if (b != Type::kDyn && b != Type::kList && b != Type::kAttributeDomains &&
            b != Type::kAttributes && b != Type::kCapacityDomains && b != Type::kCapacities) {
          return TypeError("in", at, a, b);
        }
        left = Make(Node::Kind::kIn, start, at, std::move(children), Type::kBool);
      } else {
        auto checked = CheckCompare(*op, at, a, b);
        if (!checked) return std::move(checked).take_error();
        left = Make(Node::Kind::kCompare, start, at, std::move(children), Type::kBool);
        if (left) (*left)->op = *op;
      }
      if (!left) return left;
    }
  }

  // CEL's checker: operands of known types must be of the same type, and ordered ones int,
  // string or bool. (An attribute's value is known only at run time: kDyn passes.)
  Status CheckCompare(Op op, size_t at, Type a, Type b) const {
    const bool ordering = op != Op::kEq && op != Op::kNe;
    auto comparable = [&](Type t) {
      if (t == Type::kDyn || t == Type::kInt || t == Type::kString || t == Type::kBool) return true;
      if (ordering) return false;
      return t == Type::kList || t == Type::kQuantity || t == Type::kSemver;
    };
    if (!comparable(a) || !comparable(b) || (a != Type::kDyn && b != Type::kDyn && a != b)) {
      return TypeError(cel::OpName(op), at, a, b);
    }
    return OkStatus();
  }

  // Prefix ! and -, applied right to left.
  Result<NodePtr> Unary() {
    std::vector<std::pair<Token, size_t>> prefixes;  // the operator and its position
    while (IsOp("!") || IsOp("-")) {
      if (IsOp("-") && Peek(1).kind == Tok::kInt) break;  // a negative literal
      prefixes.push_back({Peek(), Peek().pos});
      Take();
      if (prefixes.size() > static_cast<size_t>(kMaxDepth)) {
        return TooDeep(Peek().pos);
      }
    }
    auto operand = Member();
    if (!operand) return operand;
    for (size_t k = prefixes.size(); k-- > 0;) {
      const auto& [token, at] = prefixes[k];
      const bool is_not = token.text == "!";
      const Type t = (*operand)->type;
      if (t != Type::kDyn && t != (is_not ? Type::kBool : Type::kInt)) {
        return TypeError(token.text, at, t);
      }
      std::vector<NodePtr> children;
      children.push_back(std::move(*operand));
      operand = Make(is_not ? Node::Kind::kNot : Node::Kind::kNeg, at, at, std::move(children),
                     is_not ? Type::kBool : Type::kInt);
      if (!operand) return operand;
    }
    return operand;
  }

  // A primary followed by .field, .method(args) and [index].
  Result<NodePtr> Member() {
    const size_t start = Peek().pos;
    auto x = Primary();
    if (!x) return x;
    while (true) {
      if (IsOp(".")) {
        const size_t dot = Take().pos;
        if (IsOp("?")) return Unsupported(".?", dot);
        if (Peek().kind != Tok::kIdent) return Unexpected(Peek(), "a field name");
        const Token name = Take();
        if (IsOp("(")) {
          x = MethodCall(start, std::move(*x), name);
        } else {
          x = Select(start, std::move(*x), name);
        }
      } else if (IsOp("[")) {
        const size_t at = Take().pos;
        if (IsOp("?")) return Unsupported("[?", at);
        auto index = Expr();
        if (!index) return index;
        if (auto st = Expect("]"); !st) return std::move(st).take_error();
        x = Index(start, at, std::move(*x), std::move(*index));
      } else {
        return x;
      }
      if (!x) return x;
    }
  }

  // The static type of `operand.name` / `operand[name]`, or an error when it has no such field.
  Result<Type> FieldType(Type operand, const std::string& name, size_t at, bool is_index) const {
    switch (operand) {
      case Type::kDevice:
        if (is_index) return TypeError("[]", at, operand, Type::kString);
        if (name == "driver") return Type::kString;
        if (name == "attributes") return Type::kAttributeDomains;
        if (name == "capacity") return Type::kCapacityDomains;
        if (name == "allowMultipleAllocations") return Type::kBool;
        return Error{"undefined field " + Quote(name) + " of device at " + Where(s_, at)};
      case Type::kAttributeDomains:
        return Type::kAttributes;
      case Type::kAttributes:
        return Type::kDyn;
      case Type::kCapacityDomains:
        return Type::kCapacities;
      case Type::kCapacities:
        return Type::kQuantity;
      case Type::kDyn:
        return Type::kDyn;
      default:
        if (is_index) return TypeError("[]", at, operand, Type::kString);
        return Error{"no field " + Quote(name) + " on " + cel::TypeName(operand) + " at " +
                     Where(s_, at)};
    }
  }

  Result<NodePtr> Select(size_t start, NodePtr operand, const Token& name) {
    auto type = FieldType(operand->type, name.text, name.pos, false);
    if (!type) return std::move(type).take_error();
    std::vector<NodePtr> children;
    children.push_back(std::move(operand));
    auto n = Make(Node::Kind::kSelect, start, name.pos, std::move(children), *type);
    if (n) (*n)->string_value = name.text;
    return n;
  }

  Result<NodePtr> Index(size_t start, size_t at, NodePtr operand, NodePtr index) {
    Type type = Type::kDyn;
    if (operand->type == Type::kList || operand->type == Type::kDyn) {
      const bool list = operand->type == Type::kList;
      if (index->type != Type::kDyn && index->type != Type::kInt &&
          (list || index->type != Type::kString)) {
        return TypeError("[]", at, operand->type, index->type);
      }
    } else {
      if (index->type != Type::kDyn && index->type != Type::kString) {
        return TypeError("[]", at, operand->type, index->type);
      }
      auto field = FieldType(operand->type, "", at, true);
      if (!field) return std::move(field).take_error();
      type = *field;
    }
    std::vector<NodePtr> children;
    children.push_back(std::move(operand));
    children.push_back(std::move(index));
    return Make(Node::Kind::kIndex, start, at, std::move(children), type);
  }

  // Arguments after the name of a call: "(" [expr {"," expr}] ")".
  Result<std::vector<NodePtr>> Arguments() {
    std::vector<NodePtr> args;
    Take();  // (
    if (IsOp(")")) {
      Take();
      return args;
    }
    while (true) {
      auto arg = Expr();
      if (!arg) return std::move(arg).take_error();
      args.push_back(std::move(*arg));
      if (IsOp(")")) break;
      if (auto st = Expect(","); !st) return std::move(st).take_error();
    }
    Take();
    return args;
  }

  Result<NodePtr> MethodCall(size_t start, NodePtr receiver, const Token& name) {
    static constexpr std::pair<std::string_view, Method> kMethods[] = {
        {"startsWith", Method::kStartsWith},       {"endsWith", Method::kEndsWith},
        {"contains", Method::kContains},           {"compareTo", Method::kCompareTo},
        {"isGreaterThan", Method::kIsGreaterThan}, {"isLessThan", Method::kIsLessThan}};
    std::optional<Method> method;
    for (const auto& [text, m] : kMethods) {
      if (name.text == text) method = m;
    }
    if (!method) return Unsupported(name.text, name.pos);
    auto args = Arguments();
    if (!args) return std::move(args).take_error();
    if (args->size() != 1) {
      return Error{Quote(name.text) + " takes 1 argument, not " + std::to_string(args->size()) +
                   " at " + Where(s_, name.pos)};
    }
    const Type r = receiver->type;
    const Type a = (*args)[0]->type;
    const bool on_string = *method == Method::kStartsWith || *method == Method::kEndsWith ||
                           *method == Method::kContains;
    auto fits = [&](Type t) {
      if (t == Type::kDyn) return true;
      return on_string ? t == Type::kString : (t == Type::kQuantity || t == Type::kSemver);
    };
    if (!fits(r) || !fits(a) || (r != Type::kDyn && a != Type::kDyn && r != a)) {
      return TypeError(name.text, name.pos, r, a);
    }
    std::vector<NodePtr> children;
    children.push_back(std::move(receiver));
    children.push_back(std::move((*args)[0]));
    auto n =
        Make(Node::Kind::kMethod, start, name.pos, std::move(children),
             on_string ? Type::kBool : (*method == Method::kCompareTo ? Type::kInt : Type::kBool));
    if (n) (*n)->method = *method;
    return n;
  }

  // has(x.f), quantity(s), semver(s). Other functions are outside the subset.
  Result<NodePtr> FunctionCall(const Token& name) {
    const size_t start = name.pos;
    if (name.text == "has") {
      Take();  // (
      const size_t at = Peek().pos;
      auto arg = Expr();
      if (!arg) return arg;
      if (auto st = Expect(")"); !st) return std::move(st).take_error();
      if ((*arg)->kind != Node::Kind::kSelect) {
        return Error{
            "has() needs a field selection such as device.attributes[\"domain\"].name at " +
            Where(s_, at)};
      }
      NodePtr select = std::move(*arg);
      std::vector<NodePtr> children;
      children.push_back(std::move(select->children[0]));
      auto n = Make(Node::Kind::kHas, start, start, std::move(children), Type::kBool);
      if (n) (*n)->string_value = select->string_value;
      return n;
    }
    const bool is_quantity = name.text == "quantity";
    if (!is_quantity && name.text != "semver") return Unsupported(name.text, name.pos);
    auto args = Arguments();
    if (!args) return std::move(args).take_error();
    if (args->size() != 1) {
      return Error{Quote(name.text) + " takes 1 argument, not " + std::to_string(args->size()) +
                   " at " + Where(s_, name.pos)};
    }
    NodePtr arg = std::move((*args)[0]);
    if (arg->type != Type::kDyn && arg->type != Type::kString) {
      return TypeError(name.text, name.pos, arg->type);
    }
    std::optional<protocol::Quantity> quantity;
    std::optional<cel::Version> version;
    if (arg->kind == Node::Kind::kString) {  // checked now: an error here is the author's
      if (is_quantity) {
        auto q = protocol::ParseQuantity(arg->string_value);
        if (!q) {
          return Error{"invalid quantity " + Quote(arg->string_value) + " at " +
                       Where(s_, name.pos) + ": " + q.error()};
        }
        quantity = *q;
      } else {
        auto v = cel::ParseVersion(arg->string_value);
        if (!v) return Error{v.error() + " at " + Where(s_, name.pos)};
        version = *v;
      }
    }
    std::vector<NodePtr> children;
    children.push_back(std::move(arg));
    auto n = Make(is_quantity ? Node::Kind::kQuantity : Node::Kind::kSemver, start, start,
                  std::move(children), is_quantity ? Type::kQuantity : Type::kSemver);
    if (n) {
      (*n)->quantity = quantity;
      (*n)->version = version;
    }
    return n;
  }

  Result<NodePtr> Primary() {
    const Token& t = Peek();
    const size_t start = t.pos;
    if (t.kind == Tok::kInt || (IsOp("-") && Peek(1).kind == Tok::kInt)) {
      const bool negative = IsOp("-");
      if (negative) Take();
      const Token& number = Take();
      if (!negative && number.int_value > static_cast<uint64_t>(INT64_MAX)) {
        return Syntax(number.pos, "int literal out of range");
      }
      auto n = Make(Node::Kind::kInt, start, start, {}, Type::kInt);
      if (n) {
        (*n)->int_value = negative ? static_cast<int64_t>(0 - number.int_value)
                                   : static_cast<int64_t>(number.int_value);
      }
      return n;
    }
    if (t.kind == Tok::kString) {
      std::string value = Take().text;
      auto n = Make(Node::Kind::kString, start, start, {}, Type::kString);
      if (n) (*n)->string_value = std::move(value);
      return n;
    }
    if (IsOp("(")) {
      Take();
      auto e = Expr();
      if (!e) return e;
      if (auto st = Expect(")"); !st) return std::move(st).take_error();
      return e;
    }
    if (IsOp("[")) return List();
    if (IsOp("{")) return Unsupported("{", t.pos);
    if (IsOp(".")) return Unsupported(".", t.pos);
    if (t.kind != Tok::kIdent) return Unexpected(t, "an expression");
    const Token name = Take();
    if (IsOp("(")) return FunctionCall(name);
    if (name.text == "true" || name.text == "false") {
      auto n = Make(Node::Kind::kBool, start, start, {}, Type::kBool);
      if (n) (*n)->bool_value = name.text == "true";
      return n;
    }
    if (name.text == "device") return Make(Node::Kind::kDevice, start, start, {}, Type::kDevice);
    if (name.text == "null") return Unsupported("null", start);
    return Error{"undeclared reference to " + Quote(name.text) + " at " + Where(s_, start) +
                 " (the only variable is device)"};
  }

  Result<NodePtr> List() {
    const size_t start = Peek().pos;
    Take();  // [
    std::vector<NodePtr> elements;
    while (!IsOp("]")) {
      auto e = Expr();
      if (!e) return e;
      elements.push_back(std::move(*e));
      if (IsOp("]")) break;
      if (auto st = Expect(","); !st) return std::move(st).take_error();
    }
    Take();
    return Make(Node::Kind::kList, start, start, std::move(elements), Type::kList);
  }

  std::string_view s_;
  std::vector<Token> t_;
  size_t k_ = 0;    // the next token
  size_t end_ = 0;  // one past the last byte of the last token taken
  int nesting_ = 0;
};

}  // namespace

Result<CelProgram> CelProgram::Compile(std::string_view expression) {
  if (expression.size() > kMaxLength) {
    return Error{"expression is " + std::to_string(expression.size()) +
                 " bytes long, more than the limit of " + std::to_string(kMaxLength)};
  }
  auto tokens = cel::Tokenize(expression);
  if (!tokens) return std::move(tokens).take_error();
  if (tokens->size() == 1) return Error{"syntax error at column 1: empty expression"};
  auto root = Parser(expression, std::move(*tokens)).Parse();
  if (!root) return std::move(root).take_error();
  CelProgram program;
  program.expression_ = std::string(expression);
  program.root_ = std::shared_ptr<const Node>(std::move(*root));
  return program;
}

}  // namespace hami::dra
