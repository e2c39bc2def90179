#include "device/vendors/kunlun/kunlun.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "device/vendors/nvidia/nvidia.h"
#include "device/yaml_error.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::kunlun {
namespace {

// Cross-wing pairs, then the pairs inside each wing (HAMi InterGroupConnection, GroupConnection).
constexpr std::array<std::array<uint64_t, 2>, 4> kCrossPairs = {{{0, 4}, {1, 5}, {2, 6}, {3, 7}}};
constexpr std::array<std::array<uint64_t, 2>, 12> kWingPairs = {{{0, 1},
                                                                 {0, 2},
                                                                 {0, 3},
                                                                 {1, 2},
                                                                 {1, 3},
                                                                 {2, 3},
                                                                 {4, 5},
                                                                 {4, 6},
                                                                 {4, 7},
                                                                 {5, 6},
                                                                 {5, 7},
                                                                 {6, 7}}};
// Groups of four that are interconnected (HAMi InterGroupConnection2).
constexpr std::array<std::array<uint64_t, 4>, 6> kGroups = {
    {{0, 1, 4, 5}, {2, 3, 6, 7}, {0, 2, 4, 6}, {1, 3, 5, 7}, {0, 3, 4, 7}, {1, 2, 5, 6}}};

const std::string* Lookup(const ContainerView& c, const std::string& resource) {
  if (const std::string* v = FindValue(c.limits, resource)) return v;
  return FindValue(c.requests, resource);
}

Error ContainerError(const ContainerView& c, const std::string& why) {
  return Error{"container " + Quote(c.name) + ": " + why};
}

template <typename Want>
bool CanMeet(const std::set<uint64_t>& have, const Want& want) {
  return std::all_of(want.begin(), want.end(), [&](uint64_t v) { return have.count(v) > 0; });
}

std::vector<uint64_t> DevicePick(const std::vector<const DeviceUsage*>& devices, size_t start,
                                 size_t count, const FitFn& fit) {
  std::vector<uint64_t> res;
  for (size_t t = start; t < 8 && t < devices.size(); ++t) {
    if (fit(*devices[t])) {
      res.push_back(devices[t]->index);
      if (res.size() == count) return res;
    }
  }
  return res;
}

std::vector<uint64_t> Interconnect(const std::vector<const DeviceUsage*>& devices, size_t count,
                                   const FitFn& fit) {
  if (count == 2) {
    for (const DeviceUsage* a : devices) {
      if (!fit(*a)) continue;
      for (const DeviceUsage* b : devices) {
        if (!fit(*b) || b->index == a->index) continue;
        for (const auto& p : kCrossPairs) {
          if ((p[0] == a->index && p[1] == b->index) || (p[0] == b->index && p[1] == a->index)) {
            return {a->index, b->index};
          }
        }
      }
    }
  }
  if (count == 4) {
    std::vector<uint64_t> unused_list;
    for (const DeviceUsage* d : devices) {
      if (fit(*d)) unused_list.push_back(d->index);
    }
    std::set<uint64_t> unused(unused_list.begin(), unused_list.end());
    if (unused_list.size() == 4 || unused_list.size() == 5) {
      for (const auto& g : kGroups) {
        if (CanMeet(unused, g)) return {g.begin(), g.end()};
      }
    }
    if (unused_list.size() == 6) {
      std::vector<uint64_t> ret;
      for (const auto& g : kGroups) {
        if (!CanMeet(unused, g)) continue;
        ret.assign(g.begin(), g.end());
        std::set<uint64_t> rest;
        for (uint64_t v : unused_list) {
          if (std::find(g.begin(), g.end(), v) == g.end()) rest.insert(v);
        }
        for (const auto& p : kCrossPairs) {
          if (CanMeet(rest, p)) return ret;
        }
        for (const auto& p : kWingPairs) {
          if (CanMeet(rest, p)) return ret;
        }
      }
      return ret;
    }
  }
  return {};
}

int WingValue(int n) {
  if (n == 4) return 0;
  if (n == 1) return 2;
  return 1;
}

int CountBubble(const std::vector<uint64_t>& indexes) {
  int left = 0, right = 0;
  for (uint64_t v : indexes) (v < 4 ? left : right)++;
  if (left == 0 && right == 0) return 1;
  return WingValue(left) + WingValue(right);
}

std::vector<uint64_t> Dedup(const std::vector<uint64_t>& in) {
  std::vector<uint64_t> out;
  for (uint64_t v : in) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// Both UUID list pairs XPU and kunlun pods may carry.
bool UuidAllowed(const StringMap& annos, const std::string& id) {
  const protocol::VendorInfo xpu = *protocol::FindVendor(kVxpuVendorKey);
  const protocol::VendorInfo whole = *protocol::FindVendor(kXpuVendorKey);
  return nvidia::CheckUuid(annos, xpu.use_uuid_key, xpu.nouse_uuid_key, id) &&
         nvidia::CheckUuid(annos, whole.use_uuid_key, whole.nouse_uuid_key, id);
}

const StringMap& PodAnnotations(const FitContext& context) {
  static const StringMap kNone;
  return context.pod ? context.pod->annotations : kNone;
}

// Runs GraphSelect and turns its indexes into picks; `hold` gives a pick's memory and cores.
template <typename Hold>
bool Pick(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
          const FitFn& fit, Hold hold, FitResult* out) {
  std::vector<uint64_t> alloc = GraphSelect(candidates, request.nums, fit);
  if (alloc.empty()) return false;
  protocol::ContainerDevices picks;
  for (uint64_t idx : alloc) {
    for (const DeviceUsage* d : candidates) {
      if (d->index == idx) {
        auto [mem, cores] = hold(*d);
        picks.push_back(protocol::ContainerDevice{
            .uuid = d->id, .type = request.type, .usedmem = mem, .usedcores = cores});
        break;
      }
    }
  }
  // HAMi would hand out fewer devices than asked when a group names an index the node lacks
  // (fewer than eight devices); that is not a fit.
  if (picks.size() != static_cast<size_t>(request.nums)) return false;
  out->devices = std::move(picks);
  out->fit = true;
  return true;
}

// Kubernetes Quantity.AsInt64: the exact whole value, or nullopt (fractions, beyond int64).
std::optional<int64_t> AsInt64(std::string_view text) {
  auto q = protocol::ParseQuantity(text);
  if (!q || q->exp10 < 0) return std::nullopt;
  long double v =
      static_cast<long double>(q->mantissa) * std::pow(10.0L, q->exp10) * std::pow(2.0L, q->exp2);
  if (v > 9.2e18L) return std::nullopt;
  int64_t i = static_cast<int64_t>(v);
  return q->negative ? -i : i;
}

}  // namespace

std::vector<uint64_t> GraphSelect(const std::vector<const DeviceUsage*>& devices, int32_t nums,
                                  const FitFn& fit) {
  int left = 0, right = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (fit(*devices[i])) (i < 4 ? left : right)++;
  }
  static constexpr std::array<int, 4> kOddOrder = {1, 3, 2, 4};
  switch (nums) {
    case 8:
      if (left + right == 8) return {0, 1, 2, 3, 4, 5, 6, 7};
      return {};
    case 1:
    case 2:
    case 4:
      if (left >= nums || right >= nums) {
        for (int slots = nums; slots <= 4; ++slots) {
          int num = nums % 2 == 1 ? kOddOrder[static_cast<size_t>(slots - 1)] : slots;
          if (left == num) return DevicePick(devices, 0, static_cast<size_t>(nums), fit);
          if (right == num) return DevicePick(devices, 4, static_cast<size_t>(nums), fit);
        }
      }
      return Interconnect(devices, static_cast<size_t>(nums), fit);
    default:
      return {};
  }
}

