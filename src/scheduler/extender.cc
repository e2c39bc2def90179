#include "scheduler/extender.h"

#include <algorithm>
#include <future>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/log.h"
#include "common/strings.h"
#include "common/thread.h"
#include "k8s/object.h"
#include "nodelock/release.h"
#include "protocol/bind.h"
#include "protocol/keys.h"
#include "protocol/node_lock.h"
#include "protocol/node_register.h"
#include "protocol/reason.h"
#include "scheduler/registration.h"

namespace hami::scheduler {

using nlohmann::json;

namespace {

HttpReply Ok(std::string body) { return HttpReply{200, std::move(body)}; }

// Decision writes' answers kept for their binds; past this many (pods filtered and never bound)
// the oldest go, and their binds read the pod.
constexpr size_t kMaxDecided = 256;

// Makes room for `key` in a record map bounded at `cap`: when full and `key` is new, the record
// with the smallest `seq` goes (a scan: the bound is only reached when records are not taken).
template <typename Map>
void EraseOldestIfFull(Map& records, const std::string& key, size_t cap) {
  if (records.empty() || records.size() < std::max<size_t>(1, cap) || records.count(key) != 0) {
    return;
  }
  auto oldest = records.begin();
  for (auto it = records.begin(); it != records.end(); ++it) {
    if (it->second.seq < oldest->second.seq) oldest = it;
  }
  records.erase(oldest);
}

// The decision's merge patch, written straight as text (no JSON document built and dumped on
// the serial /filter path): {"metadata":{"annotations":{...},"labels":{"hami.io/vgpu-node":N}}}.
std::string DecisionPatch(const std::map<std::string, std::string>& annotations,
                          const std::string& node) {
  std::string out = "{\"metadata\":{\"annotations\":{";
  bool first = true;
  for (const auto& [k, v] : annotations) {
    if (!first) out += ',';
    first = false;
    protocol::AppendGoJsonString(&out, k);
    out += ':';
    protocol::AppendGoJsonString(&out, v);
  }
  out += "},\"labels\":{";
  protocol::AppendGoJsonString(&out, protocol::kVgpuNodeKey);
  out += ':';
  protocol::AppendGoJsonString(&out, node);
  out += "}}}";
  return out;
}

nodelock::LockerOptions LockerOptionsFrom(const ExtenderOptions& options) {
  nodelock::LockerOptions out;
  out.acquire.timeout = options.node_lock_timeout;
  out.acquire.zone = options.zone;
  out.acquire.seen = options.seen_node;
  out.wait = options.node_lock_retry_timeout;
  out.poll_interval = options.lock_poll_interval;
  return out;
}

// The HTTP status of a /filter or /bind body that cannot be decoded. HAMi answers 200 with the
// error in the result's Error field (its routes decode, and on failure marshal a result holding
// only Error), and so do we; a body past the nesting limit keeps its 400 (docs/INPUT_LIMITS.md).
constexpr size_t kMinNodeNamesCap = 10000;

int DecodeErrorStatus(const std::string& message) {
  return message.find("nested deeper than") != std::string::npos ? 400 : 200;
}

std::string FilterError(const std::string& message) {
  FilterResult r;
  r.error = message;
  return EncodeFilterResult(r);
}

}  // namespace

std::vector<std::string> FilteringFailedMessages(
    const std::map<std::string, std::string>& failed_nodes) {
  std::map<std::string, std::set<std::string>> nodes_by_reason;
  for (const auto& [node, reason] : failed_nodes) {
    // Reasons without the "n/m" prefix (NodeInsufficientDevice, node unregistered) are not
    // reported by reason.
    Result<protocol::DecodedReason> decoded = protocol::DecodeReason(reason);
    if (!decoded) continue;
    for (const auto& [name, count] : decoded->counts) nodes_by_reason[name].insert(node);
  }
  std::vector<std::string> out;
  for (const auto& [reason, nodes] : nodes_by_reason) {
    std::vector<std::string> sorted(nodes.begin(), nodes.end());
    out.push_back(std::to_string(nodes.size()) + " nodes " + reason + "(" + Join(sorted, ",") +
                  ")");
  }
  return out;
}

std::string SimulateFilter(const device::Registry& registry, const ExtenderArgs& args,
                           const device::ScheduleOptions& options) {
  Result<device::PodView> pod = device::ParsePodView(args.pod);
  if (!pod) return FilterError(pod.error());
  std::vector<device::NodeUsage> rows;
  std::map<std::string, json> by_name;
  FilterResult result;
  std::map<std::string, std::string> failed;
  // A node without any backend's devices is "node unregistered", as in HAMi's simulation
  // filter (buildTransientNodeInfo) and as the NodeNames form reports a node it does not know.
  std::vector<std::string> unregistered;
  for (const json& node : *args.nodes) {
    Result<device::NodeUsage> row = device::NodeUsageFromNode(registry, node);
    std::string name = device::ObjectName(node);
    if (!row) {
      failed[name] = row.error();
      continue;
    }
    if (row->devices.empty()) {
      unregistered.push_back(std::move(name));
      continue;
    }
    by_name[row->name] = node;
    rows.push_back(std::move(*row));
  }
  Result<device::ScheduleDecision> decision =
      device::Schedule(registry, *pod, rows, unregistered, options);
  if (!decision) return FilterError(decision.error());
  if (decision->pass_through) {
    result.nodes = *args.nodes;
    return EncodeFilterResult(result);
  }
  for (auto& [node, reason] : decision->FailedNodes()) failed[node] = reason;
  result.failed_nodes = std::move(failed);
  if (const device::NodeFit* chosen = decision->Chosen()) {
    result.nodes = std::vector<json>{by_name[chosen->node]};
  }
  return EncodeFilterResult(result);
}

Extender::Extender(const device::Registry& registry, device::UsageIndex& index, k8s::Client& client,
                   const Clock& clock, ExtenderOptions options, QuotaLookup quota)
    : registry_(registry),
      index_(index),
      client_(client),
      clock_(clock),
      options_(std::move(options)),
      quota_(std::move(quota)),
      locker_(client_, clock_, LockerOptionsFrom(options_)) {
  if (options_.record_events) {
    events_ = std::make_unique<EventQueue>(client_, options_.scheduler_name,
                                           EventQueue::kDefaultMaxPending,
                                           std::min(2 * options_.background_nice, 19));
  }
  if (options_.async_decision_write) {
    for (size_t i = 0; i < std::max<size_t>(1, options_.decision_writers); ++i) {
      writers_.emplace_back([this] {
        NameThisThread("hami-writer");
        if (Status s = LowerThisThreadPriority(options_.background_nice); !s) {
          HAMI_WARN("decision writer: {}", s.error());
        }
        WriterLoop();
      });
    }
  }
}

void Extender::FlushEvents() {
  if (events_) events_->Flush();
}

void Extender::Stop() {
  locker_.Stop("scheduler is shutting down");
  StopWriter();  // the decisions already answered are written first
}

Extender::~Extender() { Stop(); }

void Extender::SetExecutor(Executor executor) {
  executor_ = executor;
  locker_.SetExecutor(std::move(executor));
}

void Extender::Run(std::function<void()> task) {
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping = stopping_;  // the executor (the HTTP server's workers) may be gone
  }
  if (executor_ && !stopping) return executor_(std::move(task));
  task();
}

