// The scheduling queue, the Ready-node set and the shared state of hami-sim's two
// kube-scheduler loops (sim/scheduling_queue.h).
#include "sim/scheduling_queue.h"

#include <algorithm>

#include "common/log.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "k8s/object.h"
#include "protocol/keys.h"
#include "sim/synthetic/cluster.h"

namespace hami::sim {

namespace res = k8s::resources;
using nlohmann::json;

std::chrono::milliseconds PodBackoff(int failures, std::chrono::milliseconds initial,
                                     std::chrono::milliseconds max) {
  std::chrono::milliseconds d = initial;
  for (int i = 1; i < failures && d < max; ++i) d *= 2;
  return std::min(d, max);
}

std::string UnschedulableMessage(size_t node_count,
                                 const std::vector<std::pair<std::string, std::string>>& failed,
                                 const std::string& error) {
  std::string out = "0/" + std::to_string(node_count) + " nodes are available: ";
  if (!error.empty()) return out + error + ".";
  std::map<std::string, int> histogram;
  for (const auto& [node, reason] : failed) ++histogram[reason];
  std::vector<std::string> parts;
  for (const auto& [reason, n] : histogram) parts.push_back(std::to_string(n) + " " + reason);
  std::sort(parts.begin(), parts.end());
  if (parts.empty()) parts.push_back("no node returned by the extender");
  return out + Join(parts, ", ") + ".";
}

bool TerminalPod(const json& pod) {
  const std::string phase = k8s::FieldString(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

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

// --- SchedulingQueue ---

SchedulingQueue::SchedulingQueue(const SchedulingQueueOptions& options, const Clock& clock)
    : initial_backoff_(options.initial_backoff),
      max_backoff_(options.max_backoff),
      flush_every_(options.unschedulable_flush),
      clock_(clock) {}

SchedulingQueue::Seen SchedulingQueue::Observe(const std::string& key, const json& pod,
                                               QueuedPod** state) {
  const bool assigned = !k8s::FieldString(pod, "spec.nodeName").empty();
  const bool deleting = pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp");
  const std::string uid = k8s::Uid(pod);
  auto it = pods_.find(key);
  if (it != pods_.end() && it->second.uid != uid &&
      (it->second.where == PodWhere::kGone || it->second.where == PodWhere::kBound)) {
    pods_.erase(it);  // a new pod under the name of a deleted one
    it = pods_.end();
  }
  if (it == pods_.end()) {
    if (assigned || deleting || TerminalPod(pod)) return Seen::kIgnored;
    QueuedPod& s = pods_[key];
    s.uid = uid;
    s.rec.ns = k8s::Namespace(pod);
    s.rec.name = k8s::Name(pod);
    s.rec.first_seen = clock_.Now();
    PushActive(s);
    *state = &s;
    return Seen::kAdded;
  }
  QueuedPod& s = it->second;
  *state = &s;
  if (!assigned && !deleting) return Seen::kPending;
  if (s.where == PodWhere::kActive || s.where == PodWhere::kBackoff ||
      s.where == PodWhere::kUnschedulable) {
    Remove(s);
    s.where = assigned ? PodWhere::kBound : PodWhere::kGone;
    if (assigned && !s.rec.bound) Bound(s, clock_.Now());
  }
  return Seen::kLeft;
}

void SchedulingQueue::Deleted(const std::string& key) {
  RequestFlush();
  auto it = pods_.find(key);
  if (it != pods_.end() &&
      (it->second.where == PodWhere::kActive || it->second.where == PodWhere::kBackoff ||
       it->second.where == PodWhere::kUnschedulable)) {
    Remove(it->second);
    it->second.where = PodWhere::kGone;
  }
}

bool SchedulingQueue::Pop(std::string& key) {
  const SystemTime now = clock_.Now();
  while (!backoff_.empty() && backoff_.begin()->first <= now) {
    const std::string due = backoff_.begin()->second;
    backoff_.erase(backoff_.begin());
    PushActive(pods_[due]);
  }
  if (flush_requested_ || now - last_flush_ >= flush_every_) Flush(now);
  if (active_.empty()) return false;
  key = active_.begin()->second;
  active_.erase(active_.begin());
  pods_[key].where = PodWhere::kCycle;
  ++in_flight_;
  pop_moves_ = moves_;
  return true;
}

void SchedulingQueue::PushActive(QueuedPod& s) {
  s.where = PodWhere::kActive;
  s.seq = next_seq_++;
  active_.emplace(s.seq, k8s::ObjectKey(s.rec.ns, s.rec.name));
}

void SchedulingQueue::Remove(QueuedPod& s) {
  const std::string key = k8s::ObjectKey(s.rec.ns, s.rec.name);
  switch (s.where) {
    case PodWhere::kActive:
      active_.erase({s.seq, key});
      break;
    case PodWhere::kBackoff:
      backoff_.erase({s.backoff_until, key});
      break;
    case PodWhere::kUnschedulable:
      unschedulable_.erase(key);
      break;
    default:
      break;
  }
}

void SchedulingQueue::Requeue(QueuedPod& s, SystemTime now) {
  const std::string key = k8s::ObjectKey(s.rec.ns, s.rec.name);
  unschedulable_.erase(key);
  if (s.backoff_until > now) {
    s.where = PodWhere::kBackoff;
    backoff_.emplace(s.backoff_until, key);
  } else {
    PushActive(s);
  }
}

void SchedulingQueue::Flush(SystemTime now) {
  for (const std::string& key : unschedulable_) {
    QueuedPod& s = pods_[key];
    if (s.backoff_until > now) {
      s.where = PodWhere::kBackoff;
      backoff_.emplace(s.backoff_until, key);
    } else {
      PushActive(s);
    }
  }
  unschedulable_.clear();
  flush_requested_ = false;
  last_flush_ = now;
}

void SchedulingQueue::Fail(QueuedPod& s, SystemTime now, const std::string& why,
                           bool unschedulable) {
  const std::string key = k8s::ObjectKey(s.rec.ns, s.rec.name);
  ++s.rec.failures;
  s.rec.backoff = PodBackoff(s.rec.failures, initial_backoff_, max_backoff_);
  s.rec.last_failure = why;
  s.backoff_until = now + s.rec.backoff;
  if (unschedulable) {
    s.where = PodWhere::kUnschedulable;
    unschedulable_.insert(key);
  } else {
    s.where = PodWhere::kBackoff;
    backoff_.emplace(s.backoff_until, key);
  }
}

void SchedulingQueue::Park(QueuedPod& s, const std::string& why) {
  s.rec.last_failure = why;
  s.where = PodWhere::kUnschedulable;
  unschedulable_.insert(k8s::ObjectKey(s.rec.ns, s.rec.name));
}

void SchedulingQueue::Bound(QueuedPod& s, SystemTime now) {
  s.where = PodWhere::kBound;
  s.rec.bound = true;
  s.rec.bound_at = now;
  s.rec.last_failure.clear();
  s.rec.failure_details.clear();
}

void SchedulingQueue::BindDone(const std::string& key, SystemTime now, const std::string& error) {
  QueuedPod& s = pods_[key];
  if (error.empty()) {
    Bound(s, now);
  } else {
    Fail(s, now, error, false);
  }
  --in_flight_;
}

bool SchedulingQueue::ShouldWrite(QueuedPod& s, const std::string& message) {
  if (s.last_written == message) return false;
  s.last_written = message;
  return true;
}

std::vector<PodScheduleRecord> SchedulingQueue::Records() const {
  std::vector<PodScheduleRecord> out;
  out.reserve(pods_.size());
  for (const auto& [key, s] : pods_) out.push_back(s.rec);
  return out;
}

// --- ReadyNodes ---

void ReadyNodes::Update(const json& node) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool ready = NodeReady(node);
  const bool had = ready_.count(k8s::Name(node)) > 0;
  if (ready != had) {
    if (ready) {
      ready_.insert(k8s::Name(node));
    } else {
      ready_.erase(k8s::Name(node));
    }
    dirty_ = true;
  }
}

void ReadyNodes::Erase(const json& node) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ready_.erase(k8s::Name(node)) > 0) dirty_ = true;
}

