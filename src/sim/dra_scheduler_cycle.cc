// DraSchedulerLoop's scheduling cycle (the pod's claims, PreFilter, Filter with dra::Allocator,
// Reserve) and binding cycle (PreBind's claim status writes, then pods/binding), as
// kube-scheduler's DynamicResources plugin runs them (sim/dra_scheduler.h).
#include <algorithm>
#include <cstdio>

#include "common/log.h"
#include "common/uuid.h"
#include "k8s/object.h"
#include "sim/dra_scheduler.h"
#include "sim/dra_scheduler_impl.h"

namespace hami::sim {

using nlohmann::json;

namespace {

const json* Find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

const json* Allocation(const json& claim) {
  const json* status = Find(claim, "status");
  return status != nullptr ? Find(*status, "allocation") : nullptr;
}

const json& ReservedFor(const json& claim) {
  static const json kEmpty = json::array();
  const json* status = Find(claim, "status");
  const json* r = status != nullptr ? Find(*status, "reservedFor") : nullptr;
  return r != nullptr && r->is_array() ? *r : kEmpty;
}

bool ReservedForUid(const json& claim, const std::string& uid) {
  for (const json& r : ReservedFor(claim)) {
    if (r.is_object() && r.value("uid", "") == uid) return true;
  }
  return false;
}

// metav1.IsControlledBy: the claim's controller owner reference is the pod.
bool ControlledBy(const json& claim, const std::string& uid) {
  const json* meta = Find(claim, "metadata");
  const json* refs = meta != nullptr ? Find(*meta, "ownerReferences") : nullptr;
  if (refs == nullptr || !refs->is_array()) return false;
  for (const json& r : *refs) {
    if (r.is_object() && r.value("controller", false)) return r.value("uid", "") == uid;
  }
  return false;
}

// One requirement of a NodeSelectorTerm against `value` (absent: nullptr).
bool RequirementMatches(const json& req, const std::string* value) {
  const std::string op = req.value("operator", "");
  std::vector<std::string> values;
  if (const json* v = Find(req, "values"); v != nullptr && v->is_array()) {
    for (const json& x : *v) {
      if (x.is_string()) values.push_back(x.get<std::string>());
    }
  }
  const bool in =
      value != nullptr && std::find(values.begin(), values.end(), *value) != values.end();
  if (op == "In") return in;
  if (op == "NotIn") return !in;
  if (op == "Exists") return value != nullptr;
  if (op == "DoesNotExist") return value == nullptr;
  if ((op == "Gt" || op == "Lt") && value != nullptr && values.size() == 1) {
    try {
      const long long have = std::stoll(*value), want = std::stoll(values[0]);
      return op == "Gt" ? have > want : have < want;
    } catch (const std::exception&) {
      return false;
    }
  }
  return false;
}

// A core/v1 NodeSelector (an allocation's nodeSelector): terms ORed, requirements ANDed;
// matchExpressions read the node's labels, matchFields its metadata.name.
bool NodeSelectorMatches(const json& selector, const json& node) {
  const json* terms = Find(selector, "nodeSelectorTerms");
  if (terms == nullptr || !terms->is_array()) return false;
  const json* meta = Find(node, "metadata");
  const json* labels = meta != nullptr ? Find(*meta, "labels") : nullptr;
  const std::string name = k8s::Name(node);
  for (const json& term : *terms) {
    bool ok = true, any = false;
    if (const json* exprs = Find(term, "matchExpressions"); exprs != nullptr && exprs->is_array()) {
      for (const json& req : *exprs) {
        any = true;
        std::string v;
        const json* lv = labels != nullptr ? Find(*labels, req.value("key", "").c_str()) : nullptr;
        if (lv != nullptr && lv->is_string()) v = lv->get<std::string>();
        ok = ok && RequirementMatches(req, lv != nullptr && lv->is_string() ? &v : nullptr);
      }
    }
    if (const json* fields = Find(term, "matchFields"); fields != nullptr && fields->is_array()) {
      for (const json& req : *fields) {
        any = true;
        const bool by_name = req.value("key", "") == "metadata.name";
        ok = ok && by_name && RequirementMatches(req, &name);
      }
    }
    if (ok && any) return true;  // an empty term matches nothing
  }
  return false;
}

// kube-scheduler's klog.KObj: "ns/name".
std::string KObj(const json& obj) { return k8s::ObjectKey(obj); }

}  // namespace

void DraSchedulerLoop::Impl::CycleLoop() {
  RunCycles([this](const std::string& key) { ScheduleOne(key); });
}

Result<std::vector<DraSchedulerLoop::Impl::PodClaim>> DraSchedulerLoop::Impl::PodClaims(
    const json& pod, std::set<std::string>& keys) const {
  std::vector<PodClaim> out;
  const std::string ns = k8s::Namespace(pod), name = k8s::Name(pod), uid = k8s::Uid(pod);
  const json* spec = Find(pod, "spec");
  const json* entries = spec != nullptr ? Find(*spec, "resourceClaims") : nullptr;
  if (entries == nullptr || !entries->is_array()) return out;
  const json* status = Find(pod, "status");
  const json* statuses = status != nullptr ? Find(*status, "resourceClaimStatuses") : nullptr;
  for (const json& entry : *entries) {
    const std::string entry_name = entry.value("name", "");
    std::string claim_name;
    bool must_check_owner = false;
    if (const json* n = Find(entry, "resourceClaimName"); n != nullptr && n->is_string()) {
      claim_name = n->get<std::string>();
    } else if (Find(entry, "resourceClaimTemplateName") != nullptr) {
      const json* found = nullptr;
      if (statuses != nullptr && statuses->is_array()) {
        for (const json& st : *statuses) {
          if (st.is_object() && st.value("name", "") == entry_name) found = &st;
        }
      }
      if (found == nullptr) {
        return Error{"pod \"" + ns + "/" + name + "\": ResourceClaim not created yet"};
      }
      const json* n = Find(*found, "resourceClaimName");
      if (n == nullptr || !n->is_string()) continue;  // no claim needed for this entry
      claim_name = n->get<std::string>();
      must_check_owner = true;
    } else {
      return Error{"pod \"" + ns + "/" + name + "\", spec.resourceClaim \"" + entry_name +
                   "\": none of the supported fields are set"};
    }
    const std::string key = k8s::ObjectKey(ns, claim_name);
    keys.insert(key);
    k8s::ObjectRef claim = claims_->Get(key);
    if (!claim) return Error{"resourceclaim.resource.k8s.io \"" + claim_name + "\" not found"};
    if (Find(*claim, "metadata") != nullptr && (*claim)["metadata"].contains("deletionTimestamp")) {
      return Error{"resourceclaim \"" + claim_name + "\" is being deleted"};
    }
    if (must_check_owner && !ControlledBy(*claim, uid)) {
      return Error{"ResourceClaim " + key + " was not created for pod " + ns + "/" + name +
                   " (pod is not owner)"};
    }
    PodClaim c;
    c.key = key;
    c.claim = *claim;
    c.reserved = ReservedForUid(*claim, uid);
    out.push_back(std::move(c));
  }
  return out;
}

void DraSchedulerLoop::Impl::SyncAllocator() {
  bool rebuild = false;
  std::set<std::string> dirty;
  std::map<std::string, json> in_flight;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rebuild = inventory_dirty_ || !allocator_;
    inventory_dirty_ = false;
    dirty.swap(claims_dirty_);
    in_flight = in_flight_claims_;
  }
  if (rebuild) {
    dra::Inventory inv;
    for (const k8s::ObjectRef& c : classes_->List()) inv.device_classes[k8s::Name(*c)] = *c;
    for (const k8s::ObjectRef& s : slices_->List()) inv.slices.push_back(*s);
    accounted_.clear();
    for (const k8s::ObjectRef& c : claims_->List()) {
      const json* a = Allocation(*c);
      const std::string key = k8s::ObjectKey(*c);
      if (a == nullptr || in_flight.count(key) > 0) continue;
      inv.allocated_claims.push_back(*c);
      accounted_[key] = *a;
    }
    allocator_ = std::make_unique<dra::Allocator>(inv, [this] { return NewShareId(); });
    for (const auto& [key, a] : in_flight) {
      allocator_->Assume(a);
      accounted_[key] = a;
    }
    return;
  }
  for (const std::string& key : dirty) {
    json desired;
    if (auto f = in_flight.find(key); f != in_flight.end()) {
      desired = f->second;
    } else if (k8s::ObjectRef c = claims_->Get(key); c && Allocation(*c) != nullptr) {
      desired = *Allocation(*c);
    }
    auto it = accounted_.find(key);
    if (it != accounted_.end() ? it->second == desired : desired.is_null()) continue;
    if (it != accounted_.end()) {
      allocator_->Forget(it->second);
      accounted_.erase(it);
    }
    if (!desired.is_null()) {
      allocator_->Assume(desired);
      accounted_[key] = std::move(desired);
    }
  }
}

