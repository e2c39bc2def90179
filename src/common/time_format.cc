#include "common/time_format.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <optional>

#include "common/strings.h"

namespace hami {
namespace {

using std::chrono::days;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using std::chrono::sys_days;
using std::chrono::year_month_day;

// Years whose every instant (even shifted by a zone offset under a day) fits a SystemTime.
constexpr int kMinYear = 1678;
constexpr int kMaxYear = 2261;

struct Civil {
  int year = 1970, month = 1, day = 1, hour = 0, minute = 0, second = 0;
};

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Civil CivilFromWall(int64_t wall_seconds) {
  int64_t day_number = FloorDiv(wall_seconds, 86400);
  int64_t sod = wall_seconds - day_number * 86400;
  year_month_day ymd{sys_days{days{day_number}}};
  Civil c;
  c.year = static_cast<int>(ymd.year());
  c.month = static_cast<int>(static_cast<unsigned>(ymd.month()));
  c.day = static_cast<int>(static_cast<unsigned>(ymd.day()));
  c.hour = static_cast<int>(sod / 3600);
  c.minute = static_cast<int>(sod / 60 % 60);
  c.second = static_cast<int>(sod % 60);
  return c;
}

// Precondition: the date is valid (checked by the parser).
int64_t WallFromCivil(const Civil& c) {
  year_month_day ymd{std::chrono::year{c.year}, std::chrono::month{static_cast<unsigned>(c.month)},
                     std::chrono::day{static_cast<unsigned>(c.day)}};
  int64_t day_number = sys_days{ymd}.time_since_epoch().count();
  return day_number * 86400 + c.hour * 3600 + c.minute * 60 + c.second;
}

std::string FormatCivil(const Civil& c, char sep) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d%c%02d:%02d:%02d", c.year, c.month, c.day, sep,
                c.hour, c.minute, c.second);
  return buf;
}

// Reads exactly `n` ASCII digits at `s[*pos]`.
std::optional<int> Digits(std::string_view s, size_t* pos, size_t n) {
  if (s.size() < *pos + n) return std::nullopt;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char ch = s[*pos + i];
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  *pos += n;
  return v;
}

bool Expect(std::string_view s, size_t* pos, char ch) {
  if (*pos >= s.size() || s[*pos] != ch) return false;
  ++*pos;
  return true;
}

struct WallTime {
  int64_t wall_seconds = 0;
  int64_t nanos = 0;
};

// Parses "YYYY-MM-DD<sep>HH:MM:SS[.fffffffff]" from the start of `s`, advancing *pos. On error
// returns a message saying what is wrong (without the quoted text; the caller adds it).
Result<WallTime> ParseWall(std::string_view s, size_t* pos, char sep) {
  Civil c;
  auto year = Digits(s, pos, 4);
  bool ok = year && Expect(s, pos, '-');
  auto month = ok ? Digits(s, pos, 2) : std::nullopt;
  ok = month && Expect(s, pos, '-');
  auto day = ok ? Digits(s, pos, 2) : std::nullopt;
  ok = day && Expect(s, pos, sep);
  auto hour = ok ? Digits(s, pos, 2) : std::nullopt;
  ok = hour && Expect(s, pos, ':');
  auto minute = ok ? Digits(s, pos, 2) : std::nullopt;
  ok = minute && Expect(s, pos, ':');
  auto second = ok ? Digits(s, pos, 2) : std::nullopt;
  if (!second) {
    return Error{std::string("does not match \"YYYY-MM-DD") + sep + "HH:MM:SS\""};
  }
  c = Civil{*year, *month, *day, *hour, *minute, *second};
  if (c.year < kMinYear || c.year > kMaxYear) {
    return Error{"year " + std::to_string(c.year) + " is outside " + std::to_string(kMinYear) +
                 ".." + std::to_string(kMaxYear)};
  }
  year_month_day ymd{std::chrono::year{c.year}, std::chrono::month{static_cast<unsigned>(c.month)},
                     std::chrono::day{static_cast<unsigned>(c.day)}};
  if (!ymd.ok()) return Error{"day or month out of range"};
  if (c.hour > 23 || c.minute > 59 || c.second > 59) return Error{"time of day out of range"};
  WallTime w{WallFromCivil(c), 0};
  if (*pos < s.size() && s[*pos] == '.') {
    ++*pos;
    int n = 0;
    int64_t frac = 0;
    while (*pos < s.size() && s[*pos] >= '0' && s[*pos] <= '9') {
      if (++n > 9) return Error{"more than 9 fractional digits"};
      frac = frac * 10 + (s[*pos] - '0');
      ++*pos;
    }
    if (n == 0) return Error{"no digits after the decimal point"};
    for (int i = n; i < 9; ++i) frac *= 10;
    w.nanos = frac;
  }
  return w;
}

