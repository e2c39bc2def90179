// The structured allocator (allocator.h): the index of what is allocated, the parsing of claims
// and the status.allocation written. The checks and the search are in allocator_search.cc, the
// explanation of a failure in allocator_explain.cc.
#include "dra/allocator.h"

#include <algorithm>
#include <set>
#include <utility>

#include "common/strings.h"
#include "dra/allocator_internal.h"

namespace hami::dra {
namespace internal {

const Json* Find(const Json& obj, const char* a, const char* b, const char* c) {
  const Json* at = &obj;
  for (const char* key : {a, b, c}) {
    if (key == nullptr) break;
    if (!at->is_object()) return nullptr;
    const auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::string Str(const Json& obj, const char* key) {
  const Json* v = Find(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

std::string Qualified(const std::string& name, const std::string& driver) {
  return name.find('/') == std::string::npos ? driver + "/" + name : name;
}

void Usage::Apply(const Json& allocation, int sign) {
  const Json* results = Find(allocation, "devices", "results");
  if (results == nullptr || !results->is_array()) return;
  for (const Json& r : *results) {
    if (!r.is_object()) continue;
    if (const Json* admin = Find(r, "adminAccess");
        admin != nullptr && admin->is_boolean() && admin->get<bool>()) {
      continue;  // admin access takes nothing from other claims
    }
    const std::string driver = Str(r, "driver");
    const std::string key = DeviceKey(driver, Str(r, "pool"), Str(r, "device"));
    DeviceUse& use = by_device_[key];
    if (!Str(r, "shareID").empty()) {
      use.shares = std::max(0, use.shares + sign);
      if (const Json* consumed = Find(r, "consumedCapacity"); consumed && consumed->is_object()) {
        for (const auto& [name, value] : consumed->items()) {
          if (!value.is_string()) continue;
          auto amount = ParseAmount(value.get<std::string>());
          if (!amount) continue;
          __int128& sum = use.consumed[Qualified(name, driver)];
          sum += sign * amount->nanos;
          if (sum < 0) sum = 0;
        }
      }
    } else {
      use.dedicated = std::max(0, use.dedicated + sign);
    }
    if (use.empty()) by_device_.erase(key);
  }
}

const DeviceUse* Usage::Get(const std::string& key) const {
  const auto it = by_device_.find(key);
  return it == by_device_.end() ? nullptr : &it->second;
}

std::shared_ptr<const Result<CelProgram>> CelCache::Get(const std::string& expression) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = programs_[expression];
  if (!slot) slot = std::make_shared<const Result<CelProgram>>(CelProgram::Compile(expression));
  return slot;
}

std::vector<const Pool*> IndexData::PoolsFor(const std::string& node_name) const {
  std::vector<size_t> ids = pools_anywhere;
  if (auto it = pools_by_node.find(node_name); it != pools_by_node.end()) {
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    std::sort(ids.begin(), ids.end());
  }
  std::vector<const Pool*> out;
  for (size_t i : ids) out.push_back(&pools[i]);
  return out;
}

bool Constraint::AppliesTo(const Req& r) const {
  if (requests.empty()) return true;
  return requests.count(r.base) > 0 || (!r.sub.empty() && requests.count(r.name) > 0);
}

Run::Run(const IndexData& index, const Json& node) : index_(index), node_(node) {
  if (const Json* name = Find(node, "metadata", "name"); name && name->is_string()) {
    node_name_ = name->get<std::string>();
  }
}

Result<Req> Run::ParseReq(const Json& spec, size_t claim, const std::string& base,
                          const std::string& sub, const std::string& where) {
  if (!spec.is_object()) return Error{where + ": want an object, got " + spec.dump()};
  Req r;
  r.claim = claim;
  r.base = base;
  r.sub = sub;
  r.name = sub.empty() ? base : base + "/" + sub;
  r.spec = &spec;
  r.class_name = Str(spec, "deviceClassName");
  if (r.class_name.empty()) return Error{where + ".deviceClassName: missing"};
  const std::string mode = Str(spec, "allocationMode");
  if (mode == "All") {
    r.all = true;
  } else if (!mode.empty() && mode != "ExactCount") {
    return Error{where + ".allocationMode: want ExactCount or All, got " + Quote(mode)};
  }
  if (const Json* count = Find(spec, "count"); count != nullptr && !r.all) {
    if (!count->is_number_integer() || count->get<int64_t>() < 1) {
      return Error{where + ".count: want a positive integer, got " + count->dump()};
    }
    r.count = count->get<int64_t>();
  }
  if (const Json* t = Find(spec, "tolerations"); t != nullptr && t->is_array()) r.tolerations = *t;
  if (const Json* caps = Find(spec, "capacity", "requests"); caps != nullptr) {
    if (!caps->is_object()) return Error{where + ".capacity.requests: want a map"};
    for (const auto& [name, value] : caps->items()) {
      auto amount = value.is_string() ? ParseAmount(value.get<std::string>())
                                      : Result<Amount>(Error{"want a quantity string"});
      if (!amount) return Error{where + ".capacity.requests." + name + ": " + amount.error()};
      r.capacity[name] = *amount;
    }
  }
  return r;
}

Status Run::ParseClaims(const std::vector<Json>& claims) {
  claims_.clear();
  for (size_t i = 0; i < claims.size(); ++i) {
    const Json& object = claims[i];
    Claim c;
    c.object = &object;
    c.id = Str(object.value("metadata", Json::object()), "namespace") + "/" +
           Str(object.value("metadata", Json::object()), "name");
    const std::string at = "ResourceClaim " + c.id + ": spec.devices";
    const Json* requests = Find(object, "spec", "devices", "requests");
    if (requests == nullptr || !requests->is_array()) return Error{at + ".requests: missing"};
    for (size_t j = 0; j < requests->size(); ++j) {
      const Json& request = (*requests)[j];
      const std::string where = at + ".requests[" + std::to_string(j) + "]";
      const std::string name = Str(request, "name");
      if (name.empty()) return Error{where + ".name: missing"};
      Request out;
      if (const Json* exactly = Find(request, "exactly"); exactly != nullptr) {
        auto r = ParseReq(*exactly, i, name, "", where + ".exactly");
        if (!r) return std::move(r).take_error();
        out.alts.push_back(std::move(*r));
      } else if (const Json* first = Find(request, "firstAvailable");
                 first != nullptr && first->is_array() && !first->empty()) {
        out.first_available = true;
        for (size_t k = 0; k < first->size(); ++k) {
          const std::string sub_where = where + ".firstAvailable[" + std::to_string(k) + "]";
          const std::string sub = Str((*first)[k], "name");
          if (sub.empty()) return Error{sub_where + ".name: missing"};
          auto r = ParseReq((*first)[k], i, name, sub, sub_where);
          if (!r) return std::move(r).take_error();
          out.alts.push_back(std::move(*r));
        }
      } else {
        return Error{where + ": neither exactly nor firstAvailable"};
      }
      c.requests.push_back(std::move(out));
    }
    if (const Json* cons = Find(object, "spec", "devices", "constraints");
        cons != nullptr && cons->is_array()) {
      for (size_t j = 0; j < cons->size(); ++j) {
        const Json& con = (*cons)[j];
        Constraint k;
        if (!Str(con, "matchAttribute").empty()) {
          k.attribute = Str(con, "matchAttribute");
        } else if (!Str(con, "distinctAttribute").empty()) {
          k.match = false;
          k.attribute = Str(con, "distinctAttribute");
        } else {
          return Error{at + ".constraints[" + std::to_string(j) +
                       "]: neither matchAttribute nor distinctAttribute"};
        }
        if (const Json* names = Find(con, "requests"); names != nullptr && names->is_array()) {
          for (const Json& n : *names) {
            if (n.is_string()) k.requests.insert(n.get<std::string>());
          }
        }
        c.constraints.push_back(std::move(k));
      }
    }
    claims_.push_back(std::move(c));
  }
  results_.assign(claims_.size(), {});
  return OkStatus();
}

namespace {

// The CEL expressions of a `selectors` list; errors name the entry.
Result<std::vector<std::string>> Expressions(const Json* selectors) {
  std::vector<std::string> out;
  if (selectors == nullptr || !selectors->is_array()) return out;
  for (size_t i = 0; i < selectors->size(); ++i) {
    const Json* e = Find((*selectors)[i], "cel", "expression");
    if (e == nullptr || !e->is_string()) {
      return Error{"selector #" + std::to_string(i) + ": no cel.expression"};
    }
    out.push_back(e->get<std::string>());
  }
  return out;
}

}  // namespace

bool Run::Prepare() {
  for (Claim& c : claims_) {
    for (Request& request : c.requests) {
      for (Req& r : request.alts) {
        const auto it = index_.classes.find(r.class_name);
        if (it == index_.classes.end()) {
          errors_.push_back(Prefix(r) + "device class " + Quote(r.class_name) + " not found");
          continue;
        }
        r.device_class = &it->second;
        const std::pair<const Json*, std::string> lists[] = {
            {Find(it->second, "spec", "selectors"), "class " + Quote(r.class_name) + " "},
            {Find(*r.spec, "selectors"), ""}};
        for (const auto& [list, who] : lists) {
          auto exprs = Expressions(list);
          if (!exprs) {
            errors_.push_back(Prefix(r) + who + exprs.error());
            continue;
          }
          for (size_t i = 0; i < exprs->size(); ++i) {
            auto program = index_.cel.Get((*exprs)[i]);
            if (!*program) {
              errors_.push_back(Prefix(r) + who + "selector #" + std::to_string(i) + " " +
                                (*exprs)[i] + ": " + program->error());
            }
          }
        }
      }
    }
  }
  if (!errors_.empty()) return false;

  bool incomplete = false;
  for (const Pool* p : index_.PoolsFor(node_name_)) {
    const Pool& pool = *p;
    std::vector<NodeDevice> on_node = DevicesOnNode(pool, node_);
    if (on_node.empty()) continue;
    if (pool.incomplete) {
      incomplete = true;
      pool_notes_.push_back("pool " + pool.driver + "/" + pool.name + " is being updated (" +
                            std::to_string(pool.slices.size()) + " of " +
                            std::to_string(pool.want_slices) + " slices at generation " +
                            std::to_string(pool.generation) + "): its devices are not used");
      continue;
    }
    auto& free = free_counters_[&pool];
    for (const auto& [set, counters] : pool.counter_sets) {
      for (const auto& [name, value] : counters) free[set][name] = value.nanos;
    }
    // Counters drawn by devices already allocated (once per device).
    for (const Json* slice : pool.slices) {
      const Json* devices = Find(*slice, "spec", "devices");
      if (devices == nullptr || !devices->is_array()) continue;
      for (const Json& device : *devices) {
        const DeviceUse* use =
            index_.usage.Get(DeviceKey(pool.driver, pool.name, Str(device, "name")));
        if (use == nullptr || use->empty()) continue;
        ForEachCounterDrawn(device, [&](const std::string& set, const std::string& name,
                                        const Amount& need) { free[set][name] -= need.nanos; });
      }
    }
    for (NodeDevice& d : on_node) devices_.push_back(std::move(d));
  }
  cel_devices_.assign(devices_.size(), std::nullopt);
  allocating_.assign(devices_.size(), {});

  for (Claim& c : claims_) {
    for (Request& request : c.requests) {
      for (Req& r : request.alts) {
        if (!r.all) continue;
        if (incomplete) {
          errors_.push_back(Prefix(r) + "asks for all devices, but a pool is being updated");
          continue;
        }
        for (size_t d = 0; d < devices_.size(); ++d) {
          const Check s = Selectable(r, d);
          if (s.verdict == Verdict::kError) errors_.push_back(Prefix(r) + s.why);
          if (s.verdict != Verdict::kOk || !Consume(r, d).reason.empty()) continue;
          r.all_devices.push_back(d);
        }
      }
    }
  }
  return errors_.empty();
}

std::vector<Json> Run::Allocations(const std::function<std::string()>& share_id) const {
  std::vector<Json> out;
  for (size_t c = 0; c < claims_.size(); ++c) {
    const Claim& claim = claims_[c];
    Json results = Json::array();
    bool node_local = false;
    Json term = Json::object();
    for (const Take& t : results_[c]) {
      const NodeDevice& d = devices_[t.device];
      Json r = {{"request", t.req->name},
                {"driver", d.pool->driver},
                {"pool", d.pool->name},
                {"device", d.name}};
      if (!t.req->tolerations.empty()) r["tolerations"] = t.req->tolerations;
      if (t.shared) {
        r["shareID"] = share_id ? share_id() : "";
        Json consumed = Json::object();
        for (const auto& [name, amount] : t.written) consumed[name] = FormatAmount(amount);
        if (!consumed.empty()) r["consumedCapacity"] = consumed;
      }
      results.push_back(std::move(r));
      if (d.locality.kind == Locality::Kind::kNode) node_local = true;
      if (d.locality.kind == Locality::Kind::kSelector && d.locality.selector != nullptr) {
        const Json* terms = Find(*d.locality.selector, "nodeSelectorTerms");
        if (terms == nullptr || !terms->is_array() || terms->size() != 1) continue;
        for (const char* kind : {"matchFields", "matchExpressions"}) {
          const Json* reqs = Find((*terms)[0], kind);
          if (reqs == nullptr || !reqs->is_array()) continue;
          Json& into = term[kind];
          if (!into.is_array()) into = Json::array();
          for (const Json& req : *reqs) {
            if (std::find(into.begin(), into.end(), req) == into.end()) into.push_back(req);
          }
        }
      }
    }
    Json allocation = {{"devices", {{"results", results}}}};
    // Configuration, as kube-scheduler copies it: each class's config once (for the requests
    // of that class), then the claim's for the requests it names (or all).
    Json config = Json::array();
    std::map<std::string, std::pair<size_t, size_t>> class_configs;
    for (const Request& request : claim.requests) {
      const Req& r = request.alts[request.selected];
      if (r.device_class == nullptr) continue;
      if (auto it = class_configs.find(r.class_name); it != class_configs.end()) {
        for (size_t i = it->second.first; i < it->second.second; ++i) {
          config[i]["requests"].push_back(r.name);
        }
        continue;
      }
      const size_t start = config.size();
      if (const Json* list = Find(*r.device_class, "spec", "config"); list && list->is_array()) {
        for (const Json& entry : *list) {
          Json e = entry.is_object() ? entry : Json::object();
          e["source"] = "FromClass";
          e["requests"] = Json::array({r.name});
          config.push_back(std::move(e));
        }
      }
      class_configs[r.class_name] = {start, config.size()};
    }
    if (const Json* list = Find(*claim.object, "spec", "devices", "config");
        list != nullptr && list->is_array()) {
      for (const Json& entry : *list) {
        if (!entry.is_object()) continue;
        const Json* names = Find(entry, "requests");
        bool applies = names == nullptr || !names->is_array() || names->empty();
        for (const Request& request : claim.requests) {
          const Req& r = request.alts[request.selected];
          if (applies) break;
          for (const Json& n : *names) {
            if (n == r.base || n == r.name) applies = true;
          }
        }
        if (!applies) continue;
        Json e = entry;
        e["source"] = "FromClaim";
        config.push_back(std::move(e));
      }
    }
    for (Json& e : config) {
      if (e.contains("requests") &&
          (e["requests"].empty() || e["requests"].size() == claim.requests.size())) {
        e.erase("requests");
      }
    }
    if (!config.empty()) allocation["devices"]["config"] = std::move(config);
    if (node_local) {
      allocation["nodeSelector"] = {
          {"nodeSelectorTerms",
           Json::array(
               {{{"matchFields", Json::array({{{"key", "metadata.name"},
                                               {"operator", "In"},
                                               {"values", Json::array({node_name_})}}})}}})}};
    } else if (!term.empty()) {
      allocation["nodeSelector"] = {{"nodeSelectorTerms", Json::array({term})}};
    }
    out.push_back(std::move(allocation));
  }
  return out;
}

std::string Run::Prefix(const Req& r) const {
  return "claim " + claims_[r.claim].id + " request " + Quote(r.name) + ": ";
}

}  // namespace internal

using internal::Run;

Allocator::Allocator(const Inventory& inventory, std::function<std::string()> share_id)
    : index_(std::make_shared<Index>()), share_id_(std::move(share_id)) {
  index_->classes = inventory.device_classes;
  index_->slices = inventory.slices;
  index_->pools = GatherPools(index_->slices);
  for (size_t i = 0; i < index_->pools.size(); ++i) {
    std::set<std::string> nodes;
    bool local = true;
    for (const Json* slice : index_->pools[i].slices) {
      const std::string node = internal::Str((*slice)["spec"], "nodeName");
      const Json* per_device = internal::Find((*slice)["spec"], "perDeviceNodeSelection");
      if (node.empty() || (per_device != nullptr && *per_device == true)) local = false;
      nodes.insert(node);
    }
    if (!local) {
      index_->pools_anywhere.push_back(i);
      continue;
    }
    for (const std::string& node : nodes) index_->pools_by_node[node].push_back(i);
  }
  for (const Json& claim : inventory.allocated_claims) {
    const Json* allocation = internal::Find(claim, "status", "allocation");
    if (allocation != nullptr) Assume(*allocation);
  }
}

void Allocator::Assume(const Json& allocation) { index_->usage.Apply(allocation, +1); }

void Allocator::Forget(const Json& allocation) { index_->usage.Apply(allocation, -1); }

Result<NodeResult> Allocator::AllocateOnNode(const Json& node,
                                             const std::vector<Json>& claims) const {
  Run run(*index_, node);
  if (auto parsed = run.ParseClaims(claims); !parsed) return std::move(parsed).take_error();
  NodeResult out;
  if (!run.Prepare() || !run.Search()) {
    out.failure = run.Failure();
    return out;
  }
  out.fits = true;
  out.allocations = run.Allocations(share_id_);
  return out;
}

}  // namespace hami::dra
