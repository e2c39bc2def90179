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
  queue_.Start();
  nodes_->Start();
  pods_->Start();
  if (!nodes_->WaitForSync(std::chrono::seconds(30)) ||
      !pods_->WaitForSync(std::chrono::seconds(30))) {
    return Error{"kube-scheduler loop: informers did not sync within 30 s"};
  }
  for (int i = 0; i < std::max(1, options_.bind_parallelism); ++i) {
    workers_.emplace_back([this] { Worker(); });
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
  RunCycles([&](const std::string& key) {
    if (options_.extender_url_source && options_.extender_url_source() != url) {
      // Another replica leads now: its kube-scheduler would talk to its own extender.
      url = options_.extender_url_source();
      http = NewExtenderHttp(options_, /*keep_alive=*/true);
    }
    ScheduleOne(key, *http);
  });
}

void KubeSchedulerLoop::Impl::ScheduleOne(const std::string& key, httplib::Client& http) {
  k8s::ObjectRef pod = pods_->Get(key);
  if (SettledBeforeCycle(key, pod)) return;
  std::vector<std::string> nodes = ready_.Sample();
  const size_t node_count = nodes.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++queue_[key].rec.attempts;
  }
  const SystemTime filter_start = clock_.Now();
  const FilterReply reply = ExtenderFilter(http, *pod, std::move(nodes));
  RecordFilter(filter_start);
  const std::string& error = reply.error;
  const std::string& chosen = reply.chosen;
  if (error.empty() && !chosen.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_[key].where = PodWhere::kBinding;  // stays in flight until the bind settles
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    QueuedPod& s = queue_[key];
    queue_.Fail(s, clock_.Now(), unschedulable ? message : error, unschedulable);
    write = unschedulable && queue_.ShouldWrite(s, message);
    queue_.Done();
  }
  if (write) {
    Submit([this, pod, message](httplib::Client&) {
      WriteUnschedulable(client_, clock_, *pod, message);
    });
  }
}

KubeSchedulerLoop::KubeSchedulerLoop(k8s::Client& client, KubeSchedulerOptions options,
                                     const Clock& clock)
    : impl_(std::make_unique<Impl>(client, std::move(options), clock)) {
  core_ = impl_.get();
}

KubeSchedulerLoop::~KubeSchedulerLoop() { Stop(); }

Status KubeSchedulerLoop::Start() { return impl_->Start(); }

void KubeSchedulerLoop::Stop() { impl_->Stop(); }

}  // namespace hami::sim
