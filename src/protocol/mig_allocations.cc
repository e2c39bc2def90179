#include "protocol/mig_allocations.h"

#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "common/json.h"
#include "common/strings.h"
#include "protocol/go_json.h"

namespace hami::protocol {

std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations) {
  std::string out = "[";
  for (size_t i = 0; i < allocations.size(); ++i) {
    const MigAllocation& a = allocations[i];
    if (i) out += ",";
    out += "{\"containerIndex\":" + std::to_string(a.container_index) +
           ",\"deviceIndex\":" + std::to_string(a.device_index) + ",\"gpuUUID\":";
    AppendGoJsonString(&out, a.gpu_uuid);
    out += ",\"profile\":";
    AppendGoJsonString(&out, a.profile);
    out += ",\"placement\":{\"start\":" + std::to_string(a.placement.start) +
           ",\"size\":" + std::to_string(a.placement.size) + "}";
    if (a.runtime) {
      // Go omits an empty migUUID (omitempty); the ids are pointers, written whenever set.
      if (!a.runtime->mig_uuid.empty()) {
        out += ",\"migUUID\":";
        AppendGoJsonString(&out, a.runtime->mig_uuid);
      }
      out += ",\"gpuInstanceID\":" + std::to_string(a.runtime->gpu_instance_id) +
             ",\"computeInstanceID\":" + std::to_string(a.runtime->compute_instance_id);
    }
    out += "}";
  }
  out += "]";
  return out;
}

namespace {

using Json = gojson::Json;
using gojson::Describe;
using gojson::MatchKey;
using gojson::ReadString;

Status ReadPlacement(const Json& v, const std::string& where, MigPlacement* p) {
  if (v.is_null()) return OkStatus();
  if (!v.is_object()) return Error{where + ": want an object, got " + Describe(v)};
  for (const auto& [key, value] : v.items()) {
    std::string_view name = MatchKey(key, {"start", "size"});
    if (name.empty()) continue;
    Status s =
        gojson::ReadInt(value, where.substr(0, where.size() - 1) + "." + std::string(name) + "\"",
                        "uint32", name == "start" ? &p->start : &p->size);
    if (!s) return s;
  }
  return OkStatus();
}

// Which runtime fields the JSON carried; Go tells them apart by nil pointers.
struct RuntimeSeen {
  bool gpu_instance = false;
  bool compute_instance = false;
};

Status ReadAllocationFields(const Json& v, const std::string& where, MigAllocation* a,
                            MigRuntimeIdentity* rt, RuntimeSeen* seen) {
  if (v.is_null()) return OkStatus();
  if (!v.is_object()) return Error{where + ": want an object, got " + Describe(v)};
  for (const auto& [key, value] : v.items()) {
    std::string_view name =
        MatchKey(key, {"containerIndex", "deviceIndex", "gpuUUID", "profile", "placement",
                       "migUUID", "gpuInstanceID", "computeInstanceID"});
    if (name.empty()) continue;
    std::string field = where + ": field \"" + std::string(name) + "\"";
    Status s = OkStatus();
    if (name == "containerIndex") {
      s = gojson::ReadInt(value, field, "int", &a->container_index);
    } else if (name == "deviceIndex") {
      s = gojson::ReadInt(value, field, "int", &a->device_index);
    } else if (name == "gpuUUID") {
      s = ReadString(value, field, &a->gpu_uuid);
    } else if (name == "profile") {
      s = ReadString(value, field, &a->profile);
    } else if (name == "placement") {
      s = ReadPlacement(value, field, &a->placement);
    } else if (name == "migUUID") {
      s = ReadString(value, field, &rt->mig_uuid);
    } else if (name == "gpuInstanceID") {
      s = gojson::ReadInt(value, field, "uint32", &rt->gpu_instance_id);
      if (!value.is_null()) seen->gpu_instance = true;
    } else {
      s = gojson::ReadInt(value, field, "uint32", &rt->compute_instance_id);
      if (!value.is_null()) seen->compute_instance = true;
    }
    if (!s) return s;
  }
  return OkStatus();
}

Status ReadAllocation(const Json& v, size_t i, MigAllocation* a) {
  std::string where = "MIG allocation " + std::to_string(i);
  MigRuntimeIdentity rt;
  RuntimeSeen seen;
  Status s = ReadAllocationFields(v, where, a, &rt, &seen);
  if (!s) return s;
  auto fail = [&](std::string_view field, const std::string& problem) {
    return Error{where + ": field \"" + std::string(field) + "\": " + problem};
  };
  if (a->container_index < 0) {
    return fail("containerIndex",
                "must not be negative, got " + std::to_string(a->container_index));
  }
  if (a->device_index < 0) {
    return fail("deviceIndex", "must not be negative, got " + std::to_string(a->device_index));
  }
  if (a->gpu_uuid.empty()) return fail("gpuUUID", "must not be empty");
  if (a->profile.empty()) return fail("profile", "must not be empty");
  if (a->placement.size == 0) return fail("placement.size", "must not be 0");
  int present =
      (rt.mig_uuid.empty() ? 0 : 1) + (seen.gpu_instance ? 1 : 0) + (seen.compute_instance ? 1 : 0);
  if (present != 0 && present != 3) {
    return Error{where + ": partial runtime identity (migUUID " +
                 (rt.mig_uuid.empty() ? "absent" : Quote(rt.mig_uuid)) + ", gpuInstanceID " +
                 (seen.gpu_instance ? "set" : "absent") + ", computeInstanceID " +
                 (seen.compute_instance ? "set" : "absent") + "): want all three or none"};
  }
  if (present == 3) a->runtime = std::move(rt);
  return OkStatus();
}

}  // namespace

Result<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view value) {
  std::vector<MigAllocation> out;
  if (value.empty()) return out;
  try {
    Result<Json> parsed = ParseJson<Json>(value);
    if (!parsed) return Error{"MIG allocations: " + parsed.error() + ": " + Quote(value)};
    Json& j = *parsed;
    if (j.is_null()) return out;
    if (!j.is_array()) return Error{"MIG allocations: want a JSON list, got " + Describe(j)};
    std::set<std::pair<int64_t, int64_t>> slots;
    for (size_t i = 0; i < j.size(); ++i) {
      MigAllocation& a = out.emplace_back();
      Status s = ReadAllocation(j[i], i, &a);
      if (!s) return std::move(s).take_error();
      if (!slots.emplace(a.container_index, a.device_index).second) {
        return Error{"MIG allocation " + std::to_string(i) + ": duplicate allocation for " +
                     "containerIndex " + std::to_string(a.container_index) + " deviceIndex " +
                     std::to_string(a.device_index)};
      }
    }
    return out;
  } catch (const std::exception& e) {
    // Not expected: every access above is type-checked first. Kept so nothing escapes.
    return Error{std::string("MIG allocations: ") + e.what()};
  }
}

}  // namespace hami::protocol
