// hamictl kinds for node annotations: "node-register" (the JSON register annotation, e.g.
// hami.io/node-nvidia-register), "node-register-legacy" (the colon form, e.g.
// hami.io/node-dcu-register) and "pair-score" (hami.io/node-nvidia-score).
//
// decode prints a JSON list with every device field explicit (zero values included); encode reads
// that list back (missing fields default, as in the annotation) and prints the exact value.
#include <nlohmann/json.hpp>

#include "cli/kinds.h"
#include "common/strings.h"
#include "protocol/node_register.h"
#include "protocol/pair_score.h"

namespace hami::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string Pretty(const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace); }

Json MigProfileJson(const protocol::MigProfile& p) {
  Json placements = Json::array();
  for (const auto& pl : p.placements)
    placements.push_back({{"start", pl.start}, {"size", pl.size}});
  return {{"name", p.name},
          {"memoryMB", p.memory_mb},
          {"core", p.core},
          {"sliceCount", p.slice_count},
          {"placements", placements}};
}

// Every field, in the annotation's key order. The legacy form has no MIG profiles.
Json DeviceJson(const protocol::DeviceInfo& d, bool with_mig) {
  Json j;
  j["id"] = d.id;
  j["index"] = d.index;
  j["count"] = d.count;
  j["devmem"] = d.devmem;
  j["devcore"] = d.devcore;
  j["type"] = d.type;
  j["numa"] = d.numa;
  j["mode"] = d.mode;
  if (with_mig) {
    j["migProfiles"] = Json::array();
    for (const auto& p : d.mig_profiles) j["migProfiles"].push_back(MigProfileJson(p));
  }
  j["health"] = d.health;
  return j;
}

std::string DevicesJson(const std::vector<protocol::DeviceInfo>& devices, bool with_mig) {
  Json out = Json::array();
  for (const auto& d : devices) out.push_back(DeviceJson(d, with_mig));
  return Pretty(out);
}

Result<std::string> DecodeRegisterKind(std::string_view value) {
  auto r = protocol::DecodeNodeRegister(value);
  if (!r) return std::move(r).take_error();
  return DevicesJson(*r, /*with_mig=*/true);
}

// The printed JSON uses the annotation's own key names, so the annotation decoder reads it.
Result<std::string> EncodeRegisterKind(std::string_view text) {
  auto r = protocol::DecodeNodeRegister(text);
  if (!r) return std::move(r).take_error();
  return protocol::EncodeNodeRegister(*r);
}

Result<std::string> DecodeLegacyKind(std::string_view value) {
  auto r = protocol::DecodeNodeRegisterLegacy(value);
  if (!r) return std::move(r).take_error();
  return DevicesJson(*r, /*with_mig=*/false);
}

Result<std::string> EncodeLegacyKind(std::string_view text) {
  auto r = protocol::DecodeNodeRegister(text);
  if (!r) return std::move(r).take_error();
  for (size_t i = 0; i < r->size(); ++i) {
    const protocol::DeviceInfo& d = (*r)[i];
    auto where = "device " + std::to_string(i) + ": ";
    if (!d.mig_profiles.empty()) {
      return Error{where + "field \"migProfiles\": the legacy form cannot carry MIG profiles"};
    }
    const std::pair<const char*, const std::string*> texts[] = {
        {"id", &d.id}, {"type", &d.type}, {"mode", &d.mode}};
    for (const auto& [name, s] : texts) {
      if (s->find_first_of(",:") != std::string::npos) {
        return Error{where + "field \"" + name + "\": " + Quote(*s) +
                     " contains ',' or ':', which the legacy form uses as separators"};
      }
    }
  }
  return protocol::EncodeNodeRegisterLegacy(*r);
}

Result<std::string> DecodePairScoreKind(std::string_view value) {
  auto r = protocol::DecodePairScores(value);
  if (!r) return std::move(r).take_error();
  Json out = Json::array();
  for (const auto& d : *r) {
    Json score = Json::object();
    for (const auto& [other, points] : d.score) score[other] = points;
    out.push_back({{"uuid", d.uuid}, {"score", score}});
  }
  return Pretty(out);
}

Result<std::string> EncodePairScoreKind(std::string_view text) {
  auto r = protocol::DecodePairScores(text);
  if (!r) return std::move(r).take_error();
  return protocol::EncodePairScores(*r);
}

}  // namespace

HAMI_REGISTER_KIND("node-register", "JSON node device register, e.g. hami.io/node-nvidia-register",
                   DecodeRegisterKind, EncodeRegisterKind);
HAMI_REGISTER_KIND("node-register-legacy",
                   "colon node device register, e.g. hami.io/node-dcu-register", DecodeLegacyKind,
                   EncodeLegacyKind);
HAMI_REGISTER_KIND("pair-score", "GPU pair scores, hami.io/node-nvidia-score", DecodePairScoreKind,
                   EncodePairScoreKind);

}  // namespace hami::cli
