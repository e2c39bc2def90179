#include "vgpu/log.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace hami::vgpu {
namespace {

std::atomic<int> g_threshold{2};

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

void SetLogThreshold(int threshold) { g_threshold.store(threshold, std::memory_order_relaxed); }

int LogThreshold() { return g_threshold.load(std::memory_order_relaxed); }

std::size_t FormatLogLine(char* buf, std::size_t cap, const char* tag, long pid, long thread,
                          const char* file, int line, const char* message) {
  int n;
  if (std::strcmp(tag, "ERROR") == 0) {
    n = std::snprintf(buf, cap, "[HAMI-core ERROR (pid:%ld thread=%ld %s:%d)]: %s\n", pid, thread,
                      Basename(file), line, message);
  } else {
    n = std::snprintf(buf, cap, "[HAMI-core %s(%ld:%ld:%s:%d)]: %s\n", tag, pid, thread,
                      Basename(file), line, message);
  }
  if (n < 0) return 0;
  if (static_cast<std::size_t>(n) >= cap) {
    // Keep the newline so a truncated line does not merge with the next one.
    buf[cap - 2] = '\n';
    return cap - 1;
  }
  return static_cast<std::size_t>(n);
}

void LogLine(int /*level*/, const char* tag, const char* file, int line, const char* fmt, ...) {
  char message[768];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  char out[1024];
  std::size_t n = FormatLogLine(out, sizeof(out), tag, static_cast<long>(getpid()),
                                static_cast<long>(pthread_self()), file, line, message);
  ssize_t ignored = write(STDERR_FILENO, out, n);
  (void)ignored;
}

}  // namespace hami::vgpu
