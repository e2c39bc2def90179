// How the node-lock functions (acquire.h, owner.h, release.h) run an API call: under the one retry
// policy for transient errors (k8s::RetryPolicy beside k8s::RetryTransient), and with an error
// message that names the call and the node. Internal to src/nodelock.
#ifndef HAMI_NODELOCK_CALL_H_
#define HAMI_NODELOCK_CALL_H_

#include <string>

#include "k8s/api_error.h"
#include "k8s/client.h"

namespace hami::nodelock::internal {

// `error` as the last try left it: "<code> <reason>: <message>", and " (gave up after <n> tries)"
// when it was transient, so retried until the policy ran out.
inline std::string Describe(const k8s::ApiError& error, const k8s::RetryPolicy& retry) {
  std::string out = error.ToString();
  if (k8s::IsTransient(error) && retry.attempts > 1) {
    out += " (gave up after " + std::to_string(retry.attempts) + " tries)";
  }
  return out;
}

// GET the node, retried under `retry`. An error reads `get node "<node>": <Describe>`.
Result<k8s::Json> GetNode(k8s::Client& client, std::string_view node,
                          const k8s::RetryPolicy& retry);

}  // namespace hami::nodelock::internal

#endif  // HAMI_NODELOCK_CALL_H_