void Extender::Event(const json& pod, std::string_view type, std::string_view reason,
                     const std::string& message) {
  if (events_) events_->Record(pod, type, reason, message);
}

HttpReply Extender::Filter(std::string_view body) { return *FilterImpl(body, /*may_wait=*/true); }

std::optional<HttpReply> Extender::FilterWithoutWaiting(std::string_view body) {
  return FilterImpl(body, /*may_wait=*/false);
}

std::optional<HttpReply> Extender::FilterImpl(std::string_view body, bool may_wait) {
  // Without --async-decision-write every filter waits for its own write: not worth a parse.
  if (!may_wait && !options_.async_decision_write) return std::nullopt;
  // kube-scheduler sends each candidate once, and the candidates are the cluster's nodes: a list
  // past twice the registered nodes (at least kMinNodeNamesCap) is cut, so what a body costs is
  // bounded by the cluster, not by the body (docs/SECURITY.md).
  Result<ExtenderArgs> args =
      ParseExtenderArgs(body, std::max<size_t>(kMinNodeNamesCap, 2 * index_.NodeCount()));
  if (!args) return HttpReply{DecodeErrorStatus(args.error()), FilterError(args.error())};
  if (args->node_names_dropped > 0) {
    HAMI_WARN(
        "/filter: NodeNames has {} more distinct names than the {} kept (twice the {} "
        "registered nodes, at least {}); the rest are ignored",
        args->node_names_dropped, args->node_names ? args->node_names->size() : 0,
        index_.NodeCount(), kMinNodeNamesCap);
  }
  if (args->pod.is_null()) return Ok(FilterError("extender args missing pod"));
  device::ScheduleOptions options;
  options.node_policy = options_.node_policy;
  options.gpu_policy = options_.gpu_policy;
  if (args->nodes) {
    // The simulation form parses every node object in the body: tens of milliseconds.
    if (!may_wait) return std::nullopt;
    return Ok(SimulateFilter(registry_, *args, options));
  }
  Result<device::PodView> pod = device::ParsePodView(args->pod);
  if (!pod) return Ok(FilterError(pod.error()));
  std::optional<std::string> reply = FilterLive(*args, *pod, args->pod, may_wait);
  if (!reply) return std::nullopt;
  return Ok(std::move(*reply));
}

