#include "sim/claim_controller.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/informer.h"
#include "k8s/object.h"

namespace hami::sim {

namespace {

using nlohmann::json;
using SteadyTime = std::chrono::steady_clock::time_point;
namespace res = k8s::resources;

// How long a deleted pod's UID is remembered (a claim naming it is then cleaned without asking
// the API server whether the pod is gone).
constexpr std::chrono::minutes kDeletedMemory{10};

bool PodDone(const json& pod) {
  const std::string phase = k8s::FieldString(pod, "status.phase");
  if (phase == "Succeeded" || phase == "Failed") return true;
  // Deleted before it was scheduled: it will never run (upstream's isPodDone).
  return pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp") &&
         k8s::FieldString(pod, "spec.nodeName").empty();
}

bool PodDeleting(const json& pod) {
  return pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp");
}

// Only what the controller reads is cached.
json TrimPod(json pod) {
  json out;
  out["metadata"] = pod.value("metadata", json::object());
  out["metadata"].erase("managedFields");
  if (pod.contains("spec")) {
    out["spec"]["nodeName"] = pod["spec"].value("nodeName", "");
    if (pod["spec"].contains("resourceClaims"))
      out["spec"]["resourceClaims"] = pod["spec"]["resourceClaims"];
  }
  if (pod.contains("status")) {
    out["status"]["phase"] = pod["status"].value("phase", "");
    if (pod["status"].contains("resourceClaimStatuses"))
      out["status"]["resourceClaimStatuses"] = pod["status"]["resourceClaimStatuses"];
  }
  return out;
}

// The controlling Pod owner of a claim: (name, uid), empty when none.
std::pair<std::string, std::string> OwningPod(const json& claim) {
  const json* owners = nullptr;
  if (claim.contains("metadata") && claim["metadata"].contains("ownerReferences"))
    owners = &claim["metadata"]["ownerReferences"];
  if (owners == nullptr || !owners->is_array()) return {};
  for (const json& o : *owners) {
    if (!o.is_object() || !o.value("controller", false)) continue;
    if (o.value("apiVersion", "") != "v1" || o.value("kind", "") != "Pod") continue;
    return {o.value("name", ""), o.value("uid", "")};
  }
  return {};
}

const json& ReservedFor(const json& claim) {
  static const json kEmpty = json::array();
  if (!claim.contains("status") || !claim["status"].is_object()) return kEmpty;
  auto it = claim["status"].find("reservedFor");
  return it != claim["status"].end() && it->is_array() ? *it : kEmpty;
}

bool IsPodConsumer(const json& r) {
  return r.is_object() && r.value("apiGroup", "").empty() && r.value("resource", "") == "pods";
}

// The pod UIDs a claim names: its controlling owner and its pod consumers.
std::vector<std::string> ClaimPodUids(const json& claim) {
  std::vector<std::string> out;
  if (auto [name, uid] = OwningPod(claim); !uid.empty()) out.push_back(uid);
  for (const json& r : ReservedFor(claim)) {
    if (IsPodConsumer(r) && !r.value("uid", "").empty()) out.push_back(r.value("uid", ""));
  }
  return out;
}

// A queue of keys, each processed by one worker at a time (client-go's workqueue, simplified):
// a key added while it is processed runs again afterwards; a delayed add waits in a timer set.
class WorkQueue {
 public:
  void Add(const std::string& key, std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      const SteadyTime at = std::chrono::steady_clock::now() + delay;
      auto it = due_.find(key);
      if (it != due_.end()) {
        if (it->second <= at) return;
        timers_.erase({it->second, key});
      }
      due_[key] = at;
      timers_.emplace(at, key);
    }
    cv_.notify_one();
  }
  // Blocks for the next due key that no worker holds; false once stopped.
  bool Get(std::string* key) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (stop_) return false;
      if (timers_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto [at, k] = *timers_.begin();
      if (at > std::chrono::steady_clock::now()) {
        cv_.wait_until(lock, at);
        continue;
      }
      timers_.erase(timers_.begin());
      due_.erase(k);
      if (processing_.count(k) > 0) {
        dirty_.insert(k);
        continue;
      }
      processing_.insert(k);
      *key = k;
      return true;
    }
  }
  void Done(const std::string& key) {
    bool again = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      processing_.erase(key);
      again = dirty_.erase(key) > 0;
    }
    if (again) Add(key);
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::pair<SteadyTime, std::string>> timers_;
  std::map<std::string, SteadyTime> due_;
  std::set<std::string> processing_, dirty_;
  bool stop_ = false;
};

}  // namespace