double CalcScore(const std::vector<uint64_t>& previous, const std::vector<uint64_t>& current) {
  switch (CountBubble(current) - CountBubble(previous)) {
    case -1:
      return 3000;
    case 0:
      return 2000;
    case 1:
      return 1000;
    case 2:
      return 0;
    default:
      return 1000;
  }
}

// ---- kunlun ----

std::vector<DeviceUsage> XpuNodeDevices(std::string_view node_name, int64_t cards) {
  std::vector<DeviceUsage> out;
  for (int64_t i = 0; i < cards && i < std::numeric_limits<int32_t>::max(); ++i) {
    DeviceUsage d;
    d.id = std::string(node_name) + "-kunlun-" + std::to_string(i);
    d.index = static_cast<uint64_t>(i);
    d.type = std::string(kXpuVendorKey);
    d.vendor = std::string(kXpuVendorKey);
    d.health = true;
    d.numa = i >= cards / 2 ? 1 : 0;
    d.count = 100;
    d.totalmem = kMaxMemory;
    d.totalcore = 100;
    out.push_back(std::move(d));
  }
  return out;
}

bool XpuMutateAdmission(const KunlunConfig& config, const ContainerView& container) {
  return FindValue(container.limits, config.resource_count_name) != nullptr;
}

Result<DeviceRequest> XpuNormalizeRequest(const KunlunConfig& config,
                                          const ContainerView& container) {
  DeviceRequest req;
  const std::string* count = Lookup(container, config.resource_count_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config.resource_count_name, *count);
  if (!nums) return ContainerError(container, nums.error());
  if (*nums == 0) return req;
  req.nums = *nums;
  req.type = std::string(kXpuVendorKey);
  req.memreq = 0;
  req.mem_percentage = 100;
  req.coresreq = 0;
  return req;
}

