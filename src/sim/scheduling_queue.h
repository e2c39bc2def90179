// The scheduling queue and the Ready-node set both of hami-sim's kube-scheduler loops own
// (internal to hami-sim; the loops are sim/kube_scheduler.h and sim/dra_scheduler.h):
//   SchedulingQueue     kube-scheduler's activeQ (FIFO by creation), backoffQ and
//                       unschedulableQ with the periodic flush, and every pod's state
//   ReadyNodes          the Ready nodes and kube-scheduler's rotating start index
//   SchedulingLoopCore  what a loop's Impl holds besides its own parts: the lock, the queue, the
//                       pod and node informers and their events, the cycle's thread and wait
//   WriteUnschedulable  the PodScheduled=False status and the FailedScheduling event
#ifndef HAMI_SIM_SCHEDULING_QUEUE_H_
#define HAMI_SIM_SCHEDULING_QUEUE_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
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
#include "common/result.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "sim/scheduling_loop.h"

namespace hami::sim {

// Succeeded or Failed: the pod takes no more scheduling.
bool TerminalPod(const nlohmann::json& pod);
// The node's Ready condition is True.
bool NodeReady(const nlohmann::json& node);

enum class PodWhere { kActive, kBackoff, kUnschedulable, kCycle, kBinding, kBound, kGone };

struct QueuedPod {
  PodScheduleRecord rec;
  PodWhere where = PodWhere::kActive;
  uint64_t seq = 0;  // activeQ order
  SystemTime backoff_until{};
  std::string last_written;  // last PodScheduled message written
  std::string uid;
};

// Not thread-safe: the owning loop holds its lock around every call. Pods are keyed "ns/name".
class SchedulingQueue {
 public:
  // `clock` must outlive the queue.
  SchedulingQueue(const SchedulingQueueOptions& options, const Clock& clock);

  // What a pod informer event did to the queues (Observe).
  enum class Seen {
    kIgnored,  // not known and not pending: nothing to schedule
    kAdded,    // first seen pending (or a new pod under a deleted one's name): in the activeQ
    kLeft,     // known, and now bound or being deleted
    kPending,  // known and still pending
  };
  // A pod add or update: a new pending pod joins the activeQ; a queued one bound by someone
  // else or being deleted leaves the queues (an in-flight one is settled by its own cycle or
  // bind). `state` gets the pod's state unless kIgnored.
  Seen Observe(const std::string& key, const nlohmann::json& pod, QueuedPod** state);
  // A pod delete: a queued pod leaves the queues; every unschedulable pod is retried.
  void Deleted(const std::string& key);

  // The next pod to schedule, after moving the backoffQ's due pods to the activeQ and flushing
  // the unschedulableQ when asked or due; false when the activeQ is empty. The pod is in flight
  // (kCycle) until Done().
  bool Pop(std::string& key);
  void Done() { --in_flight_; }

  void PushActive(QueuedPod& s);
  void Remove(QueuedPod& s);
  // From the unschedulableQ to the activeQ, or the backoffQ while its backoff lasts.
  void Requeue(QueuedPod& s, SystemTime now);
  void Flush(SystemTime now);
  // A failed attempt: the backoff doubles; the pod waits in the unschedulableQ for a cluster
  // event (`unschedulable`) or in the backoffQ.
  void Fail(QueuedPod& s, SystemTime now, const std::string& why, bool unschedulable);
  // Unschedulable without an attempt counted (DRA's PreEnqueue).
  void Park(QueuedPod& s, const std::string& why);
  void Bound(QueuedPod& s, SystemTime now);
  // The end of the pod's binding cycle (in flight since Pop): bound when `error` is empty, in
  // the backoffQ otherwise.
  void BindDone(const std::string& key, SystemTime now, const std::string& error);
  // Whether `message` differs from the last PodScheduled message written for the pod; it
  // becomes the last one.
  bool ShouldWrite(QueuedPod& s, const std::string& message);

  // A cluster event that may make unschedulable pods fit: the next Pop flushes.
  void RequestFlush() {
    flush_requested_ = true;
    ++moves_;
  }
  // A cluster event that retries only some pods (the caller Requeue()s them).
  void Moved() { ++moves_; }
  // A cluster event came since the last Pop (kube-scheduler's moveRequestCycle).
  bool MovedSincePop() const { return moves_ != pop_moves_; }

  QueuedPod& operator[](const std::string& key) { return pods_[key]; }
  const std::set<std::string>& unschedulable() const { return unschedulable_; }
  std::vector<PodScheduleRecord> Records() const;
  bool Idle() const { return active_.empty() && backoff_.empty() && in_flight_ == 0; }
  void Start() { last_flush_ = clock_.Now(); }