std::optional<std::string> Extender::FilterLive(const ExtenderArgs& args,
                                                const device::PodView& pod, const json& raw_pod,
                                                bool may_wait) {
  const std::string key = pod.Key();
  {
    // kube-scheduler may retry a pod's filter while the first call is still running; the index
    // claim below is one per pod, so such calls take turns (a background decision write of the
    // pod's last filter counts as in flight too).
    std::unique_lock<std::mutex> lock(mu_);
    // Without waiting: the decision must go to the writer thread (a write of its own waits for
    // the API server), and no earlier call of the pod may be in flight.
    if (!may_wait &&
        (filtering_.count(key) != 0 || stopping_ || writes_.size() >= options_.max_queued_writes)) {
      return std::nullopt;
    }
    if (filtering_.count(key) != 0) {
      ++waiting_for_pod_;
      cv_.wait(lock, [&] { return filtering_.count(key) == 0; });
      --waiting_for_pod_;
    }
    filtering_.insert(key);
    failed_writes_.erase(key);  // a new decision replaces the failed one
    decided_.erase(key);        // and the pod the last one stored
  }
  // A re-filtered pod must not count against itself: the claim takes its current allocation
  // out of the index, and holds back its events until the outcome is known, so neither a late
  // informer event nor this call can leave the index disagreeing with the pod's annotations.
  // Released on every way out, an exception included: a claim left behind would hold back the
  // pod's events and block its next filter forever. With a background write, the write job
  // owns it and releases it once the write is done.
  struct Claim {
    Claim(Extender* s, std::string k) : self(s), key(std::move(k)) {}
    Claim(const Claim&) = delete;  // one owner releases, once
    Claim& operator=(const Claim&) = delete;
    Extender* self;
    std::string key;
    std::optional<device::UsageIndex::Written> written;
    ~Claim() {
      self->index_.Release(key, std::move(written));
      std::vector<std::function<void()>> binds;  // binds parked for the pod's decision write
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        self->filtering_.erase(key);
        self->cv_.notify_all();
        if (auto it = self->after_claim_.find(key); it != self->after_claim_.end()) {
          binds = std::move(it->second);
          self->after_claim_.erase(it);
        }
      }
      for (auto& bind : binds) self->Run(std::move(bind));
    }
  };
  auto claim = std::make_shared<Claim>(this, key);
  index_.Claim(key);
  std::function<std::optional<std::string>()> write;
  std::string reply = DecideAndWrite(args, pod, raw_pod, &claim->written,
                                     options_.async_decision_write ? &write : nullptr);
  if (write) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_ || writes_.size() >= options_.max_queued_writes) {
      // Shutting down (no writer left to hand it to), or the writer is that far behind: the
      // filter writes the decision itself before answering.
      lock.unlock();
      if (std::optional<std::string> error = write()) return FilterError(*error);
      return reply;
    }
    writes_.push_back(
        [this, claim, key, uid = k8s::Uid(raw_pod), write = std::move(write)]() mutable {
          std::optional<std::string> error = write();
          if (error) {
            HAMI_WARN("/filter {}: decision write: {}", key, *error);
            std::lock_guard<std::mutex> l(mu_);
            EraseOldestIfFull(failed_writes_, key, options_.max_failed_writes);
            failed_writes_[key] = FailedWrite{*error, std::move(uid), failed_writes_seq_++};
          }
          claim.reset();  // releases the claim: the pod's bind and next filter may go on
        });
    writes_cv_.notify_one();
  }
  return reply;
}

