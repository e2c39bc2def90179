#include "device/vendors/nvidia/nvidia.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>

#include "common/strings.h"
#include "device/vendor_support.h"
#include "device/vendors/nvidia/mig.h"
#include "protocol/keys.h"
#include "protocol/node_register.h"
#include "protocol/quantity.h"

namespace hami::device::nvidia {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

protocol::VendorInfo MakeInfo(const NvidiaConfig& config) {
  protocol::VendorInfo info = *protocol::FindVendor(kVendorKey);
  info.count_resource = config.resource_count_name;
  info.memory_resource = config.resource_memory_name;
  info.memory_percentage_resource = config.resource_memory_percentage_name;
  info.core_resource = config.resource_core_name;
  info.priority_resource = config.resource_priority_name;
  return info;
}

// The trimmed, non-empty items of a CSV annotation value.
std::vector<std::string_view> Items(std::string_view csv) { return SplitNonEmpty(csv, ','); }

// A use/nouse list pair, given the two annotation values (null = absent).
template <typename Match>
bool CheckListValues(const std::string* use, const std::string* nouse, Match match) {
  if (nouse) {
    for (std::string_view item : Items(*nouse)) {
      if (match(item)) return false;
    }
  }
  if (use) {
    auto items = Items(*use);
    if (items.empty()) return true;
    return std::any_of(items.begin(), items.end(), match);
  }
  return true;
}

bool TypeInLists(const std::string* use, const std::string* nouse, std::string_view device_type) {
  std::string type;  // lower-cased on first use: most pods name no type at all
  return CheckListValues(use, nouse, [&](std::string_view item) {
    if (type.empty()) type = ToLower(device_type);
    return type.find(ToLower(item)) != std::string::npos;
  });
}

bool UuidInLists(const std::string* use, const std::string* nouse, std::string_view uuid) {
  return CheckListValues(use, nouse, [&](std::string_view item) { return item == uuid; });
}

// The rejections of one Fit by reason (protocol constants), counted in place instead of with a
// key string and a map node per rejection; Flush adds them to `out` (one key per reason).
class ReasonTally {
 public:
  explicit ReasonTally(protocol::ReasonCounts* out) : out_(out) {}
  void Add(std::string_view reason, int n = 1) {
    for (size_t i = 0; i < size_; ++i) {
      if (counts_[i].first == reason) {
        counts_[i].second += n;
        return;
      }
    }
    if (size_ == counts_.size()) {
      (*out_)[std::string(reason)] += n;
      return;
    }
    counts_[size_++] = {reason, n};
  }
  void Flush() {
    for (size_t i = 0; i < size_; ++i) (*out_)[std::string(counts_[i].first)] += counts_[i].second;
    size_ = 0;
  }

 private:
  protocol::ReasonCounts* out_;
  std::array<std::pair<std::string_view, int>, 16> counts_{};
  size_t size_ = 0;
};

// Percentage: a whole number; above 100 (even beyond int32) is clamped to 100, zero and negative
// values are "not given" (kPercentUnset).
Result<int32_t> ParsePercentage(std::string_view resource, std::string_view value) {
  auto v = protocol::ParseDeviceCount(resource, value);
  if (v) return *v > 100 ? 100 : (*v > 0 ? *v : kPercentUnset);
  auto q = protocol::ParseQuantity(value);
  if (q && q->negative) return kPercentUnset;
  if (q && q->exp10 >= 0 && q->exp2 >= 0) return 100;  // a whole number past int32
  return std::move(v).take_error();
}

// Pair scores between the distinct devices among the passed ones, read once per pick.
// Score a-b is a's last entry's score for b, else b's for a, else 0 (HAMi's lookup, which the
// spec writes as "a's entry for b, else b's entry for a").
class PairTable {
 public:
  PairTable(const std::vector<const DeviceUsage*>& passed, const protocol::PairScores& scores) {
    std::map<std::string_view, size_t> index;
    for (const DeviceUsage* d : passed) {
      auto [it, added] = index.emplace(d->id, index.size());
      position_id_.push_back(it->second);
    }
    size_t d = index.size();
    std::vector<std::vector<const protocol::DevicePairScore*>> entries(d);
    for (const auto& entry : scores) {
      if (auto it = index.find(entry.uuid); it != index.end()) {
        entries[it->second].push_back(&entry);
      }
    }
    std::vector<std::string_view> ids(d);
    for (const auto& [id, i] : index) ids[i] = id;
    auto from = [&](size_t a, size_t b) -> const int64_t* {
      for (auto e = entries[a].rbegin(); e != entries[a].rend(); ++e) {
        if (auto it = (*e)->score.find(std::string(ids[b])); it != (*e)->score.end()) {
          return &it->second;
        }
      }
      return nullptr;
    };
    table_.assign(d * d, 0);
    for (size_t a = 0; a < d; ++a) {
      for (size_t b = 0; b < d; ++b) {
        const int64_t* ab = from(a, b);
        const int64_t* ba = ab || a == b ? nullptr : from(b, a);
        table_[a * d + b] = ab ? *ab : (ba ? *ba : 0);
      }
    }
    distinct_ = d;
  }
  // The score between passed positions i and j (i != j; a MIG GPU passes once per instance),
  // read from the earlier position's side as HAMi's search reads it.
  int64_t operator()(size_t i, size_t j) const {
    if (i > j) std::swap(i, j);
    return table_[position_id_[i] * distinct_ + position_id_[j]];
  }

