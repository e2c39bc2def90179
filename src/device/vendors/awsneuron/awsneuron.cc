#include "device/vendors/awsneuron/awsneuron.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/keys.h"
#include "protocol/quantity.h"

namespace hami::device::awsneuron {
namespace {

const std::string* Lookup(const ContainerView& c, const std::string& resource) {
  if (const std::string* v = FindValue(c.limits, resource)) return v;
  return FindValue(c.requests, resource);
}

// Kubernetes Quantity.AsInt64: the exact whole value, or nullopt (fractions, beyond int64,
// not a quantity).
std::optional<int64_t> AsInt64(std::string_view text) {
  auto q = protocol::ParseQuantity(text);
  if (!q) return std::nullopt;
  long double v =
      static_cast<long double>(q->mantissa) * std::pow(10.0L, q->exp10) * std::pow(2.0L, q->exp2);
  if (v != std::floor(v) || v > 9.2e18L) return std::nullopt;
  int64_t i = static_cast<int64_t>(v);
  return q->negative ? -i : i;
}

// HAMi validateResourceRequest.
Result<int64_t> Validate(const std::string& resource, const std::string& text, int64_t max) {
  auto v = AsInt64(text);
  if (!v) return Error{resource + " must be an integer (value " + Quote(text) + ")"};
  if (*v <= 0) return Error{resource + " must be greater than 0 (value " + Quote(text) + ")"};
  if (*v > max) return Error{resource + " must not exceed " + std::to_string(max)};
  return *v;
}

int64_t CoresPerDevice(const NeuronConfig& config) {
  if (config.cores_per_device <= 0) return kMaxCoresPerDevice;
  return std::min(config.cores_per_device, kMaxCoresPerDevice);
}

std::vector<size_t> Run(const std::vector<const DeviceUsage*>& devices, size_t start,
                        size_t count) {
  if (devices.size() < start + count) return {};
  std::vector<size_t> res;
  for (size_t i = start; i < start + count; ++i) {
    if (devices[i]->used > 0 || !devices[i]->health) return {};
    res.push_back(i);
  }
  return res;
}

}  // namespace

std::vector<DeviceUsage> NodeDevices(std::string_view node_name, int64_t devices, int64_t cores) {
  std::vector<DeviceUsage> out;
  if (devices <= 0) return out;
  int64_t per = cores > 0 ? cores / devices : 0;
  per = std::min<int64_t>(per, 30);  // a mask of int32 bits
  int32_t mask = 0;
  for (int64_t i = 0; i < per; ++i) mask = mask * 2 + 1;
  for (int64_t i = 0; i < devices && i < kMaxDeviceCount; ++i) {
    DeviceUsage d;
    d.id = std::string(node_name) + "-AWSNeuron-" + std::to_string(i);
    d.index = static_cast<uint64_t>(i);
    d.type = std::string(kVendorKey);
    d.vendor = std::string(kVendorKey);
    d.health = true;
    d.count = static_cast<int32_t>(per);
    d.totalcore = mask;
    out.push_back(std::move(d));
  }
  return out;
}

int32_t CountMask(int32_t mask) {
  int32_t n = 0;
  for (int32_t m = mask; m > 0; m /= 2) n += m % 2;
  return n;
}

int32_t AddCoreUsage(int32_t used_mask, int32_t require) {
  if (used_mask == 0) {
    if (require == 2) return 3;
    if (require == 1) return 1;
  }
  return 3 - used_mask;
}

Result<std::pair<int32_t, int32_t>> SplitCoreRequest(const NeuronConfig& config, int64_t cores) {
  int64_t per = CoresPerDevice(config);
  if (cores <= per) return std::make_pair(int32_t{1}, static_cast<int32_t>(cores));
  if (cores % per != 0) {
    return Error{config.resource_core_name + " must be 1 or a multiple of " + std::to_string(per) +
                 ", got " + std::to_string(cores)};
  }
  int64_t nums = cores / per;
  if (nums > kMaxDeviceCount) {
    return Error{config.resource_core_name + " needs " + std::to_string(nums) +
                 " devices, which exceeds the maximum of " + std::to_string(kMaxDeviceCount)};
  }
  return std::make_pair(static_cast<int32_t>(nums), static_cast<int32_t>(per));
}

Result<bool> MutateAdmission(const NeuronConfig& config, const ContainerView& container) {
  auto fail = [&](const std::string& why) {
    return Error{"container " + Quote(container.name) + ": " + why};
  };
  if (const std::string* count = Lookup(container, config.resource_count_name)) {
    auto v = Validate(config.resource_count_name, *count, kMaxDeviceCount);
    if (!v) return fail(v.error());
    return true;
  }
  const std::string* core = Lookup(container, config.resource_core_name);
  if (!core) return false;
  auto v = Validate(config.resource_core_name, *core, kMaxDeviceCount * kMaxCoresPerDevice);
  if (!v) return fail(v.error());
  auto split = SplitCoreRequest(config, *v);
  if (!split) return fail(split.error());
  return true;
}

DeviceRequest NormalizeRequest(const NeuronConfig& config, const ContainerView& container) {
  DeviceRequest req;
  if (const std::string* count = Lookup(container, config.resource_count_name)) {
    auto v = Validate(config.resource_count_name, *count, kMaxDeviceCount);
    if (!v) return req;
    req.nums = static_cast<int32_t>(*v);
    req.type = std::string(kVendorKey);
    req.mem_percentage = 0;
    req.coresreq = static_cast<int32_t>(std::clamp<int64_t>(config.cores_per_device, 0, 30));
    return req;
  }
  const std::string* core = Lookup(container, config.resource_core_name);
  if (!core) return req;
  auto v = Validate(config.resource_core_name, *core, kMaxDeviceCount * kMaxCoresPerDevice);
  if (!v) return req;
  auto split = SplitCoreRequest(config, *v);
  if (!split) return req;
  req.nums = split->first;
  req.type = std::string(kVendorKey);
  req.mem_percentage = 0;
  req.coresreq = split->second;
  return req;
}

std::vector<size_t> GraphSelect(const std::vector<const DeviceUsage*>& devices, int32_t count,
                                std::string_view node_type) {
  if (devices.empty() || count <= 0) return {};
  size_t n = static_cast<size_t>(count);
  if (node_type.find("inf") != std::string_view::npos ||
      node_type.find("Inf") != std::string_view::npos) {
    for (size_t start = 0; start < devices.size(); ++start) {
      auto res = Run(devices, start, n);
      if (!res.empty()) return res;
    }
    return {};
  }
  if (count == 1 || count == 4 || count == 8 || count == 16) {
    for (size_t start = 0; start < devices.size(); start += n) {
      auto res = Run(devices, start, n);
      if (!res.empty()) return res;
    }
  }
  return {};
}

FitResult Fit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
              const FitContext& context, std::string_view node_type) {
  FitResult out;
  out.devices_considered = static_cast<int>(candidates.size());
  static const StringMap kNone;
  const StringMap& annos = context.pod ? context.pod->annotations : kNone;
  if (request.nums > 1) {
    std::vector<size_t> alloc = GraphSelect(candidates, request.nums, node_type);
    protocol::ContainerDevices picks;
    for (size_t idx : alloc) {
      for (const DeviceUsage* d : candidates) {
        if (d->index == idx) {
          picks.push_back(protocol::ContainerDevice{.uuid = d->id,
                                                    .type = request.type,
                                                    .usedmem = d->totalmem,
                                                    .usedcores = d->totalcore});
          break;
        }
      }
    }
    // HAMi reads positions as indexes; a run whose indexes the node lacks is no fit.
    if (alloc.empty() || picks.size() != static_cast<size_t>(request.nums)) {
      out.reasons[std::string(protocol::kNumaNotFit)] = 1;
      return out;
    }
    out.devices = std::move(picks);
    out.fit = true;
    return out;
  }
  const protocol::VendorInfo info = *protocol::FindVendor(kVendorKey);
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const DeviceUsage& dev = **it;
    std::string_view reason;
    if (!dev.health) {
      reason = protocol::kCardNotHealth;
    } else if (dev.type.find(request.type) == std::string::npos || request.type != kVendorKey) {
      reason = protocol::kCardTypeMismatch;
    } else if (!nvidia::CheckUuid(annos, info.use_uuid_key, info.nouse_uuid_key, dev.id)) {
      reason = protocol::kCardUuidMismatch;
    } else if (dev.count <= dev.used) {
      reason = protocol::kCardTimeSlicingExhausted;
    } else if (context.policy.mutex && dev.used > 0) {
      reason = protocol::kExclusiveDeviceAllocateConflict;
    } else if (CountMask(dev.totalcore) - CountMask(dev.usedcores) < request.coresreq) {
      reason = protocol::kCardInsufficientCore;
    }
    if (!reason.empty()) {
      ++out.reasons[std::string(reason)];
      continue;
    }
    out.devices.push_back(protocol::ContainerDevice{
        .uuid = dev.id,
        .type = request.type,
        .usedmem = 0,
        .usedcores = AddCoreUsage(dev.usedcores, request.coresreq),
    });
    out.fit = true;
    out.reasons.clear();
    return out;
  }
  return out;
}

