#include "deviceplugin/mig_apply_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/strings.h"

namespace hami::deviceplugin {

MigApplyLock::MigApplyLock(std::string path) : path_(std::move(path)) {}

MigApplyLock::~MigApplyLock() {
  Release();
  if (fd_ >= 0) ::close(fd_);
}

Status MigApplyLock::Open() {
  if (fd_ >= 0) return OkStatus();
  std::error_code ec;
  const auto dir = std::filesystem::path(path_).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return Error{"MIG apply lock: create " + Quote(dir.string()) + ": " + ec.message()};
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return Error{"MIG apply lock: open " + Quote(path_) + ": " + std::strerror(errno)};
  return OkStatus();
}

Status MigApplyLock::Acquire() {
  if (held_) return OkStatus();
  if (Status s = Open(); !s) return s;
  int rc;
  do {
    rc = ::flock(fd_, LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return Error{"MIG apply lock: flock " + Quote(path_) + ": " + std::strerror(errno)};
  held_ = true;
  return OkStatus();
}

Result<bool> MigApplyLock::TryAcquire() {
  if (held_) return true;
  if (Status s = Open(); !s) return std::move(s).take_error();
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return false;
    return Error{"MIG apply lock: flock " + Quote(path_) + ": " + std::strerror(errno)};
  }
  held_ = true;
  return true;
}

Status MigApplyLock::AcquireWithin(const MigLockWait& wait) {
  const Clock& clock = wait.clock != nullptr ? *wait.clock : RealClock();
  const SystemTime deadline = clock.Now() + wait.timeout;
  for (;;) {
    Result<bool> got = TryAcquire();
    if (!got) return Error{got.error()};
    if (*got) return OkStatus();
    if (clock.Now() >= deadline) {
      return Error{"another process has held " + path_ + " for more than " +
                   std::to_string(wait.timeout.count()) +
                   " ms (it is changing this node's MIG instances); retry"};
    }
    if (wait.sleep) {
      wait.sleep(wait.poll);
    } else {
      std::this_thread::sleep_for(wait.poll);
    }
  }
}

void MigApplyLock::Release() {
  if (!held_) return;
  ::flock(fd_, LOCK_UN);
  held_ = false;
}

}  // namespace hami::deviceplugin
