// DraSchedulerLoop's state, shared by its parts (internal to hami-sim):
//   dra_scheduler.cc        start/stop and the informer handlers that feed the queue
//                           (sim/scheduling_queue.h)
//   dra_scheduler_cycle.cc  the scheduling cycle (claims, PreFilter, Filter with dra::Allocator,
//                           Reserve) and the binding cycle (PreBind's claim status writes, bind)
#ifndef HAMI_SIM_DRA_SCHEDULER_IMPL_H_
#define HAMI_SIM_DRA_SCHEDULER_IMPL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "dra/allocator.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "sim/dra_scheduler.h"
#include "sim/scheduling_queue.h"
#include "sim/worker_pool.h"

namespace hami::sim {

class DraSchedulerLoop::Impl : public SchedulingLoopCore {
 public:
  using json = nlohmann::json;
  static inline const k8s::Resource& kSlices = k8s::resources::kResourceSlices;
  static inline const k8s::Resource& kClaims = k8s::resources::kResourceClaims;
  static inline const k8s::Resource& kClasses = k8s::resources::kDeviceClasses;
  // What DRA mode keeps per pod besides its QueuedPod.
  struct PodClaimsSeen {
    // Claim keys ("ns/name") the last attempt named: an event on one of them retries the pod.
    std::set<std::string> claims;
    std::string claim_statuses;  // status.resourceClaimStatuses as last seen (dumped)
  };
  // One claim of the pod being scheduled, as the cycle saw it.
  struct PodClaim {
    std::string key;
    json claim;
    bool reserved = false;       // reservedFor already lists the pod
    std::optional<json> assume;  // the allocation this cycle made (unallocated claims only)
    bool written = false;        // PreBind's status write succeeded
  };

  Impl(k8s::Client& client, DraSchedulerOptions options, const Clock& clock);

  Status Start() override;
  void Stop() override;

  // Informer handlers (dra_scheduler.cc).
  bool OnPodSeen(SchedulingQueue::Seen seen, const std::string& key, const json& pod,
                 QueuedPod& s) override;
  void OnClaim(const json* old_claim, const json* claim);  // claim null: deleted
  void OnInventory();                                      // a slice or class changed

  // The scheduling cycle (dra_scheduler_cycle.cc).
  void CycleLoop();
  void ScheduleOne(const std::string& key);
  // The pod's claims (PreEnqueue): the reason as the error when one is missing. `keys` gets
  // every claim key it could name, found or not.
  Result<std::vector<PodClaim>> PodClaims(const json& pod, std::set<std::string>& keys) const;
  // Brings allocator_ up to date with the informers and the in-flight allocations.
  void SyncAllocator();
  // kube-scheduler's validateDeviceClass over the claim's requests: "" when every class exists,
  // the unschedulable reason when one does not, "error: <why>" for a request without a class.
  std::string RequestClassesExist(const json& claim) const;
  void PreBindAndBind(const std::string& key, const json& pod, const std::string& node,
                      std::vector<PodClaim> claims);
  // PreBind for one claim; the error as kube-scheduler words it.
  Status ReserveClaim(const json& pod, PodClaim& c);
  void Unreserve(const json& pod, const PodClaim& c);
  std::string NewShareId();

  const DraSchedulerOptions options_;
  std::unique_ptr<k8s::Informer> slices_;
  std::unique_ptr<k8s::Informer> claims_;
  std::unique_ptr<k8s::Informer> classes_;

  // Guarded by mu_ (SchedulingLoopCore's).
  std::map<std::string, PodClaimsSeen> claims_seen_;  // by pod key
  uint64_t claims_allocated_ = 0;
  // Allocations decided by a cycle and not yet seen in the claim informer's cache, by claim key
  // (kube-scheduler's in-flight allocations).
  std::map<std::string, json> in_flight_claims_;
  bool inventory_dirty_ = true;         // slices or classes changed: rebuild allocator_
  std::set<std::string> claims_dirty_;  // claim keys whose allocation may have changed

  // The cycle thread's own.
  std::unique_ptr<dra::Allocator> allocator_;
  std::map<std::string, json> accounted_;  // claim key -> the allocation allocator_ holds

  std::mutex share_mu_;
  uint64_t share_state_ = 0;

  WorkerPool<NoWorkerContext> pool_;  // PreBind + bind, the FailedScheduling write
};

}  // namespace hami::sim

#endif  // HAMI_SIM_DRA_SCHEDULER_IMPL_H_