void DraSchedulerLoop::Impl::ScheduleOne(const std::string& key) {
  k8s::ObjectRef pod = pods_->Get(key);
  if (SettledBeforeCycle(key, pod)) return;
  // Settles the pod as unschedulable (waits for an event) or failed (backoff). A cluster event
  // during the cycle sends an unschedulable pod back at once (kube-scheduler's move request).
  auto park = [&](const std::string& why, bool unschedulable, bool count_failure,
                  const std::set<std::string>& claim_keys, std::vector<std::string> details,
                  const std::string& write) {
    bool do_write = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      QueuedPod& s = queue_[key];
      const SystemTime now = clock_.Now();
      claims_seen_[key].claims = claim_keys;
      if (count_failure) {
        queue_.Fail(s, now, why, unschedulable);
      } else {
        queue_.Park(s, why);
      }
      s.rec.failure_details = std::move(details);
      if (s.where == PodWhere::kUnschedulable && queue_.MovedSincePop()) queue_.Requeue(s, now);
      do_write = !write.empty() && queue_.ShouldWrite(s, write);
      queue_.Done();
    }
    if (do_write) {
      pool_.Submit([this, pod, write](NoWorkerContext&) {
        WriteUnschedulable(client_, clock_, *pod, write);
      });
    }
    cv_.notify_all();
  };

  std::set<std::string> claim_keys;
  auto claims = PodClaims(*pod, claim_keys);
  if (!claims) {  // PreEnqueue: no attempt, no status write
    park(claims.error(), true, false, claim_keys, {}, "");
    return;
  }
  std::vector<std::string> nodes = ready_.All();
  const size_t node_count = nodes.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++queue_[key].rec.attempts;
  }
  auto unschedulable = [&](const std::string& why) {
    const std::string msg = UnschedulableMessage(node_count, {}, why);
    park(msg, true, true, claim_keys, {}, msg);
  };

  // PreFilter.
  std::vector<size_t> to_allocate;
  std::vector<json> to_allocate_claims;
  std::vector<const json*> selectors;  // the allocated claims' node selectors
  for (size_t i = 0; i < claims->size(); ++i) {
    const PodClaim& c = (*claims)[i];
    if (const json* a = Allocation(c.claim)) {
      if (!c.reserved && ReservedFor(c.claim).size() >= kDraMaxReservedFor) {
        return unschedulable(kDraClaimInUse);
      }
      if (const json* sel = Find(*a, "nodeSelector")) selectors.push_back(sel);
      continue;
    }
    bool pending = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending = in_flight_claims_.count(c.key) > 0;
    }
    if (pending) {
      return unschedulable("resource claim " + KObj(c.claim) +
                           " is in the process of being allocated");
    }
    std::string bad_class = RequestClassesExist(c.claim);
    if (!bad_class.empty()) {
      if (bad_class.rfind("error: ", 0) == 0) {
        park(bad_class.substr(7), false, true, claim_keys, {}, "");
        return;
      }
      return unschedulable(bad_class);
    }
    to_allocate.push_back(i);
    to_allocate_claims.push_back(c.claim);
  }

  // Filter, in the candidates' order; the first node that fits is taken.
  const SystemTime filter_start = clock_.Now();
  if (!to_allocate.empty()) SyncAllocator();
  std::vector<std::pair<std::string, std::string>> failed;
  std::vector<std::string> details;
  std::string chosen;
  std::vector<json> allocations;
  size_t processed = 0;
  for (const std::string& name : nodes) {
    ++processed;
    k8s::ObjectRef node = nodes_->Get(name);
    if (!node) continue;
    bool available = true;
    for (const json* sel : selectors) available = available && NodeSelectorMatches(*sel, *node);
    if (!available) {
      failed.emplace_back(name, kDraNotAvailableOnNode);
      continue;
    }
    if (!to_allocate.empty()) {
      Result<dra::NodeResult> r = allocator_->AllocateOnNode(*node, to_allocate_claims);
      if (!r) {  // a malformed claim or class: an error, retried after the backoff
        park(r.error(), false, true, claim_keys, {}, "");
        return;
      }
      if (!r->fits) {
        failed.emplace_back(
            name, r->failure.reason.empty() ? std::string(kDraCannotAllocate) : r->failure.reason);
        for (const std::string& d : r->failure.details) details.push_back(name + ": " + d);
        continue;
      }
      allocations = std::move(r->allocations);
    }
    chosen = name;
    break;
  }
  RecordFilter(filter_start);
  ready_.Advance(processed, node_count);
  if (chosen.empty()) {
    const std::string msg = node_count == 0 ? std::string("no nodes available to schedule pods")
                                            : UnschedulableMessage(node_count, failed, "");
    park(msg, true, true, claim_keys, std::move(details), msg);
    return;
  }

  // Reserve: the allocations are in flight until the claim informer shows them.
  for (size_t k = 0; k < to_allocate.size() && k < allocations.size(); ++k) {
    PodClaim& c = (*claims)[to_allocate[k]];
    c.assume = allocations[k];
    allocator_->Assume(allocations[k]);
    accounted_[c.key] = allocations[k];
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const PodClaim& c : *claims) {
      if (c.assume) in_flight_claims_[c.key] = *c.assume;
    }
    claims_seen_[key].claims = claim_keys;
    queue_[key].where = PodWhere::kBinding;  // stays in flight until the bind settles
  }
  pool_.Submit([this, key, pod, chosen, cs = std::move(*claims)](NoWorkerContext&) mutable {
    PreBindAndBind(key, *pod, chosen, std::move(cs));
  });
}

