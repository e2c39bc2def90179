// Log lines in HAMi-core's shape (users and scripts grep for them):
//   [HAMI-core Warn(<pid>:<pthread_self>:<file>:<line>)]: <message>
//   [HAMI-core ERROR (pid:<pid> thread=<pthread_self> <file>:<line>)]: <message>
// Written to stderr with one write(2) per line. Level from LIBCUDA_LOG_LEVEL (default 2):
// errors always, Warn/Msg at >= 2, Info at >= 3, Debug at >= 4.
#ifndef HAMI_VGPU_LOG_H_
#define HAMI_VGPU_LOG_H_

#include <cstddef>

namespace hami::vgpu {

enum LogLevel : int { kLogError = 0, kLogWarn = 2, kLogMsg = 2, kLogInfo = 3, kLogDebug = 4 };

void SetLogThreshold(int threshold);
int LogThreshold();

// Formats one line (with trailing newline) into buf; returns its length (truncated to cap - 1).
// `tag` is one of "Debug", "Info", "Warn", "Msg", "ERROR". Exposed for tests.
std::size_t FormatLogLine(char* buf, std::size_t cap, const char* tag, long pid, long thread,
                          const char* file, int line, const char* message);

void LogLine(int level, const char* tag, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace hami::vgpu

#define VGPU_LOG_AT(level, tag, ...)                                                   \
  do {                                                                                 \
    if ((level) == ::hami::vgpu::kLogError || ::hami::vgpu::LogThreshold() >= (level)) \
      ::hami::vgpu::LogLine(level, tag, __FILE__, __LINE__, __VA_ARGS__);              \
  } while (0)
#define VGPU_ERROR(...) VGPU_LOG_AT(::hami::vgpu::kLogError, "ERROR", __VA_ARGS__)
#define VGPU_WARN(...) VGPU_LOG_AT(::hami::vgpu::kLogWarn, "Warn", __VA_ARGS__)
#define VGPU_MSG(...) VGPU_LOG_AT(::hami::vgpu::kLogMsg, "Msg", __VA_ARGS__)
#define VGPU_INFO(...) VGPU_LOG_AT(::hami::vgpu::kLogInfo, "Info", __VA_ARGS__)
#define VGPU_DEBUG(...) VGPU_LOG_AT(::hami::vgpu::kLogDebug, "Debug", __VA_ARGS__)

#endif  // HAMI_VGPU_LOG_H_