ContainerAsk AskOf(const NeuronConfig& config, const ContainerView& container) {
  ContainerAsk ask;
  if (const std::string* v = FindValue(container.limits, config.resource_count_name)) {
    ask.count_in_limits = true;
    auto n = AsInt64(*v);
    ask.count_positive = n && *n > 0;
  }
  return ask;
}

StringMap PatchAnnotations(const NeuronConfig& config, const protocol::PodDevices& devices,
                           const std::vector<ContainerAsk>& asks,
                           const std::map<std::string, uint64_t>& index_of,
                           std::string_view node_name, int64_t now_unix_nanos) {
  StringMap out;
  bool any = std::any_of(devices.begin(), devices.end(),
                         [](const protocol::ContainerDevices& c) { return !c.empty(); });
  if (!any) return out;
  const protocol::VendorInfo info = *protocol::FindVendor(kVendorKey);
  out[info.allocated_key] = protocol::EncodePodDevices(devices);
  std::vector<std::string> ids;
  const uint64_t per =
      config.cores_per_device > 0 ? static_cast<uint64_t>(config.cores_per_device) : 0;
  for (size_t c = 0; c < devices.size() && c < asks.size(); ++c) {
    for (const protocol::ContainerDevice& d : devices[c]) {
      auto it = index_of.find(d.uuid);
      if (it == index_of.end()) continue;
      uint64_t idx = it->second;
      if (asks[c].count_in_limits) {
        if (asks[c].count_positive) ids.push_back(std::to_string(idx));
        continue;
      }
      if (d.usedcores & 1) {
        ids.push_back(std::to_string(per * idx));
        out[std::string(kResourceTypeKey)] = config.resource_core_name;
      }
      if (d.usedcores & 2) {
        ids.push_back(std::to_string(per * idx + 1));
        out[std::string(kResourceTypeKey)] = config.resource_core_name;
      }
    }
  }
  if (!ids.empty()) {
    out[std::string(kAssignedIndexKey)] = Join(ids, ",");
    out[std::string(kPredicateTimeKey)] = std::to_string(now_unix_nanos);
    out[std::string(kAllocatedFlagKey)] = "false";
    out[std::string(kAssignedNodeKey)] = std::string(node_name);
  }
  return out;
}