std::string ClaimGenerateName(std::string_view pod, std::string_view claim) {
  std::string name = std::string(pod) + "-" + std::string(claim) + "-";
  constexpr size_t kMaxBaseLen = 57;  // a hyphen and 5 random characters more make 63
  if (name.size() <= kMaxBaseLen) return name;
  // Both parts shortened in proportion, so a long pod name does not eat the claim's name.
  const size_t total = name.size();
  return std::string(pod.substr(0, pod.size() * kMaxBaseLen / total)) + "-" +
         std::string(claim.substr(0, claim.size() * kMaxBaseLen / total));
}

class ClaimController::Impl {
 public:
  Impl(k8s::Client& client, const Clock& clock, ClaimControllerOptions options)
      : client_(client), clock_(clock), options_(options) {}

  Status Start();
  void Stop();

  // Handlers (informer threads).
  void OnPod(const json& pod);
  void OnPodDeleted(const json& pod);
  void OnClaim(const json& claim);
  void OnClaimDeleted(const json& claim);
  void EnqueueClaimsOf(const std::string& pod_uid);

  void Worker();
  Status SyncPod(const std::string& key);
  Status SyncClaim(const std::string& key);
  // Whether pod ns/name with `uid` may still use a claim; errors are the API's.
  Result<bool> PodStillUses(const std::string& ns, const std::string& name, const std::string& uid);
  // The claim pod `pod` owns for its claim entry `entry`, "" when none is known.
  std::string FindOwnedClaim(const json& pod, const std::string& entry);
  Result<std::string> CreateClaim(const json& pod, const std::string& entry,
                                  const std::string& template_name);

  k8s::Client& client_;
  const Clock& clock_;
  const ClaimControllerOptions options_;
  std::unique_ptr<k8s::Informer> pods_, claims_, templates_;
  WorkQueue queue_;
  std::vector<std::thread> workers_;

  mutable std::mutex mu_;
  ClaimControllerStats stats_;
  std::map<std::string, int> attempts_;                         // key -> failed syncs in a row
  std::map<std::string, std::set<std::string>> by_pod_;         // pod uid -> claim keys
  std::map<std::string, std::vector<std::string>> claim_uids_;  // claim key -> its pod uids
  // Claims this controller made, before its informer shows them: pod uid -> entry -> name.
  std::map<std::string, std::map<std::string, std::string>> created_;
  std::map<std::string, SystemTime> deleted_;  // pod uid -> when its deletion was seen
  bool stopped_ = false;
};

