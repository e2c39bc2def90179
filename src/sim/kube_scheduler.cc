#include "sim/kube_scheduler.h"

#include <httplib.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/log.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "protocol/keys.h"
#include "scheduler/extender_args.h"

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

std::string PodPhase(const json& pod) { return k8s::FieldString(pod, "status.phase"); }

bool Terminal(const json& pod) {
  const std::string phase = PodPhase(pod);
  return phase == "Succeeded" || phase == "Failed";
}

// kube-scheduler's numFeasibleNodesToFind with the adaptive percentageOfNodesToScore.
size_t FeasibleNodesToFind(size_t n) {
  if (n < 100) return n;
  int64_t pct = 50 - static_cast<int64_t>(n) / 125;
  if (pct < 5) pct = 5;
  size_t num = n * static_cast<size_t>(pct) / 100;
  return std::max<size_t>(num, 100);
}

// Only the parts of a pod the loop and the extender read are cached.
json TrimPod(json pod) {
  if (pod.contains("metadata")) pod["metadata"].erase("managedFields");
  return pod;
}

// An extender reply: transport or HTTP failure and the Error field both land in `error`.
struct FilterReply {
  std::string error;
  std::vector<std::pair<std::string, std::string>> failed;  // FailedNodes
  std::string chosen;                                       // first of NodeNames
};

std::string ReplyError(const httplib::Result& r, std::string_view verb, json* body) {
  const std::string what = "extender " + std::string(verb);
  if (!r) return what + ": " + httplib::to_string(r.error());
  if (r->status != 200) return what + ": HTTP " + std::to_string(r->status);
  *body = ParseJsonOrNull(r->body);
  if (!body->is_object()) return what + ": response is not a JSON object";
  const json* e = scheduler::FindKeyInsensitive(*body, "Error");
  return e != nullptr && e->is_string() ? e->get<std::string>() : "";
}

FilterReply ParseFilterReply(const httplib::Result& r) {
  FilterReply out;
  json body;
  out.error = ReplyError(r, "/filter", &body);
  if (!body.is_object()) return out;
  const json* names = scheduler::FindKeyInsensitive(body, "NodeNames");
  if (names != nullptr && names->is_array() && !names->empty() && (*names)[0].is_string()) {
    out.chosen = (*names)[0].get<std::string>();
  }
  const json* fails = scheduler::FindKeyInsensitive(body, "FailedNodes");
  if (fails != nullptr && fails->is_object()) {
    for (const auto& [n, why] : fails->items()) {
      out.failed.emplace_back(n, why.is_string() ? why.get<std::string>() : why.dump());
    }
  }
  return out;
}

}  // namespace

class KubeSchedulerLoop::Impl {
 public:
  enum class Where { kActive, kBackoff, kUnschedulable, kCycle, kBinding, kBound, kGone };
  struct PodState {
    PodScheduleRecord rec;
    Where where = Where::kActive;
    uint64_t seq = 0;  // activeQ order
    SystemTime backoff_until{};
    std::string last_written;  // last PodScheduled message written
    std::string uid;
  };

  Impl(k8s::Client& client, KubeSchedulerOptions options, const Clock& clock)
      : client_(client), options_(std::move(options)), clock_(clock) {}

  Status Start();
  void Stop();

  // Informer handlers.
  void OnPod(const json& pod);
  void OnPodDelete(const json& pod);
  void OnNode(const json* old_node, const json& node);
  void OnNodeDelete(const json& node);

  // Queue moves; mu_ held.
  void PushActive(PodState& s);
  void Remove(PodState& s);
  void Flush(SystemTime now);
  void Fail(PodState& s, SystemTime now, const std::string& why, bool unschedulable);

  void CycleLoop();
  void ScheduleOne(const std::string& key, httplib::Client& http);
  void Bind(const std::string& key, const json& pod, const std::string& node,
            httplib::Client& http);
  void WriteUnschedulable(const json& pod, const std::string& message);
  std::vector<std::string> CandidateNodes();
  void Submit(std::function<void(httplib::Client&)> task);
  void SubmitBind(const std::string& node, std::function<void(httplib::Client&)> task);
  void BindDone(const std::string& node);
  void Worker();
  std::unique_ptr<httplib::Client> NewHttp(bool keep_alive) const;