std::string Extender::DecideAndWrite(const ExtenderArgs& args, const device::PodView& pod,
                                     const json& raw_pod,
                                     std::optional<device::UsageIndex::Written>* written,
                                     std::function<std::optional<std::string>()>* deferred) {
  std::vector<std::string> names = args.node_names.value_or(std::vector<std::string>{});
  device::UsageIndex::SharedSnapshot snap = index_.SharedRows(names);
  device::ScheduleOptions options;
  options.node_policy = options_.node_policy;
  options.gpu_policy = options_.gpu_policy;
  device::NamespaceQuota quota;
  if (quota_) {
    quota = quota_(pod.namespace_name);
    options.quota = &quota;
  }
  Result<device::ScheduleDecision> decision =
      device::Schedule(registry_, pod, snap.nodes, snap.missing, options);
  if (!decision) return FilterError(decision.error());
  FilterResult result;
  if (decision->pass_through) {
    result.node_names = args.node_names;
    return EncodeFilterResult(result);
  }
  result.failed_nodes = decision->FailedNodes();
  const device::NodeFit* chosen = decision->Chosen();
  if (chosen == nullptr) {
    for (const std::string& message : FilteringFailedMessages(*result.failed_nodes)) {
      Event(raw_pod, "Warning", "FilteringFailed", message);
    }
    return EncodeFilterResult(result);
  }
  const SystemTime decided_at = clock_.Now();
  std::map<std::string, std::string> annotations =
      device::AllocationAnnotations(registry_, pod, *decision, decided_at);
  annotations[std::string(protocol::kVgpuTimeKey)] = protocol::FormatBindTime(decided_at);
  // The decision counts before the patch (a concurrent filter must see it).
  device::PodView updated = pod;
  for (const auto& [k, v] : annotations) updated.annotations[k] = v;
  Result<std::optional<device::PodAllocation>> alloc =
      device::PodAllocationFromPod(registry_, updated);
  if (alloc) index_.SetClaimed(pod.Key(), *alloc);
  result.node_names = std::vector<std::string>{chosen->node};
  char score[32];
  std::snprintf(score, sizeof(score), "%.2f", chosen->score);
  std::string succeeded = "find fit node(" + chosen->node + "), " +
                          std::to_string(result.failed_nodes->size()) +
                          " nodes not fit, 1 nodes fit(" + chosen->node + ":" + score + ")";
  // The patch, then what the API server stored (at its resourceVersion: events older than it
  // are stale) into *written; the error when it fails.
  struct Write {
    Extender* self;
    std::string key;
    std::string path;
    std::string patch;
    Result<std::optional<device::PodAllocation>> alloc;
    std::optional<device::UsageIndex::Written>* written;
    std::string succeeded;
    std::optional<json> raw_copy;  // the pod for the event (a background write's own copy)
    const json* raw;
    std::optional<std::string> operator()() {
      auto patched_text =
          self->client_.Request("PATCH", path, patch, "application/merge-patch+json");
      if (!patched_text) return "patch pod annotations: " + patched_text.error().ToString();
      Result<json> patched = ParseJson(*patched_text, kMaxJsonDepth);
      if (!patched) return "patch pod annotations: answer: " + patched.error();
      device::UsageIndex::Written stored;
      stored.rv = k8s::ResourceVersionNumber(*patched);
      Result<device::PodView> view = device::ParsePodView(*patched);
      Result<std::optional<device::PodAllocation>> now =
          view ? device::PodAllocationFromPod(self->registry_, *view) : alloc;
      if (now) stored.allocation = *now;
      *written = std::move(stored);
      // The bind reads the decision from this answer instead of a GET of the pod.
      self->KeepDecided(key, std::move(*patched));
      if (self->events_) {
        self->Event(raw_copy ? *raw_copy : *raw, "Normal", "FilteringSucceed", succeeded);
      }
      return std::nullopt;
    }
  };
  Write write{this,
              pod.Key(),
              k8s::resources::kPods.Path(pod.namespace_name, pod.name),
              DecisionPatch(annotations, chosen->node),
              std::move(alloc),
              written,
              std::move(succeeded),
              std::nullopt,
              &raw_pod};
  if (deferred) {
    if (events_) write.raw_copy = raw_pod;
    write.raw = nullptr;
    *deferred = std::move(write);
    return EncodeFilterResult(result);
  }
  if (std::optional<std::string> error = write()) return FilterError(*error);
  return EncodeFilterResult(result);
}

