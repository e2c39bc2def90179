// What kube-apiserver checks on writes of the DRA kinds (resource.k8s.io/v1: DeviceClass,
// ResourceSlice, ResourceClaim, ResourceClaimTemplate) before it stores them, so a DRA driver or
// controller tested against `hami-sim apiserver` is refused what a real cluster refuses
// (docs/DRA.md, "The sim API server's resource.k8s.io/v1"). Each error is one apimachinery
// field error as kube-apiserver prints it: the field path, the kind of error, the value and why
// ("spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero").
#ifndef HAMI_SIM_APISERVER_DRA_VALIDATION_H_
#define HAMI_SIM_APISERVER_DRA_VALIDATION_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/apiserver/resources.h"

namespace hami::sim {

using FieldErrors = std::vector<std::string>;

// Counter sets by name, each with its counter names: what a pool's slices declare in
// spec.sharedCounters, and what its devices may consume (spec.devices[].consumesCounters).
using CounterSets = std::map<std::string, std::set<std::string>>;

// API limits (k8s.io/api/resource/v1).
inline constexpr size_t kDraMaxDevicesPerSlice = 128;
inline constexpr size_t kDraMaxDevicesWithTaintsOrCounters = 64;
inline constexpr size_t kDraMaxAttributesAndCapacities = 32;
inline constexpr size_t kDraMaxCounterSets = 8;
inline constexpr size_t kDraMaxCountersPerSet = 32;
inline constexpr size_t kDraMaxConsumesCounters = 2;
inline constexpr size_t kDraMaxValidValues = 10;
inline constexpr size_t kDraMaxRequests = 32;
inline constexpr size_t kDraMaxFirstAvailable = 8;
inline constexpr size_t kDraMaxSelectors = 32;

// spec.selectors, spec.config, spec.extendedResourceName.
FieldErrors ValidateDeviceClass(const nlohmann::json& obj);

// A create (`old` nullptr) or update of a ResourceSlice. `pool_counters`: the counter sets the
// other slices of the same driver and pool declare; a device's consumesCounters must name one
// of them and only its counters (so a driver writes its sharedCounters slice first).
FieldErrors ValidateResourceSlice(const nlohmann::json& obj, const nlohmann::json* old,
                                  const CounterSets& pool_counters);

// A create (`old` nullptr: spec.devices) or update (`old`: the spec is immutable) of a
// ResourceClaim. A change of status goes through ValidateResourceClaimStatus.
FieldErrors ValidateResourceClaim(const nlohmann::json& obj, const nlohmann::json* old);

// A write of status (the /status subresource): reservedFor needs an allocation, an allocation
// cannot change once set (only be removed), and new results name the claim's requests.
FieldErrors ValidateResourceClaimStatus(const nlohmann::json& obj, const nlohmann::json& old);

// Like ValidateResourceClaim, for spec.spec of a ResourceClaimTemplate.
FieldErrors ValidateResourceClaimTemplate(const nlohmann::json& obj, const nlohmann::json* old);

// kube-apiserver's defaults for a claim spec (ResourceClaim.spec, ResourceClaimTemplate
// spec.spec): allocationMode ExactCount and, with it, count 1; toleration operator Equal.
void DefaultDeviceClaimSpec(nlohmann::json& spec);

// The counter sets `slice` declares in spec.sharedCounters (well-formed entries only).
CounterSets SharedCounterSets(const nlohmann::json& slice);

// Whether `type` is one of the resource.k8s.io kinds above.
bool IsDraType(const ResourceType& type);

// What kube-apiserver does to a write of a DRA kind before storing it (`old` nullptr on create):
// defaults the claim specs; drops a ResourceClaim's status on create; sets metadata.generation
// of DeviceClasses and ResourceSlices (1, then +1 on each change of spec); then validates.
// Returns the errors (empty: store `obj`).
FieldErrors AdmitDraWrite(const ResourceType& type, nlohmann::json& obj, const nlohmann::json* old,
                          const CounterSets& pool_counters);

// "a" for one error, "[a, b]" for several: how kube-apiserver joins them after "is invalid: ".
std::string JoinFieldErrors(const FieldErrors& errors);

}  // namespace hami::sim

#endif  // HAMI_SIM_APISERVER_DRA_VALIDATION_H_