 private:
  std::vector<size_t> position_id_;  // passed position -> distinct device
  size_t distinct_ = 0;
  std::vector<int64_t> table_;  // distinct x distinct
};

size_t DistinctIds(const std::vector<const DeviceUsage*>& passed) {
  std::vector<std::string_view> ids;
  for (const DeviceUsage* d : passed) ids.push_back(d->id);
  std::sort(ids.begin(), ids.end());
  return static_cast<size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

// a x b, or UINT64_MAX when that overflows.
uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::numeric_limits<uint64_t>::max();
  }
  return a * b;
}

// C(n, k), or anything above `cap` once it passes `cap`.
uint64_t ChooseUpTo(uint64_t n, uint64_t k, uint64_t cap) {
  k = std::min(k, n - k);
  uint64_t c = 1;
  for (uint64_t i = 1; i <= k; ++i) {
    // c * (n - k + i) / i is exact at each step; past the cap the value no longer matters.
    c = SaturatingMul(c, n - k + i) / i;
    if (c > cap) return cap + 1;
  }
  return c;
}

// Every combination in lexicographic order of positions; the first maximum wins.
std::vector<size_t> ExhaustiveBest(const PairTable& pair, size_t n, size_t k) {
  std::vector<size_t> combo(k), best;
  for (size_t i = 0; i < k; ++i) combo[i] = i;
  int64_t highest = 0;
  while (true) {
    int64_t sum = 0;
    for (size_t a = 0; a < k; ++a) {
      for (size_t b = a + 1; b < k; ++b) sum += pair(combo[a], combo[b]);
    }
    if (best.empty() || sum > highest) best = combo, highest = sum;
    size_t i = k;
    while (i > 0 && combo[i - 1] == n - k + (i - 1)) --i;
    if (i == 0) break;
    ++combo[i - 1];
    for (size_t j = i; j < k; ++j) combo[j] = combo[j - 1] + 1;
  }
  return best;
}

