// ResourceQuota integration (docs/protocol.md#resource-quotas), as pure values: which quota limits
// count, and whether a request still fits a namespace's quota. The scheduler keeps the per
// namespace state (from its ResourceQuota informer and the usage index) and passes it in.
#ifndef HAMI_DEVICE_QUOTA_H_
#define HAMI_DEVICE_QUOTA_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hami::device {

// One tracked resource of one namespace.
struct QuotaEntry {
  int64_t used = 0;        // sum over the namespace's pods (memory already x memoryFactor)
  int64_t limit = 0;       // as written in spec.hard (memory NOT yet x memoryFactor)
  bool limit_set = false;  // false: the entry exists only through usage and never blocks
  bool operator==(const QuotaEntry&) const = default;
};

// A namespace's tracked resources, keyed by resource name ("nvidia.com/gpumem").
using NamespaceQuota = std::map<std::string, QuotaEntry>;

// The limits a ResourceQuota's spec.hard sets on `tracked` resources: only keys
// "limits.<resource>" count ("limits.nvidia.com/gpumem": "8000"); other keys are ignored. The
// value must be a whole non-negative count (protocol quantity rules); a bad value is an error
// naming the key and value.
Result<std::map<std::string, int64_t>> QuotaLimitsFromHard(
    const std::map<std::string, std::string>& hard, const std::vector<std::string>& tracked);

// Whether adding `memory` MiB (already x memory_factor) on `memory_resource` and `cores` on
// `core_resource` stays within the namespace's quota: an entry with limit_set blocks when
//   used + memory > limit x memory_factor   (memory)
//   used + cores  > limit                   (cores).
// An explicit limit of 0 blocks any positive request. Empty resource names are not checked.
bool FitQuota(const NamespaceQuota& quota, std::string_view memory_resource, int64_t memory,
              std::string_view core_resource, int64_t cores, int32_t memory_factor);

}  // namespace hami::device

#endif  // HAMI_DEVICE_QUOTA_H_
