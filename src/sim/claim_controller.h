// hami-sim's resource claim controller: what kube-controller-manager's resourceclaim controller
// (and, for claims it made, the garbage collector) does in a cluster with DRA (docs/DRA.md
// "hami-sim in DRA mode"):
//  * a pod (not done, not being deleted) whose spec.resourceClaims[] entry names a
//    resourceClaimTemplateName gets a ResourceClaim made from that template in its namespace:
//    generateName "<pod>-<claim>-" (both parts shortened in proportion when that is over 57
//    characters, as upstream does, so the name with its 5 random characters fits 63), the
//    template's spec.metadata labels and annotations plus resource.kubernetes.io/pod-claim-name,
//    the pod as controlling owner (blockOwnerDeletion), spec = the template's spec.spec. Then the
//    pod's status.resourceClaimStatuses [{name, resourceClaimName}] is written (pods/status).
//    A claim the pod already owns with that pod-claim-name annotation is used instead of a new
//    one (a restarted controller, or a status write that failed), so a claim is never made twice.
//  * a claim's status.reservedFor loses every pod that is done (Succeeded or Failed), deleted or
//    replaced (another UID); a claim left with no consumer loses its status.allocation too (the
//    devices are free again), as upstream deallocates claims the scheduler allocated.
//  * a claim owned by a pod that is done, deleted or replaced, and reserved for nobody, is
//    deleted (upstream's controller for done pods, the garbage collector for deleted ones).
// API errors (the sim apiserver injects 500s and 409s) are retried per object with backoff.
#ifndef HAMI_SIM_CLAIM_CONTROLLER_H_
#define HAMI_SIM_CLAIM_CONTROLLER_H_

#include <chrono>
#include <memory>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"
#include "k8s/client.h"

namespace hami::sim {

// The annotation that ties a generated claim to its pod's claim entry (upstream's name).
inline constexpr std::string_view kPodClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name";

struct ClaimControllerOptions {
  int workers = 4;
  // Retry of one pod or claim after an API error: initial, doubled up to max.
  std::chrono::milliseconds initial_backoff{20};
  std::chrono::milliseconds max_backoff{2000};
};

struct ClaimControllerStats {
  int claims_created = 0;
  int claims_deleted = 0;
  int claims_deallocated = 0;  // allocation removed when the last consumer went
  int retries = 0;             // pod or claim syncs retried after an API error
};

class ClaimController {
 public:
  // `client` and `clock` must outlive the controller. The clock ages the controller's memory of
  // deleted pods.
  ClaimController(k8s::Client& client, const Clock& clock = RealClock(),
                  ClaimControllerOptions options = {});
  ~ClaimController();  // Stop()s
  ClaimController(const ClaimController&) = delete;
  ClaimController& operator=(const ClaimController&) = delete;

  // Starts the pod, claim and template informers and the workers; returns once the informers
  // have synced (so claims made before a restart are known before any pod is looked at).
  Status Start();
  void Stop();  // idempotent; work still queued is abandoned

  ClaimControllerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The generateName of the claim for pod `pod`'s claim entry `claim` (upstream's rule).
std::string ClaimGenerateName(std::string_view pod, std::string_view claim);

}  // namespace hami::sim

#endif  // HAMI_SIM_CLAIM_CONTROLLER_H_
