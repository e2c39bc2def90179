// Internal to src/protocol: reading JSON the way Go's encoding/json fills a struct, shared by the
// decoders of node register, MIG allocations and pair scores. A null member leaves the field as
// it is; a key matches the field of that exact name, else one equal to it ignoring ASCII case;
// errors name the field path given in `where` and show the offending value.
#ifndef HAMI_PROTOCOL_GO_JSON_H_
#define HAMI_PROTOCOL_GO_JSON_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hami::protocol::gojson {

using Json = nlohmann::ordered_json;

// A JSON value for an error message, cut to 80 characters.
inline std::string Describe(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 80) + "...";
  return s;
}

inline bool EqualFoldAscii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] - 'A' + 'a') : b[i];
    if (x != y) return false;
  }
  return true;
}

// The field name `key` selects among `names`, or "" when none.
inline std::string_view MatchKey(std::string_view key,
                                 std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (n == key) return n;
  }
  for (std::string_view n : names) {
    if (EqualFoldAscii(n, key)) return n;
  }
  return {};
}

// An integer that must fit T (Go's `type_name`, for the message).
template <typename T>
Status ReadInt(const Json& v, const std::string& where, const char* type_name, T* out) {
  if (v.is_null()) return OkStatus();
  if (!v.is_number_integer()) return Error{where + ": want an integer, got " + Describe(v)};
  bool in_range;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    in_range = u <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    if (in_range) *out = static_cast<T>(u);
  } else {
    int64_t s = v.get<int64_t>();
    if constexpr (std::is_signed_v<T>) {
      in_range = s >= std::numeric_limits<T>::min() && s <= std::numeric_limits<T>::max();
    } else {
      in_range = s >= 0 && static_cast<uint64_t>(s) <= std::numeric_limits<T>::max();
    }
    if (in_range) *out = static_cast<T>(s);
  }
  if (!in_range) return Error{where + ": " + Describe(v) + " is out of range for " + type_name};
  return OkStatus();
}

inline Status ReadString(const Json& v, const std::string& where, std::string* out) {
  if (v.is_null()) return OkStatus();
  if (!v.is_string()) return Error{where + ": want a string, got " + Describe(v)};
  *out = v.get<std::string>();
  return OkStatus();
}

inline Status ReadBool(const Json& v, const std::string& where, bool* out) {
  if (v.is_null()) return OkStatus();
  if (!v.is_boolean()) return Error{where + ": want true or false, got " + Describe(v)};
  *out = v.get<bool>();
  return OkStatus();
}

}  // namespace hami::protocol::gojson

#endif  // HAMI_PROTOCOL_GO_JSON_H_
