// klog-style logging: `I1129 09:10:55.123456 4242 file.cc:42] message` on stderr.
// Severity INFO/WARNING/ERROR always print; HAMI_VLOG(n) prints only at verbosity >= n (`-v`).
// Thread-safe; one line per call.
#ifndef HAMI_COMMON_LOG_H_
#define HAMI_COMMON_LOG_H_

#include <fmt/format.h>

#include <string_view>

namespace hami::log {

enum class Severity { kInfo, kWarning, kError };

void SetVerbosity(int v);
int Verbosity();

// Where lines go; the default writes to stderr. For tests.
using Sink = void (*)(std::string_view line);
void SetSink(Sink sink);

void Write(Severity severity, const char* file, int line, std::string_view message);

}  // namespace hami::log

#define HAMI_LOG_AT(sev, ...) \
  ::hami::log::Write(sev, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
#define HAMI_INFO(...) HAMI_LOG_AT(::hami::log::Severity::kInfo, __VA_ARGS__)
#define HAMI_WARN(...) HAMI_LOG_AT(::hami::log::Severity::kWarning, __VA_ARGS__)
#define HAMI_ERROR(...) HAMI_LOG_AT(::hami::log::Severity::kError, __VA_ARGS__)
#define HAMI_VLOG(level, ...)                                        \
  do {                                                               \
    if (::hami::log::Verbosity() >= (level)) HAMI_INFO(__VA_ARGS__); \
  } while (0)

#endif  // HAMI_COMMON_LOG_H_
