// The incremental usage index (docs/ARCHITECTURE.md#decisions, 3): per-device usage of every
// registered node, kept up to date by pod events as per-device deltas, so a filter call reads only
// its candidate nodes' rows. No scan of all pods per call, no per-call copy of the cluster.
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

// One MIG instance a pod reserved (hami.io/vgpu-mig-allocations) on the GPU `uuid`.
struct MigReservation {
  std::string uuid{};
  MigInstance instance{};
  bool operator==(const MigReservation&) const = default;
};

// What one pod holds on its node, collapsed (docs/protocol.md#usage-of-a-pod) over all vendors.
struct PodAllocation {
  std::string key{};                  // "namespace/name"
  std::string namespace_name{};       // for quota usage
  std::string node{};                 // hami.io/vgpu-node
  std::vector<DeviceDelta> deltas{};  // each with its backend's Device::UsageTag of the pod
  // MIG: the reserved instances, in annotation order, and for each GPU that has one, how many
  // of the pod's device entries on it lack a reservation (a GPU of `deltas` without any
  // reservation has all its entries unreserved). The index marks a device mig_inconsistent when
  // it is in MIG mode and used without a reservation, when it is not in MIG mode and holds a
  // reservation, and every MIG device of the node when a reservation names a GPU the node lacks.
  std::vector<MigReservation> mig{};
  std::map<std::string, int32_t> mig_unreserved{};
  bool operator==(const PodAllocation&) const = default;
};

// The allocation a pod holds, or nullopt when it holds none: no hami.io/vgpu-node annotation,
// phase Succeeded or Failed, or no backend's allocated annotation with a device. A pod being
// deleted keeps its usage until it is gone. Init containers count until they have all exited 0
// (PodView::init_done). An allocated annotation that does not decode is an error naming the pod
// and the key. A hami.io/vgpu-mig-allocations value that does not decode reserves nothing (as in
// HAMi), so the MIG GPUs the pod uses read as inconsistent.
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

  // Pod events, in resourceVersion order. `rv` is the pod's metadata.resourceVersion as a number
  // (0: unknown, always applied). An event older than the last one applied for the pod is
  // ignored, so a late event (an informer resync replaying its cache, a watch that lags the
  // extender's own write) never undoes newer state.
  //
  // Adds a pod's allocation, replacing the one it had (its old deltas are subtracted first).
  void UpsertPod(PodAllocation allocation, uint64_t rv = 0);
  // The pod holds nothing (as of `rv`); false when the index held no allocation for it. The
  // version is remembered, so an older event cannot bring the allocation back.
  bool RemovePod(const std::string& key, uint64_t rv = 0);
  // The pod is gone: its allocation and its version are dropped.
  void ForgetPod(const std::string& key);

  // The extender's own write, between its decision and the API server's answer. Claim takes the
  // pod's usage out of the index (a re-filtered pod does not count against itself) and holds
  // back the pod's events (the newest is kept) until Release; it returns the allocation the pod
  // had. SetClaimed shows the decision being written to concurrent filters. Release ends the
  // claim: with `written` (the allocation and resourceVersion of the API server's answer, or
  // nullopt allocation for none) that becomes the pod's state; with nullopt the write did not
  // happen and the pod's state before the claim comes back. A held event newer than that state
  // is applied last. Claims of one pod must not overlap (the caller serialises them).
  struct Written {
    std::optional<PodAllocation> allocation{};
    uint64_t rv = 0;
  };
  std::optional<PodAllocation> Claim(const std::string& key);
  void SetClaimed(const std::string& key, std::optional<PodAllocation> allocation);
  void Release(const std::string& key, std::optional<Written> written);

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
  // How many nodes are registered.
  size_t NodeCount() const;

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
    int64_t mig_unreserved = 0;    // device entries of pods without a MIG reservation
    std::vector<MigInstance> mig;  // reserved MIG instances
    std::map<std::string, int64_t, std::less<>> tags;  // DeviceUsage::pod_tags; no zero entries
    bool Empty() const {
      return used == 0 && usedmem == 0 && usedcores == 0 && mig_unreserved == 0 && mig.empty() &&
             tags.empty();
    }
  };
  struct PodEntry {
    std::optional<PodAllocation> allocation{};  // what is counted now
    uint64_t rv = 0;                            // of the last event applied
  };
  struct Claimed {
    PodEntry before{};       // the state Release without a write restores
    bool held = false;       // an event arrived during the claim
    bool held_gone = false;  // ... the pod was deleted
    PodEntry held_event{};   // ... the newest one
  };
  // Replaces the pod's counted allocation (nullopt: none) and version.
  void SetEntryLocked(const std::string& key, std::optional<PodAllocation> allocation, uint64_t rv);
  // Applies an event unless it is older than the pod's version; holds it back while claimed.
  void EventLocked(const std::string& key, std::optional<PodAllocation> allocation, uint64_t rv);
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
  std::unordered_map<std::string, PodEntry> pods_;                   // by pod key
  std::unordered_map<std::string, Claimed> claims_;                  // pods being written
  size_t allocated_pods_ = 0;                                        // entries with allocation
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