Status ClaimController::Impl::Start() {
  k8s::InformerOptions pod_opts;
  pod_opts.transform = TrimPod;
  k8s::InformerHandlers ph;
  ph.on_add = [this](const k8s::ObjectRef& o) { OnPod(*o); };
  ph.on_update = [this](const k8s::ObjectRef&, const k8s::ObjectRef& o) { OnPod(*o); };
  ph.on_delete = [this](const k8s::ObjectRef& o) { OnPodDeleted(*o); };
  pods_ = std::make_unique<k8s::Informer>(client_, res::kPods, pod_opts, ph);
  k8s::InformerHandlers ch;
  ch.on_add = [this](const k8s::ObjectRef& o) { OnClaim(*o); };
  ch.on_update = [this](const k8s::ObjectRef&, const k8s::ObjectRef& o) { OnClaim(*o); };
  ch.on_delete = [this](const k8s::ObjectRef& o) { OnClaimDeleted(*o); };
  claims_ =
      std::make_unique<k8s::Informer>(client_, res::kResourceClaims, k8s::InformerOptions{}, ch);
  templates_ = std::make_unique<k8s::Informer>(client_, res::kResourceClaimTemplates,
                                               k8s::InformerOptions{}, k8s::InformerHandlers{});
  claims_->Start();
  templates_->Start();
  pods_->Start();
  for (k8s::Informer* i : {claims_.get(), templates_.get(), pods_.get()}) {
    if (!i->WaitForSync(std::chrono::seconds(30)))
      return Error{"claim controller: an informer did not sync within 30 s"};
  }
  for (int i = 0; i < std::max(1, options_.workers); ++i)
    workers_.emplace_back([this] { Worker(); });
  return OkStatus();
}

void ClaimController::Impl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  queue_.Stop();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  // Each informer takes up to a second to notice; stop them side by side.
  std::vector<std::thread> stops;
  for (k8s::Informer* i : {pods_.get(), claims_.get(), templates_.get()}) {
    if (i != nullptr) stops.emplace_back([i] { i->Stop(); });
  }
  for (std::thread& t : stops) t.join();
}

void ClaimController::Impl::OnPod(const json& pod) {
  queue_.Add("p|" + k8s::ObjectKey(pod));
  if (PodDone(pod) || PodDeleting(pod)) EnqueueClaimsOf(k8s::Uid(pod));
}

void ClaimController::Impl::OnPodDeleted(const json& pod) {
  const std::string uid = k8s::Uid(pod);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const SystemTime now = clock_.Now();
    std::erase_if(deleted_, [&](const auto& d) { return now - d.second > kDeletedMemory; });
    deleted_[uid] = now;
    created_.erase(uid);
  }
  EnqueueClaimsOf(uid);
}

void ClaimController::Impl::EnqueueClaimsOf(const std::string& pod_uid) {
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_pod_.find(pod_uid);
    if (it != by_pod_.end()) keys.assign(it->second.begin(), it->second.end());
  }
  for (const std::string& k : keys) queue_.Add("c|" + k);
}

void ClaimController::Impl::OnClaim(const json& claim) {
  const std::string key = k8s::ObjectKey(claim);
  std::vector<std::string> uids = ClaimPodUids(claim);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& uid : claim_uids_[key]) {
      auto it = by_pod_.find(uid);
      if (it == by_pod_.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) by_pod_.erase(it);
    }
    for (const std::string& uid : uids) by_pod_[uid].insert(key);
    claim_uids_[key] = uids;
  }
  if (!uids.empty()) queue_.Add("c|" + key);
}

void ClaimController::Impl::OnClaimDeleted(const json& claim) {
  const std::string key = k8s::ObjectKey(claim);
  std::lock_guard<std::mutex> lock(mu_);
  auto old = claim_uids_.find(key);
  if (old == claim_uids_.end()) return;
  for (const std::string& uid : old->second) {
    auto it = by_pod_.find(uid);
    if (it == by_pod_.end()) continue;
    it->second.erase(key);
    if (it->second.empty()) by_pod_.erase(it);
  }
  claim_uids_.erase(old);
}

void ClaimController::Impl::Worker() {
  std::string item;
  while (queue_.Get(&item)) {
    const std::string key = item.substr(2);
    Status s = item[0] == 'p' ? SyncPod(key) : SyncClaim(key);
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (s) {
        attempts_.erase(item);
      } else {
        const int n = std::min(++attempts_[item], 16);
        delay = std::min(options_.max_backoff, options_.initial_backoff * (1 << (n - 1)));
        ++stats_.retries;
        if (n == 4) HAMI_WARN("claim controller: {}: {} (retrying)", key, s.error());
      }
    }
    queue_.Done(item);
    if (!s) queue_.Add(item, delay);
  }
}

