#include "protocol/bind.h"

#include <chrono>

#include "common/strings.h"
#include "common/time_format.h"
#include "protocol/keys.h"

namespace hami::protocol {
namespace {
// The largest whole second a SystemTime (int64 nanoseconds) holds.
constexpr int64_t kMaxUnixSeconds = 9223372036;
}  // namespace

std::string_view FormatBindPhase(BindPhase phase) {
  switch (phase) {
    case BindPhase::kAllocating:
      return "allocating";
    case BindPhase::kSuccess:
      return "success";
    case BindPhase::kFailed:
      return "failed";
  }
  return "failed";  // unreachable for valid enum values
}

Result<BindPhase> ParseBindPhase(std::string_view value) {
  if (value == "allocating") return BindPhase::kAllocating;
  if (value == "success") return BindPhase::kSuccess;
  if (value == "failed") return BindPhase::kFailed;
  return Error{std::string(kBindPhaseKey) + ": unknown phase " + Quote(value) +
               " (want \"allocating\", \"success\" or \"failed\")"};
}

std::string FormatBindTime(SystemTime t) { return std::to_string(UnixSeconds(t)); }

Result<SystemTime> ParseBindTime(std::string_view value) {
  return ParseUnixSecondsAnnotation(kBindTimeKey, value);
}

Result<SystemTime> ParseUnixSecondsAnnotation(std::string_view key, std::string_view value) {
  auto secs = ParseInt64(value);
  if (!secs || *secs < 0 || *secs > kMaxUnixSeconds) {
    return Error{std::string(key) + ": " + Quote(value) +
                 " is not a non-negative decimal number of Unix seconds"};
  }
  return SystemTime(std::chrono::duration_cast<SystemTime::duration>(std::chrono::seconds{*secs}));
}

}  // namespace hami::protocol
