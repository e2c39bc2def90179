// DraSchedulerLoop's lifecycle, its queues (activeQ, backoffQ, unschedulableQ) and the informer
// handlers that move pods between them. The parts are listed in dra_scheduler_impl.h.
#include "sim/dra_scheduler.h"

#include <algorithm>

#include "k8s/object.h"
#include "sim/dra_scheduler_impl.h"

namespace hami::sim {

namespace res = k8s::resources;
using nlohmann::json;

namespace {

bool NodeReady(const json& node) {
  auto status = node.find("status");
  if (status == node.end() || !status->is_object()) return false;
  auto conds = status->find("conditions");
  if (conds == status->end() || !conds->is_array()) return false;
  for (const json& c : *conds) {
    if (c.is_object() && c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

// What a node update must change to retry unschedulable pods: readiness, labels (slices' and
// allocations' node selectors read them), spec.
json NodeSchedulingView(const json& node) {
  json v;
  v["ready"] = NodeReady(node);
  if (node.contains("metadata")) v["labels"] = node["metadata"].value("labels", json::object());
  if (node.contains("spec")) v["spec"] = node["spec"];
  return v;
}

json TrimPod(json pod) {
  if (pod.contains("metadata")) pod["metadata"].erase("managedFields");
  return pod;
}

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

bool IsDeleting(const json& obj) {
  return obj.contains("metadata") && obj["metadata"].contains("deletionTimestamp");
}

}  // namespace

DraSchedulerLoop::Impl::Impl(k8s::Client& client, DraSchedulerOptions options, const Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock) {
  share_state_ = options_.share_id_seed;
}

bool DraSchedulerLoop::Impl::Terminal(const json& pod) {
  const std::string phase = k8s::FieldString(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

Status DraSchedulerLoop::Impl::Start() {
  k8s::InformerOptions pod_opts;
  pod_opts.transform = TrimPod;
  k8s::InformerHandlers ph;
  ph.on_add = [this](const k8s::ObjectRef& o) { OnPod(nullptr, *o); };
  ph.on_update = [this](const k8s::ObjectRef& a, const k8s::ObjectRef& b) { OnPod(a.get(), *b); };
  ph.on_delete = [this](const k8s::ObjectRef& o) { OnPodDelete(*o); };
  pods_ = std::make_unique<k8s::Informer>(client_, res::kPods, pod_opts, ph);
  k8s::InformerHandlers nh;
  nh.on_add = [this](const k8s::ObjectRef& o) { OnNode(nullptr, *o); };
  nh.on_update = [this](const k8s::ObjectRef& a, const k8s::ObjectRef& b) { OnNode(a.get(), *b); };
  nh.on_delete = [this](const k8s::ObjectRef& o) { OnNodeDelete(*o); };
  nodes_ = std::make_unique<k8s::Informer>(client_, res::kNodes, k8s::InformerOptions{}, nh);
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
  last_flush_ = clock_.Now();
  for (k8s::Informer* i : {nodes_.get(), slices_.get(), classes_.get(), claims_.get()}) i->Start();
  pods_->Start();
  for (k8s::Informer* i :
       {nodes_.get(), slices_.get(), classes_.get(), claims_.get(), pods_.get()}) {
    if (!i->WaitForSync(std::chrono::seconds(30))) {
      return Error{"DRA scheduler loop: informers did not sync within 30 s"};
    }
  }
  for (int i = 0; i < std::max(1, options_.bind_parallelism); ++i) {
    workers_.emplace_back([this] { Worker(); });
  }
  cycle_ = std::thread([this] { CycleLoop(); });
  return OkStatus();
}

void DraSchedulerLoop::Impl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (cycle_.joinable()) cycle_.join();
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    work_stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  // Each informer takes up to a second to notice; stop them all at once.
  std::vector<std::thread> stops;
  for (k8s::Informer* i : {nodes_.get(), slices_.get(), classes_.get(), claims_.get()}) {
    if (i != nullptr) stops.emplace_back([i] { i->Stop(); });
  }
  if (pods_) pods_->Stop();
  for (std::thread& t : stops) t.join();
}

void DraSchedulerLoop::Impl::PushActive(PodState& s) {
  s.where = Where::kActive;
  s.seq = next_seq_++;
  active_.emplace(s.seq, k8s::ObjectKey(s.rec.ns, s.rec.name));
}

void DraSchedulerLoop::Impl::Requeue(PodState& s, SystemTime now) {
  const std::string key = k8s::ObjectKey(s.rec.ns, s.rec.name);
  unschedulable_.erase(key);
  if (s.backoff_until > now) {
    s.where = Where::kBackoff;
    backoff_.emplace(s.backoff_until, key);
  } else {
    PushActive(s);
  }
}

void DraSchedulerLoop::Impl::Remove(PodState& s) {
  const std::string key = k8s::ObjectKey(s.rec.ns, s.rec.name);
  switch (s.where) {
    case Where::kActive:
      active_.erase({s.seq, key});
      break;
    case Where::kBackoff:
      backoff_.erase({s.backoff_until, key});
      break;
    case Where::kUnschedulable:
      unschedulable_.erase(key);
      break;
    default:
      break;
  }
}

void DraSchedulerLoop::Impl::OnPod(const json* old_pod, const json& pod) {
  if (k8s::FieldString(pod, "spec.schedulerName") != options_.scheduler_name) return;
  const std::string key = k8s::ObjectKey(pod);
  const bool assigned = !k8s::FieldString(pod, "spec.nodeName").empty();
  const bool deleting = IsDeleting(pod);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const SystemTime now = clock_.Now();
    if (Terminal(pod) && (old_pod == nullptr || !Terminal(*old_pod))) {
      flush_requested_ = wake = true;
      ++moves_;
    }
    const std::string uid = k8s::Uid(pod);
    auto it = pods_state_.find(key);
    if (it != pods_state_.end() && it->second.uid != uid &&
        (it->second.where == Where::kGone || it->second.where == Where::kBound)) {
      pods_state_.erase(it);  // a new pod under the name of a deleted one
      it = pods_state_.end();
    }
    if (it == pods_state_.end()) {
      if (assigned || deleting || Terminal(pod)) return;
      PodState& s = pods_state_[key];
      s.uid = uid;
      s.rec.ns = k8s::Namespace(pod);
      s.rec.name = k8s::Name(pod);
      s.rec.first_seen = now;
      s.claim_statuses = ClaimStatuses(pod).dump();
      PushActive(s);
      wake = true;
    } else if (assigned || deleting) {
      PodState& s = it->second;
      if (s.where == Where::kActive || s.where == Where::kBackoff ||
          s.where == Where::kUnschedulable) {
        Remove(s);
        s.where = assigned ? Where::kBound : Where::kGone;
        if (assigned && !s.rec.bound) {
          s.rec.bound = true;
          s.rec.bound_at = now;
          s.rec.last_failure.clear();
          s.rec.failure_details.clear();
        }
      }
    } else {
      // The claim controller named a claim made from a template: a pod waiting for it goes.
      PodState& s = it->second;
      std::string statuses = ClaimStatuses(pod).dump();
      if (statuses != s.claim_statuses) {
        s.claim_statuses = std::move(statuses);
        ++moves_;
        if (s.where == Where::kUnschedulable) {
          Requeue(s, now);
          wake = true;
        }
      }
    }
  }
  if (wake) cv_.notify_all();
}

void DraSchedulerLoop::Impl::OnPodDelete(const json& pod) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flush_requested_ = true;
    ++moves_;
    auto it = pods_state_.find(k8s::ObjectKey(pod));
    if (it != pods_state_.end() &&
        (it->second.where == Where::kActive || it->second.where == Where::kBackoff ||
         it->second.where == Where::kUnschedulable)) {
      Remove(it->second);
      it->second.where = Where::kGone;
    }
  }
  cv_.notify_all();
}

void DraSchedulerLoop::Impl::OnNode(const json* old_node, const json& node) {
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    const bool ready = NodeReady(node);
    const bool had = ready_nodes_.count(k8s::Name(node)) > 0;
    if (ready != had) {
      if (ready) {
        ready_nodes_.insert(k8s::Name(node));
      } else {
        ready_nodes_.erase(k8s::Name(node));
      }
      ready_dirty_ = true;
    }
  }
  if (old_node != nullptr && NodeSchedulingView(*old_node) == NodeSchedulingView(node)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    flush_requested_ = true;
    ++moves_;
  }
  cv_.notify_all();
}

void DraSchedulerLoop::Impl::OnNodeDelete(const json& node) {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  if (ready_nodes_.erase(k8s::Name(node)) > 0) ready_dirty_ = true;
}

void DraSchedulerLoop::Impl::OnClaim(const json* old_claim, const json* claim) {
  const json& any = claim != nullptr ? *claim : *old_claim;
  const std::string key = k8s::ObjectKey(any);
  {
    std::lock_guard<std::mutex> lock(mu_);
    claims_dirty_.insert(key);
    ++moves_;
    // Our own write has reached the cache: the cache accounts for it from now on.
    if (HasAllocation(claim)) in_flight_claims_.erase(key);
    if (HasAllocation(old_claim) && !HasAllocation(claim)) {
      flush_requested_ = true;  // deallocated or deleted: its devices are free again
    } else {
      const SystemTime now = clock_.Now();
      std::vector<std::string> waiting;
      for (const std::string& pod : unschedulable_) {
        if (pods_state_[pod].claims.count(key) > 0) waiting.push_back(pod);
      }
      for (const std::string& pod : waiting) Requeue(pods_state_[pod], now);
    }
  }
  cv_.notify_all();
}

void DraSchedulerLoop::Impl::OnInventory() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inventory_dirty_ = true;
    flush_requested_ = true;
    ++moves_;
  }
  cv_.notify_all();
}