std::string ClaimController::Impl::FindOwnedClaim(const json& pod, const std::string& entry) {
  const std::string uid = k8s::Uid(pod);
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto made = created_.find(uid);
    if (made != created_.end() && made->second.count(entry) > 0) return made->second[entry];
    auto it = by_pod_.find(uid);
    if (it != by_pod_.end()) keys.assign(it->second.begin(), it->second.end());
  }
  for (const std::string& key : keys) {
    k8s::ObjectRef claim = claims_->Get(key);
    if (!claim || OwningPod(*claim).second != uid) continue;
    if (k8s::Annotation(*claim, kPodClaimNameAnnotation) == entry) return k8s::Name(*claim);
  }
  return "";
}

Result<std::string> ClaimController::Impl::CreateClaim(const json& pod, const std::string& entry,
                                                       const std::string& template_name) {
  const std::string ns = k8s::Namespace(pod);
  k8s::ObjectRef tmpl = templates_->Get(k8s::ObjectKey(ns, template_name));
  if (!tmpl) {
    return Error{"pod " + k8s::ObjectKey(pod) + ": ResourceClaimTemplate " +
                 Quote(ns + "/" + template_name) + " not found"};
  }
  const json tspec = tmpl->value("spec", json::object());
  const json tmeta = tspec.value("metadata", json::object());
  json claim = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"}};
  json& meta = claim["metadata"];
  meta["generateName"] = ClaimGenerateName(k8s::Name(pod), entry);
  meta["namespace"] = ns;
  if (tmeta.contains("labels")) meta["labels"] = tmeta["labels"];
  meta["annotations"] = tmeta.value("annotations", json::object());
  meta["annotations"][std::string(kPodClaimNameAnnotation)] = entry;
  meta["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                          {"kind", "Pod"},
                                          {"name", k8s::Name(pod)},
                                          {"uid", k8s::Uid(pod)},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}});
  claim["spec"] = tspec.value("spec", json::object());
  auto created = client_.Create(res::kResourceClaims, ns, claim);
  if (!created) {
    return Error{"pod " + k8s::ObjectKey(pod) + ": create ResourceClaim for " + Quote(entry) +
                 ": " + created.error().ToString()};
  }
  const std::string name = k8s::Name(*created);
  std::lock_guard<std::mutex> lock(mu_);
  created_[k8s::Uid(pod)][entry] = name;
  ++stats_.claims_created;
  return name;
}

Status ClaimController::Impl::SyncPod(const std::string& key) {
  k8s::ObjectRef pod = pods_->Get(key);
  if (!pod || PodDone(*pod) || PodDeleting(*pod)) return OkStatus();
  const json& spec = (*pod)["spec"];
  if (!spec.contains("resourceClaims") || !spec["resourceClaims"].is_array()) return OkStatus();
  std::map<std::string, std::string> known;  // status.resourceClaimStatuses: entry -> claim
  if (pod->contains("status") && (*pod)["status"].contains("resourceClaimStatuses")) {
    for (const json& s : (*pod)["status"]["resourceClaimStatuses"]) {
      if (s.is_object() && !s.value("resourceClaimName", "").empty())
        known[s.value("name", "")] = s.value("resourceClaimName", "");
    }
  }
  json statuses = json::array();
  bool changed = false;
  for (const json& entry : spec["resourceClaims"]) {
    if (!entry.is_object()) continue;
    const std::string name = entry.value("name", "");
    const std::string tmpl = entry.value("resourceClaimTemplateName", "");
    if (name.empty() || tmpl.empty()) continue;
    std::string claim = known.count(name) > 0 ? known[name] : FindOwnedClaim(*pod, name);
    if (claim.empty()) {
      auto made = CreateClaim(*pod, name, tmpl);
      if (!made) return std::move(made).take_error();
      claim = *made;
    }
    changed = changed || known.count(name) == 0 || known[name] != claim;
    statuses.push_back({{"name", name}, {"resourceClaimName", claim}});
  }
  if (!changed) return OkStatus();
  const std::string ns = k8s::Namespace(*pod), name = k8s::Name(*pod);
  json patch = {{"status", {{"resourceClaimStatuses", statuses}}}};
  auto r = client_.Patch(res::kPods, ns, name, k8s::PatchType::kMerge, patch, "status");
  if (!r && !k8s::IsNotFound(r.error())) {
    return Error{"pod " + key + ": status.resourceClaimStatuses: " + r.error().ToString()};
  }
  return OkStatus();
}

