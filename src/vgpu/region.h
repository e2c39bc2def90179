// Access to the shared region file (layout in shared_region.h) for one process.
//
// Locking: the 8-byte `owner_pid` word at offset 16 is the region lock itself. A process takes it
// with a compare-and-swap 0 -> pid; a waiter that finds the owner dead (no such process, or a
// zombie) steals it with a compare-and-swap owner -> pid, so a SIGKILLed holder never wedges the
// container and there is no window between "owner cleared" and "lock released". Waiting is
// bounded (Lock() takes a timeout); callers degrade instead of blocking the host program.
//
// Slots: each process owns one slot for its lifetime. Slots never move (no compaction), so a
// cached slot index stays valid; dead processes' slots are zeroed and reused, and proc_num
// shrinks when the tail is free. All writes to any slot happen under the region lock, so usage
// checks (sum over slots) and charges are atomic with respect to other processes: N processes
// allocating at once never exceed the limit. Readers outside the lock use the slot seqlock.
#ifndef HAMI_VGPU_REGION_H_
#define HAMI_VGPU_REGION_H_

#include <cstddef>
#include <cstdint>

#include "vgpu/env.h"
#include "vgpu/shared_region.h"

namespace hami::vgpu {

enum class ChargeKind { kData, kContext, kModule };

// The identity of the region file (as /proc/<pid>/maps shows a mapping of it).
struct FileId {
  std::uint64_t inode = 0;
  unsigned int dev_major = 0;
  unsigned int dev_minor = 0;
};
enum class ChargeResult { kOk, kOverLimit, kUnaccounted };

inline constexpr int kDefaultLockTimeoutMs = 5000;
// How often each process's guardian checks the region (Region::Guard).
inline constexpr int kGuardPeriodMs = 50;

// True when `pid` exists and is not a zombie (reads /proc/<pid>/stat).
bool ProcessAlive(std::int32_t pid);

// The SIGBUS guard of a shared mapping: when a process of the container truncates the file, an
// access to [map, map + size) faults; the handler extends the file (through `fd`, kept open by
// the caller) back to `file_size` and the access is retried on zero-filled pages instead of
// killing this process. One slot per mapping; installing a slot again replaces it.
inline constexpr int kBusGuardRegion = 0;
inline constexpr int kBusGuardLimiter = 1;
inline constexpr int kBusGuardSlots = 2;
void GuardAgainstTruncation(int slot, int fd, void* map, std::size_t size, std::size_t file_size);

class Region {
 public:
  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() { Close(); }

  // Opens the file at config.cache_path, creating and initialising it (limits, SM limits,
  // priority from `config`) when its magic is not set yet. Otherwise, with limits from the
  // environment the file's values win and differences are logged; with limits from the limits
  // file (config.from_limits_file) the file's limits, SM limits and priority are rewritten to
  // config's, and Limit()/SmLimit() answer config's values whatever the region holds later.
  // Never changes umask. On failure returns false with a message in err.
  bool Open(const VgpuConfig& config, char* err, std::size_t errcap);
  // Unmaps without touching the slot (used after fork and at teardown).
  void Close();
  bool is_open() const { return region_ != nullptr; }
  hami_shared_region_t* raw() const { return region_; }

  // Takes the region lock: at once from a dead holder, after timeout_ms from any holder. Returns
  // false only when the region is not open.
  bool Lock(int timeout_ms = kDefaultLockTimeoutMs);
  void Unlock();

  // Takes a slot for `pid`: its old slot after PID reuse, else a free one, else appends. Sweeps
  // dead slots first. Returns false when the lock timed out or all 1024 slots are live.
  bool Join(std::int32_t pid);
  // Zeroes and frees this process's slot (exit path).
  void Leave();
  int slot_index() const { return slot_; }

