// What kube-scheduler does with HAMi's extender (docs/protocol.md#scheduler-extender,
// nodeCacheCapable true), for the pods whose spec.schedulerName is ours: a serial scheduling cycle
// over an activeQ (FIFO by creation), POST /filter with the pod and the Ready nodes' names, then
// the bind handed to a worker (POST /bind) while the cycle goes on with the next pod. A pod no node
// fits waits in the unschedulableQ until a cluster event (node add/update, pod delete or
// termination) or the periodic flush moves it back; a failed bind (or a filter transport error)
// sends the pod to the backoffQ for initial_backoff x 2^(failures-1), capped at max_backoff. An
// extender Error (e.g. a failed API write) also goes to the backoffQ rather than the
// unschedulableQ, as kube-scheduler treats errors that are not a fit failure, so a transient API
// error is retried within seconds.
//
// Binds to one node are issued one at a time, in cycle order: the extender serialises them on
// the node lock anyway (a bind waits there until the device plugin's Allocate releases it), and a
// bind waiting in the extender would hold one of its few HTTP threads and one of our workers
// that binds to other nodes could use.
//
// Timestamps and backoff deadlines read the injected Clock; the loop itself waits on a condition
// variable with a short real-time cap, so a test that moves a FakeClock calls Wake() (or waits at
// most that cap) for the loop to notice.
#ifndef HAMI_SIM_KUBE_SCHEDULER_H_
#define HAMI_SIM_KUBE_SCHEDULER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "k8s/client.h"
#include "sim/scheduling_loop.h"

namespace hami::sim {

// The queue's options (scheduler_name, backoffs, flush, max_wait) and the extender's.
struct KubeSchedulerOptions : SchedulingQueueOptions {
  std::string extender_url;  // "http://127.0.0.1:PORT": POST /filter, /bind
  // When set, read before each scheduling cycle and bind instead of extender_url: the replica
  // that leads now (hami-sim's schedulerReplicas, sim/scheduler_set.h). Must be thread-safe.
  std::function<std::string()> extender_url_source{};
  int bind_parallelism = 16;  // binds run concurrently; the cycle is serial
  std::chrono::milliseconds http_timeout{30000};
};

// Start() (the pod and node informers, the serial scheduling cycle thread, the bind workers;
// an error when extender_url is empty), Stop(), Records(), Idle(), Unschedulable(),
// FilterLatenciesMs() (each POST /filter round trip), Wake() and passes() come from
// SchedulingLoop (sim/scheduling_loop.h).
class KubeSchedulerLoop : public SchedulingLoop {
 public:
  // `client` and `clock` must outlive the loop.
  KubeSchedulerLoop(k8s::Client& client, KubeSchedulerOptions options,
                    const Clock& clock = RealClock());
  ~KubeSchedulerLoop();  // Stop()s

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_KUBE_SCHEDULER_H_
