// scheduler::EventQueue: Events (FilteringSucceed, BindingFailed, ...) are written by one
// background thread, so a /filter or /bind reply never waits for the API server's event write
// (a round trip, and a --kube-qps token, per decision). Bounded: past `max_pending` queued
// events new ones are dropped and counted, as client-go's broadcaster drops under pressure.
#ifndef HAMI_SCHEDULER_EVENT_QUEUE_H_
#define HAMI_SCHEDULER_EVENT_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "k8s/client.h"

namespace hami::scheduler {

class EventQueue {
 public:
  // `client` must outlive the queue. `component` is the event source (--scheduler-name).
  // Its thread is named hami-events and runs `nice` nicer than the process (common/thread.h).
  static constexpr size_t kDefaultMaxPending = 1000;
  EventQueue(k8s::Client& client, std::string component, size_t max_pending = kDefaultMaxPending,
             int nice = 0);
  ~EventQueue();  // sends what is queued, then stops
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Queues an event about `involved` (only its kind, apiVersion and metadata are kept).
  void Record(const nlohmann::json& involved, std::string_view type, std::string_view reason,
              std::string message);
  // Blocks until every event queued before the call has been sent (or failed).
  void Flush();
  uint64_t dropped() const;
  uint64_t failed() const;

 private:
  struct Pending {
    nlohmann::json involved;
    std::string type, reason, message;
  };
  void Run();

  k8s::Client& client_;
  const std::string component_;
  const size_t max_pending_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  uint64_t queued_ = 0;  // events accepted so far
  uint64_t sent_ = 0;    // of those, sent or failed
  uint64_t dropped_ = 0;
  uint64_t failed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_EVENT_QUEUE_H_