  k8s::Client& client_;
  const KubeSchedulerOptions options_;
  const Clock& clock_;
  std::unique_ptr<k8s::Informer> pods_;
  std::unique_ptr<k8s::Informer> nodes_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the cycle
  std::map<std::string, PodState> pods_state_;
  std::set<std::pair<uint64_t, std::string>> active_;
  std::set<std::pair<SystemTime, std::string>> backoff_;
  std::set<std::string> unschedulable_;
  uint64_t next_seq_ = 0;
  size_t in_flight_ = 0;  // the cycle's pod + queued and running binds
  bool flush_requested_ = false;
  SystemTime last_flush_{};
  uint64_t passes_ = 0;
  bool stopping_ = false;
  bool started_ = false;

  std::mutex nodes_mu_;
  std::set<std::string> ready_nodes_;
  std::vector<std::string> ready_list_;
  bool ready_dirty_ = true;
  size_t next_start_ = 0;  // kube-scheduler's nextStartNodeIndex

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<std::function<void(httplib::Client&)>> work_;
  // Binds to a node with a bind in flight wait here, in cycle order (see the header).
  std::map<std::string, std::deque<std::function<void(httplib::Client&)>>> node_binds_;
  std::set<std::string> node_busy_;
  bool work_stop_ = false;
  std::vector<std::thread> workers_;
  std::thread cycle_;
};

std::unique_ptr<httplib::Client> KubeSchedulerLoop::Impl::NewHttp(bool keep_alive) const {
  auto http = std::make_unique<httplib::Client>(options_.extender_url);
  http->set_connection_timeout(std::chrono::seconds(5));
  http->set_read_timeout(options_.http_timeout);
  http->set_write_timeout(options_.http_timeout);
  // Bind workers open a connection per request: cpp-httplib's server (the extender's) parks one
  // of its threads on every idle kept-alive connection, and 16 idle ones once starved /filter.
  // The cycle's one connection is busy back to back, so it is kept (no connect + accept + thread
  // hand-off per pod on the serial path).
  http->set_keep_alive(keep_alive);
  // The request goes out as headers then body: with Nagle the body waits for the extender's
  // delayed ACK (~40 ms per call).
  http->set_tcp_nodelay(true);
  return http;
}

Status KubeSchedulerLoop::Impl::Start() {
  if (options_.extender_url.empty()) return Error{"kube-scheduler loop: extender_url is empty"};
  k8s::InformerOptions pod_opts;
  pod_opts.compact = true;  // read through Get() once per attempt; keeps 10k pods small
  pod_opts.transform = TrimPod;
  k8s::InformerHandlers ph;
  ph.on_add = [this](const k8s::ObjectRef& o) { OnPod(*o); };
  ph.on_update = [this](const k8s::ObjectRef&, const k8s::ObjectRef& o) { OnPod(*o); };
  ph.on_delete = [this](const k8s::ObjectRef& o) { OnPodDelete(*o); };
  pods_ = std::make_unique<k8s::Informer>(client_, res::kPods, pod_opts, ph);
  k8s::InformerHandlers nh;
  nh.on_add = [this](const k8s::ObjectRef& o) { OnNode(nullptr, *o); };
  nh.on_update = [this](const k8s::ObjectRef& a, const k8s::ObjectRef& b) { OnNode(a.get(), *b); };
  nh.on_delete = [this](const k8s::ObjectRef& o) { OnNodeDelete(*o); };
  nodes_ = std::make_unique<k8s::Informer>(client_, res::kNodes, k8s::InformerOptions{}, nh);
  last_flush_ = clock_.Now();
  nodes_->Start();
  pods_->Start();
  if (!nodes_->WaitForSync(std::chrono::seconds(30)) ||
      !pods_->WaitForSync(std::chrono::seconds(30))) {
    return Error{"kube-scheduler loop: informers did not sync within 30 s"};
  }
  for (int i = 0; i < std::max(1, options_.bind_parallelism); ++i) {
    workers_.emplace_back([this] { Worker(); });
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
  }
  cycle_ = std::thread([this] { CycleLoop(); });
  return OkStatus();
}

