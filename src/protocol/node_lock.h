// The node lock annotation hami.io/mutex.lock (docs/protocol.md#node-lock):
//   "<RFC 3339 time in the writer's zone>,<namespace>,<pod>"  e.g.
//   "2026-08-21T10:11:12+08:00,default,train-0"
// Legacy writers put a bare RFC 3339 timestamp. One key is shared by every vendor. The scheduler
// sets it in Bind; the device plugin removes it after the pod's last Allocate; it expires after
// a timeout (default 5 min). Owners are compared by the ",<namespace>,<pod>" suffix of the value.
#ifndef HAMI_PROTOCOL_NODE_LOCK_H_
#define HAMI_PROTOCOL_NODE_LOCK_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"
#include "common/time_format.h"

namespace hami::protocol {

inline constexpr std::chrono::minutes kDefaultNodeLockTimeout{5};

struct LockOwner {
  std::string ns;
  std::string pod;
  bool operator==(const LockOwner&) const = default;
};

struct NodeLock {
  ZonedTime time;                  // instant and the writer's UTC offset
  std::optional<LockOwner> owner;  // nullopt for the legacy timestamp-only value
};

// No ',' => legacy timestamp only; otherwise exactly three ','-separated parts, the first an
// RFC 3339 time. Anything else is an error naming the value (HAMi then blocks the node until
// the value is removed by hand; see DecideNodeLock).
Result<NodeLock> ParseNodeLock(std::string_view value);

// Inverse of ParseNodeLock (whole seconds; the offset as parsed, "Z" when zero).
std::string FormatNodeLock(const NodeLock& lock);

// The value a pod writes to take the lock at `now`: "<RFC 3339 in zone>,<ns>,<pod>".
std::string NodeLockValue(SystemTime now, const Zone& zone, std::string_view ns,
                          std::string_view pod);

// now - lock time > timeout (strictly).
bool NodeLockExpired(const NodeLock& lock, SystemTime now,
                     std::chrono::nanoseconds timeout = kDefaultNodeLockTimeout);

// The value ends with ",<ns>,<pod>".
bool NodeLockOwnedBy(std::string_view value, std::string_view ns, std::string_view pod);

// nodelock::Release's guard: the value is owned by ns/pod, or is a legacy timestamp-only value
// (which names no owner). A forced release skips this check.
bool MayReleaseNodeLock(std::string_view value, std::string_view ns, std::string_view pod);

enum class LockAction {
  kAcquire,       // no lock: write new_value
  kAlreadyOwned,  // this pod holds it: nothing to write
  kTakeOver,      // expired or its owner pod is gone: write new_value over it
  kBusy,          // another live owner holds a fresh lock: message says who and since when
  kMalformed,     // unparsable value: message names it; nothing may be written
};

std::string_view LockActionName(LockAction action);

struct LockDecision {
  LockAction action = LockAction::kBusy;
  std::string new_value;  // set for kAcquire and kTakeOver
  std::string message;    // why; for kBusy "node <n> has been locked within <timeout> ..."
};

struct LockRequest {
  std::string_view node;                    // for messages
  std::optional<std::string_view> current;  // the annotation; nullopt when absent
  std::string_view ns;                      // the pod that wants the lock
  std::string_view pod;
  SystemTime now;
  Zone zone = Zone::Utc();  // the zone new values are written in (HAMi: local)
  std::chrono::nanoseconds timeout = kDefaultNodeLockTimeout;
  // Whether the current owner pod still exists (a GET that did not answer NotFound). Only read
  // for an unexpired lock held by another pod; callers may leave it true until they know.
  bool owner_exists = true;
};

// LockNode (docs/protocol.md#node-lock) as a pure decision, in HAMi's order: absent => acquire;
// malformed
// => error; expired => take over; owned by this pod => ok; owner gone => take over; else busy.
// A legacy value names no owner, so an unexpired one is busy.
LockDecision DecideNodeLock(const LockRequest& request);

// Go's time.Duration.String() for the messages: "5m0s", "28s", "1h0m0s", "1.5s", "100ms".
std::string FormatGoDuration(std::chrono::nanoseconds d);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_NODE_LOCK_H_
