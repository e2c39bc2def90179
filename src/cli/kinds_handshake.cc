// hamictl kind "handshake": the node handshake value (hami.io/node-handshake and vendor variants).
// The "YYYY-MM-DD HH:MM:SS" forms carry no zone; hamictl reads them as UTC (say so in "zone").
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/kinds.h"
#include "common/json.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "protocol/handshake.h"

namespace hami::cli {
namespace {

using protocol::HandshakeKind;
using Json = nlohmann::ordered_json;

Result<std::string> DecodeHandshakeKind(std::string_view value) {
  protocol::Handshake h = protocol::ParseHandshake(value, Zone::Utc());
  if (h.kind == HandshakeKind::kOther) {
    return Error{"handshake value " + Quote(value) +
                 ": not \"Requesting[_<time>]\", \"Reported_<time>\", \"Deleted_<time>\" or "
                 "\"Reported <Go time>\""};
  }
  Json j;
  j["kind"] = std::string(protocol::HandshakeKindName(h.kind));
  j["timestamp"] = h.timestamp ? Json(*h.timestamp) : Json(nullptr);
  bool legacy = h.kind == HandshakeKind::kReportedLegacy;
  j["time"] = h.time ? Json(FormatRfc3339(*h.time, Zone::Utc())) : Json(nullptr);
  j["timeError"] = h.time_error.empty() ? Json(nullptr) : Json(h.time_error);
  j["zone"] = !h.timestamp ? Json(nullptr) : Json(legacy ? "from value" : "assumed UTC");
  j["raw"] = h.raw;
  return j.dump(2, ' ', false, Json::error_handler_t::replace);
}

// The optional string field `name`: nullopt when absent or null.
Result<std::optional<std::string>> OptionalString(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Error{std::string("handshake: field \"") + name + "\" must be a string or null"};
  }
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::string> EncodeHandshakeKind(std::string_view text) {
  Result<nlohmann::json> parsed = ParseJson(text);
  if (!parsed) return Error{"handshake: input is " + parsed.error()};
  nlohmann::json& j = *parsed;
  if (!j.is_object()) return Error{"handshake: input is not a JSON object"};
  auto kind_name = OptionalString(j, "kind");
  if (!kind_name) return std::move(kind_name).take_error();
  auto kind = protocol::HandshakeKindFromName(kind_name->value_or(""));
  if (!kind || *kind == HandshakeKind::kOther) {
    return Error{"handshake: field \"kind\" " + Quote(kind_name->value_or("")) +
                 " is not Requesting, Reported, Deleted or ReportedLegacy"};
  }
  auto timestamp = OptionalString(j, "timestamp");
  if (!timestamp) return std::move(timestamp).take_error();
  auto time = OptionalString(j, "time");
  if (!time) return std::move(time).take_error();
  // The timestamp text wins, so values with unparsable times re-encode byte for byte.
  if (timestamp->has_value()) {
    std::string prefix = *kind == HandshakeKind::kReportedLegacy
                             ? "Reported "
                             : std::string(protocol::HandshakeKindName(*kind)) + "_";
    return prefix + **timestamp;
  }
  if (time->has_value()) {
    auto t = ParseRfc3339(**time);
    if (!t) return Error{"handshake: field \"time\": " + t.error()};
    // Wall-clock forms are written in UTC, as decode reads them; the legacy form keeps the
    // offset the time was given in.
    bool legacy = *kind == HandshakeKind::kReportedLegacy;
    return protocol::FormatHandshake(*kind, t->instant,
                                     legacy ? Zone::Fixed(t->offset_seconds) : Zone::Utc());
  }
  if (*kind == HandshakeKind::kRequesting) return std::string("Requesting");
  return Error{"handshake: kind " + Quote(**kind_name) + " needs \"timestamp\" or \"time\""};
}

}  // namespace

HAMI_REGISTER_KIND("handshake",
                   "node handshake, e.g. \"Requesting_2024-01-23 04:30:04\" (times read as UTC)",
                   DecodeHandshakeKind, EncodeHandshakeKind);

}  // namespace hami::cli