// The pair with the highest score (first in lexicographic order), then k - 2 times the position
// adding the most to the chosen ones' sum (the lowest position on ties). Ascending positions.
std::vector<size_t> GreedyBest(const PairTable& pair, size_t n, size_t k) {
  size_t first = 0, second = 1;
  int64_t highest = pair(0, 1);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      if (pair(i, j) > highest) first = i, second = j, highest = pair(i, j);
    }
  }
  std::vector<bool> taken(n, false);
  std::vector<int64_t> gain(n, 0);
  std::vector<size_t> out;
  auto take = [&](size_t p) {
    taken[p] = true;
    out.push_back(p);
    for (size_t j = 0; j < n; ++j) {
      if (!taken[j]) gain[j] += pair(j, p);
    }
  };
  take(first);
  take(second);
  while (out.size() < k) {
    size_t pick = n;
    for (size_t j = 0; j < n; ++j) {
      if (!taken[j] && (pick == n || gain[j] > gain[pick])) pick = j;
    }
    take(pick);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool CheckUuid(const StringMap& annotations, std::string_view use_key, std::string_view nouse_key,
               std::string_view uuid) {
  return UuidInLists(FindValue(annotations, use_key), FindValue(annotations, nouse_key), uuid);
}

bool CheckType(const StringMap& annotations, std::string_view use_key, std::string_view nouse_key,
               std::string_view device_type) {
  return TypeInLists(FindValue(annotations, use_key), FindValue(annotations, nouse_key),
                     device_type);
}

std::vector<size_t> PickByTopology(const std::vector<const DeviceUsage*>& passed, int32_t nums,
                                   const protocol::PairScores& scores, SearchBudget* budget) {
  size_t n = passed.size();
  size_t k = nums > 0 ? static_cast<size_t>(nums) : 0;
  std::vector<size_t> best;
  if (k == 0 || k > n) return best;
  if (k == n) {
    for (size_t i = 0; i < n; ++i) best.push_back(i);
    return best;
  }
  auto spend = [&](uint64_t steps) { return !budget || budget->TrySpend(steps); };
  uint64_t d = DistinctIds(passed);
  uint64_t table_steps = d * d;
  if (k == 1) {
    if (!spend(SaturatingMul(n, n) / 2 + table_steps)) return best;
    PairTable pair(passed, scores);
    int64_t lowest = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t sum = 0;
      for (size_t j = 0; j < n; ++j) sum += j == i ? 0 : pair(i, j);
      if (best.empty() || sum < lowest) best = {i}, lowest = sum;
    }
    return best;
  }
  // Exhaustive when it fits one node's share: HAMi's answer exactly. Otherwise greedy.
  uint64_t pairs = k * (k - 1) / 2;
  uint64_t combos = ChooseUpTo(n, k, kNodeSearchSteps);
  uint64_t exhaustive = SaturatingMul(combos, pairs) + table_steps;
  if (combos <= kNodeSearchSteps && exhaustive <= kNodeSearchSteps && spend(exhaustive)) {
    return ExhaustiveBest(PairTable(passed, scores), n, k);
  }
  if (!spend(SaturatingMul(n, n) / 2 + SaturatingMul(n, k) + table_steps)) return best;
  return GreedyBest(PairTable(passed, scores), n, k);
}

NvidiaDevice::NvidiaDevice(NvidiaConfig config)
    : config_(std::move(config)), info_(MakeInfo(config_)) {}

Result<std::vector<DeviceUsage>> NvidiaDevice::NodeDevices(const NodeView& node) const {
  std::vector<DeviceUsage> out;
  const std::string* value = FindValue(node.annotations, info_.register_key);
  if (!value) return out;
  std::string_view text = Trim(*value);
  // JSON since v2.8; older plugins wrote the colon form, which we still read.
  bool json = text.empty() || text.front() == '[' || text == "null";
  auto devices =
      json ? protocol::DecodeNodeRegister(text) : protocol::DecodeNodeRegisterLegacy(text);
  if (!devices) return Error{"annotation " + info_.register_key + ": " + devices.error()};
  for (const auto& info : *devices) out.push_back(UsageFromDeviceInfo(info, info_.vendor_key));
  return out;
}

Result<DeviceRequest> NvidiaDevice::NormalizeRequest(const ContainerView& container) const {
  auto lookup = [&](const std::string& resource) -> const std::string* {
    if (const std::string* v = FindValue(container.limits, resource)) return v;
    return FindValue(container.requests, resource);
  };
  auto fail = [&](const std::string& why) {
    return Error{"container " + Quote(container.name) + ": " + why};
  };
  DeviceRequest req;
  const std::string* count = lookup(config_.resource_count_name);
  if (!count) return req;
  auto nums = protocol::ParseDeviceCount(config_.resource_count_name, *count);
  if (!nums) return fail(nums.error());
  if (*nums == 0) return req;
  req.nums = *nums;
  req.type = std::string(kVendorKey);
  if (const std::string* mem = lookup(config_.resource_memory_name)) {
    auto mib = protocol::ParseMemoryMiB(config_.resource_memory_name, *mem);
    if (!mib) return fail(mib.error());
    if (*mib > kInt32Max / config_.memory_factor) {
      return fail("resource " + config_.resource_memory_name + " value " + Quote(*mem) +
                  ": times memoryFactor " + std::to_string(config_.memory_factor) +
                  " exceeds 2147483647 MiB");
    }
    req.memreq = *mib * config_.memory_factor;
  }
  if (const std::string* pct = lookup(config_.resource_memory_percentage_name)) {
    auto p = ParsePercentage(config_.resource_memory_percentage_name, *pct);
    if (!p) return fail(p.error());
    req.mem_percentage = *p;
  }
  if (req.memreq == 0 && req.mem_percentage == kPercentUnset) {
    if (config_.default_memory != 0) {
      req.memreq = config_.default_memory;
    } else {
      req.mem_percentage = 100;
    }
  }
  req.coresreq = config_.default_cores;
  if (const std::string* cores = lookup(config_.resource_core_name)) {
    auto c = protocol::ParseDeviceCount(config_.resource_core_name, *cores);
    if (!c) return fail(c.error());
    req.coresreq = *c;
  }
  return req;
}