SystemTime ToSystemTime(int64_t unix_seconds, int64_t nanos) {
  return SystemTime(
      std::chrono::duration_cast<SystemTime::duration>(seconds{unix_seconds} + nanoseconds{nanos}));
}

std::string FormatOffset(int offset_seconds) {
  if (offset_seconds == 0) return "Z";
  char sign = offset_seconds < 0 ? '-' : '+';
  int abs = offset_seconds < 0 ? -offset_seconds : offset_seconds;
  char buf[16];
  // RFC 3339 has no seconds in an offset; like Go, any remainder is dropped.
  std::snprintf(buf, sizeof buf, "%c%02d:%02d", sign, abs / 3600 % 100, abs / 60 % 60);
  return buf;
}

}  // namespace

int Zone::OffsetAt(SystemTime t) const {
  if (!local_) return offset_;
  time_t tt = static_cast<time_t>(UnixSeconds(t));
  struct tm tm_local {};
  if (localtime_r(&tt, &tm_local) == nullptr) return 0;
  return static_cast<int>(tm_local.tm_gmtoff);
}

int Zone::OffsetForWallClock(int64_t wall_seconds) const {
  if (!local_) return offset_;
  time_t as_utc = static_cast<time_t>(wall_seconds);
  struct tm fields {};
  if (gmtime_r(&as_utc, &fields) == nullptr) return 0;
  fields.tm_isdst = -1;
  time_t instant = mktime(&fields);
  // mktime() returns -1 for errors and for 1969-12-31 23:59:59 UTC; the latter is harmless here.
  if (instant == static_cast<time_t>(-1)) return 0;
  return static_cast<int>(wall_seconds - static_cast<int64_t>(instant));
}

int64_t UnixSeconds(SystemTime t) {
  return std::chrono::floor<seconds>(t.time_since_epoch()).count();
}

std::string FormatDateTime(SystemTime t, const Zone& zone) {
  int64_t secs = UnixSeconds(t);
  return FormatCivil(CivilFromWall(secs + zone.OffsetAt(t)), ' ');
}

Result<SystemTime> ParseDateTime(std::string_view text, const Zone& zone) {
  size_t pos = 0;
  auto wall = ParseWall(text, &pos, ' ');
  if (!wall) return Error{"time " + Quote(text) + ": " + wall.error()};
  if (pos != text.size()) {
    return Error{"time " + Quote(text) + ": unexpected text after the seconds"};
  }
  int offset = zone.OffsetForWallClock(wall->wall_seconds);
  return ToSystemTime(wall->wall_seconds - offset, wall->nanos);
}

std::string FormatRfc3339(SystemTime t, const Zone& zone) {
  return FormatRfc3339(ZonedTime{t, zone.OffsetAt(t)});
}

std::string FormatRfc3339(const ZonedTime& t) {
  int64_t secs = UnixSeconds(t.instant);
  return FormatCivil(CivilFromWall(secs + t.offset_seconds), 'T') + FormatOffset(t.offset_seconds);
}

Result<ZonedTime> ParseRfc3339(std::string_view text) {
  auto fail = [&](std::string_view why) {
    return Error{"RFC 3339 time " + Quote(text) + ": " + std::string(why)};
  };
  size_t pos = 0;
  auto wall = ParseWall(text, &pos, 'T');
  if (!wall) return fail(wall.error());
  int offset = 0;
  if (pos < text.size() && text[pos] == 'Z') {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    auto hh = Digits(text, &pos, 2);
    bool ok = hh && Expect(text, &pos, ':');
    auto mm = ok ? Digits(text, &pos, 2) : std::nullopt;
    if (!mm) return fail("zone offset does not match \"+hh:mm\"");
    if (*hh > 23 || *mm > 59) return fail("zone offset out of range");
    offset = sign * (*hh * 3600 + *mm * 60);
  } else {
    return fail("missing zone (\"Z\" or \"+hh:mm\")");
  }
  if (pos != text.size()) return fail("unexpected text after the zone");
  return ZonedTime{ToSystemTime(wall->wall_seconds - offset, wall->nanos), offset};
}

}  // namespace hami
