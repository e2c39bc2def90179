// NVIDIA's self-registration (device.h HAMI_REGISTER_VENDOR): the `nvidia` section of
// device-config.yaml makes the NVIDIA backend active; the backend parses it (nvidia_config.h).
#include <yaml-cpp/yaml.h>

#include "common/strings.h"

#include "device/vendors/nvidia/nvidia.h"
#include "device/vendors/nvidia/nvidia_config.h"
#include "protocol/keys.h"
#include "protocol/pair_score.h"

namespace hami::device::nvidia {
namespace {

Result<std::vector<std::unique_ptr<Device>>> MakeNvidia(const YAML::Node& section,
                                                        const DeviceConfig& /*config*/) {
  auto config = ParseNvidiaConfig(section);
  if (!config) return std::move(config).take_error();
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<NvidiaDevice>(std::move(*config)));
  return out;
}

}  // namespace

Health CheckNvidiaHealth(NodeSeen& seen, int64_t allocatable, std::string_view register_value,
                         Health handshake) {
  const int64_t last = seen.count;
  const bool register_changed = seen.register_value != register_value;
  seen.count = allocatable;
  seen.register_value = std::string(register_value);
  if (allocatable == 0 && last == 0) return handshake;
  if (allocatable == 0) return Health{false, false};
  if (allocatable != last) return Health{true, true};
  if (register_changed) return Health{handshake.healthy, true};
  return handshake;
}

Health NvidiaDevice::CheckHealth(const NodeView& node, Health handshake) const {
  int64_t allocatable = 0;
  if (const std::string* v = FindValue(node.allocatable, info_.count_resource)) {
    allocatable = ParseInt64(*v).value_or(0);
  }
  const std::string* reg = FindValue(node.annotations, info_.register_key);
  std::lock_guard<std::mutex> lock(seen_mu_);
  return CheckNvidiaHealth(seen_[node.name], allocatable, reg ? *reg : std::string(), handshake);
}

void NvidiaDevice::ForgetNode(std::string_view node) const {
  std::lock_guard<std::mutex> lock(seen_mu_);
  if (auto it = seen_.find(node); it != seen_.end()) seen_.erase(it);
}

Result<protocol::PairScores> NvidiaDevice::NodePairScores(const NodeView& node) const {
  const std::string* value = FindValue(node.annotations, protocol::kNodeNvidiaScoreKey);
  if (!value) return protocol::PairScores{};
  auto scores = protocol::DecodePairScores(*value);
  if (!scores) {
    return Error{"annotation " + std::string(protocol::kNodeNvidiaScoreKey) + ": " +
                 scores.error()};
  }
  return scores;
}

HAMI_REGISTER_VENDOR(nvidia, "nvidia", MakeNvidia);

}  // namespace hami::device::nvidia