void DraSchedulerLoop::Impl::Flush(SystemTime now) {
  const std::set<std::string> keys = std::move(unschedulable_);
  unschedulable_.clear();
  for (const std::string& key : keys) Requeue(pods_state_[key], now);
  flush_requested_ = false;
  last_flush_ = now;
}

void DraSchedulerLoop::Impl::Fail(PodState& s, SystemTime now, const std::string& why,
                                  bool unschedulable) {
  const std::string key = k8s::ObjectKey(s.rec.ns, s.rec.name);
  ++s.rec.failures;
  s.rec.backoff = PodBackoff(s.rec.failures, options_.initial_backoff, options_.max_backoff);
  s.rec.last_failure = why;
  s.backoff_until = now + s.rec.backoff;
  if (unschedulable) {
    s.where = Where::kUnschedulable;
    unschedulable_.insert(key);
  } else {
    s.where = Where::kBackoff;
    backoff_.emplace(s.backoff_until, key);
  }
}

// Every Ready node, from kube-scheduler's rotating start index. Below 100 nodes kube-scheduler
// looks at all of them every cycle, so the start stays put; the cycle moves it past the nodes it
// looked at otherwise.
std::vector<std::string> DraSchedulerLoop::Impl::CandidateNodes() {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  if (ready_dirty_) {
    ready_list_.assign(ready_nodes_.begin(), ready_nodes_.end());
    ready_dirty_ = false;
  }
  const size_t n = ready_list_.size();
  if (n == 0) return {};
  std::vector<std::string> out;
  out.reserve(n);
  const size_t start = next_start_ % n;
  for (size_t i = 0; i < n; ++i) out.push_back(ready_list_[(start + i) % n]);
  return out;
}

