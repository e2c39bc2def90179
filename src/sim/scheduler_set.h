// hami-scheduler's replicas in `hami-sim run` (docs/RELIABILITY.md): one or more in-process
// scheduler::Server instances, each with its own API client as a separate pod would have. With
// more than one, each replica's pod also runs kube-scheduler's leader election on a Lease
// (k8s::LeaderElector) and its hami-scheduler follows that Lease (--leader-elect): only the
// leader registers nodes, and the sim's kube-scheduler loop talks to the leader's extender.
//
// Kill() tears a replica down the way SIGKILL does: its election stops without giving the
// Lease back (the others wait leaseDuration before taking over) and its listeners close, so
// requests in flight fail; what it wrote stays (locks, bind phases, annotations). Restart()
// starts a fresh process on the same ports, with a new election identity, as a Deployment would.
//
// A sampler thread measures availability: a replica serves when it is alive, holds the Lease
// (always, with one replica) and has made its first registration pass as leader. The longest
// stretch with no serving replica after the first one served is failover_seconds_max.
#ifndef HAMI_SIM_SCHEDULER_SET_H_
#define HAMI_SIM_SCHEDULER_SET_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "device/config.h"
#include "k8s/client.h"
#include "k8s/leader_election.h"
#include "scheduler/server.h"
#include "sim/scenario.h"

namespace hami::sim {

// A clock `offset` away from `base` (a node whose clock is skewed). Thread-safe.
class SkewedClock : public Clock {
 public:
  SkewedClock(const Clock& base, std::chrono::milliseconds offset) : base_(base), offset_(offset) {}
  SystemTime Now() const override { return base_.Now() + offset_; }

 private:
  const Clock& base_;
  const std::chrono::milliseconds offset_;
};

struct SchedulerSetOptions {
  int replicas = 1;
  // Every replica's options; http_bind and metrics_bind are replaced by 127.0.0.1 ports (kept
  // across restarts), and the leader-election fields are set when replicas > 1.
  scheduler::ServerOptions server{};
  device::DeviceConfig device_config = device::DefaultDeviceConfig();
  std::string lease_namespace = "kube-system";
  std::string lease_name = "hami-scheduler";
  LeaderElectionTiming election{};
  // A new API client for each process started (never null); it must outlive the set.
  std::function<k8s::Client&()> new_client;
  const Clock* clock = &RealClock();  // the replicas' (possibly skewed) clock
  std::chrono::milliseconds sample_period{10};
};

struct SchedulerSetStats {
  int restarts = 0;        // replicas started again after a Kill
  int leader_changes = 0;  // a different process became the serving leader
  double failover_seconds_max = 0;
};

// The pods hami-scheduler's usage index counts, from its /metrics text: every
// hami_vgpu_memory_allocated_bytes sample's "namespace/pod" -> its device_uuid labels.
std::map<std::string, std::set<std::string>> CountedAllocations(std::string_view metrics);

// GETs http://127.0.0.1:<port>/metrics and parses it with CountedAllocations.
Result<std::map<std::string, std::set<std::string>>> ScrapeCountedAllocations(int port);

class SchedulerSet {
 public:
  explicit SchedulerSet(SchedulerSetOptions options);
  ~SchedulerSet();  // Stop()s
  SchedulerSet(const SchedulerSet&) = delete;
  SchedulerSet& operator=(const SchedulerSet&) = delete;

  // Starts every replica; returns once one serves, or an error after `wait`.
  Status Start(std::chrono::milliseconds wait);
  // Stops every replica (gracefully) and the sampler. Idempotent.
  void Stop();

  int replicas() const { return options_.replicas; }
  // Kills replica `i` (no clean-up, see above). False when it is already down.
  bool Kill(int i);
  // Starts replica `i` again after a Kill; an error when its ports cannot be bound.
  Status Restart(int i);
  bool Alive(int i) const;

  // The serving replica, or -1 while none serves.
  int Serving() const;
  // The replica holding the Lease (the only replica with one), alive or not; -1 when unknown.
  int Leader() const;
  // The extender URL kube-scheduler should use: the leader's, else replica 0's.
  std::string ExtenderUrl() const;
  // A port any live replica serves /webhook on (the webhook Service load-balances over all
  // ready replicas); 0 when none is alive.
  int WebhookPort() const;
  // /metrics of the serving replica (its usage index per pod: hami_vgpu_memory_allocated_bytes),
  // else of any live one; 0 when none is alive.
  int MetricsPort() const;

  SchedulerSetStats Stats() const;

 private:
  struct Replica;
  Status StartLocked(Replica& r, int index);
  void Sample();

  const SchedulerSetOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  // Dead processes' parts, kept until Stop(): their threads may still hold references.
  std::vector<std::unique_ptr<Replica>> graveyard_;
  bool stopped_ = false;
  std::thread sampler_;
  // Sampler state.
  SchedulerSetStats stats_;
  std::string last_serving_;  // identity of the last serving process
  bool ever_served_ = false;
  bool gap_open_ = false;
  std::chrono::steady_clock::time_point gap_start_{};
  int serving_ = -1;
  uint64_t generation_ = 0;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_SCHEDULER_SET_H_
