// The loop's bind, on a worker of its pool: binds to one node go one at a time in cycle order
// (see sim/kube_scheduler.h), other work (the FailedScheduling write) goes straight to the pool.
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
  if (!error.empty()) HAMI_VLOG(2, "bind {} to {}: {}", key, node, error);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.BindDone(key, clock_.Now(), error);
  }
  cv_.notify_all();
}

}  // namespace hami::sim
