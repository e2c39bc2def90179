// The Device API (DESIGN decision 5): one interface per vendor backend. A backend knows its
// resource names and annotation keys (protocol::VendorInfo, with the configured resource names),
// reads its devices from a node's annotations, normalises a container's request and fits a
// request onto a node's devices. Backends are registered by vendor key in a Registry; the
// scheduler, the simulator and the device plugin loop over Registry::All().
//
// Everything here is pure: no I/O, no clock, deterministic for equal inputs.
#ifndef HAMI_DEVICE_DEVICE_H_
#define HAMI_DEVICE_DEVICE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/config.h"
#include "device/pod_view.h"
#include "device/policy.h"
#include "device/quota.h"
#include "device/usage.h"
#include "protocol/reason.h"
#include "protocol/vendor.h"

namespace hami::device {

// What Fit may look at besides the candidates and the request.
struct FitContext {
  const PodView* pod = nullptr;     // annotations: type/uuid selection, numa-bind, vgpu-mode
  const NodeUsage* node = nullptr;  // cordoned devices, pair scores
  GpuPolicy policy{};               // mutex / topology-aware filters
  // Quota of the pod's namespace; nullptr = no quota check.
  const NamespaceQuota* quota = nullptr;
  // This vendor's devices already chosen for the pod's earlier containers (positional, init
  // containers first, `init_count` of them); the container being fitted comes next. Used for the
  // hypothetical collapsed pod total in the quota check. nullptr = none.
  const protocol::PodDevices* earlier = nullptr;
  size_t init_count = 0;
};

struct FitResult {
  bool fit = false;
  protocol::ContainerDevices devices{};  // chosen devices, in pick order (on success)
  protocol::ReasonCounts reasons{};      // rejections by reason name
  int devices_considered = 0;            // the reason denominator: candidates given to Fit
  // "1/3 CardInsufficientMemory, 2/3 CardTypeMismatch" (protocol::EncodeReason).
  std::string Reason() const;
};

class Device {
 public:
  virtual ~Device() = default;

  // Vendor key, resource names (as configured) and annotation keys.
  virtual const protocol::VendorInfo& Info() const = 0;
  const std::string& VendorKey() const { return Info().vendor_key; }

  // gpumem requests and quota memory limits are multiplied by this (>= 1).
  virtual int32_t MemoryFactor() const { return 1; }

  // This vendor's devices on a node, as usage rows with zero usage and `vendor` = VendorKey(),
  // from the node's annotations. No register annotation = no devices (not an error); an
  // undecodable one is an error naming the key.
  virtual Result<std::vector<DeviceUsage>> NodeDevices(const StringMap& node_annotations) const = 0;

  // One container's request (limits first, then requests, per resource). nums == 0 when the
  // container asks for none of this vendor's devices. A bad quantity is an error naming the
  // container, the resource and the value (HAMi silently ignores such pods).
  virtual Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const = 0;

  // Picks `request.nums` devices among `candidates` (already sorted by the GPU policy; the
  // preferred device last) or says why not. Does not modify the candidates.
  virtual FitResult Fit(const std::vector<const DeviceUsage*>& candidates,
                        const DeviceRequest& request, const FitContext& context) const = 0;

  // A bonus added to the node score (HAMi ScoreNode); NVIDIA adds 0.
  virtual double NodeScoreBonus(const NodeUsage& /*node*/, NodePolicy /*policy*/) const {
    return 0;
  }
};

// Backends by vendor key. Not thread-safe to modify; const use is safe from any thread.
class Registry {
 public:
  Registry() = default;
  Registry(Registry&&) = default;
  Registry& operator=(Registry&&) = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds `device`, replacing a backend with the same vendor key.
  void Register(std::unique_ptr<Device> device);
  const Device* Find(std::string_view vendor_key) const;
  // Every backend, sorted by vendor key (the order HAMi uses for multi-vendor work).
  std::vector<const Device*> All() const;

 private:
  std::map<std::string, std::unique_ptr<Device>, std::less<>> devices_;
};

// The backends `config` enables: NVIDIA when config.has_nvidia. (Other vendors join here as
// they are implemented.)
Registry MakeRegistry(const DeviceConfig& config);

// A node's usage row with zero usage: every backend's devices from the annotations, in backend
// order then registered order, plus the cordon list and the NVIDIA pair scores. A register or
// pair-score annotation that does not decode is an error naming the node and key.
Result<NodeUsage> NodeUsageFromAnnotations(const Registry& registry, const std::string& node_name,
                                           const StringMap& node_annotations);

// The same from a core/v1 Node object (metadata.name and metadata.annotations), for the
// simulation filter, whose ExtenderArgs carry full nodes and whose usage is zero.
Result<NodeUsage> NodeUsageFromNode(const Registry& registry, const nlohmann::json& node);

}  // namespace hami::device

#endif  // HAMI_DEVICE_DEVICE_H_
