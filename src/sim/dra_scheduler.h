// kube-scheduler with the DynamicResources plugin and no extender (hami-sim in DRA mode,
// docs/DRA.md "hami-sim in DRA mode: the scheduler"), for the pods whose spec.schedulerName is
// ours. The same queues as KubeSchedulerLoop (activeQ FIFO by creation, backoffQ, unschedulableQ
// with the periodic flush) and, per pod, what the plugin does:
//
//  * PreEnqueue: each spec.resourceClaims[] entry names its claim (resourceClaimName, or for a
//    resourceClaimTemplateName the name in pod.status.resourceClaimStatuses[]); a claim not made
//    yet, not in the cache, being deleted, or (template) not controlled by the pod keeps the pod
//    in the unschedulableQ with kube-scheduler's reason (no attempt, no PodScheduled write)
//    until the pod's status or the claim changes;
//  * PreFilter: an allocated claim whose reservedFor is full (256) is "resourceclaim in use"; an
//    unallocated one whose allocation is in flight for another pod waits; a request naming a
//    DeviceClass that does not exist waits for the class;
//  * Filter, per Ready node in kube-scheduler's rotating order: allocated claims' nodeSelector
//    must match the node ("resourceclaim not available on the node"), the unallocated ones are
//    allocated together by dra::Allocator ("cannot allocate all claims" otherwise, with per
//    node details); the first node that fits is taken (nodes in a fixed order: that packs);
//  * Reserve: the allocations are assumed (in flight) so the next cycle sees them taken;
//  * PreBind, on a worker: each claim not reserved for the pod gets status.allocation (when
//    this cycle allocated it) and a reservedFor entry {resource: pods, name, uid} through
//    /status with its resourceVersion (retried on conflict, re-reading the claim); then the pod
//    is bound (pods/binding). A failed write forgets what was not written, removes the pod from
//    the reservedFor of what was, and sends the pod to the backoffQ.
//
// A pod no node fits gets PodScheduled False, reason Unschedulable, with kube-scheduler's
// message ("0/2 nodes are available: 2 cannot allocate all claims.") and a FailedScheduling
// event. Cluster events that retry unschedulable pods: node add or change (readiness, labels,
// spec), ResourceSlice or DeviceClass add/update/delete, a claim the pod waits for created or
// changed, any claim deallocated or deleted, the pod's own resourceClaimStatuses, a pod deleted
// or finished.
//
// Not modelled: the claim's finalizer (the sim's apiserver has no finalizers), PostFilter's
// deallocation of a claim to make room, scoring among fitting nodes.
#ifndef HAMI_SIM_DRA_SCHEDULER_H_
#define HAMI_SIM_DRA_SCHEDULER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "k8s/client.h"
#include "sim/scheduling_loop.h"

namespace hami::sim {

// The queue's options (scheduler_name, backoffs, flush, max_wait) and DRA mode's.
struct DraSchedulerOptions : SchedulingQueueOptions {
  int bind_parallelism = 4;  // PreBind + bind run concurrently
  // A new shareID per share of a device (kube-scheduler: a random UID). Empty: RFC 4122 version
  // 4 UUIDs from a generator seeded with share_id_seed, so a run is reproducible.
  std::function<std::string()> share_id{};
  uint64_t share_id_seed = 1;
};

// kube-scheduler's DynamicResources reasons, word for word.
inline constexpr const char* kDraCannotAllocate = "cannot allocate all claims";
inline constexpr const char* kDraNotAvailableOnNode = "resourceclaim not available on the node";
inline constexpr const char* kDraClaimInUse = "resourceclaim in use";
// The most consumers a claim may be reserved for (resource.k8s.io's
// ResourceClaimReservedForMaxSize).
inline constexpr size_t kDraMaxReservedFor = 256;

// Start() (informers of pods, nodes, resourceslices, resourceclaims and deviceclasses, the
// scheduling cycle thread, the bind workers), Stop(), Records(), Idle(), Unschedulable(),
// FilterLatenciesMs() (each Filter phase: allocating the pod's claims node by node until one
// fits), Wake() and passes() come from SchedulingLoop (sim/scheduling_loop.h). In a record,
// `attempts` counts scheduling cycles past PreEnqueue; `last_failure` is the FailedScheduling
// message, or the PreEnqueue reason, or the write error; `failure_details` the allocator's per
// node lines of the last failed Filter, each "<node>: <detail>".
class DraSchedulerLoop : public SchedulingLoop {
 public:
  // `client` and `clock` must outlive the loop.
  DraSchedulerLoop(k8s::Client& client, DraSchedulerOptions options,
                   const Clock& clock = RealClock());
  ~DraSchedulerLoop();  // Stop()s

  // Claims this loop wrote an allocation to.
  uint64_t ClaimsAllocated() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_DRA_SCHEDULER_H_