// Checks 1-3 of docs/protocol.md#nvidias-fit, which come before the numa-bind restart.
NvidiaDevice::PodSelection NvidiaDevice::Selection(const StringMap& annos) const {
  return PodSelection{.vgpu_mode = FindValue(annos, protocol::kVgpuModeKey),
                      .use_type = FindValue(annos, info_.use_type_key),
                      .nouse_type = FindValue(annos, info_.nouse_type_key),
                      .use_uuid = FindValue(annos, info_.use_uuid_key),
                      .nouse_uuid = FindValue(annos, info_.nouse_uuid_key)};
}

std::optional<std::string_view> NvidiaDevice::CheckIdentity(const DeviceUsage& dev,
                                                            const DeviceRequest& request,
                                                            const FitContext& ctx,
                                                            const PodSelection& sel) const {
  if (!dev.health || dev.mig_inconsistent) return protocol::kCardNotHealth;
  if (ctx.node && ctx.node->cordoned.count(dev.id)) return protocol::kCardCordoned;
  if (!TypeInLists(sel.use_type, sel.nouse_type, dev.type) ||
      (sel.vgpu_mode && sel.vgpu_mode->find(dev.mode) == std::string::npos) ||
      request.type != kVendorKey) {
    return protocol::kCardTypeMismatch;
  }
  return std::nullopt;
}

// Checks 5-14 of docs/protocol.md#nvidias-fit; on success `*chosen` is the device entry to
// allocate.
std::optional<std::string_view> NvidiaDevice::CheckCapacity(
    const DeviceUsage& dev, const DeviceRequest& request, const FitContext& ctx,
    const PodSelection& sel, const protocol::ContainerDevices& picked,
    protocol::ContainerDevice* chosen) const {
  if (!UuidInLists(sel.use_uuid, sel.nouse_uuid, dev.id)) return protocol::kCardUuidMismatch;
  if (dev.count <= dev.used) return protocol::kCardTimeSlicingExhausted;
  if (ctx.policy.mutex && dev.used > 0) return protocol::kExclusiveDeviceAllocateConflict;
  int32_t cores = std::min(request.coresreq, 100);
  int32_t memreq = request.memreq;
  if (memreq <= 0 && request.mem_percentage != kPercentUnset) {
    memreq =
        static_cast<int32_t>(static_cast<int64_t>(dev.totalmem) * request.mem_percentage / 100);
  }
  // The pick is built (its id copied) only when the quota needs it or the device fits: most
  // rejected devices never copy their id.
  if (ctx.quota) {
    *chosen = protocol::ContainerDevice{dev.id, request.type, memreq, cores};
    if (auto reason = CheckQuota(ctx, info_, config_.memory_factor, picked, *chosen)) return reason;
  }
  if (dev.totalmem - dev.usedmem < memreq) return protocol::kCardInsufficientMemory;
  if (dev.totalcore - dev.usedcores < cores) return protocol::kCardInsufficientCore;
  if (dev.totalcore == 100 && cores == 100 && dev.used > 0) {
    return protocol::kExclusiveDeviceAllocateConflict;
  }
  if (dev.totalcore != 0 && dev.usedcores == dev.totalcore && cores == 0) {
    return protocol::kCardComputeUnitsExhausted;
  }
  // Check 15: a MIG GPU needs a profile of at least memreq with a free placement, after the
  // instances this container already took on it (mig.h).
  if (dev.mode == kMigMode && !MigFits(dev, picked, memreq)) {
    return protocol::kCardMigTopologyInfeasible;
  }
  if (!ctx.quota) *chosen = protocol::ContainerDevice{dev.id, request.type, memreq, cores};
  return std::nullopt;
}

