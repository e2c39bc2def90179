// Wall-clock text formats HAMi puts on the wire, with the time zone injected so nothing depends
// on the machine's TZ unless a caller asks for it (docs/ARCHITECTURE.md#decisions, 6):
//   * "YYYY-MM-DD HH:MM:SS" (Go layout "2006-01-02 15:04:05"): the handshake timestamps. The
//     text carries no zone; the reader must know the writer's zone.
//   * RFC 3339 ("2026-08-21T10:11:12+08:00", "Z" for UTC): the node lock timestamp.
// All functions are total: they never throw, and a parse error names the offending text.
// Supported instants are those a SystemTime holds (nanoseconds since 1970 in int64), so parsers
// accept years 1678..2261 only.
#ifndef HAMI_COMMON_TIME_FORMAT_H_
#define HAMI_COMMON_TIME_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace hami {

// A time zone: either a fixed offset from UTC or the process's local zone (TZ, /etc/localtime).
// Tests use Fixed() so they never depend on the machine; production code passes Local() where
// HAMi uses Go's time.Local. Cheap to copy.
class Zone {
 public:
  // `offset_seconds` east of UTC, e.g. +08:00 = 28800. Must lie in (-86400, 86400).
  static Zone Fixed(int offset_seconds) { return Zone(false, offset_seconds); }
  static Zone Utc() { return Zone(false, 0); }
  // The local zone via localtime_r()/mktime() (tm_gmtoff), so daylight saving is honoured.
  static Zone Local() { return Zone(true, 0); }

  // Offset (seconds east of UTC) in effect at the instant `t`.
  int OffsetAt(SystemTime t) const;
  // Offset in effect for a wall-clock time, given as seconds since 1970-01-01 00:00:00 of that
  // wall clock. For Local() in a daylight-saving gap or overlap, mktime()'s choice wins.
  int OffsetForWallClock(int64_t wall_seconds) const;

 private:
  Zone(bool local, int offset) : local_(local), offset_(offset) {}
  bool local_;
  int offset_;
};

// Offsets a parsed RFC 3339 value carried, kept so a value can be re-written byte for byte.
struct ZonedTime {
  SystemTime instant;
  int offset_seconds = 0;  // from the text: "Z" and "+00:00" are both 0
};

// "2024-01-23 04:30:04": `t` in `zone`, sub-seconds truncated (as Go's Format does).
std::string FormatDateTime(SystemTime t, const Zone& zone);

// Inverse of FormatDateTime: exactly "YYYY-MM-DD HH:MM:SS", read as a wall-clock time in `zone`.
// Like Go's time.Parse, a fraction of a second (".", 1..9 digits) directly after the seconds is
// accepted. Fields must be in range (month 1..12, day valid for the month, hour 0..23, minute and
// second 0..59). Nothing else may precede or follow.
Result<SystemTime> ParseDateTime(std::string_view text, const Zone& zone);

// "2026-08-21T10:11:12+08:00", or "...Z" when the offset is zero; whole seconds (Go's
// time.RFC3339 layout).
std::string FormatRfc3339(SystemTime t, const Zone& zone);
// Same, for an instant with an explicit offset (what ParseRfc3339 returned).
std::string FormatRfc3339(const ZonedTime& t);

// Parses what Go's time.Parse(time.RFC3339, s) accepts: "YYYY-MM-DDTHH:MM:SS", an optional
// fraction ("." and 1..9 digits), then "Z" or "+hh:mm"/"-hh:mm" (hh 0..23, mm 0..59).
Result<ZonedTime> ParseRfc3339(std::string_view text);

// Whole seconds of `t` since 1970, rounded towards negative infinity.
int64_t UnixSeconds(SystemTime t);

}  // namespace hami

#endif  // HAMI_COMMON_TIME_FORMAT_H_
