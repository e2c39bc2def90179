// The extender's /filter and /bind (docs/protocol.md#filter-and-scores, #bind;
// docs/ARCHITECTURE.md#decisions 1, 3 and 4) as
// functions over (request body, scheduler state) -> response body. Always HTTP 200; failures go
// into the `Error` field, never a crash.
//
// Filter with NodeNames decides over the usage index and persists the decision on the pod in ONE
// merge patch (hami.io/vgpu-node annotation and label, hami.io/vgpu-time, every vendor's
// to-allocate and allocated annotations); the pod enters the index before the patch and leaves
// it again when the patch fails. Exactly one node is returned. Filter with Nodes is a
// side-effect-free simulation over the given nodes with zero usage.
//
// Bind takes the node lock hami.io/mutex.lock ("<RFC3339>,<ns>,<pod>") when a regular container
// asks for a device, stamps hami.io/bind-phase=allocating and hami.io/bind-time, and creates the
// Binding; on a failure after the lock it releases the lock. A bind to a node another live pod
// holds waits in a per-node FIFO (polling the lock) up to node_lock_retry_timeout instead of
// failing into kube-scheduler's backoff; an expired lock or one whose owner pod is gone is taken
// over. The wait holds no thread (BindAsync): nodelock::Locker's timer hands each next attempt to
// the executor.
#ifndef HAMI_SCHEDULER_EXTENDER_H_
#define HAMI_SCHEDULER_EXTENDER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/time_format.h"
#include "device/device.h"
#include "device/schedule.h"
#include "device/usage_index.h"
#include "k8s/client.h"
#include "nodelock/acquire.h"
#include "scheduler/event_queue.h"
#include "scheduler/extender_args.h"
#include "scheduler/http_reply.h"
#include "scheduler/webhook.h"

namespace hami::scheduler {

struct ExtenderOptions {
  device::NodePolicy node_policy = device::NodePolicy::kBinpack;  // --node-scheduler-policy
  device::GpuPolicy gpu_policy{};                                 // --gpu-scheduler-policy
  std::chrono::nanoseconds node_lock_timeout = std::chrono::minutes(5);
  std::chrono::nanoseconds node_lock_retry_timeout = std::chrono::seconds(25);
  // How often a queued bind re-reads a contended lock (real time).
  std::chrono::milliseconds lock_poll_interval{100};
  std::string scheduler_name = "hami-scheduler";  // event source component
  Zone zone = Zone::Local();                      // the zone lock values are written in
  bool record_events = true;
  // --async-decision-write: /filter answers once the decision is made and counted in the index;
  // its patch of the pod is written in the background (decision_writers threads), and the
  // pod's bind waits for that write (parked, holding no thread; the client's timeouts bound the
  // write) and fails with its error when it failed. Off: the filter answers after the patch
  // (HAMi's order).
  bool async_decision_write = false;
  // With async_decision_write: decision writes in flight at once (writer threads; at least 1).
  // One pod's writes never overlap (its claim is held until its write is done), so only writes
  // of different pods run side by side.
  size_t decision_writers = 4;
  // --background-nice: the decision writers (and the server's informers) run this much nicer
  // than the /filter loop, the Event sender twice as nice (capped at 19), so that on a busy
  // node they wait while a filter runs: kube-scheduler's one-at-a-time cycle is what bounds the
  // rate (docs/PERFORMANCE.md). 0 leaves every thread at the process's priority.
  int background_nice = 5;
  // The node lock's first attempt takes the node from here when it shows the lock free (the
  // server's node informer), instead of a GET (nodelock::AcquireOptions::seen).
  std::function<std::optional<nodelock::SeenNode>(std::string_view node)> seen_node;
  // With async_decision_write: once this many decision writes wait for the writer thread (the
  // API server is slow or down), a filter writes its own decision before it answers, as without
  // the flag, so answered-but-unwritten decisions stay bounded.
  size_t max_queued_writes = 1024;
  // The failed decision writes remembered for their pods' binds; past this, the oldest go (its
  // pod's bind then fails on the missing decision instead).
  size_t max_failed_writes = 4096;
};

// The simulation filter (ExtenderArgs.Nodes): the best of the given nodes, zero usage, no side
// effects. `args.nodes` must be set.
std::string SimulateFilter(const device::Registry& registry, const ExtenderArgs& args,
                           const device::ScheduleOptions& options);

// The FilteringFailed event messages (docs/protocol.md#filter-and-scores, step 5): per reason name,
// "<k> nodes <Reason>(<sorted node list>)", from the FailedNodes GenReason strings; reasons without
// the "n/m" prefix are left out.
std::vector<std::string> FilteringFailedMessages(
    const std::map<std::string, std::string>& failed_nodes);

// Thread-safe: Filter and Bind may run concurrently from server threads.
class Extender {
 public:
  // Everything referenced must outlive the extender. `quota` may be empty.
  Extender(const device::Registry& registry, device::UsageIndex& index, k8s::Client& client,
           const Clock& clock, ExtenderOptions options, QuotaLookup quota);
  Extender(const Extender&) = delete;
  Extender& operator=(const Extender&) = delete;

