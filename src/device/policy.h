// Scheduling policies and formulas (docs/protocol.md#filter-and-scores): node score, device score
// with the hami.io/device-scoring-weights weights, the GPU policy chain and the device order it
// implies.
//
// Orders follow HAMi's convention: a list is sorted ascending by the policy's "less" and then
// consumed FROM THE END, so the device a policy prefers sorts last. All functions are pure.
#ifndef HAMI_DEVICE_POLICY_H_
#define HAMI_DEVICE_POLICY_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "device/usage.h"
#include "protocol/scoring_weights.h"

namespace hami::device {

enum class NodePolicy { kBinpack, kSpread };

// "binpack" or "spread" (exact); nullopt otherwise.
std::optional<NodePolicy> ParseNodePolicy(std::string_view text);

// A parsed GPU policy: `hami.io/gpu-scheduler-policy` or --gpu-scheduler-policy, e.g. "spread",
// "binpack,numa", "topology-aware". Names: binpack, spread, numa (sort keys, in written order),
// mutex and topology-aware (filters, not sort keys).
struct GpuPolicy {
  enum class Key { kBinpack, kSpread, kNuma };
  std::vector<Key> keys{};      // sort keys in written order
  bool mutex = false;           // "mutex" present: fit rejects devices already in use
  bool topology_aware = false;  // "topology-aware" present: fit picks by pair score
  bool chain = false;           // more than one name, or a bare "numa": lexicographic keys
  bool mutex_only = false;      // exactly "mutex": sort by used, descending
  bool operator==(const GpuPolicy&) const = default;
};

// Splits on ',' and trims each name. With strict, an unknown or empty name is an error naming
// it; otherwise unknown names are skipped, so an unknown single policy behaves as spread (HAMi).
Result<GpuPolicy> ParseGpuPolicy(std::string_view text, bool strict);

// 10 x (sum used/sum count + sum usedcores/sum totalcore + sum usedmem/sum totalmem) over every
// device of the node, or 0 when any of the three totals is 0.
double NodeScore(const std::vector<DeviceUsage>& devices);

// HAMi's device score for one container: for every request whose `type` equals the device's
// `type` exactly, one more slot, its cores and its memory (percentage x totalmem / 100 when the
// percentage is neither 0 nor 101, else memreq) are added to the device's usage;
//   10 x (w.slot (slots+used)/count + w.core (cores+usedcores)/totalcore
//         + w.memory (mem+usedmem)/totalmem),
// 0 when count, totalcore or totalmem is 0. Because NVIDIA devices' type is the model, NVIDIA
// requests rarely match and devices rank by current usage (docs/protocol.md#filter-and-scores, step
// 4).
double DeviceScore(const DeviceUsage& device, const ContainerRequests& requests,
                   const protocol::ScoringWeights& weights);

// Default weights: slot=1, core=1, memory=1.
protocol::ScoringWeights DefaultScoringWeights();

// A device and its score for the container being placed.
struct ScoredDevice {
  DeviceUsage* device = nullptr;
  double score = 0;
};

// Sorts ascending by the policy so that the preferred device comes last:
//  * no chain, no numa-bind: binpack = (score asc, numa asc); spread, topology-aware, empty and
//    unknown = (score desc, numa asc); mutex = (used desc, numa asc).
//  * no chain, numa-bind: binpack = (numa desc, score asc); others = (numa asc, score desc).
//  * chain: keys in written order (binpack = score asc, spread = score desc, numa = numa asc),
//    numa-bind puts numa first; no score key means spread; then index asc.
// The sort is stable, so devices that compare equal keep their node order (the registered order):
// with two identical idle devices the later one is chosen.
void SortDevices(const GpuPolicy& policy, bool numa_bind, std::vector<ScoredDevice>* devices);

}  // namespace hami::device

#endif  // HAMI_DEVICE_POLICY_H_
