#include "deviceplugin/mps_daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/mps.h"

extern char** environ;

namespace hami::deviceplugin {
namespace {

constexpr size_t kMaxOutput = 64 * 1024;

// Closes the descriptors it holds when it goes out of scope.
class Fds {
 public:
  ~Fds() {
    for (int fd : fds_) ::close(fd);
  }
  int Add(int fd) {
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }
  void Close(int fd) {
    auto it = std::find(fds_.begin(), fds_.end(), fd);
    if (it == fds_.end()) return;
    ::close(fd);
    fds_.erase(it);
  }

 private:
  std::vector<int> fds_;
};

Error SysError(const std::string& what, int err) { return Error{what + ": " + std::strerror(err)}; }

int ExitCode(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return -1;
}

// Waits for `pid` to exit until `deadline`; false when it has not. Uses a pidfd (Linux 5.3);
// without one, polls waitpid.
bool WaitUntil(pid_t pid, std::chrono::steady_clock::time_point deadline, int* wstatus) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  for (;;) {
    const pid_t r = ::waitpid(pid, wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) {
      if (pidfd >= 0) ::close(pidfd);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (pidfd >= 0) ::close(pidfd);
      return false;
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      ::poll(nullptr, 0, static_cast<int>(std::min<int64_t>(left.count(), 10)));
    }
  }
}

std::vector<std::string> MergedEnv(const std::vector<std::string>& overrides) {
  std::vector<std::string> out = overrides;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    const std::string_view key = kv.substr(0, kv.find('=') + 1);
    bool overridden = false;
    for (const std::string& o : overrides)
      overridden |= std::string_view(o).substr(0, key.size()) == key;
    if (!overridden) out.emplace_back(kv);
  }
  return out;
}

}  // namespace

