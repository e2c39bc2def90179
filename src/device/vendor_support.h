// Pieces several vendor backends (src/device/vendors/) share word for word: reading a config
// section's resource-name keys and asking whether a container's limits name a resource. Each
// backend keeps what differs (its own keys, messages and defaults); only the identical shapes
// live here, the Fit scan among them. The messages are pinned by the vendors' tests.
#ifndef HAMI_DEVICE_VENDOR_SUPPORT_H_
#define HAMI_DEVICE_VENDOR_SUPPORT_H_

#include <yaml-cpp/yaml.h>

#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "device/device.h"
#include "device/pod_view.h"
#include "protocol/pod_devices.h"

namespace hami::device {

// Reads each `key` of the map `section` into `*field`, verbatim: a missing or null key keeps the
// field's default; anything but a scalar with non-blank text is
// `<path>.<key>: want a resource name, got "<value>"`.
Status ReadResourceNames(const YAML::Node& section, const std::string& path,
                         std::initializer_list<std::pair<const char*, std::string*>> fields);

// The section shape cambricon, hygon, mthreads and amd share: a null `section` keeps the
// defaults; anything but a map is `<name>: want a map, got "<value>"`; otherwise
// resourceCountName, resourceMemoryName and resourceCoreName go through ReadResourceNames.
Status ReadVendorSection(const YAML::Node& section, std::string_view name, std::string* count,
                         std::string* memory, std::string* core);

// Whether the container JSON's resources.limits is an object holding `resource`.
bool LimitsContain(const nlohmann::json& container, const std::string& resource);

// The device count `capacity` holds under `resource`: 0 when it is not there; a value that is not
// a device count is `capacity <resource>: <why>`.
Result<int32_t> CapacityCount(const StringMap& capacity, const std::string& resource);

// How a vendor that registers through status.capacity alone (cambricon, mthreads) turns two
// counts into cards: `core_resource` counts core units, `cores_per_card` of them per card;
// `memory_resource` counts memory units of `memory_factor` MiB, shared evenly by the cards.
struct CapacityCards {
  const std::string& core_resource;
  const std::string& memory_resource;
  int64_t cores_per_card;
  int64_t memory_factor;
  std::string_view id_infix;  // a card's id is `<node>-<id_infix>-<i>`
  std::string_view vendor;    // the rows' type and vendor
};

// One healthy row per card (core units / cores_per_card, rounded up; none without core units):
// index i, count 100, totalcore cores_per_card, totalmem memory units x memory_factor x
// cores_per_card / core units (at most INT32_MAX). A count that is not one is CapacityCount's
// error.
Result<std::vector<DeviceUsage>> CapacityCardRows(const NodeView& node, const CapacityCards& cards);

// The quota step of a Fit (HAMi fitQuota): with ctx.quota, the pod's total (the earlier
// containers, this container's `picked` and `candidate`, collapsed as the usage index collapses a
// pod) must fit the namespace's quota on `info`'s memory and core resources
// (ResourceQuotaNotFit). Without a quota: nullopt.
std::optional<std::string_view> CheckQuota(const FitContext& ctx, const protocol::VendorInfo& info,
                                           int64_t memory_factor,
                                           const protocol::ContainerDevices& picked,
                                           const protocol::ContainerDevice& candidate);

// CheckShare's quota step, for the backends that have one (cambricon): it runs once the device's
// slice is known, before memory and cores are checked, as HAMi orders it.
struct QuotaStep {
  const protocol::VendorInfo& info;
  int64_t memory_factor;
  const protocol::ContainerDevices& picked;
};

// The share checks after type and UUID that cambricon, hygon, iluvatar and mthreads run in this
// order: time slices (CardTimeSlicingExhausted), the mutex policy
// (ExclusiveDeviceAllocateConflict), `quota` when given (CheckQuota), memory (a percentage of
// totalmem when memreq is 0; CardInsufficientMemory), cores capped at 100 (CardInsufficientCore), a
// whole-device request on a used device (ExclusiveDeviceAllocateConflict), cores all taken
// (CardComputeUnitsExhausted). Passing: `*chosen` is {dev.id, request.type, memreq, cores}.
std::optional<std::string_view> CheckShare(const DeviceUsage& dev, const DeviceRequest& request,
                                           const FitContext& ctx, protocol::ContainerDevice* chosen,
                                           const QuotaStep* quota = nullptr);

// A device check inside Fit: the reason a device is refused, or nullopt with `*chosen` filled.
// `picked` holds the devices this request took so far (for the quota step).
using DeviceCheck = std::function<std::optional<std::string_view>(
    const DeviceUsage& dev, const protocol::ContainerDevices& picked,
    protocol::ContainerDevice* chosen)>;

void ScanCandidates(const std::vector<const DeviceUsage*>& candidates, int32_t nums,
                    const DeviceCheck& check, FitResult* r);

}  // namespace hami::device

#endif  // HAMI_DEVICE_VENDOR_SUPPORT_H_
