// What hami-sim's two kube-scheduler loops (KubeSchedulerLoop in extender mode,
// sim/kube_scheduler.h; DraSchedulerLoop in DRA mode, sim/dra_scheduler.h) have in common to
// their callers: the per-pod record, kube-scheduler's backoff and FailedScheduling message, the
// options of the scheduling queue, and the read-only view of a running loop.
#ifndef HAMI_SIM_SCHEDULING_LOOP_H_
#define HAMI_SIM_SCHEDULING_LOOP_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace hami::sim {

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

// The options both loops' scheduling queues take (KubeSchedulerOptions and DraSchedulerOptions
// add their own).
struct SchedulingQueueOptions {
  std::string scheduler_name = "hami-scheduler";    // the pods' spec.schedulerName
  std::chrono::milliseconds initial_backoff{1000};  // doubles per failed attempt ...
  std::chrono::milliseconds max_backoff{10000};     // ... up to this
  std::chrono::seconds unschedulable_flush{60};     // unschedulableQ flushed at least this often
  // Upper bound of one real-time wait of the loop, so FakeClock-driven deadlines are noticed.
  std::chrono::milliseconds max_wait{100};
};

class SchedulingLoopCore;  // sim/scheduling_queue.h (internal)

// What both loops offer their callers: Start/Stop and a read-only view, thread-safe.
class SchedulingLoop {
 public:
  SchedulingLoop(const SchedulingLoop&) = delete;
  SchedulingLoop& operator=(const SchedulingLoop&) = delete;

  // Starts the loop's informers, its scheduling cycle thread and its bind workers; returns
  // once the informers have synced (an error after 30 s without).
  Status Start();
  void Stop();  // idempotent

  // One per pod seen pending.
  std::vector<PodScheduleRecord> Records() const;
  // Nothing in activeQ, backoffQ or in flight (unschedulable pods may remain).
  bool Idle() const;
  size_t Unschedulable() const;
  // Every Filter phase so far (extender mode: each POST /filter round trip, retries included),
  // in ms of the loop's clock.
  std::vector<double> FilterLatenciesMs() const;

  // Added: makes the loop re-read the clock now (after a FakeClock move).
  void Wake();
  // Added: passes of the scheduling loop so far; a test that Wake()s and sees this grow knows the
  // loop has looked at the clock since.
  uint64_t passes() const;

 protected:
  SchedulingLoop() = default;
  ~SchedulingLoop() = default;
  // The derived loop's state; set once by its constructor, outlives every call above.
  SchedulingLoopCore* core_ = nullptr;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_SCHEDULING_LOOP_H_
