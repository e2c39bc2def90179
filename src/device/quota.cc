#include "device/quota.h"

#include <algorithm>

#include "protocol/quantity.h"

namespace hami::device {

Result<std::map<std::string, int64_t>> QuotaLimitsFromHard(
    const std::map<std::string, std::string>& hard, const std::vector<std::string>& tracked) {
  std::map<std::string, int64_t> out;
  constexpr std::string_view kPrefix = "limits.";
  for (const auto& [key, value] : hard) {
    if (key.rfind(kPrefix, 0) != 0) continue;
    std::string resource = key.substr(kPrefix.size());
    if (resource.empty() || std::find(tracked.begin(), tracked.end(), resource) == tracked.end()) {
      continue;
    }
    auto v = protocol::ParseDeviceCount(key, value);
    if (!v) return Error{"resource quota spec.hard: " + v.error()};
    out[resource] = *v;
  }
  return out;
}

bool FitQuota(const NamespaceQuota& quota, std::string_view memory_resource, int64_t memory,
              std::string_view core_resource, int64_t cores, int32_t memory_factor) {
  auto blocks = [&](std::string_view resource, int64_t request, int64_t factor) {
    if (resource.empty()) return false;
    auto it = quota.find(std::string(resource));
    if (it == quota.end() || !it->second.limit_set) return false;
    return it->second.used + request > it->second.limit * factor;
  };
  return !blocks(memory_resource, memory, std::max<int32_t>(memory_factor, 1)) &&
         !blocks(core_resource, cores, 1);
}

}  // namespace hami::device
