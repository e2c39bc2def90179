// DraSchedulerLoop's state, shared by its parts (internal to hami-sim):
//   dra_scheduler.cc        start/stop, the queues and the informer handlers that feed them
//   dra_scheduler_cycle.cc  the scheduling cycle (claims, PreFilter, Filter with dra::Allocator,
//                           Reserve) and the binding cycle (PreBind's claim status writes, bind)
#ifndef HAMI_SIM_DRA_SCHEDULER_IMPL_H_
#define HAMI_SIM_DRA_SCHEDULER_IMPL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "dra/allocator.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "sim/dra_scheduler.h"

namespace hami::sim {

class DraSchedulerLoop::Impl {
 public:
  using json = nlohmann::json;
  static inline const k8s::Resource kSlices{"resource.k8s.io", "v1", "resourceslices", false};
  static inline const k8s::Resource kClaims{"resource.k8s.io", "v1", "resourceclaims", true};
  static inline const k8s::Resource kClasses{"resource.k8s.io", "v1", "deviceclasses", false};
  enum class Where { kActive, kBackoff, kUnschedulable, kCycle, kBinding, kBound, kGone };
  struct PodState {
    PodScheduleRecord rec;
    Where where = Where::kActive;
    uint64_t seq = 0;  // activeQ order
    SystemTime backoff_until{};
    std::string last_written;  // last PodScheduled message written
    std::string uid;
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

  static bool Terminal(const json& pod);

  Status Start();
  void Stop();

  // Informer handlers (dra_scheduler.cc).
  void OnPod(const json* old_pod, const json& pod);
  void OnPodDelete(const json& pod);
  void OnNode(const json* old_node, const json& node);
  void OnNodeDelete(const json& node);
  void OnClaim(const json* old_claim, const json* claim);  // claim null: deleted
  void OnInventory();                                      // a slice or class changed

  // Queue moves; mu_ held (dra_scheduler.cc).
  void PushActive(PodState& s);
  void Requeue(PodState& s, SystemTime now);  // from the unschedulableQ, honouring the backoff
  void Remove(PodState& s);
  void Flush(SystemTime now);
  void Fail(PodState& s, SystemTime now, const std::string& why, bool unschedulable);
  std::vector<std::string> CandidateNodes();

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
  void WriteUnschedulable(const json& pod, const std::string& message);
  void Submit(std::function<void()> task);
  void Worker();
  std::string NewShareId();

  k8s::Client& client_;
  const DraSchedulerOptions options_;
  const Clock& clock_;
  std::unique_ptr<k8s::Informer> pods_;
  std::unique_ptr<k8s::Informer> nodes_;
  std::unique_ptr<k8s::Informer> slices_;
  std::unique_ptr<k8s::Informer> claims_;
  std::unique_ptr<k8s::Informer> classes_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the cycle
  std::map<std::string, PodState> pods_state_;
  std::set<std::pair<uint64_t, std::string>> active_;
  std::set<std::pair<SystemTime, std::string>> backoff_;
  std::set<std::string> unschedulable_;
  uint64_t next_seq_ = 0;
  size_t in_flight_ = 0;  // the cycle's pod + pending PreBind/bind
  bool flush_requested_ = false;
  SystemTime last_flush_{};
  uint64_t passes_ = 0;
  // Cluster events that retry pods so far; the cycle's pod goes back at once when one came
  // while it was being scheduled (kube-scheduler's moveRequestCycle).
  uint64_t moves_ = 0;
  uint64_t cycle_moves_ = 0;
  uint64_t claims_allocated_ = 0;
  std::vector<double> filter_ms_;  // each Filter phase
  bool stopping_ = false;
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

  std::mutex nodes_mu_;
  std::set<std::string> ready_nodes_;
  std::vector<std::string> ready_list_;
  bool ready_dirty_ = true;
  size_t next_start_ = 0;  // kube-scheduler's nextStartNodeIndex

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<std::function<void()>> work_;
  bool work_stop_ = false;
  std::vector<std::thread> workers_;
  std::thread cycle_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_DRA_SCHEDULER_IMPL_H_
