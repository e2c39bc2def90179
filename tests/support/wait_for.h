// Waiting in tests for what another thread makes true (an informer's event, a pod's state): not
// for timing, which tests inject (hami::Clock). Include as "support/wait_for.h".
#ifndef HAMI_TESTS_SUPPORT_WAIT_FOR_H_
#define HAMI_TESTS_SUPPORT_WAIT_FOR_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace hami::test_support {

// Polls `cond` every 10 ms until it holds (true) or `limit` passes (then one last look).
inline bool WaitFor(const std::function<bool()>& cond,
                    std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
    if (cond()) return true;
  }
  return cond();
}

// A request held in a stand-in (the sim API server's fail_request hook) until the test lets it
// go: Wait() blocks the calling thread until Open().
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

}  // namespace hami::test_support

#endif  // HAMI_TESTS_SUPPORT_WAIT_FOR_H_
