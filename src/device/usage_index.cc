#include "device/usage_index.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>

#include "common/strings.h"
#include "protocol/keys.h"

namespace hami::device {
namespace {

// Device entries per GPU over every container (init ones too): each should have a reservation
// when the GPU is in MIG mode.
void CountMigEntries(const protocol::PodDevices& devices, std::map<std::string, int32_t>* out) {
  for (const auto& container : devices) {
    for (const auto& d : container) ++(*out)[d.uuid];
  }
}

// The pod's hami.io/vgpu-mig-allocations as reservations, and per reserved GPU the entries
// without one (docs/protocol.md#mig).
void AddMigReservations(const PodView& pod, const std::map<std::string, int32_t>& entries,
                        PodAllocation* out) {
  const std::string* raw = FindValue(pod.annotations, protocol::kVgpuMigAllocationsKey);
  if (!raw) return;
  auto decoded = protocol::DecodeMigAllocations(*raw);
  if (!decoded) return;
  std::map<std::string, int32_t> reserved;
  for (auto& a : *decoded) {
    ++reserved[a.gpu_uuid];
    out->mig.push_back(MigReservation{std::move(a.gpu_uuid),
                                      MigInstance{std::move(a.profile), a.placement, a.runtime}});
  }
  for (const auto& [uuid, count] : reserved) {
    auto e = entries.find(uuid);
    int32_t used = e == entries.end() ? 0 : e->second;
    out->mig_unreserved[uuid] = std::max(used - count, 0);
  }
}

}  // namespace

Result<std::optional<PodAllocation>> PodAllocationFromPod(const Registry& registry,
                                                          const PodView& pod) {
  std::optional<PodAllocation> none;
  std::map<std::string, int32_t> entries;  // device entries per GPU
  auto node = pod.annotations.find(std::string(protocol::kVgpuNodeKey));
  if (node == pod.annotations.end() || node->second.empty()) return none;
  if (pod.phase == "Succeeded" || pod.phase == "Failed") return none;
  PodAllocation out;
  out.key = pod.Key();
  out.namespace_name = pod.namespace_name;
  out.node = node->second;
  for (const Device* device : registry.All()) {
    // Each backend reads its own allocation (Device::PodAllocated) and says how it counts
    // (Device::UsageDeltas, HAMi AddResourceUsage).
    auto decoded = device->PodAllocated(pod.annotations);
    if (!decoded) return Error{"pod " + Quote(pod.Key()) + ": " + decoded.error()};
    if (!decoded->has_value()) continue;
    // The tag is kept in the pod's deltas, so removing the pod takes back exactly what it added
    // even if its annotations changed since.
    std::string tag = device->UsageTag(pod.annotations);
    for (auto& d : device->UsageDeltas(**decoded, pod.init_containers.size(), pod.init_done)) {
      d.tag = tag;
      out.deltas.push_back(std::move(d));
    }
    CountMigEntries(**decoded, &entries);
  }
  if (out.deltas.empty()) return none;
  AddMigReservations(pod, entries, &out);
  return std::optional<PodAllocation>(std::move(out));
}

namespace {

constexpr std::string_view kMigModeName = "mig";

// A pod never frees what others hold: a negative size counts as 0 (the decoder already refuses
// one), the same way on add and on remove so the counters stay exact.
int64_t Held(int32_t v) { return std::max<int64_t>(v, 0); }

// A row's int32 field from a counter: never below zero, never wrapped past int32.
int32_t ToRow(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, 0, std::numeric_limits<int32_t>::max()));
}

}  // namespace

void UsageIndex::ApplyLocked(const PodAllocation& allocation, int sign) {
  auto& node = usage_[allocation.node];
  auto& ns = namespaces_[allocation.namespace_name];
  for (const auto& r : allocation.mig) {
    std::vector<MigInstance>& held = node[r.uuid].mig;
    if (sign > 0) {
      held.push_back(r.instance);
    } else if (auto it = std::find(held.begin(), held.end(), r.instance); it != held.end()) {
      held.erase(it);
    }
  }
  for (const auto& d : allocation.deltas) {
    Counters& c = node[d.uuid];
    c.used += sign * std::max(d.slots, 1);
    c.usedmem += sign * Held(d.usedmem);
    c.usedcores += sign * Held(d.usedcores);
    if (!d.tag.empty()) {
      auto tag = c.tags.try_emplace(d.tag, 0).first;
      tag->second += sign * std::max(d.slots, 1);
      if (tag->second == 0) c.tags.erase(tag);
    }
    auto unreserved = allocation.mig_unreserved.find(d.uuid);
    c.mig_unreserved +=
        sign * (unreserved == allocation.mig_unreserved.end() ? 1 : unreserved->second);
  }
  // Erased once every field is back to zero (a reservation may name a GPU without a delta).
  for (const auto& d : allocation.deltas) {
    if (auto it = node.find(d.uuid); it != node.end() && it->second.Empty()) node.erase(it);
  }
  for (const auto& r : allocation.mig) {
    if (auto it = node.find(r.uuid); it != node.end() && it->second.Empty()) node.erase(it);
  }
  for (const auto& d : allocation.deltas) {
    Totals& t = ns[d.vendor];
    t.usedmem += sign * Held(d.usedmem);
    t.usedcores += sign * Held(d.usedcores);
    if (t == Totals{}) ns.erase(d.vendor);
  }
  if (node.empty()) usage_.erase(allocation.node);
  if (ns.empty()) namespaces_.erase(allocation.namespace_name);
}