void KubeSchedulerLoop::Impl::Stop() {
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
  // Each informer takes up to a second to notice; stop both at once.
  std::thread stop_nodes([this] {
    if (nodes_) nodes_->Stop();
  });
  if (pods_) pods_->Stop();
  stop_nodes.join();
}

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
  const size_t want = FeasibleNodesToFind(n);
  if (want == n) return ready_list_;
  std::vector<std::string> out;
  out.reserve(want);
  const size_t start = next_start_ % n;
  for (size_t i = 0; i < want; ++i) out.push_back(ready_list_[(start + i) % n]);
  next_start_ = (start + want) % n;
  return out;
}

void KubeSchedulerLoop::Impl::CycleLoop() {
  std::unique_ptr<httplib::Client> http = NewHttp(/*keep_alive=*/true);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    ++passes_;
    const SystemTime now = clock_.Now();
    while (!backoff_.empty() && backoff_.begin()->first <= now) {
      const std::string key = backoff_.begin()->second;
      backoff_.erase(backoff_.begin());
      PushActive(pods_state_[key]);
    }
    if (flush_requested_ || now - last_flush_ >= options_.unschedulable_flush) Flush(now);
    if (active_.empty()) {
      cv_.wait_for(lock, options_.max_wait);
      continue;
    }
    const std::string key = active_.begin()->second;
    active_.erase(active_.begin());
    pods_state_[key].where = Where::kCycle;
    ++in_flight_;
    lock.unlock();
    ScheduleOne(key, *http);
    lock.lock();
  }
}

void KubeSchedulerLoop::Impl::ScheduleOne(const std::string& key, httplib::Client& http) {
  k8s::ObjectRef pod = pods_->Get(key);
  auto settle = [&](const std::function<void(PodState&, SystemTime)>& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    fn(pods_state_[key], clock_.Now());
    --in_flight_;
  };
  if (!pod || !k8s::FieldString(*pod, "spec.nodeName").empty() || Terminal(*pod) ||
      (*pod)["metadata"].contains("deletionTimestamp")) {
    settle([&](PodState& s, SystemTime) {
      s.where =
          pod && !k8s::FieldString(*pod, "spec.nodeName").empty() ? Where::kBound : Where::kGone;
    });
    return;
  }
  std::vector<std::string> nodes = CandidateNodes();
  const size_t node_count = nodes.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++pods_state_[key].rec.attempts;
  }
  json args = {{"Pod", *pod}, {"Nodes", nullptr}, {"NodeNames", std::move(nodes)}};
  const FilterReply reply = ParseFilterReply(http.Post("/filter", args.dump(), "application/json"));
  const std::string& error = reply.error;
  const std::string& chosen = reply.chosen;
  if (error.empty() && !chosen.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pods_state_[key].where = Where::kBinding;  // stays in flight until the bind settles
    }
    SubmitBind(chosen, [this, key, pod, chosen](httplib::Client& h) {
      Bind(key, *pod, chosen, h);
      BindDone(chosen);
    });
    return;
  }
  // A transport failure or an extender Error is retried after the backoff; "no node fits"
  // waits in the unschedulableQ for a cluster event.
  const bool unschedulable = error.empty();
  const std::string message = UnschedulableMessage(node_count, reply.failed, error);
  bool write = false;
  settle([&](PodState& s, SystemTime now) {
    Fail(s, now, unschedulable ? message : error, unschedulable);
    write = unschedulable && s.last_written != message;
    if (write) s.last_written = message;
  });
  if (write) Submit([this, pod, message](httplib::Client&) { WriteUnschedulable(*pod, message); });
}