const std::vector<std::string>& ReadyNodes::ListLocked() {
  if (dirty_) {
    list_.assign(ready_.begin(), ready_.end());
    dirty_ = false;
  }
  return list_;
}

std::vector<std::string> ReadyNodes::Sample() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<std::string>& list = ListLocked();
  const size_t n = list.size();
  const size_t want = synthetic::KubeSchedulerCandidates(n);
  if (want == n) return list;
  std::vector<std::string> out;
  out.reserve(want);
  const size_t start = next_start_ % n;
  for (size_t i = 0; i < want; ++i) out.push_back(list[(start + i) % n]);
  next_start_ = (start + want) % n;
  return out;
}

std::vector<std::string> ReadyNodes::All() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<std::string>& list = ListLocked();
  const size_t n = list.size();
  if (n == 0) return {};
  std::vector<std::string> out;
  out.reserve(n);
  const size_t start = next_start_ % n;
  for (size_t i = 0; i < n; ++i) out.push_back(list[(start + i) % n]);
  return out;
}

void ReadyNodes::Advance(size_t processed, size_t count) {
  if (count < 100) return;
  std::lock_guard<std::mutex> lock(mu_);
  next_start_ = (next_start_ + processed) % count;
}

// --- WriteUnschedulable ---

void WriteUnschedulable(k8s::Client& client, const Clock& clock, const json& pod,
                        const std::string& message) {
  json cond = {{"type", "PodScheduled"},
               {"status", "False"},
               {"reason", "Unschedulable"},
               {"message", message},
               {"lastTransitionTime", FormatRfc3339(clock.Now(), Zone::Utc())}};
  json patch = {{"status", {{"conditions", json::array({cond})}}}};
  auto r = client.Patch(res::kPods, k8s::Namespace(pod), k8s::Name(pod),
                        k8s::PatchType::kStrategicMerge, patch, "status");
  if (!r) {
    HAMI_VLOG(2, "pod {}: PodScheduled condition: {}", k8s::ObjectKey(pod), r.error().ToString());
  }
  auto e = client.RecordEvent(pod, "Warning", "FailedScheduling", message, "default-scheduler");
  if (!e) {
    HAMI_VLOG(2, "pod {}: FailedScheduling event: {}", k8s::ObjectKey(pod), e.error().ToString());
  }
}

