// Internals of the structured allocator (allocator.h), shared by allocator.cc (the index and the
// output), allocator_search.cc (the checks and the search) and allocator_explain.cc (why a node
// failed). Not for other modules.
#ifndef HAMI_DRA_ALLOCATOR_INTERNAL_H_
#define HAMI_DRA_ALLOCATOR_INTERNAL_H_

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "dra/allocator.h"
#include "dra/capacity.h"
#include "dra/cel.h"
#include "dra/pools.h"

namespace hami::dra::internal {

// obj[a][b]... when each step is an object holding the key, else nullptr.
const Json* Find(const Json& obj, const char* a, const char* b = nullptr, const char* c = nullptr);
std::string Str(const Json& obj, const char* key);

// Calls f(counter_set, counter, amount) for each counter `device` draws on its pool's counter
// sets (consumesCounters[].counters, in order); an entry whose counters are not an object, or a
// value that does not parse, draws nothing.
template <typename F>
void ForEachCounterDrawn(const Json& device, F&& f) {
  const Json* consumes = Find(device, "consumesCounters");
  if (consumes == nullptr || !consumes->is_array()) return;
  for (const Json& c : *consumes) {
    const Json* counters = Find(c, "counters");
    if (counters == nullptr || !counters->is_object()) continue;
    const std::string set = Str(c, "counterSet");
    for (const auto& [name, v] : counters->items()) {
      if (auto need = ParseAmount(Str(v, "value"))) f(set, name, *need);
    }
  }
}

// "domain/name" for a capacity or attribute name of a device of `driver` (bare names are in
// the driver's domain).
std::string Qualified(const std::string& name, const std::string& driver);

// What the allocations known to the index take of one device.
struct DeviceUse {
  int dedicated = 0;                         // results without a shareID
  int shares = 0;                            // results with one
  std::map<std::string, __int128> consumed;  // qualified capacity name -> nanos
  bool empty() const { return dedicated == 0 && shares == 0; }
};

class Usage {
 public:
  // Adds (sign +1) or removes (-1) the results of a status.allocation.
  void Apply(const Json& allocation, int sign);
  const DeviceUse* Get(const std::string& key) const;

 private:
  std::map<std::string, DeviceUse> by_device_;
};

// Compiled CEL programs by expression; thread-safe.
class CelCache {
 public:
  std::shared_ptr<const Result<CelProgram>> Get(const std::string& expression);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Result<CelProgram>>> programs_;
};

struct IndexData {
  std::map<std::string, Json> classes;
  std::vector<Json> slices;
  std::vector<Pool> pools;  // point into `slices`
  // Pools whose slices all name a node (spec.nodeName), by node; the others may be anywhere.
  // Indexes into `pools`, ascending.
  std::map<std::string, std::vector<size_t>> pools_by_node;
  std::vector<size_t> pools_anywhere;
  // The pools that may have devices on `node_name`, in `pools` order.
  std::vector<const Pool*> PoolsFor(const std::string& node_name) const;
  Usage usage;
  mutable CelCache cel;
};

// A request `exactly`, or one subrequest of a request `firstAvailable`.
struct Req {
  size_t claim = 0;
  std::string base;            // the request's name
  std::string sub;             // the subrequest's name, empty for `exactly`
  std::string name;            // base, or "base/sub": the result's request
  const Json* spec = nullptr;  // the exactly or subrequest object
  std::string class_name;
  const Json* device_class = nullptr;
  bool all = false;
  int64_t count = 1;
  Json tolerations = Json::array();
  std::map<std::string, Amount> capacity;  // capacity.requests, names as written
  std::vector<size_t> all_devices;         // allocationMode All: the devices it takes
};

struct Request {
  std::vector<Req> alts;  // one for `exactly`
  bool first_available = false;
  size_t selected = 0;
};

// matchAttribute / distinctAttribute over the devices of some of a claim's requests.
struct Constraint {
  bool match = true;  // false: distinct
  std::string attribute;
  std::set<std::string> requests;   // empty: all
  std::vector<std::string> values;  // of the devices added, in order (a stack)
  bool AppliesTo(const Req& r) const;
};

struct Claim {
  const Json* object = nullptr;
  std::string id;  // namespace/name
  std::vector<Request> requests;
  std::vector<Constraint> constraints;
};

// What one allocation (a result) takes of a device; by qualified capacity name.
struct Take {
  const Req* req = nullptr;
  size_t device = 0;
  bool shared = false;
  bool counted = false;                    // drew the device's counters (its first allocation)
  std::map<std::string, Amount> consumed;  // shared: by qualified capacity name
  std::map<std::string, Amount> written;   // shared: by the name the device gives it
  std::vector<size_t> constraints;         // indexes of the claim's constraints it was added to
};

// What a request would consume of a device, before looking at what is free.
struct DeviceConsumption {
  std::string reason;  // non-empty: the device cannot serve the request at all
  std::map<std::string, Consumption> by_capacity;  // qualified name
  std::map<std::string, std::string> raw_names;    // qualified -> as the device writes it
  std::map<std::string, Amount> values;            // qualified -> the capacity's value
  std::map<std::string, bool> requested;           // qualified -> named by the request
};

enum class Verdict { kOk, kRejected, kError };

struct Check {
  Verdict verdict = Verdict::kOk;
  std::string why;  // kRejected: for a human; kError: the error
};

// One AllocateOnNode call.
class Run {
 public:
  Run(const IndexData& index, const Json& node);