 private:
  const std::chrono::milliseconds initial_backoff_, max_backoff_;
  const std::chrono::seconds flush_every_;
  const Clock& clock_;
  std::map<std::string, QueuedPod> pods_;
  std::set<std::pair<uint64_t, std::string>> active_;
  std::set<std::pair<SystemTime, std::string>> backoff_;
  std::set<std::string> unschedulable_;
  uint64_t next_seq_ = 0;
  size_t in_flight_ = 0;  // the cycle's pod + pending binds
  bool flush_requested_ = false;
  SystemTime last_flush_{};
  uint64_t moves_ = 0;  // cluster events so far
  uint64_t pop_moves_ = 0;
};

// The Ready nodes, in name order; thread-safe.
class ReadyNodes {
 public:
  // A node add or update; a node delete.
  void Update(const nlohmann::json& node);
  void Erase(const nlohmann::json& node);
  // Extender mode: kube-scheduler's sample of the Ready nodes (all below 100, in name order;
  // above, synthetic::KubeSchedulerCandidates of them from the rotating start index, which moves
  // past them).
  std::vector<std::string> Sample();
  // Every Ready node, from the rotating start index; Advance() moves it past the `processed`
  // nodes a cycle looked at, when it had 100 or more (`count`): below that kube-scheduler looks
  // at all of them every cycle.
  std::vector<std::string> All();
  void Advance(size_t processed, size_t count);

 private:
  const std::vector<std::string>& ListLocked();

  std::mutex mu_;
  std::set<std::string> ready_;
  std::vector<std::string> list_;
  bool dirty_ = true;
  size_t next_start_ = 0;  // kube-scheduler's nextStartNodeIndex
};

// The PodScheduled=False (reason Unschedulable) condition with `message`, and kube-scheduler's
// FailedScheduling event; failures are logged only.
void WriteUnschedulable(k8s::Client& client, const Clock& clock, const nlohmann::json& pod,
                        const std::string& message);

// A loop's shared state; its Impl derives from it. Guarded by mu_ unless noted.
class SchedulingLoopCore {
 public:
  // Where the two loops differ in what they share:
  //   kExtender: the pod informer is compact (a pod read through Get() once per attempt keeps
  //              10k pods small); every update of a finished pod flushes the unschedulableQ; a
  //              node update retries unschedulable pods when it changes readiness, labels, spec,
  //              annotations other than the node lock (which every bind takes and releases) or
  //              allocatable.
  //   kDra:      the pod informer keeps whole pods; the update that finishes a pod flushes; a
  //              node update retries when it changes readiness, labels (slices' and allocations'
  //              node selectors read them) or spec.
  enum class Mode { kExtender, kDra };
  // `client` and `clock` must outlive the core.
  SchedulingLoopCore(k8s::Client& client, const SchedulingQueueOptions& options, const Clock& clock,
                     Mode mode);
  virtual ~SchedulingLoopCore() = default;
  SchedulingLoopCore(const SchedulingLoopCore&) = delete;
  SchedulingLoopCore& operator=(const SchedulingLoopCore&) = delete;

  // SchedulingLoop's Start and Stop.
  virtual Status Start() = 0;
  virtual void Stop() = 0;

  // The pod informer and the node informer.
  void MakeInformers();
  // Starts the node informer, `extra`, then the pod informer; waits for them all to sync.
  // `who` names the loop in the error.
  Status StartInformers(const std::string& who, std::initializer_list<k8s::Informer*> extra);
  // Stops the informers made and `extra` (nullptr ones skipped), all at once: each takes up
  // to a second to notice.
  void StopInformers(std::initializer_list<k8s::Informer*> extra);
  // The cycle's thread running `body`; StopCycle ends and joins it (idempotent).
  void StartCycle(std::function<void()> body);
  void StopCycle();

  // The scheduling cycle's thread: until stopping_, one pod at a time from the queue handed to
  // `schedule` (mu_ not held), which settles it; waits for Wake or a pod (at most max_wait).
  template <typename Schedule>
  void RunCycles(Schedule&& schedule) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      ++passes_;
      std::string key;
      if (!queue_.Pop(key)) {
        cv_.wait_for(lock, max_wait_);
        continue;
      }
      lock.unlock();
      schedule(key);
      lock.lock();
    }
  }
  // The cycle's pod is gone, bound, finished or being deleted since it was queued: settled
  // here (true), or still to schedule (false).
  bool SettledBeforeCycle(const std::string& key, const k8s::ObjectRef& pod);
  // Informer events. A pod add or update of ours goes through the queue's Observe, then
  // OnPodSeen, which returns whether to wake the cycle.
  void OnPod(const nlohmann::json* old_pod, const nlohmann::json& pod);
  virtual bool OnPodSeen(SchedulingQueue::Seen /*seen*/, const std::string& /*key*/,
                         const nlohmann::json& /*pod*/, QueuedPod& /*state*/) {
    return false;
  }
  void OnPodDelete(const nlohmann::json& pod);
  void OnNode(const nlohmann::json* old_node, const nlohmann::json& node);
  void OnNodeDelete(const nlohmann::json& node) { ready_.Erase(node); }
  // Records one Filter phase that began at `start`.
  void RecordFilter(SystemTime start);

  k8s::Client& client_;
  const Clock& clock_;
  const std::string scheduler_name_;
  const std::chrono::milliseconds max_wait_;
  const Mode mode_;
  std::unique_ptr<k8s::Informer> pods_;
  std::unique_ptr<k8s::Informer> nodes_;
  std::thread cycle_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the cycle
  SchedulingQueue queue_;
  std::vector<double> filter_ms_;  // each Filter phase
  uint64_t passes_ = 0;
  bool stopping_ = false;
  ReadyNodes ready_;  // its own lock
};

}  // namespace hami::sim

#endif  // HAMI_SIM_SCHEDULING_QUEUE_H_
