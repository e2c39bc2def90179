// Helpers for tests that start the real binaries: spawn a process with its stdout and stderr
// captured in a temp file (printed when the current test has failed), pick a free loopback
// port, wait for an HTTP endpoint with a deadline, stop with SIGTERM and reap. Header-only.
#ifndef HAMI_TESTS_INTEGRATION_HARNESS_H_
#define HAMI_TESTS_INTEGRATION_HARNESS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace hami::integration {

// A port that was free on 127.0.0.1 a moment ago (the kernel's next ephemeral port, so a
// collision with another process before our child binds it is unlikely).
inline int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// A fresh directory under $TMPDIR (or /tmp), removed by the caller.
inline std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + ".XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  return ::mkdtemp(buf.data()) ? std::string(buf.data()) : std::string();
}

// One child process. Its stdout and stderr go to `<log_dir>/<name>.log`; when the running test
// has failed, the destructor prints that log so the failure comes with the binary's account.
class Process {
 public:
  Process(std::string name, std::string log_dir) : name_(std::move(name)) {
    log_path_ = log_dir + "/" + name_ + ".log";
  }
  ~Process() {
    Stop();
    if (::testing::Test::HasFailure()) {
      std::fprintf(stderr, "----- %s (%s) -----\n%s----- end of %s -----\n", name_.c_str(),
                   log_path_.c_str(), Log().c_str(), name_.c_str());
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // argv[0] is the binary's path. Returns false when posix_spawn fails.
  bool Start(const std::vector<std::string>& argv) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<std::string> args = argv;
    std::vector<char*> raw;
    for (std::string& a : args) raw.push_back(a.data());
    raw.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, raw[0], &actions, nullptr, raw.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) pid_ = -1;
    return rc == 0;
  }

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // SIGTERM, then waits up to `grace` before SIGKILL. Returns the wait status (-1: not running).
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10)) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        status = -2;  // did not stop on SIGTERM
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    return status;
  }

  // True while the child has not exited (reaps it when it has).
  bool Alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }

  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string name_;
  std::string log_path_;
  pid_t pid_ = -1;
};

// Polls GET http://127.0.0.1:<port><path> until it answers 200, `process` dies, or `timeout`
// passes.
inline bool WaitForHttp(int port, const std::string& path, Process* process,
                        std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(std::chrono::milliseconds(200));
  while (std::chrono::steady_clock::now() < deadline) {
    if (process != nullptr && !process->Alive()) return false;
    if (auto res = http.Get(path.c_str()); res && res->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace hami::integration

#endif  // HAMI_TESTS_INTEGRATION_HARNESS_H_