  ~Extender();  // Stop()s

  // Runs a task on some thread (the HTTP server's workers); empty = on the calling thread.
  using Executor = std::function<void(std::function<void()>)>;
  // Before the first bind.
  void SetExecutor(Executor executor);

  HttpReply Filter(std::string_view body);
  // Filter, or nullopt where it would wait: for an earlier call of the same pod, for its own
  // decision write (no --async-decision-write, or the writer thread that far behind), or on the
  // simulation form's parse. For a caller that must not block (the HTTP event loop), which
  // then hands the body to Filter on another thread.
  std::optional<HttpReply> FilterWithoutWaiting(std::string_view body);
  // Calls `done` exactly once with the reply, possibly later and on another thread: a bind
  // waiting for the node lock holds no thread, its attempts run on the executor.
  void BindAsync(std::string body, std::function<void(HttpReply)> done);
  // BindAsync, waited for.
  HttpReply Bind(std::string_view body);

  // Filters waiting for an earlier filter of the same pod (or its decision write) to finish.
  size_t FiltersWaitingForTheirPod() const;

  // Answers queued binds at once with an error (shutdown).
  void Stop();
  // Events are sent in the background (event_queue.h); blocks until the queued ones are sent.
  void FlushEvents();

 private:
  // What a bind knows once it read its pod, before it takes the lock.
  struct BindStart {
    BindingArgs args;
    std::string ns;
    nlohmann::json raw;
    // Non-empty when `raw` is the decision write's answer rather than a GET made by this bind:
    // the bind-phase patch is then conditional on this resourceVersion, and a pod changed since
    // is read again and checked again (BindLocked).
    std::string decided_rv;
    bool requests_devices = false;
    bool needs_lock = false;  // HAMi's node lock (hami.io/mutex.lock)
    // The backends asked for whose bind takes their own node lock (device::BindLock::kVendor).
    std::vector<const device::Device*> vendor_locks;
  };
  // The part of a bind before the lock: a reply when it ends there, else *start is set.
  HttpReply PrepareBind(BindingArgs args, std::optional<BindStart>* start);
  // Why a bind must not go on with the pod it read: another UID, or bound already (then "" with
  // *bound_here when bound to this very node: the bind is done). nullopt: it may go on.
  std::optional<std::string> IdentityRefusal(const BindingArgs& args, const std::string& ns,
                                             const nlohmann::json& raw, bool* bound_here) const;
  // With async_decision_write: a pod asking for devices whose decision is not for this node.
  std::optional<std::string> DecisionRefusal(const BindingArgs& args, const std::string& ns,
                                             const nlohmann::json& raw,
                                             bool requests_devices) const;
  // The pod as the decision write stored it, kept for its bind (which then needs no GET).
  void KeepDecided(const std::string& key, nlohmann::json pod);
  std::optional<nlohmann::json> TakeDecided(const std::string& key);
  // BindAsync after the body is parsed; parked while the pod's decision is being written.
  void BindParsed(BindingArgs args, std::function<void(HttpReply)> done);
  // `task` on the executor (the calling thread without one).
  void Run(std::function<void()> task);
  // The part after the lock (`locked`: the lock's outcome).
  HttpReply BindLocked(const BindStart& start, const Status& locked);
  void ReleaseNodeLock(const std::string& node, const std::string& ns, const std::string& pod);
  // Takes each vendor lock of `start` on its node, in order; on an error the ones taken are
  // released again and the error names the vendor's words. `taken`: the keys written.
  // The vendor locks a bind took: key and the value it wrote.
  using TakenLocks = std::vector<std::pair<std::string, std::string>>;
  Status TakeVendorLocks(const BindStart& start, TakenLocks* taken);
  // nodelock::ReleaseVendorLock for each: a lock another bind took meanwhile stays.
  void ReleaseVendorLocks(const std::string& node, const TakenLocks& taken);
  std::optional<HttpReply> FilterImpl(std::string_view body, bool may_wait);
  // nullopt only without `may_wait` (FilterWithoutWaiting), before anything changed.
  std::optional<std::string> FilterLive(const ExtenderArgs& args, const device::PodView& pod,
                                        const nlohmann::json& raw_pod, bool may_wait);
  // The decision for a pod whose index entry the caller has claimed; *written is set to what
  // the API server stored when the decision was written.
  // With `deferred`, the write is not made: *deferred is set to it (returns its error) and the
  // answer is the decision's.
  std::string DecideAndWrite(const ExtenderArgs& args, const device::PodView& pod,
                             const nlohmann::json& raw_pod,
                             std::optional<device::UsageIndex::Written>* written,
                             std::function<std::optional<std::string>()>* deferred = nullptr);
  void Event(const nlohmann::json& pod, std::string_view type, std::string_view reason,
             const std::string& message);
  void WriterLoop();
  void StopWriter();