std::string FindExecutable(std::string_view name, std::string_view path) {
  auto executable = [](const std::string& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) return "";
  if (name.find('/') != std::string_view::npos) {
    return executable(std::string(name)) ? std::string(name) : "";
  }
  for (std::string_view dir : SplitNonEmpty(path, ':')) {
    std::string candidate = std::string(dir) + "/" + std::string(name);
    if (executable(candidate)) return candidate;
  }
  return "";
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, std::string_view input,
                                 std::chrono::milliseconds timeout) {
  if (argv.empty()) return Error{"no command"};
  const std::string what = Quote(argv[0]);
  Fds fds;
  // Output goes to a memory file, not a pipe: a daemon the command forks may keep it open, and
  // nothing blocks on a full buffer.
  const int out = fds.Add(::memfd_create("hami-command-output", MFD_CLOEXEC));
  if (out < 0) return SysError(what + ": memfd_create", errno);
  // stdin is a socket so that writing to a command that exited early is EPIPE, not SIGPIPE.
  int in[2] = {-1, -1};
  if (input.empty()) {
    in[0] = fds.Add(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (in[0] < 0) return SysError(what + ": open /dev/null", errno);
  } else {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
      return SysError(what + ": socketpair", errno);
    }
    fds.Add(in[0]);
    fds.Add(in[1]);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
  std::vector<std::string> args = argv, envs = MergedEnv(env);
  std::vector<char*> cargv, cenv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (std::string& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return SysError("run " + what, rc);
  // The child's end: once the command exits nothing holds it, and a send fails instead of
  // blocking on a full buffer.
  fds.Close(in[0]);
  if (!input.empty()) {
    size_t sent = 0;
    while (sent < input.size()) {
      const ssize_t n = ::send(in[1], input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the command stopped reading: its exit status tells
      sent += static_cast<size_t>(n);
    }
    ::shutdown(in[1], SHUT_WR);
  }
  int wstatus = 0;
  if (!WaitUntil(pid, std::chrono::steady_clock::now() + timeout, &wstatus)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &wstatus, 0);
    return Error{what + " did not exit within " + std::to_string(timeout.count()) + " ms"};
  }
  CommandResult result;
  result.status = ExitCode(wstatus);
  char buf[4096];
  off_t offset = 0;
  while (result.output.size() < kMaxOutput) {
    const ssize_t n = ::pread(out, buf, sizeof buf, offset);
    if (n <= 0) break;
    result.output.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return result;
}

MpsDaemons::MpsDaemons(MpsDaemonOptions options, std::vector<std::string> gpu_uuids,
                       const Clock& clock)
    : options_(std::move(options)), gpus_(std::move(gpu_uuids)), clock_(clock) {}

std::vector<std::string> MpsDaemons::Env(const std::string& uuid) const {
  return {"CUDA_VISIBLE_DEVICES=" + uuid,
          "CUDA_MPS_PIPE_DIRECTORY=" + MpsPipeHostDir(options_.root, uuid),
          "CUDA_MPS_LOG_DIRECTORY=" + MpsLogHostDir(options_.root, uuid)};
}

bool MpsDaemons::Answers(const std::string& uuid) {
  auto r = RunCommand({control_}, Env(uuid), "get_default_active_thread_percentage\n",
                      options_.command_timeout);
  return r && r->status == 0;
}

Status MpsDaemons::Launch(const std::string& uuid) {
  for (const std::string& dir :
       {MpsPipeHostDir(options_.root, uuid), MpsLogHostDir(options_.root, uuid)}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      return Error{"MPS daemon of GPU " + Quote(uuid) + ": create " + Quote(dir) + ": " +
                   ec.message()};
  }
  ++launches_;
  auto r = RunCommand({control_, "-d"}, Env(uuid), "", options_.command_timeout);
  if (!r) return Error{"MPS daemon of GPU " + Quote(uuid) + ": " + r.error()};
  if (r->status != 0) {
    return Error{"MPS daemon of GPU " + Quote(uuid) + ": " + Quote(control_) + " -d exited " +
                 std::to_string(r->status) + ": " + Quote(Trim(r->output))};
  }
  HAMI_INFO("MPS control daemon of GPU {} started (pipe {})", uuid,
            MpsPipeHostDir(options_.root, uuid));
  return OkStatus();
}

Status MpsDaemons::Start() {
  next_ = clock_.Now() + options_.watch_interval;
  const char* path = std::getenv("PATH");
  control_ = FindExecutable(options_.control, path ? path : "");
  if (control_.empty()) {
    HAMI_INFO(
        "operatingmode mps: {} not found (not executable or not on PATH): no MPS control daemon "
        "is started; containers still get the MPS env and mounts of {}",
        Quote(options_.control), options_.root);
    return OkStatus();
  }
  Status result = OkStatus();
  for (const std::string& uuid : gpus_) {
    if (Answers(uuid)) {
      HAMI_INFO("MPS control daemon of GPU {} is already running", uuid);
      continue;
    }
    if (Status s = Launch(uuid); !s) result = s;
  }
  return result;
}

void MpsDaemons::Tick() {
  if (control_.empty() || stopped_) return;
  const SystemTime now = clock_.Now();
  if (now < next_) return;
  next_ = now + options_.watch_interval;
  for (const std::string& uuid : gpus_) {
    if (Answers(uuid)) continue;
    HAMI_WARN("MPS control daemon of GPU {} does not answer; starting it again", uuid);
    if (Status s = Launch(uuid); !s) HAMI_ERROR("{}", s.error());
  }
}

void MpsDaemons::Stop() {
  if (control_.empty() || stopped_) return;
  stopped_ = true;
  for (const std::string& uuid : gpus_) {
    auto r = RunCommand({control_}, Env(uuid), "quit\n", options_.command_timeout);
    if (!r) {
      HAMI_WARN("MPS control daemon of GPU {}: quit: {}", uuid, r.error());
    } else if (r->status != 0) {
      HAMI_WARN("MPS control daemon of GPU {}: quit exited {}: {}", uuid, r->status,
                Trim(r->output));
    }
  }
}

}  // namespace hami::deviceplugin
