#include "device/policy.h"

#include <algorithm>
#include <array>

#include "common/strings.h"

namespace hami::device {
namespace {

// -1, 0, 1 comparison helpers; a key "asc" returns a<b.
template <typename T>
int Cmp(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int CompareByKey(GpuPolicy::Key key, const ScoredDevice& a, const ScoredDevice& b) {
  switch (key) {
    case GpuPolicy::Key::kBinpack:
      return Cmp(a.score, b.score);
    case GpuPolicy::Key::kSpread:
      return Cmp(b.score, a.score);
    case GpuPolicy::Key::kNuma:
      return Cmp(a.device->numa, b.device->numa);
  }
  return 0;
}

}  // namespace

std::optional<NodePolicy> ParseNodePolicy(std::string_view text) {
  if (text == "binpack") return NodePolicy::kBinpack;
  if (text == "spread") return NodePolicy::kSpread;
  return std::nullopt;
}

Result<GpuPolicy> ParseGpuPolicy(std::string_view text, bool strict) {
  GpuPolicy policy;
  auto parts = Split(text, ',');
  int names = 0;
  bool bare_numa = false;
  for (std::string_view raw : parts) {
    std::string_view name = Trim(raw);
    if (name == "binpack") {
      policy.keys.push_back(GpuPolicy::Key::kBinpack);
    } else if (name == "spread") {
      policy.keys.push_back(GpuPolicy::Key::kSpread);
    } else if (name == "numa") {
      policy.keys.push_back(GpuPolicy::Key::kNuma);
      bare_numa = true;
    } else if (name == "mutex") {
      policy.mutex = true;
    } else if (name == "topology-aware") {
      policy.topology_aware = true;
    } else {
      if (strict) {
        return Error{"gpu scheduler policy " + Quote(text) + ": unknown policy " + Quote(name) +
                     " (want binpack, spread, numa, mutex or topology-aware)"};
      }
      continue;
    }
    ++names;
  }
  policy.chain = names > 1 || (names == 1 && bare_numa);
  policy.mutex_only = names == 1 && policy.mutex;
  return policy;
}

double NodeScore(const std::vector<DeviceUsage>& devices) {
  double used = 0, count = 0, usedcores = 0, totalcore = 0, usedmem = 0, totalmem = 0;
  for (const auto& d : devices) {
    used += d.used;
    count += d.count;
    usedcores += d.usedcores;
    totalcore += d.totalcore;
    usedmem += d.usedmem;
    totalmem += d.totalmem;
  }
  if (count == 0 || totalcore == 0 || totalmem == 0) return 0;
  return 10 * (used / count + usedcores / totalcore + usedmem / totalmem);
}

protocol::ScoringWeights DefaultScoringWeights() { return {.slot = 1, .core = 1, .memory = 1}; }

double DeviceScore(const DeviceUsage& device, const ContainerRequests& requests,
                   const protocol::ScoringWeights& weights) {
  if (device.count == 0 || device.totalcore == 0 || device.totalmem == 0) return 0;
  double slots = 0, cores = 0, mem = 0;
  for (const auto& [vendor, req] : requests) {
    if (req.type != device.type) continue;
    slots += 1;
    cores += req.coresreq;
    if (req.mem_percentage != 0 && req.mem_percentage != kPercentUnset) {
      mem += static_cast<double>(static_cast<int64_t>(device.totalmem) * req.mem_percentage / 100);
    } else {
      mem += req.memreq;
    }
  }
  return 10 * (weights.slot * (slots + device.used) / device.count +
               weights.core * (cores + device.usedcores) / device.totalcore +
               weights.memory * (mem + device.usedmem) / device.totalmem);
}

namespace {

constexpr size_t kInsertionSortMax = 32;

// The sort keys of a policy, in order, each once: a key after its first occurrence never decides
// (the comparison by it before was equal), so a repeat in a written policy is dropped. At most
// one of each Key: no allocation (SortDevices runs once per candidate node and container).
class SortKeys {
 public:
  void Add(GpuPolicy::Key k) {
    if (std::find(begin(), end(), k) == end()) keys_[size_++] = k;
  }
  bool empty() const { return size_ == 0; }
  const GpuPolicy::Key* begin() const { return keys_.data(); }
  const GpuPolicy::Key* end() const { return keys_.data() + size_; }

 private:
  std::array<GpuPolicy::Key, 3> keys_{};  // kBinpack, kSpread, kNuma
  size_t size_ = 0;
};

}  // namespace

void SortDevices(const GpuPolicy& policy, bool numa_bind, std::vector<ScoredDevice>* devices) {
  SortKeys keys;
  bool index_tiebreak = false;
  bool by_used = false;
  using K = GpuPolicy::Key;
  if (policy.chain) {
    if (numa_bind) keys.Add(K::kNuma);
    bool has_score = false;
    for (K k : policy.keys) {
      if (numa_bind && k == K::kNuma) continue;
      keys.Add(k);
      has_score = has_score || k != K::kNuma;
    }
    if (!has_score) keys.Add(K::kSpread);
    index_tiebreak = true;
  } else if (policy.mutex_only && !numa_bind) {
    by_used = true;
  } else {
    bool binpack = !policy.keys.empty() && policy.keys.front() == K::kBinpack;
    if (numa_bind) {
      if (!binpack) {
        keys.Add(K::kNuma);
        keys.Add(K::kSpread);
      }
    } else {
      keys.Add(binpack ? K::kBinpack : K::kSpread);
      keys.Add(K::kNuma);
    }
  }
  bool binpack_numa_bind = !policy.chain && numa_bind && keys.empty();
  auto less = [&](const ScoredDevice& a, const ScoredDevice& b) {
    if (by_used) {
      int c = Cmp(b.device->used, a.device->used);
      if (c == 0) c = Cmp(a.device->numa, b.device->numa);
      return c < 0;
    }
    if (binpack_numa_bind) {
      int c = Cmp(b.device->numa, a.device->numa);
      if (c == 0) c = Cmp(a.score, b.score);
      return c < 0;
    }
    for (K k : keys) {
      int c = CompareByKey(k, a, b);
      if (c != 0) return c < 0;
    }
    return index_tiebreak && a.device->index < b.device->index;
  };
  // A node's few devices: a stable insertion sort, which allocates nothing (std::stable_sort
  // takes a buffer from the heap on every call). Both give the one stable order of `less`.
  std::vector<ScoredDevice>& v = *devices;
  if (v.size() > kInsertionSortMax) {
    std::stable_sort(v.begin(), v.end(), less);
    return;
  }
  for (size_t i = 1; i < v.size(); ++i) {
    ScoredDevice x = v[i];
    size_t j = i;
    for (; j > 0 && less(x, v[j - 1]); --j) v[j] = v[j - 1];
    v[j] = x;
  }
}

}  // namespace hami::device