// ---- the Device class ----

namespace {

constexpr std::string_view kSection = "awsneuron";
constexpr std::string_view kNodeTypeInfo = "AWSNodeType";

// A container under admission as a ContainerView (quantities as text), through the pod reader.
Result<ContainerView> ContainerOf(const AdmissionEdit& edit) {
  nlohmann::json pod = {{"spec", {{"containers", nlohmann::json::array({edit.Container()})}}}};
  auto view = ParsePodView(pod);
  if (!view) return std::move(view).take_error();
  return view->containers.at(0);
}

std::optional<uint64_t> IndexFromId(std::string_view id) {
  size_t dash = id.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  return ParseUint64(id.substr(dash + 1));
}

Result<int64_t> CapacityOf(const NodeView& node, const std::string& resource) {
  const std::string* v = FindValue(node.capacity, resource);
  if (!v) return int64_t{0};
  auto n = protocol::ParseDeviceCount(resource, *v);
  if (!n) return Error{"node " + Quote(node.name) + ": capacity " + n.error()};
  return int64_t{*n};
}

}  // namespace

Result<NeuronConfig> ParseNeuronConfig(const YAML::Node& section) {
  NeuronConfig config;
  if (!section || section.IsNull()) return config;
  if (!section.IsMap()) return FieldError(std::string(kSection), "a map", Describe(section));
  for (auto [key, field] : {std::pair{"resourceCountName", &config.resource_count_name},
                            std::pair{"resourceCoreName", &config.resource_core_name}}) {
    YAML::Node value = section[key];
    if (!value || value.IsNull()) continue;
    if (!value.IsScalar()) {
      return FieldError(std::string(kSection) + "." + key, "a resource name", Describe(value));
    }
    if (!Trim(value.Scalar()).empty()) *field = std::string(Trim(value.Scalar()));
  }
  return config;
}