void UsageIndex::MergeUsageLocked(NodeUsage* row) const {
  static const Counters kNone;
  auto u = usage_.find(row->name);
  for (auto& d : row->devices) {
    const Counters* c = &kNone;
    if (u != usage_.end()) {
      if (auto it = u->second.find(d.id); it != u->second.end()) c = &it->second;
    }
    d.used = ToRow(c->used);
    d.usedmem = ToRow(c->usedmem);
    d.usedcores = ToRow(c->usedcores);
    d.mig_in_use = c->mig;
    d.pod_tags.clear();
    for (const auto& [tag, n] : c->tags) d.pod_tags.emplace(tag, ToRow(n));
    d.mig_inconsistent = d.mode == kMigModeName ? c->mig_unreserved > 0 : !c->mig.empty();
  }
  if (u == usage_.end()) return;
  // A reservation on a GPU the node does not register: no MIG device of it can be trusted.
  for (const auto& entry : u->second) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string& uuid = entry.first;
    if (entry.second.mig.empty()) continue;
    bool known = std::any_of(row->devices.begin(), row->devices.end(),
                             [&](const DeviceUsage& d) { return d.id == uuid; });
    if (known) continue;
    for (auto& d : row->devices) d.mig_inconsistent |= d.mode == kMigModeName;
    break;
  }
}

void UsageIndex::RefreshLocked(const std::string& node) {
  auto n = nodes_.find(node);
  if (n == nodes_.end()) return;
  auto row = std::make_shared<NodeUsage>(*n->second);
  MergeUsageLocked(row.get());
  n->second = std::move(row);
}

void UsageIndex::SetNode(NodeUsage node) {
  std::unique_lock lock(mu_);
  MergeUsageLocked(&node);
  std::string name = node.name;
  nodes_[name] = std::make_shared<const NodeUsage>(std::move(node));
}

void UsageIndex::RemoveNode(const std::string& name) {
  std::unique_lock lock(mu_);
  nodes_.erase(name);
}

void UsageIndex::SetEntryLocked(const std::string& key, std::optional<PodAllocation> allocation,
                                uint64_t rv) {
  auto [it, inserted] = pods_.try_emplace(key);
  PodEntry& entry = it->second;
  if (entry.allocation) {
    ApplyLocked(*entry.allocation, -1);
    if (!allocation || entry.allocation->node != allocation->node) {
      RefreshLocked(entry.allocation->node);
    }
    --allocated_pods_;
  }
  entry.allocation = std::move(allocation);
  entry.rv = rv;
  if (entry.allocation) {
    ApplyLocked(*entry.allocation, +1);
    RefreshLocked(entry.allocation->node);
    ++allocated_pods_;
  }
}

void UsageIndex::EventLocked(const std::string& key, std::optional<PodAllocation> allocation,
                             uint64_t rv) {
  if (auto c = claims_.find(key); c != claims_.end()) {
    Claimed& claim = c->second;
    if (!claim.held_gone && (!claim.held || rv == 0 || rv >= claim.held_event.rv)) {
      claim.held = true;
      claim.held_event = PodEntry{std::move(allocation), rv};
    }
    return;
  }
  auto it = pods_.find(key);
  if (it != pods_.end() && rv != 0 && rv < it->second.rv) return;  // older than what we have
  SetEntryLocked(key, std::move(allocation), rv);
}

void UsageIndex::UpsertPod(PodAllocation allocation, uint64_t rv) {
  std::unique_lock lock(mu_);
  std::string key = allocation.key;
  EventLocked(key, std::move(allocation), rv);
}

bool UsageIndex::RemovePod(const std::string& key, uint64_t rv) {
  std::unique_lock lock(mu_);
  auto it = pods_.find(key);
  const bool held = it != pods_.end() && it->second.allocation.has_value();
  EventLocked(key, std::nullopt, rv);
  return held;
}

void UsageIndex::ForgetPod(const std::string& key) {
  std::unique_lock lock(mu_);
  if (auto c = claims_.find(key); c != claims_.end()) {
    c->second.held = true;
    c->second.held_gone = true;
    return;
  }
  if (pods_.count(key) == 0) return;
  SetEntryLocked(key, std::nullopt, 0);
  pods_.erase(key);
}

