// The bind workers of hami-sim's kube-scheduler loops (internal to hami-sim): a fixed pool of
// threads running tasks in submission order. Each thread owns a Context it hands to every task
// it runs (extender mode: its HTTP client to the extender). Tasks submitted under one key (a
// node) run one at a time, in submission order: SubmitSerial, then SerialDone when the task is
// done.
#ifndef HAMI_SIM_WORKER_POOL_H_
#define HAMI_SIM_WORKER_POOL_H_

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace hami::sim {

// What a task gets when the pool needs no per-thread state.
struct NoWorkerContext {};

template <typename Context>
class WorkerPool {
 public:
  using Task = std::function<void(Context&)>;

  WorkerPool() = default;
  ~WorkerPool() { Stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // `threads` (at least 1) threads, each with the Context `make` returns (default-constructed
  // when `make` is empty; then Context must be default-constructible).
  void Start(int threads, std::function<std::unique_ptr<Context>()> make = {}) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      workers_.emplace_back([this, make] {
        std::unique_ptr<Context> ctx;
        if (make) {
          ctx = make();
        } else {
          if constexpr (std::is_default_constructible_v<Context>) {
            ctx = std::make_unique<Context>();
          }
        }
        Run(*ctx);
      });
    }
  }
  // Waits for the running tasks; queued ones are dropped. Idempotent.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void Submit(Task task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Runs `task` once the tasks submitted earlier under `key` are SerialDone.
  void SubmitSerial(const std::string& key, Task task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!busy_.insert(key).second) {
        waiting_[key].push_back(std::move(task));
        return;
      }
      work_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // The task SubmitSerial ran under `key` is done: the next one for `key` may run.
  void SerialDone(const std::string& key) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = waiting_.find(key);
      if (it == waiting_.end() || it->second.empty()) {
        busy_.erase(key);
        if (it != waiting_.end()) waiting_.erase(it);
        return;
      }
      work_.push_back(std::move(it->second.front()));
      it->second.pop_front();
    }
    cv_.notify_one();
  }

 private:
  void Run(Context& ctx) {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || !work_.empty(); });
      if (stop_) return;
      Task task = std::move(work_.front());
      work_.pop_front();
      lock.unlock();
      task(ctx);
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> work_;
  std::map<std::string, std::deque<Task>> waiting_;  // by key, behind the running one
  std::set<std::string> busy_;                       // keys with a task queued or running
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_WORKER_POOL_H_
