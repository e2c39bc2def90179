// KubeSchedulerLoop's state, shared by its parts (internal to hami-sim):
//   kube_scheduler.cc           start/stop and the serial scheduling cycle (filter, then hand off)
//   kube_scheduler_queue.cc     the informer handlers that feed the queue (sim/scheduling_queue.h)
//   kube_scheduler_bind.cc      the bind workers (one bind per node at a time)
//   kube_scheduler_extender.cc  the HTTP client of the extender (/filter, /bind)
#ifndef HAMI_SIM_KUBE_SCHEDULER_IMPL_H_
#define HAMI_SIM_KUBE_SCHEDULER_IMPL_H_

#include <httplib.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "sim/kube_scheduler.h"
#include "sim/scheduling_queue.h"

namespace hami::sim {

class KubeSchedulerLoop::Impl : public SchedulingLoopCore {
 public:
  using json = nlohmann::json;

  Impl(k8s::Client& client, KubeSchedulerOptions options, const Clock& clock)
      : SchedulingLoopCore(client, options, clock), options_(std::move(options)) {}

  Status Start();
  void Stop();

  // Informer handlers (kube_scheduler_queue.cc).
  void OnPod(const json& pod);
  void OnNode(const json* old_node, const json& node);

  // The scheduling cycle (kube_scheduler.cc).
  void CycleLoop();
  void ScheduleOne(const std::string& key, httplib::Client& http);
  // Bind workers (kube_scheduler_bind.cc).
  void Bind(const std::string& key, const json& pod, const std::string& node,
            httplib::Client& http);
  void Submit(std::function<void(httplib::Client&)> task);
  void SubmitBind(const std::string& node, std::function<void(httplib::Client&)> task);
  void BindDone(const std::string& node);
  void Worker();

  const KubeSchedulerOptions options_;
  std::unique_ptr<k8s::Informer> pods_;
  std::unique_ptr<k8s::Informer> nodes_;

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

}  // namespace hami::sim

#endif  // HAMI_SIM_KUBE_SCHEDULER_IMPL_H_
