#include "device/device.h"

#include <yaml-cpp/yaml.h>

#include <exception>
#include <iterator>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "protocol/keys.h"

namespace hami::device {

// Defined in the file CMake generates from src/device/vendors/*/ (vendor_anchors.cc): it
// references every vendor's registration anchor, so the linker keeps each vendor's object file.
size_t LinkedVendorCount();

namespace {

// Function-local so registration from other files' static initialisers never sees it
// uninitialised.
std::map<std::string, VendorFactory, std::less<>>& Factories() {
  static auto* factories = new std::map<std::string, VendorFactory, std::less<>>();
  return *factories;
}

void ReadStringMap(const nlohmann::json& obj, const char* a, const char* b, StringMap* out) {
  if (!obj.is_object()) return;
  auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return;
  auto y = x->find(b);
  if (y == x->end() || !y->is_object()) return;
  for (const auto& [k, v] : y->items()) {
    if (v.is_string()) {
      (*out)[k] = v.get<std::string>();
    } else if (v.is_number_integer()) {
      (*out)[k] = std::to_string(v.get<int64_t>());
    }
  }
}

Result<std::optional<protocol::PodDevices>> DecodeKey(const StringMap& annotations,
                                                      const std::string& key) {
  std::optional<protocol::PodDevices> none;
  if (key.empty()) return none;
  const std::string* value = FindValue(annotations, key);
  if (!value) return none;
  auto decoded = protocol::DecodePodDevices(*value);
  if (!decoded) return Error{"annotation " + key + ": " + decoded.error()};
  return std::optional<protocol::PodDevices>(std::move(*decoded));
}

// The container's resources.<section> has `name`.
bool HasResource(const nlohmann::json& ctr, const char* section, const std::string& name) {
  if (name.empty() || !ctr.is_object()) return false;
  auto res = ctr.find("resources");
  if (res == ctr.end() || !res->is_object()) return false;
  auto sec = res->find(section);
  return sec != res->end() && sec->is_object() && sec->contains(name);
}

}  // namespace

std::string FitResult::Reason() const {
  return protocol::EncodeReason(reasons, devices_considered);
}

void Registry::KeyFilter::Add(std::string_view key) {
  if (key.size() < 64) {
    lengths |= uint64_t{1} << key.size();
  } else {
    long_keys = true;
  }
  if (!key.empty()) {
    const auto c = static_cast<unsigned char>(key[0]);
    first[c >> 6] |= uint64_t{1} << (c & 63);
  }
}

void Registry::Register(std::unique_ptr<Device> device) {
  std::string key = device->VendorKey();
  devices_[key] = std::move(device);
  // A replaced backend may have scored nodes: build both filters again.
  keys_ = {};
  scoring_keys_ = {};
  for (const auto& [k, d] : devices_) {
    keys_.Add(k);
    if (d->ScoresNodes()) scoring_keys_.Add(k);
  }
}

std::map<std::string, std::unique_ptr<Device>, std::less<>> Registry::Release() {
  keys_ = {};
  scoring_keys_ = {};
  return std::move(devices_);
}

const Device* Registry::Find(std::string_view vendor_key) const {
  if (!keys_.MayHave(vendor_key)) return nullptr;
  auto it = devices_.find(vendor_key);
  return it == devices_.end() ? nullptr : it->second.get();
}

const Device* Registry::FindScoring(std::string_view vendor_key) const {
  if (!scoring_keys_.MayHave(vendor_key)) return nullptr;
  const Device* d = Find(vendor_key);
  return d != nullptr && d->ScoresNodes() ? d : nullptr;
}

std::vector<const Device*> Registry::All() const {
  std::vector<const Device*> out;
  out.reserve(devices_.size());
  for (const auto& [key, device] : devices_) out.push_back(device.get());
  return out;
}

NodeView NodeViewFromNode(const nlohmann::json& node) {
  NodeView view;
  view.name = ObjectName(node);
  view.annotations = ObjectAnnotations(node);
  ReadStringMap(node, "metadata", "labels", &view.labels);
  ReadStringMap(node, "status", "capacity", &view.capacity);
  ReadStringMap(node, "status", "allocatable", &view.allocatable);
  return view;
}

Result<std::string> Device::TakeVendorLock(const NodeView& node, SystemTime /*now*/) const {
  return Error{"node " + node.name + ": vendor " + Info().vendor_key +
               " has no node lock of its own"};
}

Result<bool> Device::MutateAdmission(AdmissionEdit& edit) const {
  const std::string& count = Info().count_resource;
  return HasResource(edit.Container(), "limits", count) ||
         HasResource(edit.Container(), "requests", count);
}

StringMap Device::AllocationAnnotations(const AllocationContext& /*context*/,
                                        const protocol::PodDevices& devices) const {
  StringMap out;
  std::string value = protocol::EncodePodDevices(devices);
  const protocol::VendorInfo& info = Info();
  if (!info.to_allocate_key.empty()) out[info.to_allocate_key] = value;
  if (!info.allocated_key.empty()) out[info.allocated_key] = value;
  return out;
}

Result<std::optional<protocol::PodDevices>> Device::PodAllocated(
    const StringMap& pod_annotations) const {
  return DecodeKey(pod_annotations, Info().allocated_key);
}

std::vector<DeviceDelta> Device::UsageDeltas(const protocol::PodDevices& devices, size_t init_count,
                                             bool init_done) const {
  return CollapsePodDevices(devices, init_count, init_done);
}

NodeRegistration Device::EncodeNodeRegistration(
    const std::vector<protocol::DeviceInfo>& devices) const {
  NodeRegistration out;
  const protocol::VendorInfo& info = Info();
  if (!info.register_key.empty()) {
    out.annotations[info.register_key] =
        info.register_format == protocol::RegisterFormat::kLegacyColon
            ? protocol::EncodeNodeRegisterLegacy(devices)
            : protocol::EncodeNodeRegister(devices);
  }
  if (!info.count_resource.empty()) {
    int64_t count = 0;
    for (const auto& d : devices) count += d.count;
    out.capacity[info.count_resource] = std::to_string(count);
  }
  return out;
}

Result<std::optional<protocol::PodDevices>> Device::PodToAllocate(
    const StringMap& pod_annotations) const {
  const protocol::VendorInfo& info = Info();
  std::vector<const std::string*> keys = {&info.to_allocate_key};
  for (const auto& k : info.to_allocate_read_keys) keys.push_back(&k);
  for (const std::string* key : keys) {
    auto r = DecodeKey(pod_annotations, *key);
    if (!r || r->has_value()) return r;
  }
  return std::optional<protocol::PodDevices>();
}

bool RegisterVendorFactory(std::string_view section, VendorFactory factory) {
  return Factories().emplace(std::string(section), std::move(factory)).second;
}

std::vector<std::string> RegisteredVendorSections() {
  (void)LinkedVendorCount();
  std::vector<std::string> out;
  for (const auto& [name, factory] : Factories()) out.push_back(name);
  return out;
}

const VendorFactory* FindVendorFactory(std::string_view section) {
  (void)LinkedVendorCount();
  auto it = Factories().find(section);
  return it == Factories().end() ? nullptr : &it->second;
}

namespace {

// Runs the factory of one section (none registered: nothing to add).
Status AddSection(const std::string& name, const std::string& text, const DeviceConfig& config,
                  Registry* registry) {
  const VendorFactory* factory = FindVendorFactory(name);
  if (!factory) return OkStatus();
  Result<std::vector<std::unique_ptr<Device>>> made = Error{""};
  // yaml-cpp reports syntax errors by exception; they stop here.
  try {
    made = (*factory)(YAML::Load(text), config);
  } catch (const std::exception& e) {
    return Error{"device config: " + name + ": " + e.what()};
  }
  if (!made) return std::move(made).take_error();
  for (auto& device : *made) registry->Register(std::move(device));
  return OkStatus();
}

}  // namespace

Result<Registry> BuildRegistry(const DeviceConfig& config) {
  Registry registry;
  for (const auto& [name, text] : config.sections) {
    if (auto s = AddSection(name, text, config, &registry); !s) return std::move(s).take_error();
  }
  return registry;
}

Registry MakeRegistry(const DeviceConfig& config) {
  Registry registry;
  for (const auto& [name, text] : config.sections) {
    Registry one;
    if (!AddSection(name, text, config, &one)) continue;
    for (auto& [key, device] : one.Release()) registry.Register(std::move(device));
  }
  return registry;
}

Result<NodeUsage> NodeUsageFromAnnotations(const Registry& registry, const std::string& node_name,
                                           const StringMap& node_annotations) {
  NodeView view;
  view.name = node_name;
  view.annotations = node_annotations;
  return NodeUsageFromView(registry, view);
}

Result<NodeUsage> NodeUsageFromView(const Registry& registry, const NodeView& view) {
  const std::string& node_name = view.name;
  const StringMap& node_annotations = view.annotations;
  NodeUsage node;
  node.name = node_name;
  for (const Device* device : registry.All()) {
    auto devices = device->NodeDevices(view);
    if (!devices) return Error{"node " + Quote(node_name) + ": " + devices.error()};
    for (auto& d : *devices) node.devices.push_back(std::move(d));
  }
  if (auto it = node_annotations.find(protocol::kDeviceCordonKey); it != node_annotations.end()) {
    node.cordoned = ParseCordon(it->second);
  }
  for (const Device* device : registry.All()) {
    auto scores = device->NodePairScores(view);
    if (!scores) return Error{"node " + Quote(node_name) + ": " + scores.error()};
    node.pair_scores.insert(node.pair_scores.end(), std::make_move_iterator(scores->begin()),
                            std::make_move_iterator(scores->end()));
  }
  return node;
}

Result<NodeUsage> NodeUsageFromNode(const Registry& registry, const nlohmann::json& node) {
  return NodeUsageFromView(registry, NodeViewFromNode(node));
}

}  // namespace hami::device