size_t Extender::FiltersWaitingForTheirPod() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_for_pod_;
}

void Extender::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    writes_cv_.wait(lock, [&] { return stopping_ || !writes_.empty(); });
    if (writes_.empty()) return;  // stopping, all written
    std::function<void()> job = std::move(writes_.front());
    writes_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // releases the claim outside mu_ (its destructor takes mu_)
    lock.lock();
  }
}

void Extender::StopWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  writes_cv_.notify_all();
  for (std::thread& writer : writers_) {
    if (writer.joinable()) writer.join();
  }
}

void Extender::ReleaseNodeLock(const std::string& node, const std::string& ns,
                               const std::string& pod) {
  // A lock left behind blocks every bind to the node until it expires (5 minutes); Release
  // retries transient errors and conflicts, and never removes a lock taken by someone else.
  if (Status s = locker_.Release(node, ns, pod); !s) {
    HAMI_WARN("release lock of node {} for {}/{}: {}", node, ns, pod, s.error());
  }
}

Status Extender::TakeVendorLocks(const BindStart& start, TakenLocks* taken) {
  const std::string& node = start.args.node;
  auto fail = [&](std::string message) -> Status {
    ReleaseVendorLocks(node, *taken);
    taken->clear();
    return Error{std::move(message)};
  };
  for (const device::Device* backend : start.vendor_locks) {
    const std::string key(backend->VendorLockKey());
    // Decided on the node as read and written on that resourceVersion only, so two binds racing
    // for the lock cannot both win; a node changed meanwhile by anything else (the handshake,
    // another vendor's lock) is read again and the lock decided again (client-go's
    // RetryOnConflict).
    std::string refusal;
    std::string value_written;
    auto written = k8s::RetryOnConflict<json>(5, [&]() -> k8s::ApiResult<json> {
      auto raw =
          k8s::RetryTransient<json>([&] { return client_.Get(k8s::resources::kNodes, "", node); });
      if (!raw) return raw;
      Result<std::string> value =
          backend->TakeVendorLock(device::NodeViewFromNode(*raw), clock_.Now());
      if (!value) {
        refusal = value.error();
        return *raw;
      }
      value_written = *value;
      json patch = {
          {"metadata",
           {{"annotations", {{key, *value}}}, {"resourceVersion", k8s::ResourceVersion(*raw)}}}};
      return client_.Patch(k8s::resources::kNodes, "", node, k8s::PatchType::kMerge, patch);
    });
    if (!refusal.empty()) return fail(refusal);
    if (!written) {
      return fail("node " + node + ": take lock " + key + ": " + written.error().ToString());
    }
    taken->emplace_back(key, value_written);
  }
  return OkStatus();
}