DraSchedulerLoop::DraSchedulerLoop(k8s::Client& client, DraSchedulerOptions options,
                                   const Clock& clock)
    : impl_(std::make_unique<Impl>(client, std::move(options), clock)) {}

DraSchedulerLoop::~DraSchedulerLoop() { Stop(); }

Status DraSchedulerLoop::Start() { return impl_->Start(); }

void DraSchedulerLoop::Stop() { impl_->Stop(); }

std::vector<PodScheduleRecord> DraSchedulerLoop::Records() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  std::vector<PodScheduleRecord> out;
  out.reserve(impl_->pods_state_.size());
  for (const auto& [key, s] : impl_->pods_state_) out.push_back(s.rec);
  return out;
}

bool DraSchedulerLoop::Idle() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->active_.empty() && impl_->backoff_.empty() && impl_->in_flight_ == 0;
}

size_t DraSchedulerLoop::Unschedulable() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->unschedulable_.size();
}

uint64_t DraSchedulerLoop::ClaimsAllocated() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->claims_allocated_;
}

std::vector<double> DraSchedulerLoop::FilterLatenciesMs() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->filter_ms_;
}

void DraSchedulerLoop::Wake() {
  { std::lock_guard<std::mutex> lock(impl_->mu_); }
  impl_->cv_.notify_all();
}

uint64_t DraSchedulerLoop::passes() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->passes_;
}

}  // namespace hami::sim
