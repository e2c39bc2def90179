// hamictl kinds for pod annotations: "pod-devices" (hami.io/vgpu-devices-allocated,
// hami.io/vgpu-devices-to-allocate and the other vendors' equivalents) and "mig-allocations"
// (hami.io/vgpu-mig-allocations).
//
// pod-devices JSON: a list with one entry per container (init containers first), each a list of
// {"uuid","type","usedmem","usedcores"}. The empty segment after the value's final ';' is not a
// container and is not shown; encode writes every container followed by ';' as HAMi does, so a
// value HAMi wrote comes back byte for byte ("" <-> []).
#include <limits>
#include <nlohmann/json.hpp>

#include "cli/kinds.h"
#include "common/json.h"
#include "common/strings.h"
#include "protocol/mig_allocations.h"
#include "protocol/pod_devices.h"

namespace hami::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string Pretty(const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace); }

std::string Describe(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

Result<std::string> DecodePodKind(std::string_view value) {
  auto r = protocol::DecodePodDevices(value);
  if (!r) return std::move(r).take_error();
  // The final segment is the empty tail of the last ';' (or all of ""), not a container.
  if (value.empty() || value.back() == ';') r->pop_back();
  Json out = Json::array();
  for (const auto& container : *r) {
    Json devices = Json::array();
    for (const auto& d : container) {
      devices.push_back(
          {{"uuid", d.uuid}, {"type", d.type}, {"usedmem", d.usedmem}, {"usedcores", d.usedcores}});
    }
    out.push_back(devices);
  }
  return Pretty(out);
}

Status ReadPodDevice(const Json& j, const std::string& where, protocol::ContainerDevice* d) {
  if (!j.is_object()) return Error{where + ": want an object, got " + Describe(j)};
  for (const char* name : {"uuid", "type"}) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) continue;
    std::string field = where + ": field \"" + name + "\"";
    if (!it->is_string()) return Error{field + ": want a string, got " + Describe(*it)};
    std::string s = it->get<std::string>();
    if (s.find_first_of(",:;") != std::string::npos) {
      return Error{field + ": " + Quote(s) + " contains ',', ':' or ';', the value's separators"};
    }
    (std::string_view(name) == "uuid" ? d->uuid : d->type) = s;
  }
  for (const char* name : {"usedmem", "usedcores"}) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) continue;
    std::string field = where + ": field \"" + name + "\"";
    bool fits =
        it->is_number_integer() &&
        (it->is_number_unsigned() ? it->get<uint64_t>() <= std::numeric_limits<int32_t>::max()
                                  : it->get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                                        it->get<int64_t>() <= std::numeric_limits<int32_t>::max());
    if (!fits) return Error{field + ": want an int32, got " + Describe(*it)};
    (std::string_view(name) == "usedmem" ? d->usedmem : d->usedcores) = it->get<int32_t>();
  }
  return OkStatus();
}

Result<std::string> EncodePodKind(std::string_view text) {
  Result<Json> parsed = ParseJson<Json>(text);
  if (!parsed) return Error{"pod-devices: " + parsed.error() + ": " + Quote(text)};
  Json& j = *parsed;
  if (!j.is_array()) {
    return Error{"pod-devices: want a JSON list of containers, got " + Quote(text)};
  }
  protocol::PodDevices pod;
  for (size_t c = 0; c < j.size(); ++c) {
    std::string where = "container " + std::to_string(c);
    if (!j[c].is_array()) return Error{where + ": want a list of devices, got " + Describe(j[c])};
    protocol::ContainerDevices& devices = pod.emplace_back();
    for (size_t i = 0; i < j[c].size(); ++i) {
      Status s =
          ReadPodDevice(j[c][i], where + " device " + std::to_string(i), &devices.emplace_back());
      if (!s) return std::move(s).take_error();
    }
  }
  return protocol::EncodePodDevices(pod);
}

Result<std::string> DecodeMigKind(std::string_view value) {
  auto r = protocol::DecodeMigAllocations(value);
  if (!r) return std::move(r).take_error();
  Json out = Json::array();
  for (const auto& a : *r) {
    Json j;
    j["containerIndex"] = a.container_index;
    j["deviceIndex"] = a.device_index;
    j["gpuUUID"] = a.gpu_uuid;
    j["profile"] = a.profile;
    j["placement"] = {{"start", a.placement.start}, {"size", a.placement.size}};
    // null = not realized yet; the decoder reads null as absent.
    j["migUUID"] = a.runtime ? Json(a.runtime->mig_uuid) : Json(nullptr);
    j["gpuInstanceID"] = a.runtime ? Json(a.runtime->gpu_instance_id) : Json(nullptr);
    j["computeInstanceID"] = a.runtime ? Json(a.runtime->compute_instance_id) : Json(nullptr);
    out.push_back(j);
  }
  return Pretty(out);
}

Result<std::string> EncodeMigKind(std::string_view text) {
  auto r = protocol::DecodeMigAllocations(text);
  if (!r) return std::move(r).take_error();
  return protocol::EncodeMigAllocations(*r);
}

}  // namespace

HAMI_REGISTER_KIND("pod-devices", "per-container devices, e.g. hami.io/vgpu-devices-allocated",
                   DecodePodKind, EncodePodKind);
HAMI_REGISTER_KIND("mig-allocations", "MIG reservations, hami.io/vgpu-mig-allocations",
                   DecodeMigKind, EncodeMigKind);

}  // namespace hami::cli