void Extender::ReleaseVendorLocks(const std::string& node, const TakenLocks& taken) {
  for (const auto& [key, value] : taken) {
    if (Status s = nodelock::ReleaseVendorLock(client_, node, key, value); !s) {
      HAMI_WARN("{}", s.error());
    }
  }
}

HttpReply Extender::Bind(std::string_view body) {
  std::promise<HttpReply> reply;
  std::future<HttpReply> got = reply.get_future();
  BindAsync(std::string(body), [&reply](HttpReply r) { reply.set_value(std::move(r)); });
  return got.get();
}

void Extender::BindAsync(std::string body, std::function<void(HttpReply)> done) {
  Result<BindingArgs> args = ParseBindingArgs(body);
  if (!args) {
    return done(HttpReply{DecodeErrorStatus(args.error()), EncodeBindingResult(args.error())});
  }
  BindParsed(std::move(*args), std::move(done));
}

void Extender::BindParsed(BindingArgs args, std::function<void(HttpReply)> done) {
  if (options_.async_decision_write) {
    const std::string ns = args.pod_namespace.empty() ? "default" : args.pod_namespace;
    const std::string key = ns + "/" + args.pod_name;
    std::unique_lock<std::mutex> lock(mu_);
    if (filtering_.count(key) != 0) {
      // The pod's decision is still being written: the bind goes on once its claim is released
      // (holding no thread meanwhile), and reads the pod with the decision on it.
      after_claim_[key].push_back([this, args = std::move(args), done = std::move(done)]() mutable {
        BindParsed(std::move(args), std::move(done));
      });
      return;
    }
    if (auto it = failed_writes_.find(key); it != failed_writes_.end()) {
      const std::string error = "the filter's decision was not written: " + it->second.error;
      json pod = {{"kind", "Pod"},
                  {"apiVersion", "v1"},
                  {"metadata", {{"namespace", ns}, {"name", args.pod_name}}}};
      if (!it->second.uid.empty()) pod["metadata"]["uid"] = it->second.uid;
      failed_writes_.erase(it);
      lock.unlock();
      Event(pod, "Warning", "BindingFailed", error);
      return done(Ok(EncodeBindingResult(error)));
    }
  }
  std::optional<BindStart> prepared;
  HttpReply early = PrepareBind(std::move(args), &prepared);
  if (!prepared) return done(std::move(early));
  auto start = std::make_shared<BindStart>(std::move(*prepared));
  auto rest = [this, start, done = std::move(done)](Status locked) {
    done(BindLocked(*start, locked));
  };
  if (!start->needs_lock) return rest(OkStatus());
  // Waiting for the lock holds no thread: the rest of the bind runs once it is taken.
  locker_.AcquireAsync(start->args.node, start->ns, start->args.pod_name, std::move(rest));
}

void Extender::KeepDecided(const std::string& key, json pod) {
  std::lock_guard<std::mutex> lock(mu_);
  EraseOldestIfFull(decided_, key, kMaxDecided);
  decided_[key] = Decided{std::move(pod), decided_seq_++};
}

std::optional<json> Extender::TakeDecided(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = decided_.find(key);
  if (it == decided_.end()) return std::nullopt;
  json pod = std::move(it->second.pod);
  decided_.erase(it);
  return pod;
}