FitResult XpuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                 const FitContext& context) {
  FitResult out;
  out.devices_considered = static_cast<int>(candidates.size());
  const StringMap& annos = PodAnnotations(context);
  std::set<std::string> uuid_mismatch;
  FitFn fit = [&](const DeviceUsage& d) {
    if (!UuidAllowed(annos, d.id)) {
      uuid_mismatch.insert(d.id);
      return false;
    }
    return d.used == 0 && d.health;
  };
  auto hold = [](const DeviceUsage& d) { return std::make_pair(d.totalmem, d.totalcore); };
  if (Pick(candidates, request, fit, hold, &out)) return out;
  if (!uuid_mismatch.empty()) {
    out.reasons[std::string(protocol::kCardUuidMismatch)] = static_cast<int>(uuid_mismatch.size());
  } else {
    out.reasons[std::string(protocol::kNumaNotFit)] = 1;
  }
  return out;
}

double XpuScore(const std::vector<const DeviceUsage*>& node_devices,
                const std::vector<uint64_t>& picked_indexes, bool all_picks_kunlun) {
  std::vector<uint64_t> prev;
  for (const DeviceUsage* d : node_devices) {
    if (d->type.find(kXpuVendorKey) == std::string::npos) return 0;
    if (d->used > 0) prev.push_back(d->index);
  }
  if (!all_picks_kunlun) return 0;
  return CalcScore(Dedup(prev), Dedup(picked_indexes));
}

StringMap XpuPatchAnnotations(const protocol::PodDevices& devices,
                              const std::map<std::string, uint64_t>& index_of) {
  StringMap out;
  bool any = std::any_of(devices.begin(), devices.end(),
                         [](const protocol::ContainerDevices& c) { return !c.empty(); });
  if (!any) return out;
  out[protocol::FindVendor(kXpuVendorKey)->allocated_key] = protocol::EncodePodDevices(devices);
  for (const protocol::ContainerDevices& ctr : devices) {
    std::vector<std::string> idx;
    for (const protocol::ContainerDevice& d : ctr) {
      if (auto it = index_of.find(d.uuid); it != index_of.end()) {
        idx.push_back(std::to_string(it->second));
      }
    }
    if (!idx.empty()) out[std::string(kDeviceSelectionKey)] = Join(idx, ",");
  }
  return out;
}

