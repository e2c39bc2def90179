// The node's MIG apply lock (docs/MIG.md "Device plugin"): an exclusive flock(2) on
// /tmp/hami/hami-mig-apply.lock, held while the plugin creates or destroys MIG instances, so
// another tool on the node that takes the same lock (and a second plugin process) never changes
// the GPU's instances at the same time. HAMi v2.10 names the file; flock makes it a lock rather
// than a marker, and the kernel drops it when the holder dies, so no stale lock survives.
#ifndef HAMI_DEVICEPLUGIN_MIG_APPLY_LOCK_H_
#define HAMI_DEVICEPLUGIN_MIG_APPLY_LOCK_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace hami::deviceplugin {

inline constexpr std::string_view kMigApplyLockPath = "/tmp/hami/hami-mig-apply.lock";

// How long AcquireWithin waits while another process (the device plugin, an operator's tool)
// holds the lock: polled every `poll` until `timeout`, then an error saying so. A caller serving
// a gRPC request waits this way rather than in a blocking flock, which would hold the request
// (and whatever the caller serialises behind it) for as long as the other holder keeps the lock.
struct MigLockWait {
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds poll{50};
  const Clock* clock = nullptr;                          // null: RealClock()
  std::function<void(std::chrono::milliseconds)> sleep;  // empty: std::this_thread::sleep_for
};

// One holder of the lock: an open file description of the lock file. Two MigApplyLocks on the
// same path exclude each other, in one process as across processes. Not thread-safe itself.
class MigApplyLock {
 public:
  explicit MigApplyLock(std::string path = std::string(kMigApplyLockPath));
  ~MigApplyLock();  // releases
  MigApplyLock(const MigApplyLock&) = delete;
  MigApplyLock& operator=(const MigApplyLock&) = delete;

  // Creates the directory and the file when missing, then blocks until the lock is held.
  // Errors name the path and the system error.
  Status Acquire();
  // As Acquire, but answers false at once when another holder has it.
  Result<bool> TryAcquire();
  // As Acquire, but polls TryAcquire under `wait` and fails naming the path and the wait when
  // another holder keeps the lock past `wait.timeout`.
  Status AcquireWithin(const MigLockWait& wait);
  // Releases; a no-op when not held.
  void Release();
  bool held() const { return held_; }
  const std::string& path() const { return path_; }

 private:
  Status Open();
  std::string path_;
  int fd_ = -1;
  bool held_ = false;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_MIG_APPLY_LOCK_H_
