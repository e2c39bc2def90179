#include "scheduler/event_queue.h"

#include <utility>

#include "common/log.h"
#include "common/thread.h"

namespace hami::scheduler {

using nlohmann::json;

EventQueue::EventQueue(k8s::Client& client, std::string component, size_t max_pending, int nice)
    : client_(client), component_(std::move(component)), max_pending_(max_pending) {
  thread_ = std::thread([this, nice] {
    NameThisThread("hami-events");
    if (Status s = LowerThisThreadPriority(nice); !s) HAMI_WARN("event sender: {}", s.error());
    Run();
  });
}

EventQueue::~EventQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EventQueue::Record(const json& involved, std::string_view type, std::string_view reason,
                        std::string message) {
  // The event names its object by reference: copying the pod's metadata is enough.
  json ref = json::object();
  for (const char* field : {"kind", "apiVersion", "metadata"}) {
    auto it = involved.find(field);
    if (it != involved.end()) ref[field] = *it;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.size() >= max_pending_) {
    if (dropped_++ == 0) HAMI_WARN("event queue full ({} pending): dropping events", max_pending_);
    return;
  }
  queue_.push_back({std::move(ref), std::string(type), std::string(reason), std::move(message)});
  ++queued_;
  cv_.notify_all();
}

void EventQueue::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = queued_;
  cv_.wait(lock, [&] { return sent_ >= target; });
}

uint64_t EventQueue::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

uint64_t EventQueue::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

void EventQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything was sent
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    auto r = client_.RecordEvent(p.involved, p.type, p.reason, p.message, component_);
    lock.lock();
    if (!r) {
      ++failed_;
      HAMI_VLOG(2, "event {}: {}", p.reason, r.error().ToString());
    }
    ++sent_;
    cv_.notify_all();
  }
}

}  // namespace hami::scheduler