void KubeSchedulerLoop::Impl::Bind(const std::string& key, const json& pod, const std::string& node,
                                   httplib::Client& http) {
  json args = {{"PodName", k8s::Name(pod)},
               {"PodNamespace", k8s::Namespace(pod)},
               {"PodUID", k8s::Uid(pod)},
               {"Node", node}};
  json body;
  std::string error =
      ReplyError(http.Post("/bind", args.dump(), "application/json"), "/bind", &body);
  if (!error.empty()) {
    // The Binding may have been created before the error (e.g. a lost response).
    k8s::ObjectRef now_pod = pods_->Get(key);
    if (now_pod && !k8s::FieldString(*now_pod, "spec.nodeName").empty()) error.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    PodState& s = pods_state_[key];
    const SystemTime now = clock_.Now();
    if (error.empty()) {
      s.where = Where::kBound;
      s.rec.bound = true;
      s.rec.bound_at = now;
      s.rec.last_failure.clear();
    } else {
      HAMI_VLOG(2, "bind {} to {}: {}", key, node, error);
      Fail(s, now, error, false);
    }
    --in_flight_;
  }
  cv_.notify_all();
}

void KubeSchedulerLoop::Impl::WriteUnschedulable(const json& pod, const std::string& message) {
  json cond = {{"type", "PodScheduled"},
               {"status", "False"},
               {"reason", "Unschedulable"},
               {"message", message},
               {"lastTransitionTime", FormatRfc3339(clock_.Now(), Zone::Utc())}};
  json patch = {{"status", {{"conditions", json::array({cond})}}}};
  auto r = client_.Patch(res::kPods, k8s::Namespace(pod), k8s::Name(pod),
                         k8s::PatchType::kStrategicMerge, patch, "status");
  if (!r)
    HAMI_VLOG(2, "pod {}: PodScheduled condition: {}", k8s::ObjectKey(pod), r.error().ToString());
  auto e = client_.RecordEvent(pod, "Warning", "FailedScheduling", message, "default-scheduler");
  if (!e)
    HAMI_VLOG(2, "pod {}: FailedScheduling event: {}", k8s::ObjectKey(pod), e.error().ToString());
}

void KubeSchedulerLoop::Impl::Submit(std::function<void(httplib::Client&)> task) {
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    work_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

void KubeSchedulerLoop::Impl::SubmitBind(const std::string& node,
                                         std::function<void(httplib::Client&)> task) {
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    if (!node_busy_.insert(node).second) {
      node_binds_[node].push_back(std::move(task));
      return;
    }
    work_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

void KubeSchedulerLoop::Impl::BindDone(const std::string& node) {
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    auto it = node_binds_.find(node);
    if (it == node_binds_.end() || it->second.empty()) {
      node_busy_.erase(node);
      if (it != node_binds_.end()) node_binds_.erase(it);
      return;
    }
    work_.push_back(std::move(it->second.front()));
    it->second.pop_front();
  }
  work_cv_.notify_one();
}

void KubeSchedulerLoop::Impl::Worker() {
  std::unique_ptr<httplib::Client> http = NewHttp(/*keep_alive=*/false);
  std::unique_lock<std::mutex> lock(work_mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return work_stop_ || !work_.empty(); });
    if (work_stop_) return;
    auto task = std::move(work_.front());
    work_.pop_front();
    lock.unlock();
    task(*http);
    lock.lock();
  }
}

KubeSchedulerLoop::KubeSchedulerLoop(k8s::Client& client, KubeSchedulerOptions options,
                                     const Clock& clock)
    : impl_(std::make_unique<Impl>(client, std::move(options), clock)) {}

KubeSchedulerLoop::~KubeSchedulerLoop() { Stop(); }

Status KubeSchedulerLoop::Start() { return impl_->Start(); }

void KubeSchedulerLoop::Stop() { impl_->Stop(); }

std::vector<PodScheduleRecord> KubeSchedulerLoop::Records() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  std::vector<PodScheduleRecord> out;
  out.reserve(impl_->pods_state_.size());
  for (const auto& [key, s] : impl_->pods_state_) out.push_back(s.rec);
  return out;
}

bool KubeSchedulerLoop::Idle() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->active_.empty() && impl_->backoff_.empty() && impl_->in_flight_ == 0;
}

size_t KubeSchedulerLoop::Unschedulable() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->unschedulable_.size();
}

void KubeSchedulerLoop::Wake() {
  { std::lock_guard<std::mutex> lock(impl_->mu_); }
  impl_->cv_.notify_all();
}

uint64_t KubeSchedulerLoop::passes() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->passes_;
}

}  // namespace hami::sim