NeuronDevice::NeuronDevice(NeuronConfig config) : config_(std::move(config)) {
  info_ = *protocol::FindVendor(kVendorKey);
  info_.count_resource = config_.resource_count_name;
  info_.core_resource = config_.resource_core_name;
}

Result<std::vector<DeviceUsage>> NeuronDevice::NodeDevices(const NodeView& node) const {
  auto devices = CapacityOf(node, config_.resource_count_name);
  if (!devices) return std::move(devices).take_error();
  auto cores = CapacityOf(node, config_.resource_core_name);
  if (!cores) return std::move(cores).take_error();
  std::vector<DeviceUsage> rows = awsneuron::NodeDevices(node.name, *devices, *cores);
  const std::string* type = FindValue(node.labels, kInstanceTypeLabel);
  for (DeviceUsage& row : rows) row.custom_info[std::string(kNodeTypeInfo)] = type ? *type : "";
  return rows;
}

Health NeuronDevice::CheckHealth(const NodeView& /*node*/, Health /*handshake*/) const {
  return Health{true, true};
}

Result<bool> NeuronDevice::MutateAdmission(AdmissionEdit& edit) const {
  auto c = ContainerOf(edit);
  if (!c) return std::move(c).take_error();
  return awsneuron::MutateAdmission(config_, *c);
}

Result<DeviceRequest> NeuronDevice::NormalizeRequest(const ContainerView& container) const {
  return awsneuron::NormalizeRequest(config_, container);
}

FitResult NeuronDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                            const DeviceRequest& request, const FitContext& context) const {
  std::string node_type;
  if (!candidates.empty()) {
    auto it = candidates[0]->custom_info.find(kNodeTypeInfo);
    if (it != candidates[0]->custom_info.end()) node_type = it->second;
  }
  return awsneuron::Fit(candidates, request, context, node_type);
}

StringMap NeuronDevice::AllocationAnnotations(const AllocationContext& context,
                                              const protocol::PodDevices& devices) const {
  static const PodView kNoPod;
  const PodView& pod = context.pod ? *context.pod : kNoPod;
  std::vector<ContainerAsk> asks;
  for (const ContainerView* c : pod.AllContainers()) asks.push_back(AskOf(config_, *c));
  std::map<std::string, uint64_t> index_of;
  for (const auto& ctr : devices) {
    for (const auto& d : ctr) {
      if (auto i = IndexFromId(d.uuid)) index_of[d.uuid] = *i;
    }
  }
  // HAMi writes the node the pod is being placed on; the device ids name it
  // ("<node>-AWSNeuron-<i>"), else the pod's hami.io/vgpu-node or spec.nodeName.
  std::string node(context.node);
  const std::string marker = "-" + std::string(kVendorKey) + "-";
  for (const auto& ctr : devices) {
    for (const auto& d : ctr) {
      size_t at = d.uuid.rfind(marker);
      if (node.empty() && at != std::string::npos && at > 0) node = d.uuid.substr(0, at);
    }
  }
  if (node.empty()) {
    const std::string* assigned = FindValue(pod.annotations, protocol::kVgpuNodeKey);
    node = assigned ? *assigned : pod.node_name;
  }
  int64_t now =
      context.now
          ? std::chrono::duration_cast<std::chrono::nanoseconds>(context.now->time_since_epoch())
                .count()
          : 0;
  StringMap out = awsneuron::PatchAnnotations(config_, devices, asks, index_of, node, now);
  if (!context.now) out.erase(std::string(kPredicateTimeKey));
  return out;
}

NodeRegistration NeuronDevice::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  NodeRegistration out;
  // Two cores per device, as on inf2 and trn1 (HAMi addresses two per device).
  int64_t cores = static_cast<int64_t>(devices.size()) * kMaxCoresPerDevice;
  out.capacity[config_.resource_count_name] = std::to_string(devices.size());
  out.capacity[config_.resource_core_name] = std::to_string(cores);
  return out;
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeNeuron(const YAML::Node& section,
                                                        const DeviceConfig& /*config*/) {
  auto config = ParseNeuronConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<NeuronDevice>(*config));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(awsneuron, "awsneuron", MakeNeuron);

}  // namespace hami::device::awsneuron
