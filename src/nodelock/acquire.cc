#include "nodelock/acquire.h"

#include <future>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/object.h"
#include "nodelock/call.h"
#include "nodelock/release.h"
#include "protocol/bind.h"
#include "protocol/keys.h"

namespace hami::nodelock {
namespace {

using k8s::Json;
namespace res = k8s::resources;

// Rounds of GET + conditional write before a node whose annotations keep changing counts as busy.
constexpr int kConflictRounds = 5;

// Whether the pod named by a lock may still use it. A 404 says it is gone. A pod that has ended
// (phase Failed or Succeeded) gets no Allocate any more: a kubelet that failed it while its
// device plugin was away left the lock behind. A pod whose bind-phase is success has been
// allocated: the plugin wrote that and then failed to release (the API server was away), so
// the lock outlived its use (bind-phase failed is not taken for done: a pod bound again carries
// it until the new bind writes allocating). HAMi takes only a 404 for gone, so such locks
// blocked the node until they expired. An error that persists says nothing, and a live owner's
// lock must not be taken.
bool OwnerExists(k8s::Client& client, const protocol::LockOwner& owner,
                 const k8s::RetryPolicy& retry) {
  auto pod =
      k8s::RetryTransient<Json>(retry, [&] { return client.Get(res::kPods, owner.ns, owner.pod); });
  if (!pod) return !k8s::IsNotFound(pod.error());
  const std::string phase = k8s::FieldString(*pod, "status.phase");
  if (phase == "Failed" || phase == "Succeeded") return false;
  return k8s::Annotation(*pod, protocol::kBindPhaseKey) !=
         protocol::FormatBindPhase(protocol::BindPhase::kSuccess);
}

}  // namespace

Result<bool> TryAcquire(k8s::Client& client, std::string_view node, std::string_view ns,
                        std::string_view pod, SystemTime now, const AcquireOptions& options,
                        std::string* why) {
  auto request = [&](const std::optional<std::string>& current) {
    protocol::LockRequest req;
    req.node = node;
    if (current) req.current = *current;
    req.ns = ns;
    req.pod = pod;
    req.now = now;
    req.zone = options.zone;
    req.timeout = options.timeout;
    return req;
  };
  // The resourceVersion makes the write conditional: a racing writer gets 409 and we re-read.
  auto write = [&](const std::string& rv, const std::string& value) {
    Json patch;
    patch["metadata"]["resourceVersion"] = rv;
    patch["metadata"]["annotations"][std::string(protocol::kNodeLockKey)] = value;
    return k8s::RetryTransient<Json>(options.retry, [&] {
      return client.Patch(res::kNodes, "", node, k8s::PatchType::kMerge, patch);
    });
  };
  auto write_failed = [&](const k8s::ApiError& e) -> Result<bool> {
    return Error{"lock node " + Quote(node) + ": " + internal::Describe(e, options.retry)};
  };
  // The cache's copy, taken only when it shows the lock free: any other answer (held, ours
  // already, expired) is decided on a fresh read, as a cache may lag the plugin's release or
  // another replica's write.
  if (options.seen) {
    if (std::optional<SeenNode> seen = options.seen(node);
        seen && !seen->resource_version.empty()) {
      protocol::LockDecision d = protocol::DecideNodeLock(request(seen->lock));
      if (d.action == protocol::LockAction::kAcquire) {
        auto r = write(seen->resource_version, d.new_value);
        if (r) return true;
        if (!k8s::IsConflict(r.error())) return write_failed(r.error());
      }
    }
  }
  for (int round = 0; round < kConflictRounds; ++round) {
    auto n = internal::GetNode(client, node, options.retry);
    if (!n) return std::move(n).take_error();
    std::optional<std::string> current = k8s::Annotation(*n, protocol::kNodeLockKey);
    protocol::LockRequest req = request(current);
    protocol::LockDecision d = protocol::DecideNodeLock(req);
    if (d.action == protocol::LockAction::kBusy && current) {
      auto lock = protocol::ParseNodeLock(*current);
      if (lock && lock->owner && !OwnerExists(client, *lock->owner, options.retry)) {
        req.owner_exists = false;
        d = protocol::DecideNodeLock(req);
      }
    }
    switch (d.action) {
      case protocol::LockAction::kAlreadyOwned:
        return true;
      case protocol::LockAction::kMalformed:
        return Error{d.message};
      case protocol::LockAction::kBusy:
        *why = d.message;
        return false;
      case protocol::LockAction::kAcquire:
      case protocol::LockAction::kTakeOver:
        break;
    }
    auto r = write(k8s::ResourceVersion(*n), d.new_value);
    if (r) return true;
    if (!k8s::IsConflict(r.error())) return write_failed(r.error());
  }
  *why = "node " + std::string(node) + " lock: too many conflicting writers";
  return false;
}

Locker::Locker(k8s::Client& client, const Clock& clock, LockerOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {
  timer_ = std::thread([this] { TimerLoop(); });
}

Locker::~Locker() { Stop(); }

void Locker::SetExecutor(Executor executor) { executor_ = std::move(executor); }

void Locker::Stop(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) stop_reason_ = why;
    stopped_ = true;
    timer_cv_.notify_all();
  }
  if (timer_.joinable() && timer_.get_id() != std::this_thread::get_id()) timer_.join();
}

