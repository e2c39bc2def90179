#include "device/vendors/metax/metax.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>

#include "common/json.h"
#include "common/strings.h"
#include "device/yaml_error.h"
#include "protocol/quantity.h"

namespace hami::device::metax {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

const std::string* Lookup(const ContainerView& c, const std::string& resource) {
  if (resource.empty()) return nullptr;
  if (const std::string* v = FindValue(c.limits, resource)) return v;
  return FindValue(c.requests, resource);
}

Status ReadString(const YAML::Node& section, const char* key, std::string* out) {
  YAML::Node v = section[key];
  if (!v || v.IsNull()) return OkStatus();
  if (!v.IsScalar()) return FieldError(std::string("metax.") + key, "a string", Describe(v));
  *out = v.Scalar();
  return OkStatus();
}

}  // namespace

protocol::VendorInfo GpuVendor(const MetaxConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kGpuKey);
  info.count_resource = config.resource_count_name;
  return info;
}

protocol::VendorInfo SgpuVendor(const MetaxConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kSgpuKey);
  info.count_resource = config.resource_vcount_name;
  info.memory_resource = config.resource_vmemory_name;
  info.core_resource = config.resource_vcore_name;
  return info;
}

Result<MetaxConfig> ParseMetaxConfig(const YAML::Node& node) {
  MetaxConfig c;
  if (!node || node.IsNull()) return c;
  if (!node.IsMap()) return FieldError("metax", "a map", Describe(node));
  for (auto [key, out] : {std::pair{"resourceCountName", &c.resource_count_name},
                          {"resourceVCountName", &c.resource_vcount_name},
                          {"resourceVMemoryName", &c.resource_vmemory_name},
                          {"resourceVCoreName", &c.resource_vcore_name}}) {
    if (Status s = ReadString(node, key, out); !s) return std::move(s).take_error();
  }
  YAML::Node aware = node["sgpuTopologyAware"];
  if (aware && !aware.IsNull()) {
    std::optional<bool> v;
    if (aware.IsScalar()) {
      std::string s = ToLower(aware.Scalar());
      if (s == "true" || s == "yes" || s == "on" || s == "y") v = true;
      if (s == "false" || s == "no" || s == "off" || s == "n") v = false;
    }
    if (!v) return FieldError("metax.sgpuTopologyAware", "a boolean", Describe(aware));
    c.topology_aware = *v;
  }
  return c;
}

// ---- Metax-GPU ----

std::vector<DeviceUsage> GpuNodeDevices(const std::string& node_name, int64_t count) {
  std::vector<DeviceUsage> out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(DeviceUsage{.id = node_name + "-metax-" + std::to_string(i),
                              .index = static_cast<uint64_t>(i),
                              .type = std::string(kGpuKey),
                              .vendor = std::string(kGpuKey),
                              .health = true,
                              .count = 1,
                              .totalmem = kGpuMemory,
                              .totalcore = 100});
  }
  return out;
}

Result<DeviceRequest> GpuRequest(const MetaxConfig& config, const ContainerView& container) {
  DeviceRequest req;
  const std::string* count = Lookup(container, config.resource_count_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config.resource_count_name, *count);
  if (!nums) return Error{"container " + Quote(container.name) + ": " + nums.error()};
  if (*nums == 0) return req;
  return DeviceRequest{.nums = *nums,
                       .type = std::string(kGpuKey),
                       .memreq = 0,
                       .mem_percentage = 100,
                       .coresreq = 100};
}

FitResult GpuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                 const protocol::PodDevices* earlier, bool mutex) {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  int32_t cores = std::min(request.coresreq, 100);
  protocol::ContainerDevices picked;
  for (size_t k = candidates.size(); k-- > 0;) {
    const DeviceUsage& dev = *candidates[k];
    int32_t memreq = request.memreq > 0 ? request.memreq : 0;
    if (request.mem_percentage != kPercentUnset && request.memreq == 0) {
      memreq =
          static_cast<int32_t>(static_cast<int64_t>(dev.totalmem) * request.mem_percentage / 100);
    }
    std::optional<std::string_view> reason;
    if (!dev.health) {
      reason = protocol::kCardNotHealth;
    } else if (request.type != kGpuKey) {
      reason = protocol::kCardTypeMismatch;
    } else if (dev.count <= dev.used) {
      reason = protocol::kCardTimeSlicingExhausted;
    } else if (mutex && dev.used > 0) {
      reason = protocol::kExclusiveDeviceAllocateConflict;
    } else if (static_cast<int64_t>(dev.totalmem) - dev.usedmem < memreq) {
      reason = protocol::kCardInsufficientMemory;
    } else if (static_cast<int64_t>(dev.totalcore) - dev.usedcores < cores) {
      reason = protocol::kCardInsufficientCore;
    } else if (dev.totalcore == 100 && cores == 100 && dev.used > 0) {
      reason = protocol::kExclusiveDeviceAllocateConflict;
    } else if (dev.totalcore != 0 && dev.usedcores == dev.totalcore && cores == 0) {
      reason = protocol::kCardComputeUnitsExhausted;
    } else if (earlier) {
      for (const auto& container : *earlier) {
        for (const auto& d : container) {
          if (d.type == dev.type && d.uuid != dev.id) reason = kCardNotFoundCustomFilterRule;
        }
      }
    }
    if (reason) {
      r.reasons[std::string(*reason)] += 1;
      continue;
    }
    picked.push_back(protocol::ContainerDevice{dev.id, request.type, memreq, cores});
    if (static_cast<int32_t>(picked.size()) == request.nums) {
      r.fit = true;
      r.devices = std::move(picked);
      return r;
    }
  }
  if (!picked.empty()) {
    r.reasons[std::string(protocol::kAllocatedCardsInsufficientRequest)] =
        static_cast<int>(picked.size());
  }
  return r;
}

