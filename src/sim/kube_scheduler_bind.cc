// The loop's bind workers: binds to one node go one at a time in cycle order (see
// sim/kube_scheduler.h), other work (the FailedScheduling write) goes straight to the pool.
#include "common/log.h"
#include "k8s/object.h"
#include "sim/kube_scheduler_extender.h"
#include "sim/kube_scheduler_impl.h"

namespace hami::sim {

using nlohmann::json;

void KubeSchedulerLoop::Impl::Bind(const std::string& key, const json& pod, const std::string& node,
                                   httplib::Client& http) {
  std::string error = ExtenderBind(http, pod, node);
  if (!error.empty()) {
    // The Binding may have been created before the error (e.g. a lost response).
    k8s::ObjectRef now_pod = pods_->Get(key);
    if (now_pod && !k8s::FieldString(*now_pod, "spec.nodeName").empty()) error.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    QueuedPod& s = queue_[key];
    const SystemTime now = clock_.Now();
    if (error.empty()) {
      queue_.Bound(s, now);
    } else {
      HAMI_VLOG(2, "bind {} to {}: {}", key, node, error);
      queue_.Fail(s, now, error, false);
    }
    queue_.Done();
  }
  cv_.notify_all();
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
  std::unique_ptr<httplib::Client> http = NewExtenderHttp(options_, /*keep_alive=*/false);
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

}  // namespace hami::sim
