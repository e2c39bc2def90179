// Errors from the Kubernetes API as values: the HTTP code plus the metav1.Status reason and
// message the server sent (docs/ARCHITECTURE.md#decisions, 7). Code 0 means no HTTP answer at all
// (connection refused, timeout, TLS failure); its reason is then "Transport" or "Timeout".
#ifndef HAMI_K8S_API_ERROR_H_
#define HAMI_K8S_API_ERROR_H_

#include <string>
#include <utility>
#include <variant>

#include "common/result.h"

namespace hami::k8s {

// metav1.StatusReason values this code base reads or writes.
inline constexpr const char* kReasonNotFound = "NotFound";
inline constexpr const char* kReasonAlreadyExists = "AlreadyExists";
inline constexpr const char* kReasonConflict = "Conflict";
inline constexpr const char* kReasonInvalid = "Invalid";
inline constexpr const char* kReasonBadRequest = "BadRequest";
inline constexpr const char* kReasonExpired = "Expired";
inline constexpr const char* kReasonGone = "Gone";
inline constexpr const char* kReasonMethodNotAllowed = "MethodNotAllowed";
inline constexpr const char* kReasonUnsupportedMediaType = "UnsupportedMediaType";
inline constexpr const char* kReasonUnauthorized = "Unauthorized";
inline constexpr const char* kReasonInternalError = "InternalError";
inline constexpr const char* kReasonTooManyRequests = "TooManyRequests";
inline constexpr const char* kReasonTimeout = "Timeout";
inline constexpr const char* kReasonTransport = "Transport";

struct ApiError {
  int code = 0;
  std::string reason;
  std::string message;

  // "409 Conflict: pods \"p\" ..." (or "Transport: ..." when code is 0).
  std::string ToString() const {
    return (code ? std::to_string(code) + " " : std::string()) + reason + ": " + message;
  }
  Error ToError() const { return Error{ToString()}; }
};

inline bool IsNotFound(const ApiError& e) { return e.code == 404; }
inline bool IsConflict(const ApiError& e) { return e.code == 409 && e.reason == kReasonConflict; }
inline bool IsAlreadyExists(const ApiError& e) { return e.reason == kReasonAlreadyExists; }
inline bool IsInvalid(const ApiError& e) { return e.code == 422; }
// Worth retrying as is: no answer (transport), 429 Too Many Requests, or a server error.
inline bool IsTransient(const ApiError& e) { return e.code == 0 || e.code == 429 || e.code >= 500; }
// A watch or list from a resourceVersion the server no longer holds: relist.
inline bool IsGone(const ApiError& e) {
  return e.code == 410 || e.reason == kReasonExpired || e.reason == kReasonGone;
}

// A value or an ApiError; the API-facing twin of hami::Result.
template <typename T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : v_(std::in_place_index<0>, std::move(value)) {}         // NOLINT: implicit
  ApiResult(ApiError error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Precondition: ok().
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // Precondition: !ok().
  const ApiError& error() const { return std::get<1>(v_); }
  ApiError take_error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, ApiError> v_;
};

using ApiStatus = ApiResult<std::monostate>;
inline ApiStatus ApiOk() { return ApiStatus(std::monostate{}); }

}  // namespace hami::k8s

#endif  // HAMI_K8S_API_ERROR_H_
