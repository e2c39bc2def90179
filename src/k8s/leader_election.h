// Leader election over a coordination.k8s.io/v1 Lease, with client-go's semantics: a lease is
// taken over only after its holder has not renewed it for leaseDuration as observed on *our*
// clock (so clock skew between nodes does not matter), and every write carries the
// resourceVersion it read, so two candidates can never both win.
#ifndef HAMI_K8S_LEADER_ELECTION_H_
#define HAMI_K8S_LEADER_ELECTION_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "k8s/client.h"

namespace hami::k8s {

struct LeaderElectionConfig {
  std::string lease_namespace = "kube-system";
  std::string lease_name;
  std::string identity;  // unique per candidate, e.g. the pod name
  std::chrono::seconds lease_duration{15};
  // Not on the wire, so finer than seconds (tests and hami-sim run short elections). A leader
  // that cannot renew for renew_deadline steps down.
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  // `client` and `clock` must outlive the elector.
  LeaderElector(Client& client, LeaderElectionConfig config, const Clock& clock = RealClock());

  // One round: create, renew or take over the lease when allowed. Returns whether this candidate
  // holds the lease afterwards; API failures other than conflicts are errors. Not thread-safe
  // (one loop drives it).
  ApiResult<bool> TryAcquireOrRenew();

  // Rounds every retry_period until Stop(); calls on_started when leadership is gained and
  // on_stopped when it is lost (renewals failing past renew_deadline, or someone else holds it).
  void Run(const std::function<void()>& on_started, const std::function<void()>& on_stopped);
  void Stop();

  bool is_leader() const;

 private:
  Json LeaseSpec(const Json& old_spec, bool transition) const;

  Client& client_;
  const LeaderElectionConfig config_;
  const Clock& clock_;
  // What we last saw in the lease and when (our clock) we first saw it.
  std::string observed_record_;
  SystemTime observed_at_{};
  SystemTime last_renew_{};
  bool leader_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace hami::k8s

#endif  // HAMI_K8S_LEADER_ELECTION_H_