std::optional<std::string> Extender::IdentityRefusal(const BindingArgs& args, const std::string& ns,
                                                     const json& raw, bool* bound_here) const {
  *bound_here = false;
  // The decision was made for the pod with this UID: one deleted and created again under the
  // same name (a StatefulSet's) is another pod and gets nothing; the Binding carries the UID too.
  if (!args.pod_uid.empty() && k8s::Uid(raw) != args.pod_uid) {
    return "pod " + ns + "/" + args.pod_name + " has UID " + Quote(k8s::Uid(raw)) +
           ", not the bind request's " + Quote(args.pod_uid);
  }
  // A pod that is already bound gets no second bind: kube-scheduler binds again when the answer
  // to its first Binding was lost (the API server restarted after writing it), and writing
  // bind-phase allocating again would undo the device plugin's success, or take the node lock
  // from the pod the plugin is allocating. Bound here, the bind is done; elsewhere, it fails.
  if (const std::string bound = k8s::FieldString(raw, "spec.nodeName"); !bound.empty()) {
    if (bound == args.node) {
      *bound_here = true;
      return std::string();
    }
    return "pod " + ns + "/" + args.pod_name + " is already bound to node " + Quote(bound);
  }
  return std::nullopt;
}

std::optional<std::string> Extender::DecisionRefusal(const BindingArgs& args, const std::string& ns,
                                                     const json& raw, bool requests_devices) const {
  // With the decision written in the background, a pod whose write failed and whose failure
  // record is gone (past max_failed_writes) must not be bound without its devices: the device
  // plugin would fail its Allocate on the node.
  const std::string decided = k8s::Annotation(raw, protocol::kVgpuNodeKey).value_or("");
  if (options_.async_decision_write && requests_devices && decided != args.node) {
    return "pod " + ns + "/" + args.pod_name + " has no decision for node " + Quote(args.node) +
           " (" + std::string(protocol::kVgpuNodeKey) + " is " + Quote(decided) +
           "); it is scheduled again";
  }
  return std::nullopt;
}

HttpReply Extender::PrepareBind(BindingArgs parsed, std::optional<BindStart>* start) {
  BindingArgs* args = &parsed;
  const std::string ns = args->pod_namespace.empty() ? "default" : args->pod_namespace;
  // The pod as this scheduler's decision write stored it, when that is the pod's last write the
  // bind knows of: the bind-phase patch is made conditional on its resourceVersion (BindLocked
  // reads the pod again when it changed). Otherwise the pod is read.
  std::string decided_rv;
  json raw;
  if (std::optional<json> kept = TakeDecided(ns + "/" + args->pod_name);
      kept && !k8s::ResourceVersion(*kept).empty() &&
      (args->pod_uid.empty() || k8s::Uid(*kept) == args->pod_uid)) {
    decided_rv = k8s::ResourceVersion(*kept);
    raw = std::move(*kept);
  } else {
    auto got = client_.Get(k8s::resources::kPods, ns, args->pod_name);
    if (!got) {
      // The index is not touched: the pod informer removes a pod that is gone, and a transient
      // error here says nothing about the pod's allocation.
      return Ok(EncodeBindingResult("get pod " + ns + "/" + args->pod_name + ": " +
                                    got.error().ToString()));
    }
    raw = std::move(*got);
  }
  bool bound_here = false;
  if (std::optional<std::string> why = IdentityRefusal(*args, ns, raw, &bound_here)) {
    return Ok(EncodeBindingResult(*why));
  }
  Result<device::PodView> pod = device::ParsePodView(raw);
  if (!pod) return Ok(EncodeBindingResult(pod.error()));
  // Only a regular container's device request takes the lock (the plugin's Allocate needs it).
  // Each backend says which lock (HAMi's LockNode): HAMi's node lock, its own, or none.
  bool needs_lock = false;
  bool requests_devices = false;
  std::vector<const device::Device*> vendor_locks;
  if (auto reqs = device::NormalizePodRequests(registry_, *pod)) {
    requests_devices = !reqs->Empty();
    for (size_t i = reqs->init_count; i < reqs->containers.size(); ++i) {
      for (const auto& [vendor, req] : reqs->containers[i]) {
        if (req.nums <= 0) continue;
        const device::Device* backend = registry_.Find(vendor);
        const device::BindLock kind =
            backend ? backend->BindLockKind() : device::BindLock::kNodeLock;
        needs_lock |= kind == device::BindLock::kNodeLock;
        if (kind == device::BindLock::kVendor &&
            std::find(vendor_locks.begin(), vendor_locks.end(), backend) == vendor_locks.end()) {
          vendor_locks.push_back(backend);
        }
      }
    }
  }
  if (std::optional<std::string> why = DecisionRefusal(*args, ns, raw, requests_devices)) {
    Event(raw, "Warning", "BindingFailed", *why);
    return Ok(EncodeBindingResult(*why));
  }
  *start = BindStart{std::move(*args), ns,         std::move(raw),         std::move(decided_rv),
                     requests_devices, needs_lock, std::move(vendor_locks)};
  return HttpReply{};
}

