// Pod annotations of the bind step (docs/protocol.md#pod-annotations, #bind):
//   hami.io/bind-phase: "allocating" (scheduler Bind), then "success" or "failed" (device plugin)
//   hami.io/bind-time:  Unix seconds as a decimal string, e.g. "1716199325"
// hami.io/vgpu-time uses the same Unix-seconds format.
#ifndef HAMI_PROTOCOL_BIND_H_
#define HAMI_PROTOCOL_BIND_H_

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace hami::protocol {

enum class BindPhase { kAllocating, kSuccess, kFailed };

// "allocating", "success", "failed".
std::string_view FormatBindPhase(BindPhase phase);
// Exactly one of the three words (case-sensitive, no white space); anything else is an error
// naming the value.
Result<BindPhase> ParseBindPhase(std::string_view value);

// Whole Unix seconds of `t` (floored), e.g. "1716199325".
std::string FormatBindTime(SystemTime t);
// A non-negative decimal integer of Unix seconds that a SystemTime can hold (up to
// 9223372036, year 2262). No sign, no white space. Errors name `hami.io/bind-time` and the value.
Result<SystemTime> ParseBindTime(std::string_view value);

// Same format for another annotation (e.g. hami.io/vgpu-time); errors name `key`.
Result<SystemTime> ParseUnixSecondsAnnotation(std::string_view key, std::string_view value);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_BIND_H_
