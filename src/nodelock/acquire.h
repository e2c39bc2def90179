// Taking the node lock hami.io/mutex.lock for a pod (protocol/node_lock.h has the value and the
// decision rules; release.h gives it back, owner.h says who holds it). The scheduler's Bind takes
// it before it binds a pod that asks a regular container for a device; the device plugin's
// Allocate, which carries no pod identity, finds the pod through it.
//
// Binds wait, they don't bounce: a bind to a node another live pod holds waits in a per-node FIFO
// (Locker) and re-reads the lock every poll interval until it is free or the wait runs out,
// instead of failing into kube-scheduler's backoff. An expired lock, or one whose owner pod is
// gone, has ended (Failed, Succeeded: no Allocate comes for it) or was allocated (bind-phase
// success: its plugin's release got lost), is taken over.
#ifndef HAMI_NODELOCK_ACQUIRE_H_
#define HAMI_NODELOCK_ACQUIRE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/clock.h"
#include "common/result.h"
#include "common/time_format.h"
#include "k8s/client.h"
#include "protocol/node_lock.h"

namespace hami::nodelock {

// What a cache (an informer) last saw of a node: its resourceVersion and lock annotation.
struct SeenNode {
  std::string resource_version;
  std::optional<std::string> lock;
};

struct AcquireOptions {
  // A lock older than this is taken over (--node-lock-timeout).
  std::chrono::nanoseconds timeout = protocol::kDefaultNodeLockTimeout;
  Zone zone = Zone::Local();  // the zone new lock values are written in (HAMi: local)
  k8s::RetryPolicy retry;     // around every API call
  // Optional: the node as a cache last saw it (nullopt: not seen). When it shows the lock free,
  // the first attempt writes the lock conditional on that resourceVersion without a GET; a
  // stale cache gets 409 and the node is read as usual. Called from any thread.
  std::function<std::optional<SeenNode>(std::string_view node)> seen;
};

// One attempt, no queue: GET the node (or take options.seen's copy when it shows the lock free),
// decide (protocol::DecideNodeLock, with a GET of the owner
// pod when another pod holds a fresh lock: a 404 means it is gone and the lock is taken over), and
// write the new value in a merge patch conditional on the resourceVersion read; a 409 re-reads,
// up to 5 rounds. Every call is retried on a transient error under options.retry.
// Returns true when ns/pod holds the lock afterwards (taken, taken over, or already its own);
// false when it is busy, with the reason in *why ("node <n> has been locked within 5m0s ..." or
// "node <n> lock: too many conflicting writers"); an error when it cannot be taken: a malformed
// lock (DecideNodeLock's message) or a failed call (`get node "<n>": ...`, `lock node "<n>": ...`,
// "(gave up after <k> tries)" when transient). Thread-safe as far as `client` is.
Result<bool> TryAcquire(k8s::Client& client, std::string_view node, std::string_view ns,
                        std::string_view pod, SystemTime now, const AcquireOptions& options,
                        std::string* why);

struct LockerOptions {
  AcquireOptions acquire;
  // How long the first in a node's queue keeps trying, on the injected clock, from its turn
  // (--node-lock-retry-timeout).
  std::chrono::nanoseconds wait = std::chrono::seconds(25);
  // Real time between two attempts on a busy lock (the lock is released by another process, the
  // device plugin, so the queue polls it).
  std::chrono::milliseconds poll_interval{100};
};

// The per-node FIFO of pods waiting for a node's lock. One attempt at a time per node, for the
// first in line; the next starts as soon as the first is answered. A wait holds no thread: each
// attempt runs as a task on the executor, and a timer thread hands out the polls. Thread-safe.
class Locker {
 public:
  // Runs a task on some thread; empty = on the calling thread (the timer's, for polls).
  using Executor = std::function<void(std::function<void()>)>;

  // `client` and `clock` must outlive the locker.
  Locker(k8s::Client& client, const Clock& clock, LockerOptions options);
  Locker(const Locker&) = delete;
  Locker& operator=(const Locker&) = delete;
  ~Locker();  // Stop()s

  // Before the first Acquire.
  void SetExecutor(Executor executor);

  // Queues ns/pod for `node`'s lock and calls `then` exactly once, possibly later and on another
  // thread: OK once ns/pod holds it; TryAcquire's error when it cannot be taken; the last busy
  // reason when `wait` ran out; the Stop reason when stopped first.
  void AcquireAsync(const std::string& node, std::string ns, std::string pod,
                    std::function<void(Status)> then);
  // AcquireAsync, waited for.
  Status Acquire(const std::string& node, std::string ns, std::string pod);
  // nodelock::Release under this locker's retry policy.
  Status Release(std::string_view node, std::string_view ns, std::string_view pod,
                 std::string_view seen = "");

  // Answers every queued pod with Error{why} and stops the timer. A lock an attempt in flight
  // takes after this is given back. Idempotent; only the first `why` counts.
  void Stop(const std::string& why = "node lock queue stopped");

  const LockerOptions& options() const { return options_; }

 private:
  struct Waiter {
    std::string ns, pod;
    SystemTime deadline{};  // set when it becomes first in line
    bool first = false;
    bool answered = false;
    std::function<void(Status)> then;
  };
  void Run(std::function<void()> task);
  void TimerLoop();
  // One attempt for the first in `node`'s queue; schedules a poll or answers it.
  void Attempt(const std::string& node);
  // Pops `waiter` (if still first) and answers it; the next in line gets an attempt.
  void Finish(const std::string& node, const std::shared_ptr<Waiter>& waiter, Status status);

  k8s::Client& client_;
  const Clock& clock_;
  const LockerOptions options_;
  Executor executor_;

  std::mutex mu_;
  std::condition_variable timer_cv_;
  std::map<std::string, std::deque<std::shared_ptr<Waiter>>> queues_;
  std::multimap<std::chrono::steady_clock::time_point, std::string> polls_;  // node by due time
  bool stopped_ = false;
  std::string stop_reason_;
  std::thread timer_;
};

}  // namespace hami::nodelock

#endif  // HAMI_NODELOCK_ACQUIRE_H_
