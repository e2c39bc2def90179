// hamictl and kubectl-hami kind "enflame-drs-capacity": Enflame's DRS register annotation
// (enflame.com/gcu-drs-capacity), its devices and profiles with every derived figure explicit
// (src/device/vendors/enflame). Encode writes it as Enflame's plugin (Go's encoding/json) does:
// {"devices":[{"index":"0","minor":"0","capacity":6}],"profiles":{"1g.6gb":"0",...}}.
#include <map>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/strings.h"
#include "device/vendors/enflame/enflame.h"
#include "protocol/annotation_kinds.h"
#include "protocol/node_register.h"

namespace hami::device::enflame {
namespace {

using Json = nlohmann::ordered_json;

Result<std::string> DecodeDrsCapacity(std::string_view value) {
  auto node = device::enflame::ParseDrsCapacity("-", value);
  if (!node) return std::move(node).take_error();
  Json j;
  j["devices"] = Json::array();
  for (const auto& d : node->devices) {
    j["devices"].push_back(Json{{"index", d.index}, {"minor", d.minor}, {"capacity", d.capacity}});
  }
  j["profiles"] = Json::array();
  for (const auto& [name, id] : node->profiles) {
    auto [slices, memory] = device::enflame::ParseProfileName(name);
    Json p{{"name", name}, {"id", id}, {"slices", slices}, {"memoryGB", memory}};
    p["corePercent"] = nullptr;
    for (const auto& c : device::enflame::DrsProfiles({{name, id}}, node->max_slice)) {
      p["corePercent"] = c.core_percent;
    }
    j["profiles"].push_back(std::move(p));
  }
  j["maxSlice"] = node->max_slice;
  j["maxMemoryGB"] = node->max_memory_gb;
  return j.dump(2, ' ', false, Json::error_handler_t::replace);
}

Result<std::string> EncodeDrsCapacity(std::string_view text) {
  auto parsed = ParseJson(text);
  if (!parsed) return Error{"enflame-drs-capacity: input is " + parsed.error()};
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Error{"enflame-drs-capacity: input is not a JSON object"};
  std::string out = "{\"devices\":[";
  const auto devs = j.find("devices");
  if (devs == j.end() || !devs->is_array()) {
    return Error{"enflame-drs-capacity: field \"devices\" must be a list"};
  }
  for (size_t i = 0; i < devs->size(); ++i) {
    const nlohmann::json& d = (*devs)[i];
    std::string where = "enflame-drs-capacity: devices[" + std::to_string(i) + "]";
    if (!d.is_object() || !d.contains("index") || !d["index"].is_number_integer() ||
        !d.contains("capacity") || !d["capacity"].is_number_integer()) {
      return Error{where +
                   ": want {\"index\": <integer>, \"minor\": <string>, \"capacity\": "
                   "<integer>}"};
    }
    if (i > 0) out += ',';
    out += "{\"index\":";
    protocol::AppendGoJsonString(&out, std::to_string(d["index"].get<int64_t>()));
    out += ",\"minor\":";
    std::string minor = d.contains("minor") && d["minor"].is_string()
                            ? d["minor"].get<std::string>()
                            : std::to_string(d["index"].get<int64_t>());
    protocol::AppendGoJsonString(&out, minor);
    out += ",\"capacity\":" + std::to_string(d["capacity"].get<int64_t>()) + "}";
  }
  out += "],\"profiles\":{";
  const auto profiles = j.find("profiles");
  if (profiles == j.end() || !profiles->is_array()) {
    return Error{"enflame-drs-capacity: field \"profiles\" must be a list"};
  }
  std::map<std::string, std::string> sorted;  // Go's json.Marshal sorts map keys
  for (const auto& p : *profiles) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string() || !p.contains("id") ||
        !p["id"].is_string()) {
      return Error{"enflame-drs-capacity: each profile needs string \"name\" and \"id\""};
    }
    sorted[p["name"].get<std::string>()] = p["id"].get<std::string>();
  }
  bool first = true;
  for (const auto& [name, id] : sorted) {
    if (!first) out += ',';
    first = false;
    protocol::AppendGoJsonString(&out, name);
    out += ':';
    protocol::AppendGoJsonString(&out, id);
  }
  out += "}}";
  // What we write must read back.
  if (auto check = device::enflame::ParseDrsCapacity("-", out); !check) {
    return Error{"enflame-drs-capacity: " + check.error()};
  }
  return out;
}

}  // namespace

HAMI_REGISTER_KIND("enflame-drs-capacity",
                   "Enflame DRS devices and profiles (enflame.com/gcu-drs-capacity)",
                   DecodeDrsCapacity, EncodeDrsCapacity);

}  // namespace hami::device::enflame
