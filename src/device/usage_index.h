// The incremental usage index (DESIGN decision 3): per-device usage of every registered node,
// kept up to date by pod events as per-device deltas, so a filter call reads only its candidate
// nodes' rows. No scan of all pods per call, no per-call copy of the cluster.
//
// Pod annotations are the source of truth (decision 2): a pod's allocation is decoded from its
// `*-devices-allocated` annotations (PodAllocationFromPod) and the index can be rebuilt from the
// list of live pods at any time.
#ifndef HAMI_DEVICE_USAGE_INDEX_H_
#define HAMI_DEVICE_USAGE_INDEX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "device/device.h"
#include "device/pod_view.h"
#include "device/usage.h"

namespace hami::device {

// What one pod holds on its node, collapsed (§4.4) over all vendors.
struct PodAllocation {
  std::string key{};             // "namespace/name"
  std::string namespace_name{};  // for quota usage
  std::string node{};            // hami.io/vgpu-node
  std::vector<DeviceDelta> deltas{};
  bool operator==(const PodAllocation&) const = default;
};

// The allocation a pod holds, or nullopt when it holds none: no hami.io/vgpu-node annotation,
// phase Succeeded or Failed, or no backend's allocated annotation with a device. A pod being
// deleted keeps its usage until it is gone. Init containers count until they have all exited 0
// (PodView::init_done). An allocated annotation that does not decode is an error naming the pod
// and the key.
Result<std::optional<PodAllocation>> PodAllocationFromPod(const Registry& registry,
                                                          const PodView& pod);

// Thread-safe: every method may be called from any thread. Readers (Rows, NamespaceUsage) share
// a lock; writers are exclusive.
class UsageIndex {
 public:
  UsageIndex() = default;
  UsageIndex(const UsageIndex&) = delete;
  UsageIndex& operator=(const UsageIndex&) = delete;

  // Sets a node's devices and node facts (cordon, pair scores) from registration; the usage
  // fields of `node.devices` are ignored (usage comes from pods). Replaces an earlier SetNode.
  void SetNode(NodeUsage node);
  void RemoveNode(const std::string& name);

  // Adds a pod's allocation, replacing the one it had (its old deltas are subtracted first).
  void UpsertPod(PodAllocation allocation);
  // Removes a pod's allocation; false when the index did not hold it.
  bool RemovePod(const std::string& key);

  struct Snapshot {
    std::vector<NodeUsage> nodes{};      // rows with usage, in the order asked, for known nodes
    std::vector<std::string> missing{};  // asked-for names with no registered node
  };
  // Copies just the named nodes' rows (capacity + current usage). Usage on a device UUID the
  // node does not (or no longer) register is kept aside and shows up when the device does.
  Snapshot Rows(const std::vector<std::string>& names) const;

  // The same rows without copying them: each is an immutable row the index replaces (never
  // changes) when the node's registration or usage changes, so a caller may read it after the
  // call, unlocked, as the state at the time of the call. For the filter: O(1) per candidate.
  struct SharedSnapshot {
    std::vector<std::shared_ptr<const NodeUsage>> nodes{};  // in the order asked, known nodes
    std::vector<std::string> missing{};                     // asked-for names with no node
  };
  SharedSnapshot SharedRows(const std::vector<std::string>& names) const;

  // Every registered node's name, sorted.
  std::vector<std::string> NodeNames() const;

  // Sum of usedmem / usedcores of the namespace's pods, by vendor key (the quota "used").
  struct Totals {
    int64_t usedmem = 0;
    int64_t usedcores = 0;
    bool operator==(const Totals&) const = default;
  };
  std::map<std::string, Totals> NamespaceUsage(const std::string& namespace_name) const;

  std::optional<PodAllocation> Pod(const std::string& key) const;
  size_t PodCount() const;

  // Replaces everything with `nodes` and `pods` (start-up, or relist after a watch gap).
  void Rebuild(std::vector<NodeUsage> nodes, std::vector<PodAllocation> pods);

 private:
  struct Counters {
    int64_t used = 0;
    int64_t usedmem = 0;
    int64_t usedcores = 0;
  };
  // Adds or subtracts the deltas; the caller refreshes the node's row (RefreshLocked).
  void ApplyLocked(const PodAllocation& allocation, int sign);
  // Sets the usage fields of `row`'s devices from usage_ (zero where it holds none).
  void MergeUsageLocked(NodeUsage* row) const;
  // Replaces the node's row by a copy with the current usage; no-op for an unknown node.
  void RefreshLocked(const std::string& node);

  mutable std::shared_mutex mu_;
  // Registration (capacity, node facts) with the current usage merged in; copy-on-write.
  // Hashed: a filter looks up every candidate by name.
  std::unordered_map<std::string, std::shared_ptr<const NodeUsage>> nodes_;
  std::map<std::string, std::map<std::string, Counters>> usage_;     // node -> uuid -> usage
  std::map<std::string, PodAllocation> pods_;                        // by pod key
  std::map<std::string, std::map<std::string, Totals>> namespaces_;  // ns -> vendor -> totals
};

// The quota view Fit checks for one namespace: for every backend's memory and core resource, the
// namespace's limit from `limits` (QuotaLimitsFromHard; resource -> limit) and its usage from
// `used` (UsageIndex::NamespaceUsage; vendor key -> totals). Resources with neither a limit nor
// usage are left out.
NamespaceQuota NamespaceQuotaFor(const Registry& registry,
                                 const std::map<std::string, int64_t>& limits,
                                 const std::map<std::string, UsageIndex::Totals>& used);

}  // namespace hami::device

#endif  // HAMI_DEVICE_USAGE_INDEX_H_
