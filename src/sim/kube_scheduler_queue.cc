// The loop's queues (activeQ, backoffQ, unschedulableQ), the pod and node informer handlers that
// move pods between them, and the nodes one cycle offers the extender.
#include <algorithm>

#include "k8s/object.h"
#include "protocol/keys.h"
#include "sim/kube_scheduler.h"
#include "sim/kube_scheduler_impl.h"
#include "sim/synthetic/cluster.h"

namespace hami::sim {

using nlohmann::json;

std::chrono::milliseconds PodBackoff(int failures, std::chrono::milliseconds initial,
                                     std::chrono::milliseconds max) {
  std::chrono::milliseconds d = initial;
  for (int i = 1; i < failures && d < max; ++i) d *= 2;
  return std::min(d, max);
}

namespace {

bool NodeReady(const json& node) {
  const json* conds = node.contains("status") ? &node["status"] : nullptr;
  if (conds == nullptr || !conds->contains("conditions") || !(*conds)["conditions"].is_array()) {
    return false;
  }
  for (const json& c : (*conds)["conditions"]) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

// What a node update must change for kube-scheduler to retry unschedulable pods: not the node
// lock, which every bind takes and releases.
json NodeSchedulingView(const json& node) {
  json v;
  v["ready"] = NodeReady(node);
  json annos = node.contains("metadata") ? node["metadata"].value("annotations", json::object())
                                         : json::object();
  annos.erase(std::string(protocol::kNodeLockKey));
  v["annotations"] = std::move(annos);
  if (node.contains("metadata")) v["labels"] = node["metadata"].value("labels", json::object());
  if (node.contains("spec")) v["spec"] = node["spec"];
  if (node.contains("status")) v["allocatable"] = node["status"].value("allocatable", json());
  return v;
}

}  // namespace

void KubeSchedulerLoop::Impl::PushActive(PodState& s) {
  s.where = Where::kActive;
  s.seq = next_seq_++;
  active_.emplace(s.seq, k8s::ObjectKey(s.rec.ns, s.rec.name));
}

void KubeSchedulerLoop::Impl::Remove(PodState& s) {
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

void KubeSchedulerLoop::Impl::OnPod(const json& pod) {
  if (k8s::FieldString(pod, "spec.schedulerName") != options_.scheduler_name) return;
  const std::string key = k8s::ObjectKey(pod);
  const bool assigned = !k8s::FieldString(pod, "spec.nodeName").empty();
  const bool deleting = pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp");
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Terminal(pod)) flush_requested_ = wake = true;
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
      s.rec.first_seen = clock_.Now();
      PushActive(s);
      wake = true;
    } else if (assigned || deleting) {
      PodState& s = it->second;
      // A pod bound by someone else (or before we started) leaves the queues; an in-flight one
      // is settled by its own cycle or bind.
      if (s.where == Where::kActive || s.where == Where::kBackoff ||
          s.where == Where::kUnschedulable) {
        Remove(s);
        s.where = assigned ? Where::kBound : Where::kGone;
        if (assigned && !s.rec.bound) {
          s.rec.bound = true;
          s.rec.bound_at = clock_.Now();
          s.rec.last_failure.clear();
        }
      }
    }
  }
  if (wake) cv_.notify_all();
}

void KubeSchedulerLoop::Impl::OnPodDelete(const json& pod) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flush_requested_ = true;
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

void KubeSchedulerLoop::Impl::OnNode(const json* old_node, const json& node) {
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
  }
  cv_.notify_all();
}

void KubeSchedulerLoop::Impl::OnNodeDelete(const json& node) {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  if (ready_nodes_.erase(k8s::Name(node)) > 0) ready_dirty_ = true;
}

void KubeSchedulerLoop::Impl::Flush(SystemTime now) {
  for (const std::string& key : unschedulable_) {
    PodState& s = pods_state_[key];
    if (s.backoff_until > now) {
      s.where = Where::kBackoff;
      backoff_.emplace(s.backoff_until, key);
    } else {
      PushActive(s);
    }
  }
  unschedulable_.clear();
  flush_requested_ = false;
  last_flush_ = now;
}

void KubeSchedulerLoop::Impl::Fail(PodState& s, SystemTime now, const std::string& why,
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

std::vector<std::string> KubeSchedulerLoop::Impl::CandidateNodes() {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  if (ready_dirty_) {
    ready_list_.assign(ready_nodes_.begin(), ready_nodes_.end());
    ready_dirty_ = false;
  }
  const size_t n = ready_list_.size();
  const size_t want = synthetic::KubeSchedulerCandidates(n);
  if (want == n) return ready_list_;
  std::vector<std::string> out;
  out.reserve(want);
  const size_t start = next_start_ % n;
  for (size_t i = 0; i < want; ++i) out.push_back(ready_list_[(start + i) % n]);
  next_start_ = (start + want) % n;
  return out;
}

}  // namespace hami::sim
