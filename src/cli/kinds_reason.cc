// hamictl kind "reason": the FailedNodes / event reason string.
#include <nlohmann/json.hpp>

#include "cli/kinds.h"
#include "common/json.h"
#include "protocol/reason.h"

namespace hami::cli {
namespace {

Result<std::string> DecodeReasonKind(std::string_view value) {
  auto r = protocol::DecodeReason(value);
  if (!r) return std::move(r).take_error();
  nlohmann::ordered_json j;
  j["devicesConsidered"] = r->devices_considered;
  j["counts"] = nlohmann::ordered_json::object();
  for (const auto& [name, count] : r->counts) j["counts"][name] = count;
  return j.dump(2);
}

Result<std::string> EncodeReasonKind(std::string_view text) {
  Result<nlohmann::json> parsed = ParseJson(text);
  if (!parsed) return Error{"reason: input is " + parsed.error()};
  nlohmann::json& j = *parsed;
  if (!j.is_object()) return Error{"reason: input is not a JSON object"};
  auto total = j.find("devicesConsidered");
  if (total == j.end() || !total->is_number_integer()) {
    return Error{"reason: field \"devicesConsidered\" must be an integer"};
  }
  protocol::ReasonCounts counts;
  auto c = j.find("counts");
  if (c != j.end()) {
    if (!c->is_object()) return Error{"reason: field \"counts\" must be an object"};
    for (const auto& [name, count] : c->items()) {
      if (!count.is_number_integer()) {
        return Error{"reason: field \"counts." + name + "\" must be an integer"};
      }
      counts[name] = count.get<int>();
    }
  }
  return protocol::EncodeReason(counts, total->get<int>());
}

}  // namespace

HAMI_REGISTER_KIND("reason", "filter failure reasons, e.g. \"1/3 CardInsufficientMemory\"",
                   DecodeReasonKind, EncodeReasonKind);

}  // namespace hami::cli
