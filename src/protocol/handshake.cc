#include "protocol/handshake.h"

#include <cstdio>
#include <vector>

#include "common/strings.h"

namespace hami::protocol {
namespace {

constexpr std::string_view kRequesting = "Requesting";
constexpr std::string_view kRequestingPrefix = "Requesting_";
constexpr std::string_view kReportedPrefix = "Reported_";
constexpr std::string_view kDeletedPrefix = "Deleted_";
constexpr std::string_view kLegacyPrefix = "Reported ";

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "+0000", "-0530": Go's "-0700" element.
std::optional<int> ParseNumericOffset(std::string_view s) {
  if (s.size() != 5 || (s[0] != '+' && s[0] != '-') || !AllDigits(s.substr(1))) {
    return std::nullopt;
  }
  int hh = (s[1] - '0') * 10 + (s[2] - '0');
  int mm = (s[3] - '0') * 10 + (s[4] - '0');
  if (hh > 23 || mm > 59) return std::nullopt;
  return (s[0] == '-' ? -1 : 1) * (hh * 3600 + mm * 60);
}

// Go's monotonic clock reading "m=+1104711.7" / "m=-0.000000001".
bool IsMonotonicPart(std::string_view s) {
  if (s.size() < 4 || !StartsWith(s, "m=") || (s[2] != '+' && s[2] != '-')) return false;
  auto parts = Split(s.substr(3), '.');
  return parts.size() == 2 && AllDigits(parts[0]) && AllDigits(parts[1]);
}

// "2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.7" (monotonic part optional).
Result<SystemTime> ParseGoTimeString(std::string_view text, int* offset_out) {
  auto parts = Split(text, ' ');
  if (parts.size() != 4 && parts.size() != 5) {
    return Error{"Go time " + Quote(text) +
                 ": want \"YYYY-MM-DD HH:MM:SS[.f] +hhmm ZONE [m=±s.f]\""};
  }
  auto offset = ParseNumericOffset(parts[2]);
  if (!offset) return Error{"Go time " + Quote(text) + ": bad zone offset " + Quote(parts[2])};
  if (parts[3].empty()) return Error{"Go time " + Quote(text) + ": empty zone name"};
  if (parts.size() == 5 && !IsMonotonicPart(parts[4])) {
    return Error{"Go time " + Quote(text) + ": bad monotonic part " + Quote(parts[4])};
  }
  std::string wall = std::string(parts[0]) + " " + std::string(parts[1]);
  auto t = ParseDateTime(wall, Zone::Fixed(*offset));
  if (!t) return Error{"Go time " + Quote(text) + ": " + t.error()};
  *offset_out = *offset;
  return *t;
}

std::string FormatGoTimeString(SystemTime t, const Zone& zone) {
  int offset = zone.OffsetAt(t);
  std::string out = FormatDateTime(t, zone);
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   t.time_since_epoch() - std::chrono::seconds(UnixSeconds(t)))
                   .count();
  if (nanos != 0) {
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%09lld", static_cast<long long>(nanos));
    std::string f = frac;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  int abs = offset < 0 ? -offset : offset;
  char num[16];
  std::snprintf(num, sizeof num, "%c%02d%02d", offset < 0 ? '-' : '+', abs / 3600 % 100,
                abs / 60 % 60);
  out += " ";
  out += num;
  // Go names a zone without an abbreviation "-07" (whole hours) or "-0700".
  if (offset == 0) {
    out += " UTC";
  } else if (abs % 3600 == 0) {
    out += " " + std::string(num, 3);
  } else {
    out += " " + std::string(num);
  }
  return out;
}

}  // namespace

std::string_view HandshakeKindName(HandshakeKind kind) {
  switch (kind) {
    case HandshakeKind::kRequesting:
      return "Requesting";
    case HandshakeKind::kReported:
      return "Reported";
    case HandshakeKind::kDeleted:
      return "Deleted";
    case HandshakeKind::kReportedLegacy:
      return "ReportedLegacy";
    case HandshakeKind::kOther:
      return "Other";
  }
  return "Other";
}

std::optional<HandshakeKind> HandshakeKindFromName(std::string_view name) {
  for (HandshakeKind k :
       {HandshakeKind::kRequesting, HandshakeKind::kReported, HandshakeKind::kDeleted,
        HandshakeKind::kReportedLegacy, HandshakeKind::kOther}) {
    if (HandshakeKindName(k) == name) return k;
  }
  return std::nullopt;
}

Handshake ParseHandshake(std::string_view value, const Zone& zone) {
  Handshake h;
  h.raw = std::string(value);
  std::string_view prefix;
  if (value == kRequesting) {
    h.kind = HandshakeKind::kRequesting;
    return h;
  } else if (StartsWith(value, kRequestingPrefix)) {
    h.kind = HandshakeKind::kRequesting;
    prefix = kRequestingPrefix;
  } else if (StartsWith(value, kReportedPrefix)) {
    h.kind = HandshakeKind::kReported;
    prefix = kReportedPrefix;
  } else if (StartsWith(value, kDeletedPrefix)) {
    h.kind = HandshakeKind::kDeleted;
    prefix = kDeletedPrefix;
  } else if (StartsWith(value, kLegacyPrefix)) {
    h.kind = HandshakeKind::kReportedLegacy;
    prefix = kLegacyPrefix;
  } else {
    return h;
  }
  std::string_view ts = value.substr(prefix.size());
  h.timestamp = std::string(ts);
  Result<SystemTime> t = Error{};
  if (h.kind == HandshakeKind::kReportedLegacy) {
    t = ParseGoTimeString(ts, &h.legacy_offset_seconds);
  } else {
    t = ParseDateTime(ts, zone);
  }
  if (t) {
    h.time = *t;
  } else {
    h.time_error = t.error();
  }
  return h;
}

std::string FormatHandshake(HandshakeKind kind, SystemTime t, const Zone& zone) {
  switch (kind) {
    case HandshakeKind::kRequesting:
      return std::string(kRequestingPrefix) + FormatDateTime(t, zone);
    case HandshakeKind::kReported:
      return std::string(kReportedPrefix) + FormatDateTime(t, zone);
    case HandshakeKind::kDeleted:
      return std::string(kDeletedPrefix) + FormatDateTime(t, zone);
    case HandshakeKind::kReportedLegacy:
      return std::string(kLegacyPrefix) + FormatGoTimeString(t, zone);
    case HandshakeKind::kOther:
      return "";
  }
  return "";
}

HandshakeVerdict CheckHandshake(std::optional<std::string_view> value, SystemTime now,
                                bool allocatable_positive, const Zone& zone,
                                std::chrono::nanoseconds window) {
  HandshakeVerdict v;
  if (value && value->find(kRequesting) != std::string_view::npos) {
    Handshake h = ParseHandshake(*value, zone);
    // A Requesting value whose time cannot be read is left alone: healthy, nothing to write.
    if (h.kind != HandshakeKind::kRequesting || !h.time) return v;
    bool expired = now - *h.time > window;
    v.healthy = !expired || allocatable_positive;
    return v;
  }
  v.need_update = true;
  v.write_requesting = true;
  v.new_value = FormatHandshake(HandshakeKind::kRequesting, now, zone);
  return v;
}

}  // namespace hami::protocol
