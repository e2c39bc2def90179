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

namespace hami::sim {

struct KubeSchedulerOptions {
  std::string scheduler_name = "hami-scheduler";
  std::string extender_url;  // "http://127.0.0.1:PORT": POST /filter, /bind
  // When set, read before each scheduling cycle and bind instead of extender_url: the replica
  // that leads now (hami-sim's schedulerReplicas, sim/scheduler_set.h). Must be thread-safe.
  std::function<std::string()> extender_url_source{};
  std::chrono::milliseconds initial_backoff{1000};  // doubles per failed attempt ...
  std::chrono::milliseconds max_backoff{10000};     // ... up to this
  std::chrono::seconds unschedulable_flush{60};     // unschedulableQ flushed at least this often
  int bind_parallelism = 16;                        // binds run concurrently; the cycle is serial
  std::chrono::milliseconds http_timeout{30000};
  // Upper bound of one real-time wait of the loop, so FakeClock-driven deadlines are noticed.
  std::chrono::milliseconds max_wait{100};
};

struct PodScheduleRecord {
  std::string ns, name;
  SystemTime first_seen{};  // when the loop first saw the pod pending
  SystemTime bound_at{};    // when /bind succeeded (valid iff bound)
  bool bound = false;
  int attempts = 0;          // filter calls
  std::string last_failure;  // reasons of the last failed attempt (FailedNodes joined / Error)
  // Added: failed attempts so far and the backoff the last one earned (0 before any failure).
  int failures = 0;
  std::chrono::milliseconds backoff{0};
  // DRA mode (DraSchedulerLoop): the allocator's per node lines of the last failed attempt,
  // each "<node>: <detail>"; empty in extender mode.
  std::vector<std::string> failure_details;
};

// kube-scheduler's per-pod backoff after `failures` failed attempts (>= 1):
// initial x 2^(failures-1), capped at max.
std::chrono::milliseconds PodBackoff(int failures, std::chrono::milliseconds initial,
                                     std::chrono::milliseconds max);

// "0/N nodes are available: <reasons>." as kube-scheduler words a FailedScheduling message
// (reasons grouped and counted, sorted); `error` non-empty takes the place of the reasons.
std::string UnschedulableMessage(size_t node_count,
                                 const std::vector<std::pair<std::string, std::string>>& failed,
                                 const std::string& error);

class KubeSchedulerLoop {
 public:
  // `client` and `clock` must outlive the loop.
  KubeSchedulerLoop(k8s::Client& client, KubeSchedulerOptions options,
                    const Clock& clock = RealClock());
  ~KubeSchedulerLoop();  // Stop()s
  KubeSchedulerLoop(const KubeSchedulerLoop&) = delete;
  KubeSchedulerLoop& operator=(const KubeSchedulerLoop&) = delete;

  // Pod + node informers, the serial scheduling cycle thread, bind workers. Returns once both
  // informers have synced (error after 30 s without).
  Status Start();
  void Stop();  // idempotent

  std::vector<PodScheduleRecord> Records() const;
  // Nothing in activeQ, backoffQ or in flight (unschedulable pods may remain).
  bool Idle() const;
  size_t Unschedulable() const;
  // Every POST /filter round trip so far, in ms of the loop's clock (retries included).
  std::vector<double> FilterLatenciesMs() const;

  // Added: makes the loop re-read the clock now (after a FakeClock move).
  void Wake();
  // Added: passes of the scheduling loop so far; a test that Wake()s and sees this grow knows the
  // loop has looked at the clock since.
  uint64_t passes() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_KUBE_SCHEDULER_H_
