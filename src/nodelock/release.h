// Releasing the node lock hami.io/mutex.lock (protocol/node_lock.h has the value's format and
// who writes it). Both binaries release it here: the device plugin after a pod's last Allocate
// or a failed one, the scheduler after a Bind that failed once the lock was taken.
#ifndef HAMI_NODELOCK_RELEASE_H_
#define HAMI_NODELOCK_RELEASE_H_

#include <string_view>

#include "common/result.h"
#include "k8s/client.h"

namespace hami::nodelock {

// Removes hami.io/mutex.lock from `node` when ns/pod may release it (protocol::MayReleaseNodeLock:
// the lock names ns/pod, or is a legacy timestamp-only value). Every write is conditional, so a
// lock another pod took meanwhile is never removed:
//  - `seen` is the value the caller read earlier ("" when none). When ns/pod may release it, one
//    JSON patch removes the lock only while it still reads `seen` (its `test` op is the owner
//    check, so no GET).
//  - Otherwise, or when that patch fails (the lock changed, or the server refused it): GET the
//    node, check the owner, and the same JSON patch conditional on the value just read; a lock
//    that changed again meanwhile (the `test` fails: 422) re-reads, up to 5 rounds. Writes to
//    the node that leave the lock alone (the handshake, kubelet's status) do not interfere.
// Each API call is retried on a transient error under `retry` (default: k8s::RetryTransient's
// default policy).
// OK when the lock is gone afterwards or is not ns/pod's to release (logged as a warning); an
// error names the node and the call that failed: `get node "<node>": ...` or
// `release lock on "<node>": ...`, with "(gave up after <n> tries)" when the last error was
// transient. Thread-safe as far as `client` is.
//
// This is the one function in src/ that removes the lock (tests/nodelock/one_release_check.sh
// fails the build's tests when a second writer appears).
Status Release(k8s::Client& client, std::string_view node, std::string_view ns,
               std::string_view pod, std::string_view seen = "",
               const k8s::RetryPolicy& retry = {});

// A vendor's own node lock (device.h BindLock::kVendor: Cambricon's cambricon.com/dsmlu.lock,
// which holds only the bind's time): removes annotation `key` from `node` only while it still
// reads `taken`, the value this bind wrote, with the same conditional JSON patch as Release
// (`test` of that value, then `remove`; no GET). A lock that reads anything else -- it expired
// and another bind took it -- or is gone is left as it is: OK (logged at -v=2). An error names
// the node and key: `release lock cambricon.com/dsmlu.lock on "<node>": ...`. Retries as Release.
Status ReleaseVendorLock(k8s::Client& client, std::string_view node, std::string_view key,
                         std::string_view taken, const k8s::RetryPolicy& retry = {});

}  // namespace hami::nodelock

#endif  // HAMI_NODELOCK_RELEASE_H_
