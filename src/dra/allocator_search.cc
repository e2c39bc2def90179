// The checks of one device for one request and the search with backtracking over a pod's
// claims (allocator.h), in the order kube-scheduler's allocator makes them: in use, selectors,
// capacity, counters, taints, constraints.
#include <algorithm>

#include "common/strings.h"
#include "dra/allocator_internal.h"

namespace hami::dra::internal {
namespace {

// A pod whose search takes longer than this is refused on the node rather than holding the
// scheduler: far above what nodes of a few devices and claims of a few requests need.
constexpr size_t kMaxSteps = 200000;

bool Shared(const Json& device) {
  const Json* m = Find(device, "allowMultipleAllocations");
  return m != nullptr && m->is_boolean() && m->get<bool>();
}

Amount Nanos(__int128 nanos, protocol::QuantityFormat format) { return Amount{nanos, format}; }

// Kubernetes' toleration matching for device taints.
bool Tolerates(const Json& toleration, const Json& taint) {
  const std::string effect = Str(toleration, "effect");
  if (!effect.empty() && effect != Str(taint, "effect")) return false;
  const std::string key = Str(toleration, "key");
  if (!key.empty() && key != Str(taint, "key")) return false;
  const std::string op = Str(toleration, "operator");
  if (op == "Exists") return true;
  if (op.empty() || op == "Equal") return Str(toleration, "value") == Str(taint, "value");
  return false;
}

std::string TaintText(const Json& taint) {
  return Str(taint, "key") + "=" + Str(taint, "value") + ":" + Str(taint, "effect");
}

}  // namespace

const CelDevice& Run::CelOf(size_t device) {
  auto& slot = cel_devices_[device];
  if (!slot) slot = DeviceFromSlice(*devices_[device].device, devices_[device].pool->driver);
  return *slot;
}

Check Run::Selectable(const Req& r, size_t device) {
  const auto key = std::make_pair(&r, device);
  if (auto it = selectable_.find(key); it != selectable_.end()) return it->second;
  Check out;
  auto evaluate = [&](const Json* selectors, const std::string& who) {
    if (selectors == nullptr || !selectors->is_array()) return true;
    for (size_t i = 0; i < selectors->size(); ++i) {
      const Json* e = Find((*selectors)[i], "cel", "expression");
      if (e == nullptr || !e->is_string()) continue;  // Prepare refused these
      const std::string expression = e->get<std::string>();
      auto program = index_.cel.Get(expression);
      if (!*program) continue;  // Prepare refused these
      Result<bool> matches = (*program)->Eval(CelOf(device));
      if (!matches) {
        out = {Verdict::kError, devices_[device].name + ": " + who + "selector #" +
                                    std::to_string(i) + " " + expression +
                                    ": CEL runtime error: " + matches.error()};
        return false;
      }
      if (!*matches) {
        out = {Verdict::kRejected, who + "selector " + expression + " is false"};
        return false;
      }
    }
    return true;
  };
  if (evaluate(r.device_class ? Find(*r.device_class, "spec", "selectors") : nullptr,
               "class " + Quote(r.class_name) + " ")) {
    evaluate(Find(*r.spec, "selectors"), "");
  }
  selectable_[key] = out;
  return out;
}

const DeviceConsumption& Run::Consume(const Req& r, size_t device) {
  const auto key = std::make_pair(&r, device);
  if (auto it = consumption_.find(key); it != consumption_.end()) return it->second;
  DeviceConsumption& out = consumption_[key];
  const std::string& driver = devices_[device].pool->driver;
  const Json* caps = Find(*devices_[device].device, "capacity");
  std::map<std::string, const Json*> by_name;  // qualified -> capacity entry
  if (caps != nullptr && caps->is_object()) {
    // An entry qualified with the driver's domain wins over a bare one of the same name.
    for (const auto& [name, cap] : caps->items()) {
      const std::string q = Qualified(name, driver);
      if (by_name.count(q) && name.find('/') == std::string::npos) continue;
      by_name[q] = &cap;
      out.raw_names[q] = name;
    }
  }
  std::map<std::string, Amount> requested;
  for (const auto& [name, amount] : r.capacity) {
    const std::string q = Qualified(name, driver);
    if (!by_name.count(q)) {
      out.reason = "has no capacity " + Quote(name);
      return out;
    }
    requested[q] = amount;
  }
  for (const auto& [q, cap] : by_name) {
    const auto it = requested.find(q);
    std::optional<Amount> want;
    if (it != requested.end()) want = it->second;
    auto consumed = ConsumedCapacity(*cap, want);
    if (!consumed) {
      out.reason = "capacity " + Quote(out.raw_names[q]) + ": " + consumed.error();
      return out;
    }
    out.by_capacity[q] = *consumed;
    out.requested[q] = want.has_value();
    auto value = ParseAmount(Str(*cap, "value"));
    out.values[q] = value ? *value : Amount{};
  }
  return out;
}

Check Run::Counters(size_t device, bool alone) const {
  const NodeDevice& d = devices_[device];
  const DeviceUse* use = index_.usage.Get(d.key);
  const Allocating& a = allocating_[device];
  const bool drawn = (use != nullptr && !use->empty()) || (!alone && (a.dedicated || a.shares));
  if (drawn) return {};  // a device draws its counters once, however many shares it serves
  const auto free_it = free_counters_.find(d.pool);
  const auto taken_it = taken_counters_.find(d.pool);
  Check out;
  ForEachCounterDrawn(
      *d.device, [&](const std::string& set, const std::string& name, const Amount& need) {
        if (out.verdict != Verdict::kOk) return;  // the first counter short is the reason
        __int128 free = 0;
        if (free_it != free_counters_.end()) {
          if (auto s = free_it->second.find(set); s != free_it->second.end()) {
            if (auto n = s->second.find(name); n != s->second.end()) free = n->second;
          }
        }
        if (!alone && taken_it != taken_counters_.end()) {
          if (auto s = taken_it->second.find(set); s != taken_it->second.end()) {
            if (auto n = s->second.find(name); n != s->second.end()) free -= n->second;
          }
        }
        if (need.nanos <= free) return;
        Amount total;
        if (auto s = d.pool->counter_sets.find(set); s != d.pool->counter_sets.end()) {
          if (auto n = s->second.find(name); n != s->second.end()) total = n->second;
        }
        const Amount left = Nanos(std::max<__int128>(free, 0), need.format);
        out = {Verdict::kRejected, "counter " + set + "/" + name + ": wants " + FormatAmount(need) +
                                       ", " + FormatAmount(left) + " of " + FormatAmount(total) +
                                       " free"};
      });
  return out;
}

Check Run::Fits(const Req& r, size_t device, bool alone) {
  const NodeDevice& d = devices_[device];
  const bool shared = Shared(*d.device);
  const DeviceUse* use = index_.usage.Get(d.key);
  const Allocating none;
  const Allocating& a = alone ? none : allocating_[device];
  if (!shared) {
    if ((use != nullptr && use->dedicated > 0) || a.dedicated > 0) {
      return {Verdict::kRejected, a.dedicated > 0 && (use == nullptr || use->dedicated == 0)
                                      ? "taken by another request of the pod"
                                      : "allocated to another claim"};
    }
    if ((use != nullptr && use->shares > 0) || a.shares > 0) {
      return {Verdict::kRejected,
              "serves shares of other claims; it is dedicated again only when they end"};
    }
  } else if (use != nullptr && use->dedicated > 0) {
    return {Verdict::kRejected,
            "allocated whole to a claim; it is shared only when that allocation ends"};
  }
  if (Check s = Selectable(r, device); s.verdict != Verdict::kOk) return s;
  const DeviceConsumption& c = Consume(r, device);
  if (!c.reason.empty()) return {Verdict::kRejected, c.reason};
  for (const auto& [q, consumption] : c.by_capacity) {
    const std::string& raw = c.raw_names.at(q);
    const Amount& value = c.values.at(q);
    std::string want;
    if (c.requested.at(q)) {
      const Amount& asked = r.capacity.count(raw) ? r.capacity.at(raw) : consumption.amount;
      want = "wants " + FormatAmount(asked);
      if (shared) want += " (" + FormatAmount(consumption.amount) + " after requestPolicy)";
    } else {
      want = "wants " + FormatAmount(consumption.amount) + " (not requested: the default)";
    }
    if (!consumption.violation.empty()) {
      return {Verdict::kRejected, raw + ": " + want + ": " + consumption.violation};
    }
    __int128 used = 0;
    if (shared) {
      if (use != nullptr) {
        if (auto it = use->consumed.find(q); it != use->consumed.end()) used += it->second;
      }
      if (auto it = a.consumed.find(q); it != a.consumed.end()) used += it->second;
    }
    if (used + consumption.amount.nanos > value.nanos) {
      if (!shared)
        return {Verdict::kRejected, raw + ": " + want + ", the device has " + FormatAmount(value)};
      const Amount free = Nanos(std::max<__int128>(value.nanos - used, 0), value.format);
      return {Verdict::kRejected, raw + ": " + want + ", " + FormatAmount(free) + " of " +
                                      FormatAmount(value) + " free"};
    }
  }
  if (Check k = Counters(device, alone); k.verdict != Verdict::kOk) return k;
  if (const Json* taints = Find(*d.device, "taints"); taints != nullptr && taints->is_array()) {
    for (const Json& taint : *taints) {
      const std::string effect = Str(taint, "effect");
      if (effect != "NoSchedule" && effect != "NoExecute") continue;
      const bool tolerated = std::any_of(r.tolerations.begin(), r.tolerations.end(),
                                         [&](const Json& t) { return Tolerates(t, taint); });
      if (!tolerated) {
        return {Verdict::kRejected, "taint " + TaintText(taint) + " is not tolerated"};
      }
    }
  }
  return {};
}

std::string Run::AttributeValue(size_t device, const std::string& attribute) const {
  const NodeDevice& d = devices_[device];
  const Json* attrs = Find(*d.device, "attributes");
  if (attrs == nullptr || !attrs->is_object()) return "";
  if (auto it = attrs->find(attribute); it != attrs->end()) return it->dump();
  const size_t slash = attribute.find('/');
  if (slash == std::string::npos || attribute.substr(0, slash) != d.pool->driver) return "";
  if (auto it = attrs->find(attribute.substr(slash + 1)); it != attrs->end()) return it->dump();
  return "";
}

bool Run::TakeDevice(const Req& r, size_t device) {
  const Check fits = Fits(r, device, false);
  if (fits.verdict == Verdict::kError) errors_.push_back(Prefix(r) + fits.why);
  if (fits.verdict != Verdict::kOk) return false;
  Claim& claim = claims_[r.claim];
  Take t;
  t.req = &r;
  t.device = device;
  for (size_t i = 0; i < claim.constraints.size(); ++i) {
    Constraint& con = claim.constraints[i];
    if (!con.AppliesTo(r)) continue;
    const std::string value = AttributeValue(device, con.attribute);
    const bool ok = !value.empty() && (con.match ? con.values.empty() || con.values.front() == value
                                                 : std::find(con.values.begin(), con.values.end(),
                                                             value) == con.values.end());
    if (!ok) {
      for (size_t k : t.constraints) claim.constraints[k].values.pop_back();
      return false;
    }
    con.values.push_back(value);
    t.constraints.push_back(i);
  }
  const NodeDevice& d = devices_[device];
  Allocating& a = allocating_[device];
  const DeviceUse* use = index_.usage.Get(d.key);
  t.counted = (use == nullptr || use->empty()) && a.dedicated == 0 && a.shares == 0;
  if (t.counted) {
    auto& taken = taken_counters_[d.pool];
    ForEachCounterDrawn(*d.device, [&](const std::string& set, const std::string& name,
                                       const Amount& need) { taken[set][name] += need.nanos; });
  }
  t.shared = Shared(*d.device);
  if (t.shared) {
    ++a.shares;
    const DeviceConsumption& c = Consume(r, device);
    for (const auto& [q, consumption] : c.by_capacity) {
      a.consumed[q] += consumption.amount.nanos;
      t.consumed[q] = consumption.amount;
      t.written[c.raw_names.at(q)] = consumption.amount;
    }
  } else {
    ++a.dedicated;
  }
  results_[r.claim].push_back(std::move(t));
  return true;
}

void Run::Release(size_t claim) {
  Take t = std::move(results_[claim].back());
  results_[claim].pop_back();
  for (size_t k : t.constraints) claims_[claim].constraints[k].values.pop_back();
  Allocating& a = allocating_[t.device];
  if (t.shared) {
    --a.shares;
    for (const auto& [q, amount] : t.consumed) a.consumed[q] -= amount.nanos;
  } else {
    --a.dedicated;
  }
  if (t.counted) {
    const NodeDevice& d = devices_[t.device];
    auto& taken = taken_counters_[d.pool];
    ForEachCounterDrawn(*d.device, [&](const std::string& set, const std::string& name,
                                       const Amount& need) { taken[set][name] -= need.nanos; });
  }
}

bool Run::Continue(size_t claim, size_t request, size_t alt, size_t n, size_t start) {
  if (!errors_.empty()) return false;
  if (++steps_ > kMaxSteps) {
    errors_.push_back("the search gave up after " + std::to_string(kMaxSteps) + " steps");
    return false;
  }
  const Req& r = claims_[claim].requests[request].alts[alt];
  const size_t need = r.all ? r.all_devices.size() : static_cast<size_t>(r.count);
  if (r.all && need == 0) return false;
  if (n >= need) return Enter(claim, request + 1);
  if (r.all) {
    // Every device it matches, or nothing: only the next one is tried.
    if (!TakeDevice(r, r.all_devices[n])) return false;
    if (Continue(claim, request, alt, n + 1, 0)) return true;
    Release(claim);
    return false;
  }
  for (size_t d = start; d < devices_.size(); ++d) {
    if (!TakeDevice(r, d)) {
      if (!errors_.empty()) return false;
      continue;
    }
    // The next device of the same request: the same one again when it is shared (several
    // shares of one device), else a later one (combinations, not their permutations).
    const size_t next = results_[claim].back().shared ? d : d + 1;
    if (Continue(claim, request, alt, n + 1, next)) return true;
    Release(claim);
    if (!errors_.empty()) return false;
  }
  return false;
}

bool Run::Enter(size_t claim, size_t request) {
  if (claim == claims_.size()) return true;
  if (request == claims_[claim].requests.size()) return Enter(claim + 1, 0);
  Request& req = claims_[claim].requests[request];
  for (size_t alt = 0; alt < req.alts.size(); ++alt) {
    req.selected = alt;
    if (Continue(claim, request, alt, 0, 0)) return true;
    if (!errors_.empty()) return false;
  }
  req.selected = 0;
  return false;
}

bool Run::Search() { return Enter(0, 0); }

}  // namespace hami::dra::internal