// kube-scheduler's validateDeviceClass for each request (and subrequest) of `claim`: "" when
// all classes exist, the unschedulable reason when one does not, "error: ..." for a request
// without a class.
std::string DraSchedulerLoop::Impl::RequestClassesExist(const json& claim) const {
  const json* spec = Find(claim, "spec");
  const json* devices = spec != nullptr ? Find(*spec, "devices") : nullptr;
  const json* requests = devices != nullptr ? Find(*devices, "requests") : nullptr;
  if (requests == nullptr || !requests->is_array()) return "";
  auto check = [&](const json* exactly, const std::string& request) -> std::string {
    const std::string cls = exactly != nullptr ? exactly->value("deviceClassName", "") : "";
    if (cls.empty()) return "error: request " + request + ": unsupported request type";
    if (!classes_->Get(cls)) {
      return "request " + request + ": device class " + cls + " does not exist";
    }
    return "";
  };
  for (const json& r : *requests) {
    const std::string name = r.value("name", "");
    if (const json* first = Find(r, "firstAvailable"); first != nullptr && first->is_array()) {
      for (const json& sub : *first) {
        std::string why = check(&sub, name + "/" + sub.value("name", ""));
        if (!why.empty()) return why;
      }
      continue;
    }
    std::string why = check(Find(r, "exactly"), name);
    if (!why.empty()) return why;
  }
  return "";
}