  // If limit(dev) == 0 or usage(dev) + bytes <= limit(dev): adds bytes to this process's slot
  // and returns kOk. Otherwise sweeps dead slots once, re-checks, and returns kOverLimit.
  // `usage`/`limit` (optional) receive the values the decision was made on. kUnaccounted when
  // there is no slot or dev is out of range (the caller passes the call through). With
  // enforce == false the bytes are added even over the limit (context estimates).
  ChargeResult Charge(int dev, std::uint64_t bytes, ChargeKind kind, std::uint64_t* usage,
                      std::uint64_t* limit, bool enforce = true);
  void Uncharge(int dev, std::uint64_t bytes, ChargeKind kind);

  // Sum of used[dev].total over live slots (seqlock-consistent per slot).
  std::uint64_t Usage(int dev) const;
  std::uint64_t Limit(int dev) const;
  std::uint64_t SmLimit(int dev) const;

  // Frees slots of dead processes; requires the lock. Returns how many were freed.
  int SweepDeadSlotsLocked();

  // Checks the region against this process's own view and repairs it (docs/vgpu.md "Region
  // tampering"): a file truncated by someone else is extended again; an invalid header is
  // rebuilt (limits as this process knows them) keeping the slots of live processes that map the
  // file; this process's slot is re-taken and re-published from its own bookkeeping; an
  // implausible proc_num is recomputed. Runs periodically (the guardian thread) and whenever a
  // charge finds the region inconsistent. Returns true when something had to be repaired.
  bool Guard();

  // Publishes the NVML device count and UUIDs (the monitor skips entries with empty UUIDs).
  void SetDeviceInfo(int count, const char (*uuids)[HAMI_REGION_UUID_LEN]);
  // Stores max(last_kernel_time, unix_seconds).
  void RecordKernelTime(std::uint64_t unix_seconds);
  // Writes this process's SM utilisation sample for dev (watcher).
  void SetOwnSmUtil(int dev, std::uint64_t percent);
  // Records this process's host PID (as NVML reports it) in its slot.
  void SetOwnHostPid(std::int32_t hostpid);
  // This process's host PID as recorded by SetOwnHostPid (0: unknown).
  std::int32_t own_hostpid() const { return own_hostpid_; }

 private:
  hami_proc_slot_t* OwnSlot() const;
  ChargeResult ChargeLocked(int dev, std::uint64_t bytes, ChargeKind kind, bool locked,
                            bool enforce, std::uint64_t* usage, std::uint64_t* limit);
  void InitHeader(const VgpuConfig& config);
  void CheckHeader(const VgpuConfig& config);
  // Rebuilds the header keeping live slots (requires the lock or the creation lockf).
  void RebuildHeaderLocked();
  // Cheap consistency check of the header and this process's slot (requires the lock).
  bool ConsistentLocked() const;
  // Re-takes and re-publishes this process's slot, recomputes proc_num (requires the lock).
  void RepublishLocked();
  void PublishOwnLocked(hami_proc_slot_t* slot);
  // True when another live process maps this region file (its slot may have been lost).
  bool OtherMappers() const;

  hami_shared_region_t* region_ = nullptr;
  int fd_ = -1;  // kept open: the guardian and the SIGBUS guard re-extend a truncated file
  FileId file_;
  // This process's own bookkeeping (what it has charged), the source of truth for its slot.
  std::uint64_t own_[HAMI_REGION_MAX_DEVICES][3] = {};  // context, module, data
  // The header as this process knows it, for a rebuild.
  std::uint64_t seen_limit_[HAMI_REGION_MAX_DEVICES] = {};
  std::uint64_t seen_sm_limit_[HAMI_REGION_MAX_DEVICES] = {};
  std::int32_t seen_priority_ = 1;
  std::int32_t own_hostpid_ = 0;
  bool trusted_ = false;  // limits from the read-only limits file
  std::uint64_t trusted_limit_[HAMI_REGION_MAX_DEVICES] = {};
  std::uint64_t trusted_sm_limit_[HAMI_REGION_MAX_DEVICES] = {};
  std::int32_t pid_ = 0;
  int slot_ = -1;
};

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_REGION_H_
