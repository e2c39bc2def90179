#include "common/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

namespace hami::log {
namespace {
std::atomic<int> g_verbosity{0};
std::atomic<Sink> g_sink{nullptr};
std::mutex g_mu;

std::string_view BaseName(const char* path) {
  std::string_view p(path);
  size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}
}  // namespace

void SetVerbosity(int v) { g_verbosity.store(v); }
int Verbosity() { return g_verbosity.load(std::memory_order_relaxed); }
void SetSink(Sink sink) { g_sink.store(sink); }

void Write(Severity severity, const char* file, int line, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
            1000000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char letter = severity == Severity::kInfo ? 'I' : severity == Severity::kWarning ? 'W' : 'E';
  std::string out =
      fmt::format("{}{:02}{:02} {:02}:{:02}:{:02}.{:06} {:>7} {}:{}] {}\n", letter, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us,
                  static_cast<long>(::syscall(SYS_gettid)), BaseName(file), line, message);
  if (Sink sink = g_sink.load()) {
    sink(out);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace hami::log
