// Who holds the node lock hami.io/mutex.lock (protocol/node_lock.h has the value's format): the
// owner pod, since when, and whether it has expired. The device plugin reads it to find the pod
// it allocates for; an operator's question "why does nothing bind to this node?" is the same read.
#ifndef HAMI_NODELOCK_OWNER_H_
#define HAMI_NODELOCK_OWNER_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"
#include "k8s/client.h"
#include "protocol/node_lock.h"

namespace hami::nodelock {

// The node lock as read.
struct Holder {
  std::string value;        // the annotation as written
  protocol::NodeLock lock;  // lock.owner: the ns/pod holding it, nullopt for a legacy value;
                            // lock.time: since when (the writer's zone kept)
  // Whether a lock taken at lock.time has expired at `now`: strictly older than `timeout`, the
  // rule the scheduler's acquire applies before taking a lock over.
  bool Expired(SystemTime now,
               std::chrono::nanoseconds timeout = protocol::kDefaultNodeLockTimeout) const;
};

// Parses an annotation value into a Holder; an error quotes the value (ParseNodeLock's).
Result<Holder> ParseHolder(std::string_view value);

// The holder of `node`'s lock: nullopt when the node has none. One GET of the node, retried on a
// transient error under `retry`. Errors name the node: `get node "<node>": <API error>` (with
// "(gave up after <n> tries)" when the error was transient), or `node "<node>": <why the value is
// malformed>` (such a lock blocks the node until removed by hand: protocol::DecideNodeLock).
Result<std::optional<Holder>> LookupOwner(k8s::Client& client, std::string_view node,
                                          const k8s::RetryPolicy& retry = {});

}  // namespace hami::nodelock

#endif  // HAMI_NODELOCK_OWNER_H_
