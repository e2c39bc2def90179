// The MPS control daemons of `operatingmode: mps` (docs/MIG.md "MPS"): one
// `nvidia-cuda-mps-control -d` per GPU, started with CUDA_VISIBLE_DEVICES=<GPU UUID> and the
// pipe and log directories the containers mount (mps.h MpsPipeHostDir, MpsLogHostDir). The plugin
// watches them on its loop: every watch interval each daemon is asked a question through the
// control binary (`get_default_active_thread_percentage` on its stdin); one that does not answer
// is started again. Stop sends `quit` the same way. Where the control binary is absent the
// daemons are the host's business: one log line, and Allocate still gives the env and mounts.
#ifndef HAMI_DEVICEPLUGIN_MPS_DAEMON_H_
#define HAMI_DEVICEPLUGIN_MPS_DAEMON_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace hami::deviceplugin {

inline constexpr std::string_view kMpsControlBinary = "nvidia-cuda-mps-control";
inline constexpr std::chrono::seconds kMpsWatchInterval{10};

struct MpsDaemonOptions {
  // A path, or a name looked up on $PATH.
  std::string control = std::string(kMpsControlBinary);
  std::string root = "/run/nvidia/mps";  // <root>/<GPU UUID>/{pipe,log}
  std::chrono::milliseconds watch_interval = kMpsWatchInterval;
  // How long one control command may run before it is killed (counts as a failure).
  std::chrono::milliseconds command_timeout{10000};
};

// `name` when it contains a '/' and is an executable file; else the first executable
// <dir>/<name> of the ':'-separated `path`; "" when none.
std::string FindExecutable(std::string_view name, std::string_view path);

// The exit status and the combined stdout and stderr of one finished command.
struct CommandResult {
  int status = -1;  // exit code; 128 + signal when killed
  std::string output{};
};

// Runs `argv` (argv[0] is the executable's path) with the process environment plus `env`
// ("K=V", overriding), `input` on its stdin (empty: /dev/null), and waits at most `timeout`
// for it to exit; a command past it is killed and answers an error. Output beyond 64 KiB is
// dropped. A process the command leaves behind (a daemon) is not waited for. Thread-safe.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, std::string_view input,
                                 std::chrono::milliseconds timeout);

// Thread-compatible: the plugin's loop calls Tick; Start and Stop come before and after it.
class MpsDaemons {
 public:
  // `clock` must outlive the object. `gpu_uuids`: the plugin's GPUs (after the config's filters).
  MpsDaemons(MpsDaemonOptions options, std::vector<std::string> gpu_uuids, const Clock& clock);

  // Finds the control binary (absent: logs one line and does nothing, now or later), creates
  // each GPU's pipe and log directories, adopts a daemon that already answers and starts the
  // others. Errors name the GPU and what failed; a failed GPU is retried by Tick.
  Status Start();
  // When the watch interval has passed: starts each daemon that no longer answers.
  void Tick();
  // Sends `quit` to each GPU's daemon (none when the binary is absent). Idempotent.
  void Stop();

  // The control binary found by Start; "" when absent (or before Start).
  const std::string& control() const { return control_; }
  // Daemons launched so far (restarts included).
  int launches() const { return launches_; }

 private:
  std::vector<std::string> Env(const std::string& uuid) const;
  bool Answers(const std::string& uuid);
  Status Launch(const std::string& uuid);

  const MpsDaemonOptions options_;
  const std::vector<std::string> gpus_;
  const Clock& clock_;
  std::string control_;
  SystemTime next_{};
  bool stopped_ = false;
  int launches_ = 0;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_MPS_DAEMON_H_