void DraSchedulerLoop::Impl::PreBindAndBind(const std::string& key, const json& pod,
                                            const std::string& node, std::vector<PodClaim> claims) {
  std::string error;
  for (PodClaim& c : claims) {
    if (c.reserved) continue;
    Status st = ReserveClaim(pod, c);
    if (!st.ok()) {
      error = st.error();
      break;
    }
  }
  if (error.empty()) {
    k8s::ApiStatus b = client_.Bind(k8s::Namespace(pod), k8s::Name(pod), node, k8s::Uid(pod));
    // The Binding may have been created before the error (e.g. a lost response).
    if (!b.ok() && !client_.BoundTo(k8s::Namespace(pod), k8s::Name(pod), node, k8s::Uid(pod))) {
      error = "binding rejected: " + b.error().ToString();
    }
  }
  uint64_t allocated = 0;
  if (!error.empty()) {
    HAMI_VLOG(2, "pod {} to {}: {}", key, node, error);
    // Unreserve: what was written loses the pod's reservation (the allocation stays, as
    // kube-scheduler leaves it); allocations never written are forgotten.
    for (const PodClaim& c : claims) {
      if (c.written) Unreserve(pod, c);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const PodClaim& c : claims) {
      if (c.assume && c.written) ++allocated;
      if (c.assume && !c.written) {
        in_flight_claims_.erase(c.key);
        claims_dirty_.insert(c.key);
      }
    }
    claims_allocated_ += allocated;
    queue_.BindDone(key, clock_.Now(), error);
  }
  cv_.notify_all();
}

