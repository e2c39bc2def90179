// hamictl kind "node-lock": the node lock hami.io/mutex.lock, "<RFC3339>,<namespace>,<pod>" or a
// legacy bare RFC 3339 time.
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/kinds.h"
#include "common/json.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "protocol/node_lock.h"

namespace hami::cli {
namespace {

using Json = nlohmann::ordered_json;

Result<std::string> DecodeNodeLockKind(std::string_view value) {
  auto lock = protocol::ParseNodeLock(value);
  if (!lock) return std::move(lock).take_error();
  Json j;
  j["timestamp"] = std::string(value.substr(0, value.find(',')));
  j["time"] = FormatRfc3339(lock->time.instant, Zone::Utc());
  j["utcOffsetSeconds"] = lock->time.offset_seconds;
  j["legacy"] = !lock->owner.has_value();
  j["namespace"] = lock->owner ? Json(lock->owner->ns) : Json(nullptr);
  j["pod"] = lock->owner ? Json(lock->owner->pod) : Json(nullptr);
  return j.dump(2, ' ', false, Json::error_handler_t::replace);
}

Result<std::optional<std::string>> OptionalString(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Error{std::string("node-lock: field \"") + name + "\" must be a string or null"};
  }
  return std::optional<std::string>(it->get<std::string>());
}

// The timestamp text: "timestamp" verbatim, else "time" re-written with "utcOffsetSeconds".
Result<std::string> TimestampText(const nlohmann::json& j) {
  auto timestamp = OptionalString(j, "timestamp");
  if (!timestamp) return std::move(timestamp).take_error();
  if (timestamp->has_value()) return **timestamp;
  auto time = OptionalString(j, "time");
  if (!time) return std::move(time).take_error();
  if (!time->has_value()) return Error{"node-lock: needs \"timestamp\" or \"time\""};
  auto t = ParseRfc3339(**time);
  if (!t) return Error{"node-lock: field \"time\": " + t.error()};
  int offset = 0;
  auto it = j.find("utcOffsetSeconds");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() <= -86400 || it->get<int64_t>() >= 86400) {
      return Error{"node-lock: field \"utcOffsetSeconds\" must be an integer in (-86400, 86400)"};
    }
    offset = it->get<int>();
  }
  return FormatRfc3339(ZonedTime{t->instant, offset});
}

Result<std::string> EncodeNodeLockKind(std::string_view text) {
  Result<nlohmann::json> parsed = ParseJson(text);
  if (!parsed) return Error{"node-lock: input is " + parsed.error()};
  nlohmann::json& j = *parsed;
  if (!j.is_object()) return Error{"node-lock: input is not a JSON object"};
  auto stamp = TimestampText(j);
  if (!stamp) return std::move(stamp).take_error();
  auto ns = OptionalString(j, "namespace");
  if (!ns) return std::move(ns).take_error();
  auto pod = OptionalString(j, "pod");
  if (!pod) return std::move(pod).take_error();
  if (ns->has_value() != pod->has_value()) {
    return Error{"node-lock: \"namespace\" and \"pod\" must both be set or both be null"};
  }
  std::string value = *stamp;
  if (ns->has_value()) value += "," + **ns + "," + **pod;
  // Whatever we print must read back: this rejects bad times and commas inside names.
  auto check = protocol::ParseNodeLock(value);
  if (!check) return std::move(check).take_error();
  return value;
}

}  // namespace

HAMI_REGISTER_KIND(
    "node-lock", "node lock hami.io/mutex.lock, e.g. \"2026-08-21T10:11:12+08:00,default,train-0\"",
    DecodeNodeLockKind, EncodeNodeLockKind);

}  // namespace hami::cli
