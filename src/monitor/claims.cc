#include "monitor/claims.h"

#include <optional>

#include "protocol/quantity.h"

namespace hami::monitor {
namespace {

const k8s::Json* Field(const k8s::Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string String(const k8s::Json& j, const char* key) {
  const k8s::Json* f = Field(j, key);
  return f != nullptr && f->is_string() ? f->get<std::string>() : "";
}

// A quantity as a number (milli-unit exact, then double); nullopt when it is not one.
std::optional<double> QuantityValue(const k8s::Json* v) {
  if (v == nullptr || !v->is_string()) return std::nullopt;
  auto q = protocol::ParseQuantity(v->get<std::string>());
  if (!q) return std::nullopt;
  auto milli = protocol::ExactScaledValue(*q, -3);
  if (!milli || *milli < 0) return std::nullopt;
  return static_cast<double>(*milli) / 1000.0;
}

// attributes.<name>.string (or .int for minor) as text.
std::string Attribute(const k8s::Json& device, const char* name) {
  const k8s::Json* attrs = Field(device, "attributes");
  const k8s::Json* a = attrs != nullptr ? Field(*attrs, name) : nullptr;
  if (a == nullptr) return "";
  if (const k8s::Json* s = Field(*a, "string"); s != nullptr && s->is_string()) {
    return s->get<std::string>();
  }
  if (const k8s::Json* i = Field(*a, "int"); i != nullptr && i->is_number_integer()) {
    return std::to_string(i->get<int64_t>());
  }
  return "";
}

}  // namespace

bool ValidClaimUid(std::string_view uid) {
  if (uid.empty() || uid.size() > 63) return false;
  for (char c : uid) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::vector<DraDevice> ReadPoolDevices(const std::vector<k8s::ObjectRef>& slices,
                                       std::string_view node) {
  std::vector<DraDevice> out;
  for (const k8s::ObjectRef& slice : slices) {
    const k8s::Json* spec = Field(*slice, "spec");
    if (spec == nullptr || String(*spec, "driver") != kDraDriverName) continue;
    const k8s::Json* pool = Field(*spec, "pool");
    if (pool == nullptr || String(*pool, "name") != node) continue;
    const k8s::Json* devices = Field(*spec, "devices");
    if (devices == nullptr || !devices->is_array()) continue;
    for (const k8s::Json& d : *devices) {
      DraDevice dev;
      dev.name = String(d, "name");
      if (dev.name.empty()) continue;
      dev.uuid = Attribute(d, "uuid");
      dev.type = Attribute(d, "brand") + "-" + Attribute(d, "productName");
      dev.index = Attribute(d, "minor");
      const k8s::Json* capacity = Field(d, "capacity");
      if (capacity != nullptr) {
        const k8s::Json* memory = Field(*capacity, "memory");
        const k8s::Json* cores = Field(*capacity, "cores");
        dev.memory_bytes =
            QuantityValue(memory != nullptr ? Field(*memory, "value") : nullptr).value_or(0);
        dev.cores = QuantityValue(cores != nullptr ? Field(*cores, "value") : nullptr).value_or(0);
      }
      out.push_back(std::move(dev));
    }
  }
  return out;
}

ClaimInfo ReadClaimInfo(const k8s::Json& claim, std::string_view node) {
  ClaimInfo info;
  if (const k8s::Json* meta = Field(claim, "metadata"); meta != nullptr) {
    info.uid = String(*meta, "uid");
    info.ns = String(*meta, "namespace");
    info.name = String(*meta, "name");
  }
  const k8s::Json* status = Field(claim, "status");
  if (status == nullptr) return info;
  if (const k8s::Json* reserved = Field(*status, "reservedFor");
      reserved != nullptr && reserved->is_array()) {
    for (const k8s::Json& r : *reserved) {
      if (String(r, "resource") != "pods" || !String(r, "apiGroup").empty()) continue;
      ClaimPod pod{String(r, "name"), String(r, "uid")};
      if (!pod.name.empty()) info.pods.push_back(std::move(pod));
    }
  }
  const k8s::Json* allocation = Field(*status, "allocation");
  const k8s::Json* devices = allocation != nullptr ? Field(*allocation, "devices") : nullptr;
  const k8s::Json* results = devices != nullptr ? Field(*devices, "results") : nullptr;
  if (results == nullptr || !results->is_array()) return info;
  for (const k8s::Json& r : *results) {
    if (String(r, "driver") != kDraDriverName || String(r, "pool") != node) continue;
    ClaimShare share;
    share.device = String(r, "device");
    if (share.device.empty()) continue;
    if (const k8s::Json* consumed = Field(r, "consumedCapacity"); consumed != nullptr) {
      share.memory_bytes = QuantityValue(Field(*consumed, "memory")).value_or(-1);
      share.cores = QuantityValue(Field(*consumed, "cores")).value_or(-1);
    }
    info.shares.push_back(std::move(share));
  }
  return info;
}

k8s::Json TrimClaim(k8s::Json claim, std::string_view node) {
  k8s::Json out = k8s::Json::object();
  if (!claim.is_object()) return out;
  out["metadata"] = k8s::Json::object();
  if (claim.contains("metadata") && claim["metadata"].is_object()) {
    for (const char* key : {"name", "namespace", "uid", "resourceVersion"}) {
      if (claim["metadata"].contains(key)) out["metadata"][key] = claim["metadata"][key];
    }
  }
  const ClaimInfo info = ReadClaimInfo(claim, node);
  if (info.shares.empty()) return out;
  k8s::Json results = k8s::Json::array();
  for (const k8s::Json& r : claim["status"]["allocation"]["devices"]["results"]) {
    // value() would throw on a field of the wrong type: compare only strings.
    auto is = [&r](const char* key, std::string_view want) {
      return r.is_object() && r.contains(key) && r[key].is_string() &&
             r[key].get<std::string>() == want;
    };
    if (is("driver", kDraDriverName) && is("pool", node)) results.push_back(r);
  }
  out["status"]["allocation"]["devices"]["results"] = std::move(results);
  if (claim["status"].contains("reservedFor")) {
    out["status"]["reservedFor"] = claim["status"]["reservedFor"];
  }
  return out;
}

}  // namespace hami::monitor
