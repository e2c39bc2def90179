// DraSchedulerLoop's lifecycle and the informer handlers that move pods between its queues
// (sim/scheduling_queue.h). The parts are listed in dra_scheduler_impl.h.
#include "sim/dra_scheduler.h"

#include <algorithm>

#include "k8s/object.h"
#include "sim/dra_scheduler_impl.h"

namespace hami::sim {

namespace res = k8s::resources;
using nlohmann::json;

namespace {

json ClaimStatuses(const json& pod) {
  auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return json();
  return status->value("resourceClaimStatuses", json());
}

bool HasAllocation(const json* claim) {
  if (claim == nullptr) return false;
  auto status = claim->find("status");
  return status != claim->end() && status->is_object() && status->contains("allocation") &&
         !(*status)["allocation"].is_null();
}

}  // namespace

DraSchedulerLoop::Impl::Impl(k8s::Client& client, DraSchedulerOptions options, const Clock& clock)
    : SchedulingLoopCore(client, options, clock, Mode::kDra), options_(std::move(options)) {
  share_state_ = options_.share_id_seed;
}

Status DraSchedulerLoop::Impl::Start() {
  MakeInformers();
  k8s::InformerHandlers ch;
  ch.on_add = [this](const k8s::ObjectRef& o) { OnClaim(nullptr, o.get()); };
  ch.on_update = [this](const k8s::ObjectRef& a, const k8s::ObjectRef& b) {
    OnClaim(a.get(), b.get());
  };
  ch.on_delete = [this](const k8s::ObjectRef& o) { OnClaim(o.get(), nullptr); };
  claims_ = std::make_unique<k8s::Informer>(client_, Impl::kClaims, k8s::InformerOptions{}, ch);
  k8s::InformerHandlers ih;
  ih.on_add = [this](const k8s::ObjectRef&) { OnInventory(); };
  ih.on_update = [this](const k8s::ObjectRef&, const k8s::ObjectRef&) { OnInventory(); };
  ih.on_delete = [this](const k8s::ObjectRef&) { OnInventory(); };
  slices_ = std::make_unique<k8s::Informer>(client_, Impl::kSlices, k8s::InformerOptions{}, ih);
  classes_ = std::make_unique<k8s::Informer>(client_, Impl::kClasses, k8s::InformerOptions{}, ih);
  Status st = StartInformers("DRA scheduler loop", {slices_.get(), classes_.get(), claims_.get()});
  if (!st.ok()) return st;
  pool_.Start(options_.bind_parallelism);
  StartCycle([this] { CycleLoop(); });
  return OkStatus();
}

void DraSchedulerLoop::Impl::Stop() {
  StopCycle();
  pool_.Stop();
  StopInformers({slices_.get(), classes_.get(), claims_.get()});
}

bool DraSchedulerLoop::Impl::OnPodSeen(SchedulingQueue::Seen seen, const std::string& key,
                                       const json& pod, QueuedPod& s) {
  if (seen == SchedulingQueue::Seen::kAdded) {
    claims_seen_[key] = PodClaimsSeen{{}, ClaimStatuses(pod).dump()};
    return false;
  }
  if (seen != SchedulingQueue::Seen::kPending) return false;
  // The claim controller named a claim made from a template: a pod waiting for it goes.
  PodClaimsSeen& claims = claims_seen_[key];
  std::string statuses = ClaimStatuses(pod).dump();
  if (statuses == claims.claim_statuses) return false;
  claims.claim_statuses = std::move(statuses);
  queue_.Moved();
  if (s.where != PodWhere::kUnschedulable) return false;
  queue_.Requeue(s, clock_.Now());
  return true;
}

void DraSchedulerLoop::Impl::OnClaim(const json* old_claim, const json* claim) {
  const json& any = claim != nullptr ? *claim : *old_claim;
  const std::string key = k8s::ObjectKey(any);
  {
    std::lock_guard<std::mutex> lock(mu_);
    claims_dirty_.insert(key);
    // Our own write has reached the cache: the cache accounts for it from now on.
    if (HasAllocation(claim)) in_flight_claims_.erase(key);
    if (HasAllocation(old_claim) && !HasAllocation(claim)) {
      queue_.RequestFlush();  // deallocated or deleted: its devices are free again
    } else {
      queue_.Moved();
      const SystemTime now = clock_.Now();
      std::vector<std::string> waiting;
      for (const std::string& pod : queue_.unschedulable()) {
        if (claims_seen_[pod].claims.count(key) > 0) waiting.push_back(pod);
      }
      for (const std::string& pod : waiting) queue_.Requeue(queue_[pod], now);
    }
  }
  cv_.notify_all();
}

void DraSchedulerLoop::Impl::OnInventory() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inventory_dirty_ = true;
    queue_.RequestFlush();
  }
  cv_.notify_all();
}

DraSchedulerLoop::DraSchedulerLoop(k8s::Client& client, DraSchedulerOptions options,
                                   const Clock& clock)
    : impl_(std::make_unique<Impl>(client, std::move(options), clock)) {
  core_ = impl_.get();
}

DraSchedulerLoop::~DraSchedulerLoop() { Stop(); }

uint64_t DraSchedulerLoop::ClaimsAllocated() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->claims_allocated_;
}

}  // namespace hami::sim
