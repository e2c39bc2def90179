#include "nodelock/release.h"

#include <string>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "k8s/patches.h"
#include "nodelock/call.h"
#include "protocol/keys.h"
#include "protocol/node_lock.h"

namespace hami::nodelock {
namespace {

using k8s::Json;
namespace res = k8s::resources;

// Rounds of GET + conditional patch before giving up on a lock that keeps changing.
constexpr int kLockChangeRounds = 5;

// One JSON patch that removes the lock `key` only while it still reads `seen`: the one removal
// of a node lock in src/ (tests/nodelock/one_release_check.sh).
k8s::ApiResult<Json> RemoveIfUnchanged(k8s::Client& client, std::string_view node,
                                       std::string_view seen, const k8s::RetryPolicy& retry,
                                       std::string_view key = protocol::kNodeLockKey) {
  const std::string path = "/metadata/annotations/" + k8s::JsonPointerEscape(key);
  const Json ops = Json::array({{{"op", "test"}, {"path", path}, {"value", std::string(seen)}},
                                {{"op", "remove"}, {"path", path}}});
  return k8s::RetryTransient<Json>(
      retry, [&] { return client.Patch(res::kNodes, "", node, k8s::PatchType::kJsonPatch, ops); });
}

}  // namespace

Status Release(k8s::Client& client, std::string_view node, std::string_view ns,
               std::string_view pod, std::string_view seen, const k8s::RetryPolicy& retry) {
  if (!seen.empty() && protocol::MayReleaseNodeLock(seen, ns, pod)) {
    auto r = RemoveIfUnchanged(client, node, seen, retry);
    if (r) return OkStatus();
    HAMI_VLOG(2, "node {}: conditional lock release: {}; re-reading the node", node,
              r.error().ToString());
  }
  for (int round = 0; round < kLockChangeRounds; ++round) {
    auto n = internal::GetNode(client, node, retry);
    if (!n) return std::move(n).take_error();
    std::optional<std::string> lock = k8s::Annotation(*n, protocol::kNodeLockKey);
    if (!lock) return OkStatus();
    if (!protocol::MayReleaseNodeLock(*lock, ns, pod)) {
      // The pod held the lock when it was read: once its bind-phase says success, another
      // bind may take the lock over (nodelock::TryAcquire), so that is the expected race.
      if (!seen.empty() && protocol::MayReleaseNodeLock(seen, ns, pod)) {
        HAMI_VLOG(2, "node {}: lock of {}/{} already taken over by {}", node, ns, pod, *lock);
      } else {
        HAMI_WARN("node {}: lock {} is not held by {}/{}; left in place", node, *lock, ns, pod);
      }
      return OkStatus();
    }
    // Conditional on the lock's value, not on the node's resourceVersion: the node's other
    // writers (the handshake, kubelet's status, labels) never make the release fail, and a lock
    // re-taken since the GET fails the `test` op (422) and is read again.
    auto r = RemoveIfUnchanged(client, node, *lock, retry);
    if (r) return OkStatus();
    if (!k8s::IsInvalid(r.error()) && !k8s::IsConflict(r.error())) {
      return Error{"release lock on " + Quote(node) + ": " + internal::Describe(r.error(), retry)};
    }
  }
  return Error{"release lock on " + Quote(node) + ": the lock changed " +
               std::to_string(kLockChangeRounds) + " times in a row"};
}

Status ReleaseVendorLock(k8s::Client& client, std::string_view node, std::string_view key,
                         std::string_view taken, const k8s::RetryPolicy& retry) {
  auto r = RemoveIfUnchanged(client, node, taken, retry, key);
  if (r) return OkStatus();
  // 422: the `test` failed (another bind's lock, or none): not ours to remove.
  if (k8s::IsInvalid(r.error())) {
    HAMI_VLOG(2, "node {}: lock {} no longer reads {}; left as it is", node, key, taken);
    return OkStatus();
  }
  return Error{"release lock " + std::string(key) + " on " + Quote(node) + ": " +
               internal::Describe(r.error(), retry)};
}

}  // namespace hami::nodelock
