// Node handshake annotation values (docs/protocol.md#node-registration-and-the-handshake), e.g. on
// hami.io/node-handshake or a vendor variant such as hami.io/node-handshake-dcu:
//   Requesting_2024-01-23 04:30:04   scheduler asks the device plugin to report (v2.10 writes it)
//   Reported_2024-01-23 04:30:05     a vendor device plugin answered
//   Deleted_2024-01-23 04:31:10      cleanup marker written by v2.8/v2.9 (v2.10 deletes the key)
//   Reported 2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.7
//                                    NVIDIA plugin <= v2.7 (Go time.String(), zone inside)
// The "YYYY-MM-DD HH:MM:SS" timestamps carry no zone: they are the writer's local wall clock, so
// the reader passes the zone it assumes (the scheduler's local zone in v2.10).
#ifndef HAMI_PROTOCOL_HANDSHAKE_H_
#define HAMI_PROTOCOL_HANDSHAKE_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/time_format.h"

namespace hami::protocol {

enum class HandshakeKind {
  kRequesting,      // "Requesting" or "Requesting_<timestamp>"
  kReported,        // "Reported_<timestamp>"
  kDeleted,         // "Deleted_<timestamp>"
  kReportedLegacy,  // "Reported <Go time.String()>"
  kOther,           // anything else, including ""
};

// "Requesting", "Reported", "Deleted", "ReportedLegacy", "Other".
std::string_view HandshakeKindName(HandshakeKind kind);
std::optional<HandshakeKind> HandshakeKindFromName(std::string_view name);

struct Handshake {
  HandshakeKind kind = HandshakeKind::kOther;
  // The text after "Requesting_", "Reported_", "Deleted_" or "Reported "; nullopt when the value
  // has no such part (bare "Requesting", or kOther).
  std::optional<std::string> timestamp;
  // `timestamp` parsed; nullopt when absent or unparsable (then `time_error` says why).
  std::optional<SystemTime> time;
  std::string time_error;
  // kReportedLegacy only: the zone offset (seconds east of UTC) the Go string carried.
  int legacy_offset_seconds = 0;
  std::string raw;  // the whole value
};

// Total: every string yields a Handshake. Underscore timestamps are read in `zone`; the legacy
// form carries its own offset.
Handshake ParseHandshake(std::string_view value, const Zone& zone);

// "Requesting_<t in zone>", "Reported_<...>" or "Deleted_<...>" for those three kinds; for
// kReportedLegacy the Go time.String() form in `zone` ("Reported 2024-01-23 04:30:04.434037031
// +0000 UTC", abbreviation "UTC" for offset 0, else "+hhmm"; no monotonic part); "" for kOther.
std::string FormatHandshake(HandshakeKind kind, SystemTime t, const Zone& zone);

// How long a Requesting value may wait for an answer.
inline constexpr std::chrono::seconds kHandshakeWindow{60};

// The generic handshake check (docs/protocol.md#node-registration-and-the-handshake), as a pure
// function.
struct HandshakeVerdict {
  bool healthy = true;
  bool need_update = false;
  // True when the caller must write `new_value` (a fresh "Requesting_<now>"). The verdict assumes
  // the write succeeds; if it fails the caller reports {healthy, need_update=false} instead.
  bool write_requesting = false;
  std::string new_value;
  bool operator==(const HandshakeVerdict&) const = default;
};

// `value`: the handshake annotation, nullopt when absent. `allocatable_positive`: the node's
// allocatable count for the vendor's count resource is > 0.
//   value contains "Requesting":
//     no timestamp / unparsable          -> healthy, no update
//     now - t <= window (incl. future t) -> healthy, no update
//     expired, allocatable_positive      -> healthy, no update (v2.10 tolerance)
//     expired, nothing allocatable       -> unhealthy, no update
//   otherwise (absent, Reported..., Deleted..., anything) -> write Requesting_<now>, healthy,
//   need_update.
HandshakeVerdict CheckHandshake(std::optional<std::string_view> value, SystemTime now,
                                bool allocatable_positive, const Zone& zone,
                                std::chrono::nanoseconds window = kHandshakeWindow);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_HANDSHAKE_H_