bool NvidiaDevice::MayShareOneDevice(const DeviceRequest& request,
                                     const std::vector<const DeviceUsage*>& candidates,
                                     const PodView& pod) const {
  return IsMigRequest(request, candidates, FindValue(pod.annotations, protocol::kVgpuModeKey));
}

std::optional<Device::PickUsage> NvidiaDevice::AddPickUsage(
    DeviceUsage* dev, protocol::ContainerDevice* chosen) const {
  if (dev->mode != kMigMode) return std::nullopt;
  auto instance = AddMigUsage(dev, chosen);
  return PickUsage{.added = instance.has_value(), .instance = std::move(instance)};
}

FitResult NvidiaDevice::Fit(const std::vector<const DeviceUsage*>& candidates,
                            const DeviceRequest& request, const FitContext& ctx) const {
  FitResult r;
  r.devices_considered = static_cast<int>(candidates.size());
  if (request.nums <= 0) return r.fit = true, r;
  static const StringMap kNone;
  const StringMap& annos = ctx.pod ? ctx.pod->annotations : kNone;
  const std::string* numa_value = FindValue(annos, protocol::kNumaBindKey);
  bool numa_bind = numa_value && ParseBool(*numa_value).value_or(false);
  const PodSelection sel = Selection(annos);
  ReasonTally tally(&r.reasons);
  int32_t remaining = request.nums;
  std::optional<int64_t> numa;  // the NUMA node of the current numa-bind group
  std::vector<const DeviceUsage*> passed;
  protocol::ContainerDevices picked;
  for (size_t k = candidates.size(); k-- > 0;) {
    const DeviceUsage& dev = *candidates[k];
    if (auto reason = CheckIdentity(dev, request, ctx, sel)) {
      tally.Add(*reason);
      continue;
    }
    if (numa_bind && numa != dev.numa) {
      // A new NUMA node: picks on the previous one cannot be completed there.
      if (!picked.empty()) tally.Add(protocol::kNumaNotFit, static_cast<int>(picked.size()));
      picked.clear();
      passed.clear();
      remaining = request.nums;
      numa = dev.numa;
    }
    protocol::ContainerDevice chosen;
    if (auto reason = CheckCapacity(dev, request, ctx, sel, picked, &chosen)) {
      tally.Add(*reason);
      continue;
    }
    if (ctx.policy.topology_aware) passed.push_back(&dev);  // only PickByTopology reads it
    picked.push_back(std::move(chosen));
    if (!ctx.policy.topology_aware && --remaining == 0) {
      r.fit = true;
      r.devices = std::move(picked);
      tally.Flush();
      return r;
    }
    // A MIG GPU may give this container another instance: visit it again (HAMi does the same),
    // at most up to its instance count.
    if (dev.mode == kMigMode && MigRoomLeft(dev, picked)) ++k;
  }
  if (ctx.policy.topology_aware && static_cast<int64_t>(passed.size()) >= request.nums) {
    static const protocol::PairScores kNoScores;
    const auto& scores = ctx.node ? ctx.node->pair_scores : kNoScores;
    std::vector<size_t> chosen = PickByTopology(passed, request.nums, scores, ctx.search_budget);
    if (chosen.empty()) {
      // The filter's search budget is spent: the node fails rather than the filter waiting.
      tally.Add(kTopologySearchBudgetSpent, static_cast<int>(picked.size()));
      tally.Flush();
      return r;
    }
    for (size_t pos : chosen) r.devices.push_back(picked[pos]);
    r.fit = true;
    tally.Flush();
    return r;
  }
  if (!picked.empty()) {
    tally.Add(protocol::kAllocatedCardsInsufficientRequest, static_cast<int>(picked.size()));
  }
  tally.Flush();
  return r;
}

}  // namespace hami::device::nvidia
