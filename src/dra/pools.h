// The resource pools of ResourceSlices and which of their devices a node can use, as
// kube-scheduler's structured allocator gathers them (docs/DRA.md, "How claims are allocated").
// Internal to the allocator; pure functions over JSON the caller keeps alive.
#ifndef HAMI_DRA_POOLS_H_
#define HAMI_DRA_POOLS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dra/capacity.h"

namespace hami::dra {

// One pool (driver + pool name) at its highest generation.
struct Pool {
  std::string driver;
  std::string name;
  int64_t generation = 0;
  // The slices at that generation, in the order given.
  std::vector<const nlohmann::json*> slices;
  // Fewer slices at the generation than spec.pool.resourceSliceCount: the driver is writing
  // the pool; its devices are not allocated until it is whole.
  bool incomplete = false;
  int64_t want_slices = 0;
  // spec.sharedCounters of its slices: counter set -> counter -> value.
  std::map<std::string, std::map<std::string, Amount>> counter_sets;
};

// Pools of `slices` in the order of their first slice. Slices without spec.driver or
// spec.pool.name are left out.
std::vector<Pool> GatherPools(const std::vector<nlohmann::json>& slices);

// Where a device may be used: only on one node (spec.nodeName: the allocation gets the node's
// name as its node selector), on nodes a selector matches, or on all nodes.
struct Locality {
  enum class Kind { kNode, kSelector, kAll } kind = Kind::kAll;
  const nlohmann::json* selector = nullptr;  // kSelector: a core NodeSelector
};

// A device of a pool that `node` can use.
struct NodeDevice {
  const Pool* pool = nullptr;
  const nlohmann::json* slice = nullptr;
  const nlohmann::json* device = nullptr;  // the entry of slice.spec.devices
  std::string name;
  std::string key;  // "<driver>/<pool>/<device>"
  Locality locality;
};

// The devices of `pool` on `node` (a Node object), in slice order: slices whose spec.nodeName
// is the node's name, spec.allNodes, or a spec.nodeSelector matching the node; with
// spec.perDeviceNodeSelection, devices whose own nodeName/allNodes/nodeSelector do.
std::vector<NodeDevice> DevicesOnNode(const Pool& pool, const nlohmann::json& node);

// Whether a core NodeSelector (nodeSelectorTerms, ORed; within a term matchExpressions on
// labels and matchFields on metadata.name, ANDed) matches `node`.
bool NodeSelectorMatches(const nlohmann::json& selector, const nlohmann::json& node);

// "<driver>/<pool>/<device>".
std::string DeviceKey(const std::string& driver, const std::string& pool,
                      const std::string& device);

}  // namespace hami::dra

#endif  // HAMI_DRA_POOLS_H_
