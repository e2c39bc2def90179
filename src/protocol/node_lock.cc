#include "protocol/node_lock.h"

#include <cstdint>
#include <vector>

#include "common/strings.h"
#include "protocol/keys.h"

namespace hami::protocol {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string OwnerSuffix(std::string_view ns, std::string_view pod) {
  return "," + std::string(ns) + "," + std::string(pod);
}

// `v / unit` in decimal with the remainder as a fraction, trailing zeros dropped.
std::string DecimalQuotient(uint64_t v, uint64_t unit) {
  std::string out = std::to_string(v / unit);
  uint64_t rem = v % unit;
  if (rem == 0) return out;
  std::string frac;
  for (uint64_t u = unit / 10; u > 0; u /= 10) {
    frac.push_back(static_cast<char>('0' + rem / u % 10));
  }
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return out + "." + frac;
}

}  // namespace

Result<NodeLock> ParseNodeLock(std::string_view value) {
  auto fail = [&](const std::string& why) {
    return Error{std::string(kNodeLockKey) + " " + Quote(value) + ": " + why +
                 " (want \"<RFC3339>,<namespace>,<pod>\" or a bare RFC3339 time)"};
  };
  std::vector<std::string_view> parts = Split(value, ',');
  if (parts.size() != 1 && parts.size() != 3) {
    return fail("has " + std::to_string(parts.size()) + " comma-separated parts");
  }
  auto t = ParseRfc3339(parts[0]);
  if (!t) return fail(t.error());
  NodeLock lock{*t, std::nullopt};
  if (parts.size() == 3) lock.owner = LockOwner{std::string(parts[1]), std::string(parts[2])};
  return lock;
}

std::string FormatNodeLock(const NodeLock& lock) {
  std::string out = FormatRfc3339(lock.time);
  if (lock.owner) out += OwnerSuffix(lock.owner->ns, lock.owner->pod);
  return out;
}

std::string NodeLockValue(SystemTime now, const Zone& zone, std::string_view ns,
                          std::string_view pod) {
  return FormatRfc3339(now, zone) + OwnerSuffix(ns, pod);
}

bool NodeLockExpired(const NodeLock& lock, SystemTime now, std::chrono::nanoseconds timeout) {
  return now - lock.time.instant > timeout;
}

bool NodeLockOwnedBy(std::string_view value, std::string_view ns, std::string_view pod) {
  return EndsWith(value, OwnerSuffix(ns, pod));
}

bool MayReleaseNodeLock(std::string_view value, std::string_view ns, std::string_view pod) {
  return NodeLockOwnedBy(value, ns, pod) || value.find(',') == std::string_view::npos;
}

std::string_view LockActionName(LockAction action) {
  switch (action) {
    case LockAction::kAcquire:
      return "Acquire";
    case LockAction::kAlreadyOwned:
      return "AlreadyOwned";
    case LockAction::kTakeOver:
      return "TakeOver";
    case LockAction::kBusy:
      return "Busy";
    case LockAction::kMalformed:
      return "Malformed";
  }
  return "Busy";
}

LockDecision DecideNodeLock(const LockRequest& r) {
  LockDecision d;
  std::string node = std::string(r.node);
  std::string me = std::string(r.ns) + "/" + std::string(r.pod);
  auto take = [&](LockAction action, std::string why) {
    d.action = action;
    d.new_value = NodeLockValue(r.now, r.zone, r.ns, r.pod);
    d.message = std::move(why);
    return d;
  };
  if (!r.current) return take(LockAction::kAcquire, "node " + node + " locked by " + me);
  auto lock = ParseNodeLock(*r.current);
  if (!lock) {
    d.action = LockAction::kMalformed;
    d.message = "node " + node + ": " + lock.error();
    return d;
  }
  std::string holder =
      lock->owner ? lock->owner->ns + "/" + lock->owner->pod : std::string("(legacy, no owner)");
  std::string since = " since " + FormatRfc3339(lock->time);
  if (NodeLockExpired(*lock, r.now, r.timeout)) {
    return take(LockAction::kTakeOver, "node " + node + ": lock of " + holder + since +
                                           " is older than " + FormatGoDuration(r.timeout) +
                                           "; taken over by " + me);
  }
  if (NodeLockOwnedBy(*r.current, r.ns, r.pod)) {
    d.action = LockAction::kAlreadyOwned;
    d.message = "node " + node + " already locked by " + me;
    return d;
  }
  if (lock->owner && !r.owner_exists) {
    return take(LockAction::kTakeOver, "node " + node + ": lock owner " + holder +
                                           " no longer exists; taken over by " + me);
  }
  d.action = LockAction::kBusy;
  d.message = "node " + node + " has been locked within " + FormatGoDuration(r.timeout) + " by " +
              holder + since;
  return d;
}

std::string FormatGoDuration(std::chrono::nanoseconds d) {
  int64_t n = d.count();
  if (n == 0) return "0s";
  std::string sign = n < 0 ? "-" : "";
  // Negating in unsigned arithmetic keeps INT64_MIN well defined.
  uint64_t u = n < 0 ? uint64_t{0} - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  constexpr uint64_t kUs = 1000, kMs = 1000 * kUs, kS = 1000 * kMs, kM = 60 * kS, kH = 60 * kM;
  if (u < kUs) return sign + std::to_string(u) + "ns";
  if (u < kMs) return sign + DecimalQuotient(u, kUs) + "\xc2\xb5s";  // "µs", as Go writes it
  if (u < kS) return sign + DecimalQuotient(u, kMs) + "ms";
  std::string out = sign;
  uint64_t h = u / kH;
  u -= h * kH;
  uint64_t m = u / kM;
  u -= m * kM;
  if (h) out += std::to_string(h) + "h";
  if (h || m) out += std::to_string(m) + "m";
  return out + DecimalQuotient(u, kS) + "s";
}

}  // namespace hami::protocol