  Status ParseClaims(const std::vector<Json>& claims);
  // Classes, CEL programs, the node's devices, allocationMode All. False: Failure() says why.
  bool Prepare();
  bool Search();
  NodeFailure Failure();
  std::vector<Json> Allocations(const std::function<std::string()>& share_id) const;

 private:
  struct Allocating {
    int dedicated = 0;
    int shares = 0;
    std::map<std::string, __int128> consumed;
  };

  Result<Req> ParseReq(const Json& spec, size_t claim, const std::string& base,
                       const std::string& sub, const std::string& where);
  // Class and request selectors (cached per request and device).
  Check Selectable(const Req& r, size_t device);
  const DeviceConsumption& Consume(const Req& r, size_t device);
  // Whether `r` can take `device` now. `alone`: ignore what this pod's search holds.
  Check Fits(const Req& r, size_t device, bool alone);
  Check Counters(size_t device, bool alone) const;
  bool TakeDevice(const Req& r, size_t device);
  void Release(size_t claim);
  bool Enter(size_t claim, size_t request);
  bool Continue(size_t claim, size_t request, size_t alt, size_t n, size_t start);
  const CelDevice& CelOf(size_t device);
  std::string AttributeValue(size_t device, const std::string& attribute) const;
  std::string Prefix(const Req& r) const;
  void Explain(NodeFailure& failure);

  const IndexData& index_;
  const Json& node_;
  std::string node_name_;
  std::vector<Claim> claims_;
  std::vector<NodeDevice> devices_;
  std::vector<std::optional<CelDevice>> cel_devices_;
  std::vector<std::string> pool_notes_;  // pools left out, for the failure
  // Counters free per pool (address of the Pool), after the index's allocations.
  std::map<const Pool*, std::map<std::string, std::map<std::string, __int128>>> free_counters_;
  std::map<const Pool*, std::map<std::string, std::map<std::string, __int128>>> taken_counters_;
  std::vector<Allocating> allocating_;      // per device
  std::vector<std::vector<Take>> results_;  // per claim
  std::map<std::pair<const Req*, size_t>, Check> selectable_;
  std::map<std::pair<const Req*, size_t>, DeviceConsumption> consumption_;
  std::vector<std::string> errors_;  // fatal: the pod cannot be allocated on this node
  size_t steps_ = 0;
};

}  // namespace hami::dra::internal

namespace hami::dra {
struct Allocator::Index : internal::IndexData {};
}  // namespace hami::dra

#endif  // HAMI_DRA_ALLOCATOR_INTERNAL_H_
