#include "protocol/pair_score.h"

#include <exception>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/strings.h"
#include "protocol/go_json.h"
#include "protocol/node_register.h"  // AppendGoJsonString

namespace hami::protocol {

std::string EncodePairScores(const PairScores& scores) {
  std::string out = "[";
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i) out += ",";
    out += "{\"uuid\":";
    AppendGoJsonString(&out, scores[i].uuid);
    out += ",\"score\":{";
    bool first = true;
    for (const auto& [other, points] : scores[i].score) {
      if (!first) out += ",";
      first = false;
      AppendGoJsonString(&out, other);
      out += ":" + std::to_string(points);
    }
    out += "}}";
  }
  out += "]";
  return out;
}

namespace {

using Json = gojson::Json;
using gojson::Describe;

// Go's encoding/json key matching for struct fields: exact name, else ASCII case-insensitive.
// The struct has no two fields that differ only in case, so the exact match needs no priority.
bool KeyIs(std::string_view key, std::string_view name) {
  return gojson::EqualFoldAscii(key, name);
}

Status ReadScoreMap(const Json& v, const std::string& where, std::map<std::string, int64_t>* out) {
  // Go sets the map to nil for null, and otherwise adds to the map it already has.
  if (v.is_null()) {
    out->clear();
    return OkStatus();
  }
  if (!v.is_object()) return Error{where + ": field \"score\": want an object, got " + Describe(v)};
  for (const auto& [other, points] : v.items()) {
    std::string field = where + ": field \"score." + other + "\"";
    if (points.is_null()) {
      (*out)[other] = 0;  // Go stores the zero value for a null map element
      continue;
    }
    if (!points.is_number_integer()) {
      return Error{field + ": want an integer, got " + Describe(points)};
    }
    if (points.is_number_unsigned() &&
        points.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error{field + ": " + Describe(points) + " is out of range for int"};
    }
    (*out)[other] = points.get<int64_t>();
  }
  return OkStatus();
}

Status ReadEntry(const Json& v, size_t i, DevicePairScore* d) {
  std::string where = "device " + std::to_string(i);
  if (v.is_null()) return OkStatus();
  if (!v.is_object()) return Error{where + ": want an object, got " + Describe(v)};
  for (const auto& [key, value] : v.items()) {
    if (KeyIs(key, "uuid")) {
      if (value.is_null()) continue;
      if (!value.is_string()) {
        return Error{where + ": field \"uuid\": want a string, got " + Describe(value)};
      }
      d->uuid = value.get<std::string>();
    } else if (KeyIs(key, "score")) {
      Status s = ReadScoreMap(value, where, &d->score);
      if (!s) return s;
    }
  }
  return OkStatus();
}

}  // namespace

Result<PairScores> DecodePairScores(std::string_view value) {
  PairScores out;
  if (value.empty()) return out;
  try {
    Result<Json> parsed = ParseJson<Json>(value);
    if (!parsed) return Error{"pair scores: " + parsed.error() + ": " + Quote(value)};
    Json& j = *parsed;
    if (j.is_null()) return out;
    if (!j.is_array()) return Error{"pair scores: want a JSON list, got " + Describe(j)};
    for (size_t i = 0; i < j.size(); ++i) {
      Status s = ReadEntry(j[i], i, &out.emplace_back());
      if (!s) return std::move(s).take_error();
    }
    return out;
  } catch (const std::exception& e) {
    // Not expected: every access above is type-checked first. Kept so nothing escapes.
    return Error{std::string("pair scores: ") + e.what()};
  }
}

}  // namespace hami::protocol