// ---- XPU ----

int64_t TrimMemory(int64_t mib) {
  for (int64_t size : {int64_t{24576}, int64_t{49152}}) {
    if (mib <= size) return size;
  }
  return kMaxMemory;
}

Result<std::vector<DeviceUsage>> VxpuNodeDevices(std::string_view node_name,
                                                 const StringMap& node_annotations) {
  const protocol::VendorInfo info = *protocol::FindVendor(kVxpuVendorKey);
  const std::string* value = FindValue(node_annotations, info.register_key);
  if (!value) return std::vector<DeviceUsage>{};
  auto fail = [&](const std::string& why) {
    return Error{"node " + Quote(node_name) + ": annotation " + info.register_key + ": " + why};
  };
  auto devices = protocol::DecodeNodeRegister(*value, {.require_id = true});
  if (!devices) return fail(devices.error());
  if (devices->empty()) return fail("no device found on node (value " + Quote(*value) + ")");
  std::vector<DeviceUsage> out;
  for (const protocol::DeviceInfo& d : *devices) {
    out.push_back(UsageFromDeviceInfo(d, info.vendor_key));
  }
  return out;
}

Result<bool> VxpuMutateAdmission(const KunlunConfig& config, ContainerView* container) {
  ContainerView& c = *container;
  if (!FindValue(c.limits, config.resource_vcount_name)) return false;
  const std::string& mem_name = config.resource_vmemory_name;
  if (const std::string* mem = FindValue(c.limits, mem_name)) {
    auto q = protocol::ParseQuantity(*mem);
    if (!q) {
      return ContainerError(c, "resource " + mem_name + " value " + Quote(*mem) + ": " + q.error());
    }
    // Value(): rounded up to a whole number.
    long double v = std::ceil(static_cast<long double>(q->mantissa) * std::pow(10.0L, q->exp10) *
                              std::pow(2.0L, q->exp2));
    int64_t whole = v > 9.2e18L ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(v);
    if (q->negative) whole = -whole;
    std::string trimmed = std::to_string(TrimMemory(whole));
    c.limits[mem_name] = trimmed;
    c.requests[mem_name] = trimmed;
  }
  return true;
}

Result<DeviceRequest> VxpuNormalizeRequest(const KunlunConfig& config,
                                           const ContainerView& container) {
  DeviceRequest req;
  const std::string* count = Lookup(container, config.resource_vcount_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config.resource_vcount_name, *count);
  if (!nums) return ContainerError(container, nums.error());
  if (*nums == 0) return req;
  int64_t mem = 0;
  if (const std::string* m = Lookup(container, config.resource_vmemory_name)) {
    if (!protocol::ParseQuantity(*m)) {
      return ContainerError(container, "resource " + config.resource_vmemory_name + " value " +
                                           Quote(*m) + ": not a quantity");
    }
    // HAMi AsInt64: a value that is not a whole int64 counts as no memory given.
    if (auto v = AsInt64(*m)) mem = TrimMemory(*v);
  }
  int64_t cores = mem * 100 / kMaxMemory;
  int32_t pct = 0;
  if (mem == 0) {
    pct = 100;
    cores = 100;
    mem = kMaxMemory;
  }
  req.nums = *nums;
  req.type = std::string(kVxpuVendorKey);
  req.memreq = static_cast<int32_t>(mem);
  req.mem_percentage = pct;
  req.coresreq = static_cast<int32_t>(cores);
  return req;
}

bool FitVxpu(const DeviceUsage& device, const DeviceRequest& request) {
  if (!device.health) return false;
  if (static_cast<int64_t>(request.memreq) + device.usedmem > device.totalmem) return false;
  if (device.used == 0) return true;
  return device.usedmem / device.used == request.memreq;
}