HttpReply Extender::BindLocked(const BindStart& start, const Status& locked) {
  const BindingArgs* args = &start.args;
  const std::string& ns = start.ns;
  const json* raw = &start.raw;
  const bool needs_lock = start.needs_lock;
  TakenLocks vendor_keys;  // the vendor locks taken
  auto fail = [&](const std::string& message, bool release) {
    if (release) ReleaseNodeLock(args->node, ns, args->pod_name);
    ReleaseVendorLocks(args->node, vendor_keys);
    Event(*raw, "Warning", "BindingFailed", message);
    return Ok(EncodeBindingResult(message));
  };
  if (!locked) return fail(locked.error(), false);
  if (Status v = TakeVendorLocks(start, &vendor_keys); !v) return fail(v.error(), needs_lock);
  json patch = {
      {"metadata",
       {{"annotations",
         {{std::string(protocol::kBindPhaseKey),
           std::string(protocol::FormatBindPhase(protocol::BindPhase::kAllocating))},
          {std::string(protocol::kBindTimeKey), protocol::FormatBindTime(clock_.Now())}}}}}};
  // Both writes are retried on transient errors: a failed bind costs the pod a backoff and
  // every other pod for this node a wait for the lock release.
  auto write_patch = [&] {
    return k8s::RetryTransient<json>([&] {
      return client_.Patch(k8s::resources::kPods, ns, args->pod_name, k8s::PatchType::kMerge,
                           patch);
    });
  };
  if (!start.decided_rv.empty()) patch["metadata"]["resourceVersion"] = start.decided_rv;
  auto patched = write_patch();
  if (!patched && !start.decided_rv.empty() && k8s::IsConflict(patched.error())) {
    // The pod changed since the decision write stored it: read it and check it again, as a bind
    // that read the pod first would have, then write the patch as that bind writes it.
    auto now = k8s::RetryTransient<json>(
        [&] { return client_.Get(k8s::resources::kPods, ns, args->pod_name); });
    if (!now) {
      return fail("get pod " + ns + "/" + args->pod_name + ": " + now.error().ToString(),
                  needs_lock);
    }
    bool bound_here = false;
    if (std::optional<std::string> why = IdentityRefusal(*args, ns, *now, &bound_here)) {
      // Bound here already: that bind's lock is the plugin's to release.
      if (bound_here) return Ok(EncodeBindingResult(""));
      return fail(*why, needs_lock);
    }
    if (std::optional<std::string> why = DecisionRefusal(*args, ns, *now, start.requests_devices)) {
      return fail(*why, needs_lock);
    }
    patch["metadata"].erase("resourceVersion");  // as a bind that read the pod first writes it
    patched = write_patch();
  }
  if (!patched) return fail("patch pod: " + patched.error().ToString(), needs_lock);
  auto bound = k8s::RetryTransient<std::monostate>(
      [&] { return client_.Bind(ns, args->pod_name, args->node, args->pod_uid); });
  // A 409 after a try whose answer was lost is that try's Binding: the pod is bound here, its
  // lock is the plugin's to release.
  if (!bound && !(k8s::IsConflict(bound.error()) &&
                  client_.BoundTo(ns, args->pod_name, args->node, args->pod_uid))) {
    return fail("bind: " + bound.error().ToString(), needs_lock);
  }
  Event(*raw, "Normal", "BindingSucceed",
        "Successfully binding node [" + args->node + "] to " + ns + "/" + args->pod_name);
  return Ok(EncodeBindingResult(""));
}

}  // namespace hami::scheduler