// --- SchedulingLoopCore ---

SchedulingLoopCore::SchedulingLoopCore(k8s::Client& client, const SchedulingQueueOptions& options,
                                       const Clock& clock, Mode mode)
    : client_(client),
      clock_(clock),
      scheduler_name_(options.scheduler_name),
      max_wait_(options.max_wait),
      mode_(mode),
      queue_(options, clock) {}

namespace {

// Only the parts of a pod the loop (and the extender) read are cached.
json TrimPod(json pod) {
  if (pod.contains("metadata")) pod["metadata"].erase("managedFields");
  return pod;
}

// What a node update must change to retry unschedulable pods (SchedulingLoopCore::Mode).
json NodeSchedulingView(const json& node, SchedulingLoopCore::Mode mode) {
  json v;
  v["ready"] = NodeReady(node);
  if (node.contains("metadata")) v["labels"] = node["metadata"].value("labels", json::object());
  if (node.contains("spec")) v["spec"] = node["spec"];
  if (mode == SchedulingLoopCore::Mode::kExtender) {
    json annos = node.contains("metadata") ? node["metadata"].value("annotations", json::object())
                                           : json::object();
    annos.erase(std::string(protocol::kNodeLockKey));
    v["annotations"] = std::move(annos);
    if (node.contains("status")) v["allocatable"] = node["status"].value("allocatable", json());
  }
  return v;
}

}  // namespace

void SchedulingLoopCore::MakeInformers() {
  k8s::InformerOptions pod_opts;
  pod_opts.compact = mode_ == Mode::kExtender;
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
}

Status SchedulingLoopCore::StartInformers(const std::string& who,
                                          std::initializer_list<k8s::Informer*> extra) {
  queue_.Start();
  nodes_->Start();
  for (k8s::Informer* i : extra) i->Start();
  pods_->Start();
  bool synced = nodes_->WaitForSync(std::chrono::seconds(30));
  for (k8s::Informer* i : extra) synced = synced && i->WaitForSync(std::chrono::seconds(30));
  synced = synced && pods_->WaitForSync(std::chrono::seconds(30));
  if (!synced) return Error{who + ": informers did not sync within 30 s"};
  return OkStatus();
}