FitResult VxpuFit(const std::vector<const DeviceUsage*>& candidates, const DeviceRequest& request,
                  const FitContext& context) {
  FitResult out;
  out.devices_considered = static_cast<int>(candidates.size());
  const StringMap& annos = PodAnnotations(context);
  const bool mutex = context.policy.mutex;
  std::set<std::string> uuid_mismatch;
  FitFn fit = [&](const DeviceUsage& d) {
    if (!UuidAllowed(annos, d.id)) {
      uuid_mismatch.insert(d.id);
      return false;
    }
    if (mutex && d.used != 0) return false;
    return FitVxpu(d, request);
  };
  auto hold = [&](const DeviceUsage&) { return std::make_pair(request.memreq, request.coresreq); };
  if (Pick(candidates, request, fit, hold, &out)) return out;
  if (mutex) {
    for (const DeviceUsage* d : candidates) {
      if (d->used > 0 && FitVxpu(*d, request)) {
        ++out.reasons[std::string(protocol::kExclusiveDeviceAllocateConflict)];
      }
    }
  }
  if (out.reasons.empty() && !uuid_mismatch.empty()) {
    out.reasons[std::string(protocol::kCardUuidMismatch)] = static_cast<int>(uuid_mismatch.size());
  }
  if (out.reasons.empty()) out.reasons[std::string(protocol::kNumaNotFit)] = 1;
  return out;
}

// ---- the Device classes ----

namespace {

constexpr std::string_view kSection = "kunlun";

// A container under admission as a ContainerView (quantities as text), through the pod reader.
Result<ContainerView> ContainerOf(const AdmissionEdit& edit) {
  nlohmann::json pod = {{"spec", {{"containers", nlohmann::json::array({edit.Container()})}}}};
  auto view = ParsePodView(pod);
  if (!view) return std::move(view).take_error();
  return view->containers.at(0);
}

// The number after the last '-' of a device id ("<node>-kunlun-3" -> 3).
std::optional<uint64_t> IndexFromId(std::string_view id) {
  size_t dash = id.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  return ParseUint64(id.substr(dash + 1));
}

protocol::VendorInfo WholeInfo(const KunlunConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kXpuVendorKey);
  info.count_resource = config.resource_count_name;
  return info;
}

protocol::VendorInfo VirtualInfo(const KunlunConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kVxpuVendorKey);
  info.count_resource = config.resource_vcount_name;
  info.memory_resource = config.resource_vmemory_name;
  return info;
}

}  // namespace

Result<KunlunConfig> ParseKunlunConfig(const YAML::Node& section) {
  KunlunConfig config;
  if (!section || section.IsNull()) return config;
  if (!section.IsMap()) return FieldError(std::string(kSection), "a map", Describe(section));
  for (auto [key, field] : {std::pair{"resourceCountName", &config.resource_count_name},
                            std::pair{"resourceVCountName", &config.resource_vcount_name},
                            std::pair{"resourceVMemoryName", &config.resource_vmemory_name}}) {
    YAML::Node value = section[key];
    if (!value || value.IsNull()) continue;
    if (!value.IsScalar()) {
      return FieldError(std::string(kSection) + "." + key, "a resource name", Describe(value));
    }
    // An empty value (the chart's template with the value unset) keeps the default.
    if (!Trim(value.Scalar()).empty()) *field = std::string(Trim(value.Scalar()));
  }
  return config;
}

KunlunDevice::KunlunDevice(KunlunConfig config)
    : config_(std::move(config)), info_(WholeInfo(config_)) {}

Result<std::vector<DeviceUsage>> KunlunDevice::NodeDevices(const NodeView& node) const {
  const std::string* v = FindValue(node.capacity, config_.resource_count_name);
  if (!v) return std::vector<DeviceUsage>{};
  auto n = protocol::ParseDeviceCount(config_.resource_count_name, *v);
  if (!n) return Error{"node " + Quote(node.name) + ": capacity " + n.error()};
  return XpuNodeDevices(node.name, *n);
}