Status DraSchedulerLoop::Impl::ReserveClaim(const json& pod, PodClaim& c) {
  const std::string ns = k8s::Namespace(c.claim), name = k8s::Name(c.claim);
  const std::string uid = k8s::Uid(pod);
  json claim = c.claim;
  constexpr int kAttempts = 5;  // client-go's retry.DefaultRetry
  for (int attempt = 1;; ++attempt) {
    if (attempt > 1) {
      auto fresh = client_.Get(kClaims, ns, name);
      if (!fresh) {
        return Error{"get updated claim " + c.key + " after conflict: " + fresh.error().ToString()};
      }
      claim = std::move(*fresh);
    }
    if (Find(claim, "metadata") != nullptr && claim["metadata"].contains("deletionTimestamp")) {
      return Error{"claim " + c.key + " got deleted in the meantime"};
    }
    if (c.assume) {
      if (Allocation(claim) != nullptr) {
        if (*Allocation(claim) != *c.assume) {
          return Error{"claim " + c.key + " got allocated elsewhere in the meantime"};
        }
      } else {
        claim["status"]["allocation"] = *c.assume;
      }
    }
    if (!ReservedForUid(claim, uid)) {
      json& reserved = claim["status"]["reservedFor"];
      if (!reserved.is_array()) reserved = json::array();
      reserved.push_back({{"resource", "pods"}, {"name", k8s::Name(pod)}, {"uid", uid}});
    }
    auto r = client_.UpdateStatus(kClaims, claim);
    if (r.ok()) {
      c.written = true;
      return OkStatus();
    }
    if (!k8s::IsConflict(r.error()) || attempt >= kAttempts) {
      return Error{"update status of claim " + c.key + ": " + r.error().ToString()};
    }
  }
}

void DraSchedulerLoop::Impl::Unreserve(const json& pod, const PodClaim& c) {
  const std::string uid = k8s::Uid(pod);
  auto r = k8s::RetryOnConflict<json>(5, [&]() -> k8s::ApiResult<json> {
    auto claim = client_.Get(kClaims, k8s::Namespace(c.claim), k8s::Name(c.claim));
    if (!claim) return claim;
    json& reserved = (*claim)["status"]["reservedFor"];
    if (!reserved.is_array()) return claim;
    json kept = json::array();
    for (const json& e : reserved) {
      if (!e.is_object() || e.value("uid", "") != uid) kept.push_back(e);
    }
    if (kept.size() == reserved.size()) return claim;
    reserved = std::move(kept);
    return client_.UpdateStatus(kClaims, *claim);
  });
  if (!r)
    HAMI_VLOG(2, "unreserve claim {} for pod {}: {}", c.key, k8s::ObjectKey(pod),
              r.error().ToString());
}

// An RFC 4122 version 4 UUID from a splitmix64 sequence (or the option's generator).
std::string DraSchedulerLoop::Impl::NewShareId() {
  if (options_.share_id) return options_.share_id();
  std::lock_guard<std::mutex> lock(share_mu_);
  auto next = [this] {
    uint64_t z = (share_state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const uint64_t a = next(), b = next();
  return FormatUuidV4(a, b);
}

}  // namespace hami::sim