void SchedulingLoopCore::StopInformers(std::initializer_list<k8s::Informer*> extra) {
  std::vector<std::thread> stops;
  for (k8s::Informer* i : extra) {
    if (i != nullptr) stops.emplace_back([i] { i->Stop(); });
  }
  if (nodes_) stops.emplace_back([this] { nodes_->Stop(); });
  if (pods_) pods_->Stop();
  for (std::thread& t : stops) t.join();
}

void SchedulingLoopCore::StartCycle(std::function<void()> body) {
  cycle_ = std::thread(std::move(body));
}

void SchedulingLoopCore::StopCycle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (cycle_.joinable()) cycle_.join();
}

bool SchedulingLoopCore::SettledBeforeCycle(const std::string& key, const k8s::ObjectRef& pod) {
  if (pod && k8s::FieldString(*pod, "spec.nodeName").empty() && !TerminalPod(*pod) &&
      !(*pod)["metadata"].contains("deletionTimestamp")) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  queue_[key].where =
      pod && !k8s::FieldString(*pod, "spec.nodeName").empty() ? PodWhere::kBound : PodWhere::kGone;
  queue_.Done();
  return true;
}

void SchedulingLoopCore::OnPod(const json* old_pod, const json& pod) {
  if (k8s::FieldString(pod, "spec.schedulerName") != scheduler_name_) return;
  const std::string key = k8s::ObjectKey(pod);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (TerminalPod(pod) &&
        (mode_ == Mode::kExtender || old_pod == nullptr || !TerminalPod(*old_pod))) {
      queue_.RequestFlush();
      wake = true;
    }
    QueuedPod* s = nullptr;
    const SchedulingQueue::Seen seen = queue_.Observe(key, pod, &s);
    if (seen == SchedulingQueue::Seen::kIgnored) return;
    if (seen == SchedulingQueue::Seen::kAdded) wake = true;
    if (OnPodSeen(seen, key, pod, *s)) wake = true;
  }
  if (wake) cv_.notify_all();
}

void SchedulingLoopCore::OnPodDelete(const json& pod) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.Deleted(k8s::ObjectKey(pod));
  }
  cv_.notify_all();
}

void SchedulingLoopCore::OnNode(const json* old_node, const json& node) {
  ready_.Update(node);
  if (old_node != nullptr &&
      NodeSchedulingView(*old_node, mode_) == NodeSchedulingView(node, mode_)) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.RequestFlush();
  }
  cv_.notify_all();
}

void SchedulingLoopCore::RecordFilter(SystemTime start) {
  const std::chrono::duration<double, std::milli> took = clock_.Now() - start;
  std::lock_guard<std::mutex> lock(mu_);
  filter_ms_.push_back(took.count());
}

// --- SchedulingLoop ---

std::vector<PodScheduleRecord> SchedulingLoop::Records() const {
  std::lock_guard<std::mutex> lock(core_->mu_);
  return core_->queue_.Records();
}

bool SchedulingLoop::Idle() const {
  std::lock_guard<std::mutex> lock(core_->mu_);
  return core_->queue_.Idle();
}

size_t SchedulingLoop::Unschedulable() const {
  std::lock_guard<std::mutex> lock(core_->mu_);
  return core_->queue_.unschedulable().size();
}

std::vector<double> SchedulingLoop::FilterLatenciesMs() const {
  std::lock_guard<std::mutex> lock(core_->mu_);
  return core_->filter_ms_;
}

void SchedulingLoop::Wake() {
  { std::lock_guard<std::mutex> lock(core_->mu_); }
  core_->cv_.notify_all();
}

Status SchedulingLoop::Start() { return core_->Start(); }

void SchedulingLoop::Stop() { core_->Stop(); }

uint64_t SchedulingLoop::passes() const {
  std::lock_guard<std::mutex> lock(core_->mu_);
  return core_->passes_;
}

}  // namespace hami::sim