Health KunlunDevice::CheckHealth(const NodeView& /*node*/, Health /*handshake*/) const {
  return Health{true, true};
}

Result<bool> KunlunDevice::MutateAdmission(AdmissionEdit& edit) const {
  auto c = ContainerOf(edit);
  if (!c) return std::move(c).take_error();
  return XpuMutateAdmission(config_, *c);
}

Result<DeviceRequest> KunlunDevice::NormalizeRequest(const ContainerView& container) const {
  return XpuNormalizeRequest(config_, container);
}

FitResult KunlunDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                            const DeviceRequest& request, const FitContext& context) const {
  return XpuFit(candidates, request, context);
}

double KunlunDevice::ScoreNode(const ScoreContext& context) const {
  std::vector<const DeviceUsage*> previous;
  std::map<std::string_view, uint64_t> index_of;
  for (const DeviceUsage& d : context.node->devices) {
    previous.push_back(&d);
    index_of.emplace(d.id, d.index);
  }
  std::vector<uint64_t> picked;
  bool all_kunlun = true;
  for (const auto& ctr : *context.picks) {
    for (const auto& d : ctr) {
      all_kunlun = all_kunlun && d.type.find(kXpuVendorKey) != std::string::npos;
      if (auto it = index_of.find(d.uuid); it != index_of.end()) {
        picked.push_back(it->second);
      } else {
        picked.push_back(IndexFromId(d.uuid).value_or(0));
      }
    }
  }
  return XpuScore(previous, picked, all_kunlun);
}

StringMap KunlunDevice::AllocationAnnotations(const AllocationContext& /*context*/,
                                              const protocol::PodDevices& devices) const {
  std::map<std::string, uint64_t> index_of;
  for (const auto& ctr : devices) {
    for (const auto& d : ctr) {
      if (auto i = IndexFromId(d.uuid)) index_of[d.uuid] = *i;
    }
  }
  return XpuPatchAnnotations(devices, index_of);
}

NodeRegistration KunlunDevice::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  NodeRegistration out;
  out.capacity[config_.resource_count_name] = std::to_string(devices.size());
  return out;
}

VxpuDevice::VxpuDevice(KunlunConfig config)
    : config_(std::move(config)), info_(VirtualInfo(config_)) {}

Result<std::vector<DeviceUsage>> VxpuDevice::NodeDevices(const NodeView& node) const {
  return VxpuNodeDevices(node.name, node.annotations);
}

Result<bool> VxpuDevice::MutateAdmission(AdmissionEdit& edit) const {
  auto c = ContainerOf(edit);
  if (!c) return std::move(c).take_error();
  ContainerView after = *c;
  auto asks = VxpuMutateAdmission(config_, &after);
  if (!asks) return std::move(asks).take_error();
  const std::string& mem = config_.resource_vmemory_name;
  if (*asks && FindValue(c->limits, mem)) {
    edit.Set({"resources", "limits", mem}, after.limits[mem]);
    edit.Set({"resources", "requests", mem}, after.requests[mem]);
  }
  return *asks;
}

Result<DeviceRequest> VxpuDevice::NormalizeRequest(const ContainerView& container) const {
  return VxpuNormalizeRequest(config_, container);
}

FitResult VxpuDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                          const DeviceRequest& request, const FitContext& context) const {
  return VxpuFit(candidates, request, context);
}

namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeKunlun(const YAML::Node& section,
                                                        const DeviceConfig& /*config*/) {
  auto config = ParseKunlunConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<KunlunDevice>(*config));
  out.push_back(std::make_unique<VxpuDevice>(*config));
  return out;
}

}  // namespace

HAMI_REGISTER_VENDOR(kunlun, "kunlun", MakeKunlun);

}  // namespace hami::device::kunlun
