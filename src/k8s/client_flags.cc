#include "k8s/client_flags.h"

#include <cctype>
#include <cstdint>

#include "common/strings.h"

namespace hami::k8s {

std::optional<std::chrono::nanoseconds> ParseGoDuration(std::string_view s) {
  if (s == "0") return std::chrono::nanoseconds(0);
  if (s.empty()) return std::nullopt;
  int64_t total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    auto n = ParseInt64(s.substr(start, i - start));
    if (!n) return std::nullopt;
    size_t unit_start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    std::string_view unit = s.substr(unit_start, i - unit_start);
    int64_t scale;
    if (unit == "h") {
      scale = 3600'000'000'000;
    } else if (unit == "m") {
      scale = 60'000'000'000;
    } else if (unit == "s") {
      scale = 1'000'000'000;
    } else if (unit == "ms") {
      scale = 1'000'000;
    } else if (unit == "us") {
      scale = 1'000;
    } else if (unit == "ns") {
      scale = 1;
    } else {
      return std::nullopt;
    }
    if (*n > (INT64_MAX - total) / scale) return std::nullopt;
    total += *n * scale;
  }
  return std::chrono::nanoseconds(total);
}

Result<RestConfig> ClientFlags::Load() const {
  if (qps < 0) return Error{"--kube-qps " + std::to_string(qps) + ": must not be negative"};
  if (burst < 1) return Error{"--kube-burst " + std::to_string(burst) + ": must be at least 1"};
  // HAMi's --kube-timeout is whole seconds, 0 its default (the client's own timeout).
  std::optional<std::chrono::nanoseconds> t;
  const bool seconds =
      !timeout.empty() && timeout.find_first_not_of("0123456789") == std::string::npos;
  if (auto n = seconds ? ParseInt64(timeout) : std::nullopt; n && *n <= 86400) {
    t = std::chrono::seconds(*n);
  } else if (!seconds) {
    t = ParseGoDuration(timeout);
    if (t && t->count() <= 0) t.reset();
  }
  if (!t) {
    return Error{"--kube-timeout " + Quote(timeout) +
                 ": want a positive duration like 30s, or whole seconds (0: the default)"};
  }
  auto cfg = LoadConfig(kubeconfig);
  if (!cfg) return cfg;
  cfg->qps = qps;
  cfg->burst = burst;
  if (t->count() > 0) cfg->timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*t);
  return cfg;
}

}  // namespace hami::k8s
