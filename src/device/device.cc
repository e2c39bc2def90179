#include "device/device.h"

#include "common/strings.h"
#include "device/vendors/nvidia/nvidia.h"
#include "protocol/keys.h"

namespace hami::device {

std::string FitResult::Reason() const {
  return protocol::EncodeReason(reasons, devices_considered);
}

void Registry::Register(std::unique_ptr<Device> device) {
  std::string key = device->VendorKey();
  devices_[key] = std::move(device);
}

const Device* Registry::Find(std::string_view vendor_key) const {
  auto it = devices_.find(vendor_key);
  return it == devices_.end() ? nullptr : it->second.get();
}

std::vector<const Device*> Registry::All() const {
  std::vector<const Device*> out;
  out.reserve(devices_.size());
  for (const auto& [key, device] : devices_) out.push_back(device.get());
  return out;
}

Registry MakeRegistry(const DeviceConfig& config) {
  Registry registry;
  if (config.has_nvidia) registry.Register(std::make_unique<nvidia::NvidiaDevice>(config.nvidia));
  return registry;
}

Result<NodeUsage> NodeUsageFromAnnotations(const Registry& registry, const std::string& node_name,
                                           const StringMap& node_annotations) {
  NodeUsage node;
  node.name = node_name;
  for (const Device* device : registry.All()) {
    auto devices = device->NodeDevices(node_annotations);
    if (!devices) return Error{"node " + Quote(node_name) + ": " + devices.error()};
    for (auto& d : *devices) node.devices.push_back(std::move(d));
  }
  if (auto it = node_annotations.find(protocol::kDeviceCordonKey); it != node_annotations.end()) {
    node.cordoned = ParseCordon(it->second);
  }
  if (auto it = node_annotations.find(protocol::kNodeNvidiaScoreKey);
      it != node_annotations.end()) {
    auto scores = protocol::DecodePairScores(it->second);
    if (!scores) {
      return Error{"node " + Quote(node_name) + ": annotation " +
                   std::string(protocol::kNodeNvidiaScoreKey) + ": " + scores.error()};
    }
    node.pair_scores = std::move(*scores);
  }
  return node;
}

Result<NodeUsage> NodeUsageFromNode(const Registry& registry, const nlohmann::json& node) {
  return NodeUsageFromAnnotations(registry, ObjectName(node), ObjectAnnotations(node));
}

}  // namespace hami::device