  const device::Registry& registry_;
  device::UsageIndex& index_;
  k8s::Client& client_;
  const Clock& clock_;
  const ExtenderOptions options_;
  const QuotaLookup quota_;
  nodelock::Locker locker_;  // the node lock: per-node queue, acquire, release

  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t waiting_for_pod_ = 0;          // FiltersWaitingForTheirPod()
  std::set<std::string> filtering_;     // pods with a filter in flight (one at a time per pod)
  std::unique_ptr<EventQueue> events_;  // null when events are off
  // async_decision_write: the decision writes waiting for the writer thread, and the errors of
  // failed ones until the pod's bind (or next filter) reads them. Guarded by mu_.
  std::deque<std::function<void()>> writes_;
  struct FailedWrite {
    std::string error;
    std::string uid;  // the pod's, for the BindingFailed event
    uint64_t seq;     // when full, the oldest record goes
  };
  std::map<std::string, FailedWrite> failed_writes_;
  uint64_t failed_writes_seq_ = 0;
  // The pods the decision writes stored, by "ns/name", until their bind takes them; the oldest
  // go past kMaxDecided (a pod filtered and never bound). Guarded by mu_.
  struct Decided {
    nlohmann::json pod;
    uint64_t seq;
  };
  std::unordered_map<std::string, Decided> decided_;
  uint64_t decided_seq_ = 0;
  // Binds waiting for a pod's claim (its filter and decision write) to be released.
  std::map<std::string, std::vector<std::function<void()>>> after_claim_;
  Executor executor_;  // SetExecutor's
  bool stopping_ = false;
  std::condition_variable writes_cv_;
  std::vector<std::thread> writers_;
};

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_EXTENDER_H_
