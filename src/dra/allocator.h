// kube-scheduler's structured-parameters allocator (the DynamicResources plugin's Filter and
// Reserve for resource.k8s.io/v1): which devices of a node's ResourceSlices can satisfy a pod's
// ResourceClaims, and the `status.allocation` each claim gets (docs/DRA.md, "How claims are
// allocated"). Pure: the caller (hami-sim's kube-scheduler, `kubectl hami explain`) gives it the
// cluster's DeviceClasses, ResourceSlices and ResourceClaims and writes the results itself.
//
// What it implements, as kube-scheduler does:
//  * devices of the node: slices with spec.nodeName = the node, a spec.nodeSelector matching the
//    node's labels/name, or spec.allNodes; per pool only the slices of its highest generation;
//  * a request `exactly` (deviceClassName, selectors, allocationMode ExactCount with count or
//    All, tolerations, capacity.requests) or `firstAvailable` (the first subrequest that can be
//    satisfied; the result's request is "<request>/<subrequest>");
//  * the class's selectors, then the request's (CEL, cel.h); a runtime error is the claim's
//    failure; NoSchedule/NoExecute taints a request does not tolerate make a device unavailable;
//  * consumable capacity (KEP-5075, capacity.h): a device with allowMultipleAllocations is
//    shared; each share consumes, per capacity of the device, the request rounded up by its
//    requestPolicy (validRange: min + ceil((req - min) / step) * step, above max: not this
//    device; validValues: the smallest >= req), or the policy's default when the request names
//    none, or all of it when there is no default; the shares of all allocated claims plus this
//    pod's never exceed a capacity's value; each share gets a shareID and consumedCapacity lists
//    every capacity of the device. The same device may serve several shares of one claim (unless a
//    distinctAttribute constraint forbids it). A device without allowMultipleAllocations is
//    dedicated: only when no allocation uses it, and a capacity request is then only a minimum
//    it must have. A device allocated dedicated is never shared, and a shared one never given
//    dedicated, until the allocations on it end;
//  * partitionable devices (KEP-4815): a device's consumesCounters draw on the pool's
//    sharedCounters, once per device however many shares it serves; the sum over allocated
//    devices never exceeds a counter's value;
//  * constraints matchAttribute and distinctAttribute over the listed requests (all if none);
//  * the pod's claims are allocated together on the node (a search with backtracking over
//    requests and devices, in slice order), or not at all.
#ifndef HAMI_DRA_ALLOCATOR_H_
#define HAMI_DRA_ALLOCATOR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hami::dra {

using Json = nlohmann::json;

// What the scheduler knows (its informers' caches).
struct Inventory {
  std::map<std::string, Json> device_classes;  // by metadata.name
  std::vector<Json> slices;                    // every ResourceSlice
  // Every ResourceClaim with status.allocation: what they consume is taken. (Others are ignored.)
  std::vector<Json> allocated_claims;
};

// Why one node cannot take the pod's claims.
struct NodeFailure {
  // kube-scheduler's reason, as FailedScheduling groups it: "cannot allocate all claims".
  std::string reason;
  // For a human (`kubectl hami explain`, the sim's report): per claim and request what failed,
  // one line each, e.g. `claim default/train-gpu-x7k2q request "gpu": hami-gpu-1: memory:
  // wants 3000Mi (3000Mi after requestPolicy), 1000Mi of 40Gi free`, `... hami-gpu-2: selector
  // device.attributes["hami-core-gpu.project-hami.io"].uuid in ["GPU-a"] is false`, `... no
  // device of class "hami-core-gpu.project-hami.io" on the node`.
  std::vector<std::string> details;
};

struct NodeResult {
  bool fits = false;
  // fits: one status.allocation per claim, in the order given: {devices: {results: [{request,
  // driver, pool, device[, shareID, consumedCapacity][, tolerations]}], config: [...]},
  // nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In,
  // values: [<node>]}]}]}} (the node selector of node-local pools, as kube-scheduler writes it).
  std::vector<Json> allocations;
  NodeFailure failure;  // !fits
};

// AllocateOnNode may run on several threads at once (the CEL cache is locked); Assume and
// Forget must not run concurrently with anything else on the same Allocator.
class Allocator {
 public:
  // `share_id` makes a new shareID per share (kube-scheduler: a random UID; tests inject a
  // counter). `inventory` is copied into the allocator's indexes.
  Allocator(const Inventory& inventory, std::function<std::string()> share_id);

  // Allocate `claims` (ResourceClaim objects of one pod that have no allocation yet) together on
  // `node` (a Node object: metadata.name and labels are read). Errors are malformed input only
  // (a claim without spec.devices.requests, ...); a claim that cannot be satisfied is a
  // NodeResult with fits false.
  Result<NodeResult> AllocateOnNode(const Json& node, const std::vector<Json>& claims) const;

  // Records `allocation` (as AllocateOnNode returned it, or read from a claim) as taken, so the
  // next AllocateOnNode sees it consumed (kube-scheduler's in-flight allocations).
  void Assume(const Json& allocation);
  // Forgets a claim's allocation (the claim was deallocated or deleted).
  void Forget(const Json& allocation);

 private:
  struct Index;
  std::shared_ptr<Index> index_;
  std::function<std::string()> share_id_;
};

}  // namespace hami::dra

#endif  // HAMI_DRA_ALLOCATOR_H_