void Locker::Run(std::function<void()> task) {
  if (executor_) {
    executor_(std::move(task));
  } else {
    task();
  }
}

void Locker::TimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopped_) {
    if (polls_.empty()) {
      timer_cv_.wait(lock);
      continue;
    }
    auto due = polls_.begin()->first;
    if (std::chrono::steady_clock::now() < due) {
      timer_cv_.wait_until(lock, due);
      continue;
    }
    std::string node = polls_.begin()->second;
    polls_.erase(polls_.begin());
    lock.unlock();
    Run([this, node] { Attempt(node); });
    lock.lock();
  }
  // Stopped: every queued pod is answered now.
  std::vector<std::string> nodes;
  for (const auto& [node, q] : queues_) nodes.push_back(node);
  lock.unlock();
  for (const std::string& node : nodes) Attempt(node);
}

void Locker::AcquireAsync(const std::string& node, std::string ns, std::string pod,
                          std::function<void(Status)> then) {
  auto waiter = std::make_shared<Waiter>();
  waiter->ns = std::move(ns);
  waiter->pod = std::move(pod);
  waiter->then = std::move(then);
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = queues_[node];
    q.push_back(waiter);
    first = q.size() == 1;
  }
  // Queued behind another pod: Finish starts this one's turn. Queued after Stop: the timer has
  // already answered the queues, so this one is answered here.
  if (first) Attempt(node);
}

Status Locker::Acquire(const std::string& node, std::string ns, std::string pod) {
  std::promise<Status> done;
  std::future<Status> got = done.get_future();
  AcquireAsync(node, std::move(ns), std::move(pod),
               [&done](Status s) { done.set_value(std::move(s)); });
  return got.get();
}

Status Locker::Release(std::string_view node, std::string_view ns, std::string_view pod,
                       std::string_view seen) {
  return nodelock::Release(client_, node, ns, pod, seen, options_.acquire.retry);
}

void Locker::Attempt(const std::string& node) {
  std::shared_ptr<Waiter> head;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = queues_.find(node);
    if (it == queues_.end() || it->second.empty()) return;
    if (stopped_) {
      // The whole queue is answered at once.
      std::deque<std::shared_ptr<Waiter>> all;
      all.swap(it->second);
      queues_.erase(it);
      std::vector<std::shared_ptr<Waiter>> to_answer;
      for (auto& w : all) {
        if (!w->answered) {
          w->answered = true;
          to_answer.push_back(w);
        }
      }
      const std::string why = stop_reason_;
      lock.unlock();
      for (auto& w : to_answer) w->then(Error{why});
      return;
    }
    head = it->second.front();
    if (!head->first) {
      head->first = true;
      head->deadline = clock_.Now() + options_.wait;
    }
  }
  std::string why;
  Result<bool> taken =
      TryAcquire(client_, node, head->ns, head->pod, clock_.Now(), options_.acquire, &why);
  if (!taken) return Finish(node, head, std::move(taken).take_error());
  if (*taken) return Finish(node, head, OkStatus());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_ && clock_.Now() < head->deadline) {
      polls_.emplace(std::chrono::steady_clock::now() + options_.poll_interval, node);
      timer_cv_.notify_all();
      return;
    }
  }
  // Out of time, or stopped while this attempt ran (the stop answers the rest of the queue).
  Finish(node, head, Error{why});
}

void Locker::Finish(const std::string& node, const std::shared_ptr<Waiter>& waiter, Status status) {
  bool next = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (waiter->answered) {
      // Answered by the stop while this attempt ran: a lock it took is given back.
      lock.unlock();
      if (status.ok()) {
        if (Status s = Release(node, waiter->ns, waiter->pod); !s) {
          HAMI_WARN("give back lock of node {} for {}/{}: {}", node, waiter->ns, waiter->pod,
                    s.error());
        }
      }
      return;
    }
    waiter->answered = true;
    auto it = queues_.find(node);
    if (it != queues_.end() && !it->second.empty() && it->second.front() == waiter) {
      it->second.pop_front();
      next = !it->second.empty();
      if (!next) queues_.erase(it);
    }
  }
  // The next in line starts trying while this one goes on with its bind.
  if (next) Run([this, node] { Attempt(node); });
  waiter->then(std::move(status));
}

}  // namespace hami::nodelock
