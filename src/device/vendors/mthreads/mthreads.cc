#include "device/vendors/mthreads/mthreads.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendor_support.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/keys.h"
#include "protocol/quantity.h"

namespace hami::device::mthreads {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kLegalMemorySlices[] = {2, 4, 8, 16, 32, 64, 96};

protocol::VendorInfo MakeInfo(const MthreadsConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kVendorKey);
  info.count_resource = config.resource_count_name;
  info.memory_resource = config.resource_memory_name;
  info.core_resource = config.resource_core_name;
  return info;
}

const std::string* Lookup(const ContainerView& container, const std::string& resource) {
  if (const std::string* v = FindValue(container.limits, resource)) return v;
  return FindValue(container.requests, resource);
}

// container.resources.<section>[name], or null.
const nlohmann::json* Resource(const nlohmann::json& ctr, const char* section,
                               const std::string& name) {
  const nlohmann::json* v = &ctr;
  for (const char* key : {"resources", section}) {
    if (!v->is_object() || !v->contains(key)) return nullptr;
    v = &(*v)[key];
  }
  if (!v->is_object()) return nullptr;
  auto it = v->find(name);
  return it == v->end() ? nullptr : &*it;
}

std::string Text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The number ending "<node>-mthreads-<i>", else 0.
int64_t IndexFromId(std::string_view id) {
  size_t dash = id.rfind('-');
  if (dash == std::string_view::npos) return 0;
  return ParseInt64(id.substr(dash + 1)).value_or(0);
}

// The node in "<node>-mthreads-<i>" (the ids NodeDevices gives), else "".
std::string NodeFromId(std::string_view id) {
  size_t dash = id.rfind('-');
  if (dash == std::string_view::npos || !ParseInt64(id.substr(dash + 1))) return "";
  std::string_view head = id.substr(0, dash);
  constexpr std::string_view kInfix = "-mthreads";
  if (head.size() <= kInfix.size() || head.substr(head.size() - kInfix.size()) != kInfix) return "";
  return std::string(head.substr(0, head.size() - kInfix.size()));
}

// The first device of the last container that got devices ("" when none).
std::string_view LastDevice(const protocol::PodDevices& devices) {
  for (auto it = devices.rbegin(); it != devices.rend(); ++it) {
    if (!it->empty()) return it->front().uuid;
  }
  return "";
}

}  // namespace

Result<MthreadsConfig> ParseMthreadsConfig(const YAML::Node& section) {
  MthreadsConfig config;
  if (Status s = ReadVendorSection(section, kSection, &config.resource_count_name,
                                   &config.resource_memory_name, &config.resource_core_name);
      !s) {
    return std::move(s).take_error();
  }
  return config;
}

MthreadsDevice::MthreadsDevice(MthreadsConfig config)
    : config_(std::move(config)), info_(MakeInfo(config_)) {}

Result<std::vector<DeviceUsage>> MthreadsDevice::NodeDevices(const NodeView& node) const {
  return CapacityCardRows(node, CapacityCards{.core_resource = config_.resource_core_name,
                                              .memory_resource = config_.resource_memory_name,
                                              .cores_per_card = kCoresPerGpu,
                                              .memory_factor = kMemoryFactor,
                                              .id_infix = "mthreads",
                                              .vendor = info_.vendor_key});
}

Health MthreadsDevice::CheckHealth(const NodeView& /*node*/, Health /*handshake*/) const {
  return Health{true, true};
}

Result<bool> MthreadsDevice::MutateAdmission(AdmissionEdit& edit) const {
  const nlohmann::json& ctr = edit.Container();
  const nlohmann::json* count = Resource(ctr, "limits", config_.resource_count_name);
  if (!count) count = Resource(ctr, "requests", config_.resource_count_name);
  if (!count) return false;
  auto n = protocol::ParseDeviceCount(config_.resource_count_name, Text(*count));
  if (!n || *n <= 0) {
    return Error{config_.resource_count_name + " must be greater than 0, got " +
                 Quote(Text(*count))};
  }
  auto whole_cards = [&] {
    edit.Set({"resources", "limits", config_.resource_core_name},
             std::to_string(int64_t{*n} * kCoresPerGpu));
    edit.Set({"resources", "limits", config_.resource_memory_name},
             std::to_string(int64_t{*n} * kMemoryPerGpu));
  };
  if (*n > 1) {
    whole_cards();
    edit.SetPod({"metadata", "annotations", std::string(kRequestGpuNumKey)}, std::to_string(*n));
    return true;
  }
  const nlohmann::json* mem = Resource(ctr, "limits", config_.resource_memory_name);
  if (!mem) {
    whole_cards();
    return true;
  }
  auto units = protocol::ParseDeviceCount(config_.resource_memory_name, Text(*mem));
  if (!units || std::find(std::begin(kLegalMemorySlices), std::end(kLegalMemorySlices), *units) ==
                    std::end(kLegalMemorySlices)) {
    return Error{
        "sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96], got " +
        config_.resource_memory_name + " " + Quote(Text(*mem))};
  }
  return true;
}

