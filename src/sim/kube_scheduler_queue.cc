// The pod and node informer handlers that move pods between the loop's queues
// (sim/scheduling_queue.h); a node update retries unschedulable pods only when it changes what
// the extender reads.
#include "k8s/object.h"
#include "protocol/keys.h"
#include "sim/kube_scheduler.h"
#include "sim/kube_scheduler_impl.h"

namespace hami::sim {

using nlohmann::json;

namespace {

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

void KubeSchedulerLoop::Impl::OnPod(const json& pod) {
  if (k8s::FieldString(pod, "spec.schedulerName") != options_.scheduler_name) return;
  const std::string key = k8s::ObjectKey(pod);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (TerminalPod(pod)) {
      queue_.RequestFlush();
      wake = true;
    }
    QueuedPod* s = nullptr;
    switch (queue_.Observe(key, pod, &s)) {
      case SchedulingQueue::Seen::kIgnored:
        return;
      case SchedulingQueue::Seen::kAdded:
        wake = true;
        break;
      default:
        break;
    }
  }
  if (wake) cv_.notify_all();
}

void KubeSchedulerLoop::Impl::OnNode(const json* old_node, const json& node) {
  OnNodeChange(old_node, node, NodeSchedulingView);
}

}  // namespace hami::sim
