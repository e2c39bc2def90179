// Test helper: the real hami-scheduler binary as a child process. Its stderr is drained by a
// thread (so the child never blocks on a full pipe) and kept for assertions; WaitForPort() reads
// the "serving on port N" line the binary logs once it listens. The child runs with TZ=UTC so the
// handshake and node-lock timestamps it writes are predictable.
#ifndef HAMI_TESTS_SCHEDULER_SCHEDULER_PROCESS_H_
#define HAMI_TESTS_SCHEDULER_SCHEDULER_PROCESS_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace hami::scheduler::testing {

class SchedulerProcess {
 public:
  // Starts `binary` with `args` (argv[1..]); environment: the parent's plus TZ=UTC.
  SchedulerProcess(const std::string& binary, const std::vector<std::string>& args) {
    std::vector<std::string> argv_store = {binary};
    argv_store.insert(argv_store.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_store) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_store = {"TZ=UTC"};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string(*e).rfind("TZ=", 0) != 0) env_store.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (std::string& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    // Only async-signal-safe calls between fork and exec: the test process has threads.
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      execve(binary.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    close(fds[1]);
    if (pid_ < 0) {
      close(fds[0]);
      return;
    }
    fd_ = fds[0];
    reader_ = std::thread([this] { Drain(); });
  }

  ~SchedulerProcess() {
    Kill(SIGKILL);
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) close(fd_);
  }

  SchedulerProcess(const SchedulerProcess&) = delete;
  SchedulerProcess& operator=(const SchedulerProcess&) = delete;

  bool started() const { return pid_ > 0; }
  // The child's process id while it runs (for /proc/<pid>/status), else -1.
  pid_t pid() const { return pid_; }

  // The API port from the log; -1 when the process exits or `timeout` passes first.
  int WaitForPort(std::chrono::seconds timeout = std::chrono::seconds(20)) {
    static const std::regex serving("serving on port (\\d+)\\D");  // whole number only
    std::unique_lock<std::mutex> lock(mu_);
    std::smatch m;
    bool found =
        cv_.wait_for(lock, timeout, [&] { return std::regex_search(log_, m, serving) || eof_; });
    if (!found || !std::regex_search(log_, m, serving)) return -1;
    return std::stoi(m[1].str());
  }

  // Sends `sig` and reaps the child; returns the wait status (-1 when none was running).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  std::string log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  void Drain() {
    char buf[1024];
    for (;;) {
      ssize_t n = read(fd_, buf, sizeof(buf));
      std::lock_guard<std::mutex> lock(mu_);
      if (n <= 0) {
        eof_ = true;
        cv_.notify_all();
        return;
      }
      log_.append(buf, static_cast<size_t>(n));
      cv_.notify_all();
    }
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string log_;
  bool eof_ = false;
};

}  // namespace hami::scheduler::testing

#endif  // HAMI_TESTS_SCHEDULER_SCHEDULER_PROCESS_H_
