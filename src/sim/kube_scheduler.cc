// The loop's lifecycle and its serial scheduling cycle: one pod at a time from the activeQ, POST
// /filter, then the bind handed to a worker (kube_scheduler_bind.cc) or the pod back to a queue
// (kube_scheduler_queue.cc). The parts are listed in kube_scheduler_impl.h.
#include "sim/kube_scheduler.h"

#include <algorithm>
#include <map>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "sim/kube_scheduler_extender.h"
#include "sim/kube_scheduler_impl.h"

namespace hami::sim {

namespace res = k8s::resources;
using nlohmann::json;

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

// Only the parts of a pod the loop and the extender read are cached.
json TrimPod(json pod) {
  if (pod.contains("metadata")) pod["metadata"].erase("managedFields");
  return pod;
}

}  // namespace

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

void KubeSchedulerLoop::Impl::CycleLoop() {
  std::unique_ptr<httplib::Client> http = NewExtenderHttp(options_, /*keep_alive=*/true);
  std::string url = options_.extender_url_source ? options_.extender_url_source() : "";
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
    if (options_.extender_url_source && options_.extender_url_source() != url) {
      // Another replica leads now: its kube-scheduler would talk to its own extender.
      url = options_.extender_url_source();
      http = NewExtenderHttp(options_, /*keep_alive=*/true);
    }
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
  const SystemTime filter_start = clock_.Now();
  const FilterReply reply = ExtenderFilter(http, *pod, std::move(nodes));
  {
    const std::chrono::duration<double, std::milli> took = clock_.Now() - filter_start;
    std::lock_guard<std::mutex> lock(mu_);
    filter_ms_.push_back(took.count());
  }
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

std::vector<double> KubeSchedulerLoop::FilterLatenciesMs() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->filter_ms_;
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