Result<DeviceRequest> MthreadsDevice::NormalizeRequest(const ContainerView& container) const {
  auto fail = [&](const std::string& why) {
    return Error{"container " + Quote(container.name) + ": " + why};
  };
  DeviceRequest req;
  const std::string* count = Lookup(container, config_.resource_count_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config_.resource_count_name, *count);
  if (!nums) return fail(nums.error());
  if (*nums == 0) return req;
  req.nums = *nums;
  req.type = std::string(kVendorKey);
  req.mem_percentage = 0;
  int32_t memory = 0;
  if (const std::string* mem = Lookup(container, config_.resource_memory_name)) {
    auto units = protocol::ParseDeviceCount(config_.resource_memory_name, *mem);
    if (!units) return fail(units.error());
    if (*units > kInt32Max / kMemoryFactor) {
      return fail("resource " + config_.resource_memory_name + " value " + Quote(*mem) +
                  ": times 512 MiB exceeds 2147483647 MiB");
    }
    memory = *units * kMemoryFactor;
  }
  if (memory == 0) req.mem_percentage = 100;
  req.memreq = memory / req.nums;
  if (const std::string* cores = Lookup(container, config_.resource_core_name)) {
    auto c = protocol::ParseDeviceCount(config_.resource_core_name, *cores);
    if (!c) return fail(c.error());
    req.coresreq = *c / req.nums;
  }
  return req;
}

FitResult MthreadsDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                              const DeviceRequest& request, const FitContext& ctx) const {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  static const StringMap kNone;
  const StringMap& annos = ctx.pod ? ctx.pod->annotations : kNone;
  // HAMi customFilterRule: the pod's earlier containers all sit on this device.
  auto same_device = [&](const DeviceUsage& dev) {
    if (!ctx.earlier) return true;
    for (const auto& ctr : *ctx.earlier) {
      for (const auto& d : ctr) {
        if (d.uuid != dev.id) return false;
      }
    }
    return true;
  };
  auto check = [&](const DeviceUsage& dev, const protocol::ContainerDevices& /*picked*/,
                   protocol::ContainerDevice* chosen) -> std::optional<std::string_view> {
    if (!dev.health) return protocol::kCardNotHealth;
    if (dev.type.find(request.type) == std::string::npos || request.type != kVendorKey) {
      return protocol::kCardTypeMismatch;
    }
    if (!nvidia::CheckUuid(annos, info_.use_uuid_key, info_.nouse_uuid_key, dev.id)) {
      return protocol::kCardUuidMismatch;
    }
    if (auto reason = CheckShare(dev, request, ctx, chosen)) return reason;
    if (!same_device(dev)) return kCustomFilterReason;
    return std::nullopt;
  };
  ScanCandidates(candidates, request.nums, check, &r);
  return r;
}

StringMap MthreadsDevice::AllocationAnnotations(const AllocationContext& context,
                                                const protocol::PodDevices& devices) const {
  static const PodView kNoPod;
  const PodView& pod = context.pod ? *context.pod : kNoPod;
  StringMap out;
  bool any = false;
  for (const auto& ctr : devices) any = any || !ctr.empty();
  if (!any) return out;
  out[info_.allocated_key] = protocol::EncodePodDevices(devices);
  std::string node(context.node);
  if (node.empty()) {
    const std::string* v = FindValue(pod.annotations, protocol::kVgpuNodeKey);
    node = v ? *v : NodeFromId(LastDevice(devices));
  }
  std::optional<int64_t> seconds;
  if (const std::string* v = FindValue(pod.annotations, protocol::kVgpuTimeKey)) {
    seconds = ParseInt64(Trim(*v));
  }
  for (const auto& ctr : devices) {
    if (ctr.empty()) continue;
    std::vector<std::string> indexes;
    for (const auto& d : ctr) indexes.push_back(std::to_string(IndexFromId(d.uuid)));
    out[std::string(kGpuIndexKey)] = Join(indexes, ",");
    out[std::string(kPredicateNodeKey)] = node;
    if (context.now) {
      out[std::string(kPredicateTimeKey)] = std::to_string(
          std::chrono::duration_cast<std::chrono::nanoseconds>(context.now->time_since_epoch())
              .count());
    } else if (seconds && *seconds >= 0 &&
               *seconds <= std::numeric_limits<int64_t>::max() / 1000000000) {
      out[std::string(kPredicateTimeKey)] = std::to_string(*seconds * 1000000000);
    }
  }
  return out;
}

Result<std::optional<protocol::PodDevices>> MthreadsDevice::PodToAllocate(
    const StringMap& pod_annotations) const {
  return PodAllocated(pod_annotations);
}

NodeRegistration MthreadsDevice::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  NodeRegistration out;
  int64_t count = 0, memory = 0;
  for (const auto& d : devices) {
    count += d.count;
    memory += d.devmem;
  }
  out.capacity[config_.resource_count_name] = std::to_string(count);
  out.capacity[config_.resource_core_name] = std::to_string(kCoresPerGpu * devices.size());
  out.capacity[config_.resource_memory_name] = std::to_string(memory / kMemoryFactor);
  return out;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeMthreads(const YAML::Node& section,
                                                          const DeviceConfig& /*config*/) {
  auto config = ParseMthreadsConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<MthreadsDevice>(std::move(*config)));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(mthreads, "mthreads", MakeMthreads);

}  // namespace hami::device::mthreads