double TopologyValue(std::string_view annotation, int index) {
  auto doc = ParseJson(annotation);
  if (!doc || !doc->is_object()) return 0;
  double found = 0;
  for (auto it = doc->begin(); it != doc->end(); ++it) {
    // Go decodes map[int]int: every key must be an integer and every value an integer that fits
    // int, or the whole annotation is unreadable.
    std::optional<int64_t> key = ParseInt64(it.key());
    if (!key || !it->is_number_integer()) return 0;
    if (*key == index) found = static_cast<double>(it->get<int64_t>());
  }
  return static_cast<double>(static_cast<float>(found));
}

double GpuScoreNode(const StringMap& node_annotations, const protocol::PodDevices& pod_devices,
                    NodePolicy policy) {
  int n = 0;
  for (const auto& c : pod_devices) n += static_cast<int>(c.size());
  std::string_view key = policy == NodePolicy::kBinpack ? kLossesKey : kScoresKey;
  const std::string* value = FindValue(node_annotations, key);
  if (!value) return 0;
  return static_cast<double>(2000.0f - static_cast<float>(TopologyValue(*value, n)));
}

// ---- Metax-SGPU request and webhook ----

Result<DeviceRequest> SgpuRequest(const MetaxConfig& config, const ContainerView& container) {
  auto fail = [&](const std::string& resource, const std::string& value, const std::string& why) {
    return Error{"container " + Quote(container.name) + ": resource " + resource + " value " +
                 Quote(value) + ": " + why};
  };
  DeviceRequest req;
  const std::string* count = FindValue(container.limits, config.resource_vcount_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config.resource_vcount_name, *count);
  if (!nums) return Error{"container " + Quote(container.name) + ": " + nums.error()};
  if (*nums == 0) return req;
  int32_t cores = 100;
  if (const std::string* c = FindValue(container.limits, config.resource_vcore_name)) {
    auto v = protocol::ParseDeviceCount(config.resource_vcore_name, *c);
    if (!v) return Error{"container " + Quote(container.name) + ": " + v.error()};
    cores = *v;
  }
  int64_t mem = 0;
  if (const std::string* m = FindValue(container.limits, config.resource_vmemory_name)) {
    auto q = protocol::ParseQuantity(*m);
    if (!q) return fail(config.resource_vmemory_name, *m, "not a quantity");
    if (q->negative && q->mantissa != 0) {
      return fail(config.resource_vmemory_name, *m, "must not be negative");
    }
    bool has_unit = std::any_of(m->begin(), m->end(), [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
    });
    if (has_unit) {
      // Bytes. MiB = floor(bytes / 2^20); the quantity must be a whole number of bytes.
      auto mib = protocol::ParseMemoryMiB(config.resource_vmemory_name, *m);
      if (!mib) return Error{"container " + Quote(container.name) + ": " + mib.error()};
      mem = *mib;
    } else {
      auto gib = protocol::ParseDeviceCount(config.resource_vmemory_name, *m);
      if (!gib || static_cast<int64_t>(*gib) * kSgpuMemoryFactor > kInt32Max) {
        return fail(config.resource_vmemory_name, *m,
                    "want a whole number of GiB up to 2097151 (a bare vmemory is GiB)");
      }
      mem = static_cast<int64_t>(*gib) * kSgpuMemoryFactor;
    }
  }
  req.nums = *nums;
  req.type = std::string(kSgpuKey);
  req.memreq = static_cast<int32_t>(mem);
  req.mem_percentage = mem == 0 ? 100 : 0;
  req.coresreq = cores;
  return req;
}

SgpuAdmission SgpuMutate(const MetaxConfig& config, const ContainerView& container,
                         const StringMap& pod_annotations) {
  SgpuAdmission out;
  const std::string* count = FindValue(container.limits, config.resource_vcount_name);
  if (!count) return out;
  out.asks = true;
  const std::string* app_class = FindValue(pod_annotations, kAppClassKey);
  if (app_class) {
    if (*app_class != kOnline && *app_class != kOffline) {
      out.error = std::string(kAppClassKey) + " must be set one of [online, offline]";
      return out;
    }
    auto n = protocol::ParseQuantity(*count);
    bool one = n && !n->negative && n->mantissa == 1 && n->exp10 == 0 && n->exp2 == 0;
    if (!one) {
      out.error = "app-class pod must request single device";
      return out;
    }
  }
  if (app_class && *app_class == kOnline) return out;
  const std::string* qos = FindValue(pod_annotations, kQosPolicyKey);
  if (!qos) {
    out.set_qos_policy = std::string(kBestEffort);
  } else if (*qos != kBestEffort && *qos != kFixedShare && *qos != kBurstShare) {
    out.error =
        std::string(kQosPolicyKey) + " must be set one of [best-effort, fixed-share, burst-share]";
  }
  return out;
}

}  // namespace hami::device::metax
