// KubeSchedulerLoop's state, shared by its parts (internal to hami-sim):
//   kube_scheduler.cc           start/stop and the serial scheduling cycle (filter, then hand off)
//   kube_scheduler_bind.cc      the bind (on a worker, one per node at a time)
//   kube_scheduler_extender.cc  the HTTP client of the extender (/filter, /bind)
// over what both loops share: the queue, the pod and node informers (sim/scheduling_queue.h),
// the worker pool (sim/worker_pool.h).
#ifndef HAMI_SIM_KUBE_SCHEDULER_IMPL_H_
#define HAMI_SIM_KUBE_SCHEDULER_IMPL_H_

#include <httplib.h>

#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "sim/kube_scheduler.h"
#include "sim/scheduling_queue.h"
#include "sim/worker_pool.h"

namespace hami::sim {

class KubeSchedulerLoop::Impl : public SchedulingLoopCore {
 public:
  using json = nlohmann::json;

  Impl(k8s::Client& client, KubeSchedulerOptions options, const Clock& clock)
      : SchedulingLoopCore(client, options, clock, Mode::kExtender), options_(std::move(options)) {}

  Status Start() override;
  void Stop() override;

  // The scheduling cycle (kube_scheduler.cc).
  void CycleLoop();
  void ScheduleOne(const std::string& key, httplib::Client& http);
  // A bind, on a worker (kube_scheduler_bind.cc).
  void Bind(const std::string& key, const json& pod, const std::string& node,
            httplib::Client& http);

  const KubeSchedulerOptions options_;
  // Binds to one node run one at a time, in cycle order (see the header); each worker has its
  // own connection to the extender.
  WorkerPool<httplib::Client> pool_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_KUBE_SCHEDULER_IMPL_H_