std::optional<PodAllocation> UsageIndex::Claim(const std::string& key) {
  std::unique_lock lock(mu_);
  Claimed claim;
  if (auto it = pods_.find(key); it != pods_.end()) {
    claim.before = it->second;
    SetEntryLocked(key, std::nullopt, it->second.rv);
  }
  std::optional<PodAllocation> out = claim.before.allocation;
  claims_[key] = std::move(claim);
  return out;
}

void UsageIndex::SetClaimed(const std::string& key, std::optional<PodAllocation> allocation) {
  std::unique_lock lock(mu_);
  if (claims_.count(key) == 0) return;
  auto it = pods_.find(key);
  SetEntryLocked(key, std::move(allocation), it == pods_.end() ? 0 : it->second.rv);
}

void UsageIndex::Release(const std::string& key, std::optional<Written> written) {
  std::unique_lock lock(mu_);
  auto c = claims_.find(key);
  if (c == claims_.end()) return;
  Claimed claim = std::move(c->second);
  claims_.erase(c);
  PodEntry outcome =
      written ? PodEntry{std::move(written->allocation), written->rv} : std::move(claim.before);
  SetEntryLocked(key, std::move(outcome.allocation), outcome.rv);
  if (!claim.held) return;
  if (claim.held_gone) {
    SetEntryLocked(key, std::nullopt, 0);
    pods_.erase(key);
    return;
  }
  EventLocked(key, std::move(claim.held_event.allocation), claim.held_event.rv);
}

UsageIndex::Snapshot UsageIndex::Rows(const std::vector<std::string>& names) const {
  SharedSnapshot shared = SharedRows(names);
  Snapshot out;
  out.nodes.reserve(shared.nodes.size());
  for (const auto& row : shared.nodes) out.nodes.push_back(*row);
  out.missing = std::move(shared.missing);
  return out;
}

UsageIndex::SharedSnapshot UsageIndex::SharedRows(const std::vector<std::string>& names) const {
  SharedSnapshot out;
  out.nodes.reserve(names.size());
  std::shared_lock lock(mu_);
  for (const auto& name : names) {
    auto n = nodes_.find(name);
    if (n == nodes_.end()) {
      out.missing.push_back(name);
      continue;
    }
    out.nodes.push_back(n->second);
  }
  return out;
}

std::vector<std::string> UsageIndex::NodeNames() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  out.reserve(nodes_.size());
  for (const auto& [name, node] : nodes_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

size_t UsageIndex::NodeCount() const {
  std::shared_lock lock(mu_);
  return nodes_.size();
}

std::map<std::string, UsageIndex::Totals> UsageIndex::NamespaceUsage(
    const std::string& namespace_name) const {
  std::shared_lock lock(mu_);
  auto it = namespaces_.find(namespace_name);
  return it == namespaces_.end() ? std::map<std::string, Totals>{} : it->second;
}

std::optional<PodAllocation> UsageIndex::Pod(const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = pods_.find(key);
  if (it == pods_.end()) return std::nullopt;
  return it->second.allocation;
}

size_t UsageIndex::PodCount() const {
  std::shared_lock lock(mu_);
  return allocated_pods_;
}

void UsageIndex::Rebuild(std::vector<NodeUsage> nodes, std::vector<PodAllocation> pods) {
  std::unique_lock lock(mu_);
  nodes_.clear();
  usage_.clear();
  pods_.clear();
  claims_.clear();
  namespaces_.clear();
  allocated_pods_ = 0;
  // No rows yet: SetEntryLocked's row refreshes are no-ops until the rows are built below.
  for (auto& p : pods) {
    std::string key = p.key;
    SetEntryLocked(key, std::move(p), 0);
  }
  // Rows once the usage is complete (one copy per node, not one per pod).
  for (auto& n : nodes) {
    MergeUsageLocked(&n);
    std::string name = n.name;
    nodes_[name] = std::make_shared<const NodeUsage>(std::move(n));
  }
}

NamespaceQuota NamespaceQuotaFor(const Registry& registry,
                                 const std::map<std::string, int64_t>& limits,
                                 const std::map<std::string, UsageIndex::Totals>& used) {
  NamespaceQuota out;
  auto add = [&](const std::string& resource, int64_t usage) {
    if (resource.empty()) return;
    auto limit = limits.find(resource);
    if (limit == limits.end() && usage == 0) return;
    QuotaEntry& e = out[resource];
    e.used += usage;
    if (limit != limits.end()) e.limit = limit->second, e.limit_set = true;
  };
  for (const Device* device : registry.All()) {
    auto u = used.find(device->VendorKey());
    UsageIndex::Totals totals = u == used.end() ? UsageIndex::Totals{} : u->second;
    add(device->Info().memory_resource, totals.usedmem);
    add(device->Info().core_resource, totals.usedcores);
  }
  return out;
}

}  // namespace hami::device