Result<bool> ClaimController::Impl::PodStillUses(const std::string& ns, const std::string& name,
                                                 const std::string& uid) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (deleted_.count(uid) > 0) return false;
  }
  k8s::ObjectRef cached = pods_->Get(k8s::ObjectKey(ns, name));
  json pod;
  if (cached) {
    pod = *cached;
  } else {
    // Not seen (yet): only the API server can say it is gone.
    auto got = client_.Get(res::kPods, ns, name);
    if (!got) {
      if (k8s::IsNotFound(got.error())) return false;
      return Error{"get pod " + ns + "/" + name + ": " + got.error().ToString()};
    }
    pod = std::move(*got);
  }
  return k8s::Uid(pod) == uid && !PodDone(pod);
}

Status ClaimController::Impl::SyncClaim(const std::string& key) {
  k8s::ObjectRef cached = claims_->Get(key);
  if (!cached) return OkStatus();
  const json& claim = *cached;
  const std::string ns = k8s::Namespace(claim), name = k8s::Name(claim);
  const json& reserved = ReservedFor(claim);
  json valid = json::array();
  for (const json& r : reserved) {
    if (IsPodConsumer(r)) {
      auto uses = PodStillUses(ns, r.value("name", ""), r.value("uid", ""));
      if (!uses) return std::move(uses).take_error();
      if (!*uses) continue;
    }
    valid.push_back(r);
  }
  if (valid.size() < reserved.size()) {
    json updated = claim;
    if (valid.empty()) {
      // Nobody uses it any more: the scheduler's allocation is released with the last consumer.
      updated["status"].erase("reservedFor");
      updated["status"].erase("allocation");
    } else {
      updated["status"]["reservedFor"] = valid;
    }
    auto r =
        client_.UpdateStatus(res::kResourceClaims, updated);  // resourceVersion: a precondition
    if (!r) {
      if (k8s::IsNotFound(r.error())) return OkStatus();
      return Error{"ResourceClaim " + key + ": status.reservedFor: " + r.error().ToString()};
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (valid.empty() && claim["status"].contains("allocation")) ++stats_.claims_deallocated;
  }
  if (!valid.empty()) return OkStatus();
  const auto [owner, owner_uid] = OwningPod(claim);
  if (owner_uid.empty()) return OkStatus();
  auto uses = PodStillUses(ns, owner, owner_uid);
  if (!uses) return std::move(uses).take_error();
  if (*uses) return OkStatus();
  // The owner is done or gone and nobody else uses the claim (upstream's controller deletes it
  // for a done pod, the garbage collector for a deleted one).
  auto deleted = client_.Delete(res::kResourceClaims, ns, name);
  if (!deleted && !k8s::IsNotFound(deleted.error())) {
    return Error{"delete ResourceClaim " + key + ": " + deleted.error().ToString()};
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (deleted) ++stats_.claims_deleted;
  return OkStatus();
}

ClaimController::ClaimController(k8s::Client& client, const Clock& clock,
                                 ClaimControllerOptions options)
    : impl_(std::make_unique<Impl>(client, clock, options)) {}

ClaimController::~ClaimController() { Stop(); }

Status ClaimController::Start() { return impl_->Start(); }

void ClaimController::Stop() { impl_->Stop(); }

ClaimControllerStats ClaimController::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->stats_;
}

}  // namespace hami::sim
