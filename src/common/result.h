// Result<T>: a value or an error message. Errors are values in this codebase
// (docs/ARCHITECTURE.md#decisions, 7): decoders and handlers return a Result whose message names
// the field and the offending value.
#ifndef HAMI_COMMON_RESULT_H_
#define HAMI_COMMON_RESULT_H_

#include <string>
#include <utility>
#include <variant>

namespace hami {

// An error message. Construct with Error{"field \"x\": bad value \"y\""}.
struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Precondition for value()/operator*/operator->: ok().
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // Precondition: !ok().
  const std::string& error() const { return std::get<1>(v_).message; }
  // The error, for passing up: `if (!r) return r.take_error();`
  Error take_error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an error.
using Status = Result<std::monostate>;
inline Status OkStatus() { return Status(std::monostate{}); }

}  // namespace hami

#endif  // HAMI_COMMON_RESULT_H_
