// Helpers shared by the hostile HTTP tests: peak RSS of a child process, and a health check that
// must answer within 1 s on a fresh connection.
#ifndef HAMI_TESTS_HOSTILE_HOSTILE_HELPERS_H_
#define HAMI_TESTS_HOSTILE_HOSTILE_HELPERS_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <string>

#include "../net/http_test_client.h"

namespace hami::hostile {

inline constexpr size_t kMaxPeakKiB = 200 << 10;

// VmHWM (peak resident set) of `pid` in KiB; 0 when unreadable.
inline size_t PeakRssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

// GET `path` (default /healthz) on a new connection; true when 200 came back within 1 s.
inline bool HealthzWithin1s(int port, const std::string& path = "/healthz") {
  const auto start = std::chrono::steady_clock::now();
  net::testing::RawClient c(port);
  if (!c.connected() || !c.Send("GET " + path + " HTTP/1.1\r\nHost: s\r\n\r\n")) return false;
  auto r = c.Read(std::chrono::seconds(1));
  return r && r->status == 200 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(1);
}

}  // namespace hami::hostile

#endif  // HAMI_TESTS_HOSTILE_HOSTILE_HELPERS_H_
