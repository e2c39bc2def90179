#include "vgpu/region.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "vgpu/log.h"

namespace hami::vgpu {
namespace {

template <typename T>
T Load(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <typename T>
void Store(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

std::int64_t MonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void Backoff(int attempt) {
  if (attempt < 64) {
    sched_yield();
    return;
  }
  timespec ts{0, attempt < 256 ? 50000 : 500000};  // 50 us, then 0.5 ms
  nanosleep(&ts, nullptr);
}

void ZeroSlotCounters(hami_proc_slot_t* slot) {
  // A writer killed mid-update left the counter odd; make the bracket odd/even regardless.
  std::uint64_t seq = Load(&slot->seqlock) | 1;
  Store(&slot->seqlock, seq);
  for (int d = 0; d < HAMI_REGION_MAX_DEVICES; ++d) {
    hami_device_memory_t* m = &slot->used[d];
    Store(&m->context_size, std::uint64_t{0});
    Store(&m->module_size, std::uint64_t{0});
    Store(&m->data_size, std::uint64_t{0});
    Store(&m->offset, std::uint64_t{0});
    Store(&m->total, std::uint64_t{0});
    Store(&slot->monitorused[d], std::uint64_t{0});
    Store(&slot->device_util[d].sm_util, std::uint64_t{0});
    Store(&slot->device_util[d].dec_util, std::uint64_t{0});
    Store(&slot->device_util[d].enc_util, std::uint64_t{0});
  }
  Store(&slot->seqlock, seq + 1);
}

std::uint64_t ReadSlotTotal(const hami_proc_slot_t* slot, int dev) {
  for (int attempt = 0;; ++attempt) {
    std::uint64_t before = Load(&slot->seqlock);
    std::uint64_t total = Load(&slot->used[dev].total);
    std::uint64_t after = Load(&slot->seqlock);
    // A writer that died mid-update leaves the counter odd forever; after a few tries take the
    // value as it is rather than spin.
    if ((before == after && (before & 1) == 0) || attempt > 100) return total;
    sched_yield();
  }
}

std::uint64_t* KindField(hami_device_memory_t* m, ChargeKind kind) {
  switch (kind) {
    case ChargeKind::kContext:
      return &m->context_size;
    case ChargeKind::kModule:
      return &m->module_size;
    case ChargeKind::kData:
      break;
  }
  return &m->data_size;
}

// The SIGBUS guard: a file truncated by another process of the container (the region, the
// limiter side file) makes every access to its mapping fault. The handler extends the file again
// (ftruncate is async-signal-safe) and returns, so the faulting access is retried on zero-filled
// pages; the next charge or the guardian then repairs a region's contents, the limiter its
// bucket's. Faults elsewhere go to the previous handler.
struct BusGuard {
  std::atomic<int> fd{-1};
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::size_t> size{0};       // bytes mapped
  std::atomic<std::size_t> file_size{0};  // what the file is extended to
};
BusGuard g_bus[kBusGuardSlots];
struct sigaction g_bus_previous;
std::atomic<bool> g_bus_installed{false};

void OnBus(int sig, siginfo_t* info, void* uctx) {
  auto addr = reinterpret_cast<std::uintptr_t>(info != nullptr ? info->si_addr : nullptr);
  for (BusGuard& g : g_bus) {
    std::uintptr_t begin = g.begin.load(std::memory_order_relaxed);
    int fd = g.fd.load(std::memory_order_relaxed);
    if (fd >= 0 && begin != 0 && addr >= begin &&
        addr < begin + g.size.load(std::memory_order_relaxed) &&
        ftruncate(fd, static_cast<off_t>(g.file_size.load(std::memory_order_relaxed))) == 0) {
      return;
    }
  }
  if ((g_bus_previous.sa_flags & SA_SIGINFO) != 0 && g_bus_previous.sa_sigaction != nullptr) {
    g_bus_previous.sa_sigaction(sig, info, uctx);
  } else if (g_bus_previous.sa_handler == SIG_IGN) {
    return;
  } else if (g_bus_previous.sa_handler != SIG_DFL && g_bus_previous.sa_handler != nullptr) {
    g_bus_previous.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

void ReleaseBusGuard(int slot, int fd) {
  if (g_bus[slot].fd.load() != fd) return;
  g_bus[slot].begin.store(0);
  g_bus[slot].fd.store(-1);
}

// True when process `pid` maps the file `file` (device and inode; reads /proc/<pid>/maps).
bool MapsFile(std::int32_t pid, const FileId& file) {
  if (file.inode == 0) return false;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/maps", pid);
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char line[512];
  bool found = false;
  while (!found && std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned int dev_major = 0, dev_minor = 0;
    unsigned long long ino = 0;
    // A line longer than the buffer continues on the next read: its tail never parses as one.
    if (std::sscanf(line, "%*s %*s %*s %x:%x %llu", &dev_major, &dev_minor, &ino) == 3) {
      found = ino == file.inode && dev_major == file.dev_major && dev_minor == file.dev_minor;
    }
  }
  std::fclose(f);
  return found;
}

}  // namespace

void GuardAgainstTruncation(int slot, int fd, void* map, std::size_t size, std::size_t file_size) {
  if (slot < 0 || slot >= kBusGuardSlots) return;
  BusGuard& g = g_bus[slot];
  g.begin.store(0);
  g.size.store(size);
  g.file_size.store(file_size);
  g.fd.store(fd);
  g.begin.store(reinterpret_cast<std::uintptr_t>(map));
  if (g_bus_installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_sigaction = OnBus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_bus_previous);
}

bool ProcessAlive(std::int32_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  // The state follows the last ')' (the command name may itself contain parentheses).
  const char* paren = std::strrchr(buf, ')');
  if (paren == nullptr || paren[1] == '\0' || paren[2] == '\0') return true;
  char state = paren[2];
  return state != 'Z' && state != 'X' && state != 'x';
}

bool Region::Open(const VgpuConfig& config, char* err, std::size_t errcap) {
  Close();
  pid_ = static_cast<std::int32_t>(getpid());
  // Created here (O_EXCL) or found: only a found file can have lost the slots of live processes.
  int fd = open(config.cache_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  const bool created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = open(config.cache_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    std::snprintf(err, errcap, "CUDA_DEVICE_MEMORY_SHARED_CACHE: cannot open \"%s\": %s",
                  config.cache_path, std::strerror(errno));
    return false;
  }
  // 0666 regardless of the host program's umask, without touching the umask itself. Fails
  // harmlessly when the file belongs to another user.
  fchmod(fd, 0666);
  if (lockf(fd, F_LOCK, 0) != 0) {
    std::snprintf(err, errcap, "cannot lock \"%s\": %s", config.cache_path, std::strerror(errno));
    close(fd);
    return false;
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  if (ok) {
    file_ = FileId{static_cast<std::uint64_t>(st.st_ino), major(st.st_dev), minor(st.st_dev)};
  }
  if (ok && st.st_size < HAMI_REGION_FILE_SIZE) {
    char zero = 0;
    ok = pwrite(fd, &zero, 1, sizeof(hami_shared_region_t)) == 1;
  }
  void* map = MAP_FAILED;
  if (ok) {
    map = mmap(nullptr, sizeof(hami_shared_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (map == MAP_FAILED) {
    std::snprintf(err, errcap, "cannot size or map \"%s\": %s", config.cache_path,
                  std::strerror(errno));
    lockf(fd, F_ULOCK, 0);
    close(fd);
    return false;
  }
  region_ = static_cast<hami_shared_region_t*>(map);
  fd_ = fd;
  GuardAgainstTruncation(kBusGuardRegion, fd, map, sizeof(hami_shared_region_t),
                         HAMI_REGION_FILE_SIZE);
  trusted_ = config.from_limits_file;
  for (int i = 0; i < HAMI_REGION_MAX_DEVICES; ++i) {
    trusted_limit_[i] = config.memory_limit[i];
    trusted_sm_limit_[i] = config.sm_limit[i];
  }
  std::memset(own_, 0, sizeof(own_));
  bool rebuilt = false;
  if (Load(&region_->initialized_flag) != HAMI_REGION_MAGIC) {
    // A new file, or one whose header was destroyed (truncated, zeroed, overwritten): the slots
    // of live processes that map it are kept, never reset to zero.
    InitHeader(config);
    rebuilt = true;
  } else {
    CheckHeader(config);
  }
  for (int i = 0; i < HAMI_REGION_MAX_DEVICES; ++i) {
    seen_limit_[i] = Load(&region_->limit[i]);
    seen_sm_limit_[i] = Load(&region_->sm_limit[i]);
  }
  seen_priority_ = Load(&region_->priority);
  RecordKernelTime(static_cast<std::uint64_t>(time(nullptr)));
  lockf(fd, F_ULOCK, 0);
  if (rebuilt && !created && OtherMappers()) {
    // Processes of the container lost their slots with the header: their guardians re-publish
    // them from their own bookkeeping within a period; wait for that before charging anything.
    VGPU_WARN("shared region \"%s\" was invalid while in use; rebuilt, waiting for its processes",
              config.cache_path);
    timespec ts{0, 3 * kGuardPeriodMs * 1000000L};
    nanosleep(&ts, nullptr);
  }
  return true;
}

bool Region::OtherMappers() const {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (!found) {
    dirent* e = readdir(proc);
    if (e == nullptr) break;
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::int32_t pid = static_cast<std::int32_t>(std::strtol(e->d_name, nullptr, 10));
    found = pid != pid_ && MapsFile(pid, file_);
  }
  closedir(proc);
  return found;
}

void Region::InitHeader(const VgpuConfig& config) {
  for (int i = 0; i < HAMI_REGION_MAX_DEVICES; ++i) {
    seen_limit_[i] = config.memory_limit[i];
    seen_sm_limit_[i] = config.sm_limit[i];
  }
  seen_priority_ = config.priority;
  RebuildHeaderLocked();
}

void Region::RebuildHeaderLocked() {
  hami_shared_region_t* r = region_;
  // Slots of live processes that map this file are kept as they are (their owners re-publish
  // them from their own bookkeeping); everything else may hold anything: zeros.
  int last = -1;
  for (int i = 0; i < HAMI_REGION_MAX_PROCS; ++i) {
    hami_proc_slot_t* slot = &r->procs[i];
    std::int32_t pid = Load(&slot->pid);
    bool keep = pid > 0 && (pid == pid_ || (ProcessAlive(pid) && MapsFile(pid, file_)));
    if (keep) {
      std::int32_t status = Load(&slot->status);
      if (status != HAMI_SLOT_RUNNING && status != HAMI_SLOT_SUSPENDED) {
        Store(&slot->status, static_cast<std::int32_t>(HAMI_SLOT_RUNNING));
      }
      last = i;
    } else if (pid != 0 || Load(&slot->status) != 0) {
      std::memset(static_cast<void*>(slot), 0, sizeof(*slot));
    }
  }
  Store(&r->initialized_flag, 0);
  std::uint64_t owner = Load(&r->owner_pid);  // the lock word: whoever holds it keeps it
  std::memset(static_cast<void*>(r), 0, offsetof(hami_shared_region_t, procs));
  Store(&r->owner_pid, owner);
  std::memset(static_cast<void*>(&r->proc_num), 0,
              sizeof(*r) - offsetof(hami_shared_region_t, proc_num));
  r->major_version = HAMI_REGION_MAJOR;
  r->minor_version = HAMI_REGION_MINOR;
  sem_init(&r->sem, 1, 1);
  sem_init(&r->sem_postinit, 1, 1);
  for (int i = 0; i < HAMI_REGION_MAX_DEVICES; ++i) {
    r->limit[i] = trusted_ ? trusted_limit_[i] : seen_limit_[i];
    r->sm_limit[i] = trusted_ ? trusted_sm_limit_[i] : seen_sm_limit_[i];
  }
  r->utilization_switch = 1;
  r->recent_kernel = 2;
  r->proc_num = last + 1;
  r->priority = seen_priority_;
  Store(&r->initialized_flag, static_cast<std::int32_t>(HAMI_REGION_MAGIC));
}

bool Region::ConsistentLocked() const {
  const hami_shared_region_t* r = region_;
  int n = Load(&r->proc_num);
  return Load(&r->initialized_flag) == HAMI_REGION_MAGIC && slot_ >= 0 && n > slot_ &&
         n <= HAMI_REGION_MAX_PROCS && Load(&r->procs[slot_].pid) == pid_;
}

void Region::PublishOwnLocked(hami_proc_slot_t* slot) {
  std::uint64_t seq = Load(&slot->seqlock) | 1;
  Store(&slot->seqlock, seq);
  for (int d = 0; d < HAMI_REGION_MAX_DEVICES; ++d) {
    hami_device_memory_t* m = &slot->used[d];
    Store(&m->context_size, own_[d][0]);
    Store(&m->module_size, own_[d][1]);
    Store(&m->data_size, own_[d][2]);
    Store(&m->offset, std::uint64_t{0});
    Store(&m->total, own_[d][0] + own_[d][1] + own_[d][2]);
  }
  Store(&slot->seqlock, seq + 1);
  Store(&slot->hostpid, own_hostpid_);
  Store(&slot->status, static_cast<std::int32_t>(HAMI_SLOT_RUNNING));
  Store(&slot->pid, pid_);
}

void Region::RepublishLocked() {
  hami_shared_region_t* r = region_;
  if (Load(&r->initialized_flag) != HAMI_REGION_MAGIC) RebuildHeaderLocked();
  if (slot_ < 0 || Load(&r->procs[slot_].pid) != pid_) {
    int mine = -1, free_slot = -1;
    for (int i = 0; i < HAMI_REGION_MAX_PROCS && mine < 0; ++i) {
      std::int32_t pid = Load(&r->procs[i].pid);
      if (pid == pid_) mine = i;
      if (pid == 0 && free_slot < 0) free_slot = i;
    }
    slot_ = mine >= 0 ? mine : free_slot;
    if (slot_ < 0) return;
    if (mine < 0) ZeroSlotCounters(&r->procs[slot_]);
  }
  PublishOwnLocked(&r->procs[slot_]);
  int n = Load(&r->proc_num);
  if (n <= slot_ || n > HAMI_REGION_MAX_PROCS) {
    int last = slot_;
    for (int i = HAMI_REGION_MAX_PROCS - 1; i > last; --i) {
      if (Load(&r->procs[i].pid) != 0) last = i;
    }
    Store(&r->proc_num, static_cast<std::int32_t>(last + 1));
  }
}

bool Region::Guard() {
  if (region_ == nullptr || fd_ < 0) return false;
  bool repaired = false;
  struct stat st;
  if (fstat(fd_, &st) == 0 && st.st_size < HAMI_REGION_FILE_SIZE) {
    repaired = ftruncate(fd_, HAMI_REGION_FILE_SIZE) == 0;
  }
  if (slot_ < 0 || !Lock(1000)) return repaired;
  bool same = ConsistentLocked();
  const hami_proc_slot_t* slot = &region_->procs[slot_];
  for (int d = 0; same && d < HAMI_REGION_MAX_DEVICES; ++d) {
    same = Load(&slot->used[d].context_size) == own_[d][0] &&
           Load(&slot->used[d].module_size) == own_[d][1] &&
           Load(&slot->used[d].data_size) == own_[d][2];
  }
  if (!same) {
    VGPU_WARN("shared region inconsistent with this process's bookkeeping; repaired");
    RepublishLocked();
    repaired = true;
  }
  Unlock();
  return repaired;
}

void Region::CheckHeader(const VgpuConfig& config) {
  hami_shared_region_t* r = region_;
  if (r->major_version != HAMI_REGION_MAJOR || r->minor_version != HAMI_REGION_MINOR) {
    VGPU_ERROR("shared region version %u.%u, expected %d.%d", r->major_version, r->minor_version,
               HAMI_REGION_MAJOR, HAMI_REGION_MINOR);
  }
  if (config.from_limits_file) {
    // The region is writable by the container; the read-only limits file is not. Whatever an
    // earlier process (limits unset) or a writer put here is replaced.
    for (int i = 0; i < HAMI_REGION_MAX_DEVICES; ++i) {
      if (Load(&r->limit[i]) != config.memory_limit[i] ||
          Load(&r->sm_limit[i]) != config.sm_limit[i]) {
        VGPU_WARN("device %d limits in the region (%lu bytes, %lu%%) replaced by %s's", i,
                  static_cast<unsigned long>(Load(&r->limit[i])),
                  static_cast<unsigned long>(Load(&r->sm_limit[i])), kLimitsFileName);
        Store(&r->limit[i], config.memory_limit[i]);
        Store(&r->sm_limit[i], config.sm_limit[i]);
      }
    }
    Store(&r->priority, static_cast<std::int32_t>(config.priority));
    return;
  }
  for (int i = 0; i < HAMI_REGION_MAX_DEVICES; ++i) {
    if (Load(&r->limit[i]) != config.memory_limit[i]) {
      VGPU_ERROR("Limit inconsistency detected for %dth device, %lu expected, get %lu", i,
                 static_cast<unsigned long>(config.memory_limit[i]),
                 static_cast<unsigned long>(Load(&r->limit[i])));
    }
    if (Load(&r->sm_limit[i]) != config.sm_limit[i]) {
      VGPU_INFO("SM limit inconsistency detected for %dth device, %lu expected, get %lu", i,
                static_cast<unsigned long>(config.sm_limit[i]),
                static_cast<unsigned long>(Load(&r->sm_limit[i])));
    }
  }
}

void Region::Close() {
  if (region_ != nullptr) munmap(region_, sizeof(hami_shared_region_t));
  if (fd_ >= 0) {
    ReleaseBusGuard(kBusGuardRegion, fd_);
    close(fd_);
  }
  fd_ = -1;
  region_ = nullptr;
  slot_ = -1;
}

bool Region::Lock(int timeout_ms) {
  if (region_ == nullptr) return false;
  std::uint64_t* owner = &region_->owner_pid;
  const std::uint64_t me = static_cast<std::uint64_t>(pid_);
  std::int64_t deadline = -1;
  for (int attempt = 0;; ++attempt) {
    std::uint64_t expected = 0;
    if (__atomic_compare_exchange_n(owner, &expected, me, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED)) {
      return true;
    }
    // Check the holder's liveness every few rounds; a dead holder's lock is taken over at once.
    if (attempt % 16 == 15 && expected != me &&
        !ProcessAlive(static_cast<std::int32_t>(expected))) {
      if (__atomic_compare_exchange_n(owner, &expected, me, false, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        VGPU_WARN("took over the region lock from dead process %lu",
                  static_cast<unsigned long>(expected));
        // The dead holder may have been mid-update of its own slot: reclaim it now.
        SweepDeadSlotsLocked();
        return true;
      }
    }
    if (attempt == 64) deadline = MonotonicMs() + timeout_ms;
    if (deadline >= 0 && attempt % 16 == 0 && MonotonicMs() > deadline) {
      // Critical sections last microseconds; a holder that keeps the lock this long is stopped
      // or its pid was reused after it died. Take the lock over rather than stall every
      // operation of this container for the timeout again and again.
      expected = Load(owner);
      if (__atomic_compare_exchange_n(owner, &expected, me, false, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        VGPU_ERROR("Lock shrreg timeout after %d ms, taken over from pid %lu", timeout_ms,
                   static_cast<unsigned long>(expected));
        return true;
      }
    }
    Backoff(attempt);
  }
}

void Region::Unlock() {
  std::uint64_t expected = static_cast<std::uint64_t>(pid_);
  __atomic_compare_exchange_n(&region_->owner_pid, &expected, std::uint64_t{0}, false,
                              __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

int Region::SweepDeadSlotsLocked() {
  hami_shared_region_t* r = region_;
  int freed = 0;
  int n = Load(&r->proc_num);
  if (n > HAMI_REGION_MAX_PROCS) n = HAMI_REGION_MAX_PROCS;
  for (int i = 0; i < n; ++i) {
    hami_proc_slot_t* slot = &r->procs[i];
    std::int32_t pid = Load(&slot->pid);
    bool stale_free = pid == 0 && Load(&slot->status) != HAMI_SLOT_INACTIVE;
    if ((pid != 0 && pid != pid_ && !ProcessAlive(pid)) || stale_free) {
      ZeroSlotCounters(slot);
      Store(&slot->status, static_cast<std::int32_t>(HAMI_SLOT_INACTIVE));
      Store(&slot->hostpid, std::int32_t{0});
      Store(&slot->pid, std::int32_t{0});
      ++freed;
    }
  }
  while (n > 0 && Load(&r->procs[n - 1].pid) == 0 && n - 1 != slot_) --n;
  Store(&r->proc_num, static_cast<std::int32_t>(n));
  return freed;
}

bool Region::Join(std::int32_t pid) {
  pid_ = pid;
  if (!Lock()) return false;
  hami_shared_region_t* r = region_;
  slot_ = -1;
  // proc_num is recomputed from the slots themselves: a count set to 0, negative or garbage must
  // not hide (and let this process overwrite) the slots of live processes.
  int n = 0;
  for (int i = 0; i < HAMI_REGION_MAX_PROCS; ++i) {
    if (Load(&r->procs[i].pid) != 0) n = i + 1;
  }
  Store(&r->proc_num, static_cast<std::int32_t>(n));
  for (int i = 0; i < n && slot_ < 0; ++i) {
    if (Load(&r->procs[i].pid) == pid) slot_ = i;  // PID reuse: the old slot is stale.
  }
  SweepDeadSlotsLocked();
  n = Load(&r->proc_num);
  for (int i = 0; i < n && slot_ < 0; ++i) {
    if (Load(&r->procs[i].pid) == 0) slot_ = i;
  }
  if (slot_ < 0 && n < HAMI_REGION_MAX_PROCS) slot_ = n;
  if (slot_ >= 0) {
    hami_proc_slot_t* slot = &r->procs[slot_];
    ZeroSlotCounters(slot);
    std::memset(own_, 0, sizeof(own_));
    own_hostpid_ = 0;
    Store(&slot->hostpid, std::int32_t{0});
    Store(&slot->pid, pid);
    Store(&slot->status, static_cast<std::int32_t>(HAMI_SLOT_RUNNING));
    if (slot_ >= Load(&r->proc_num)) Store(&r->proc_num, static_cast<std::int32_t>(slot_ + 1));
  }
  Unlock();
  if (slot_ < 0) VGPU_ERROR("shared region has no free process slot (%d in use)", n);
  return slot_ >= 0;
}

void Region::Leave() {
  if (region_ == nullptr || slot_ < 0) return;
  bool locked = Lock(1000);
  hami_proc_slot_t* slot = OwnSlot();
  if (slot != nullptr) {
    ZeroSlotCounters(slot);
    Store(&slot->status, static_cast<std::int32_t>(HAMI_SLOT_INACTIVE));
    Store(&slot->pid, std::int32_t{0});
  }
  slot_ = -1;
  std::memset(own_, 0, sizeof(own_));
  if (locked) Unlock();
}

hami_proc_slot_t* Region::OwnSlot() const {
  if (region_ == nullptr || slot_ < 0) return nullptr;
  hami_proc_slot_t* slot = &region_->procs[slot_];
  return Load(&slot->pid) == pid_ ? slot : nullptr;
}

ChargeResult Region::Charge(int dev, std::uint64_t bytes, ChargeKind kind, std::uint64_t* usage,
                            std::uint64_t* limit, bool enforce) {
  if (dev < 0 || dev >= HAMI_REGION_MAX_DEVICES || region_ == nullptr || slot_ < 0) {
    return ChargeResult::kUnaccounted;
  }
  bool locked = Lock();
  if (locked && !ConsistentLocked()) RepublishLocked();
  ChargeResult result = ChargeLocked(dev, bytes, kind, locked, enforce, usage, limit);
  if (locked) Unlock();
  return result;
}

ChargeResult Region::ChargeLocked(int dev, std::uint64_t bytes, ChargeKind kind, bool locked,
                                  bool enforce, std::uint64_t* usage, std::uint64_t* limit) {
  std::uint64_t lim = Limit(dev);
  std::uint64_t used = Usage(dev);
  bool fits = lim == 0 || (used <= lim && bytes <= lim - used);
  if (!fits && locked && SweepDeadSlotsLocked() > 0) {
    used = Usage(dev);
    fits = used <= lim && bytes <= lim - used;
  }
  if (usage != nullptr) *usage = used;
  if (limit != nullptr) *limit = lim;
  if (!fits && enforce) return ChargeResult::kOverLimit;
  hami_proc_slot_t* slot = OwnSlot();
  if (slot == nullptr) return ChargeResult::kUnaccounted;
  hami_device_memory_t* m = &slot->used[dev];
  Store(&slot->seqlock, Load(&slot->seqlock) + 1);
  std::uint64_t* field = KindField(m, kind);
  std::uint64_t& own = own_[dev][static_cast<int>(kind) == 0 ? 2 : static_cast<int>(kind) - 1];
  own += bytes;
  Store(field, own);
  Store(&m->total, own_[dev][0] + own_[dev][1] + own_[dev][2]);
  Store(&slot->seqlock, Load(&slot->seqlock) + 1);
  return ChargeResult::kOk;
}

void Region::Uncharge(int dev, std::uint64_t bytes, ChargeKind kind) {
  if (dev < 0 || dev >= HAMI_REGION_MAX_DEVICES || region_ == nullptr || slot_ < 0) return;
  bool locked = Lock();
  if (locked && !ConsistentLocked()) RepublishLocked();
  std::uint64_t& own = own_[dev][static_cast<int>(kind) == 0 ? 2 : static_cast<int>(kind) - 1];
  own = own > bytes ? own - bytes : 0;
  hami_proc_slot_t* slot = OwnSlot();
  if (slot != nullptr) {
    hami_device_memory_t* m = &slot->used[dev];
    std::uint64_t* field = KindField(m, kind);
    Store(&slot->seqlock, Load(&slot->seqlock) + 1);
    Store(field, own);
    Store(&m->total, own_[dev][0] + own_[dev][1] + own_[dev][2]);
    Store(&slot->seqlock, Load(&slot->seqlock) + 1);
  }
  if (locked) Unlock();
}

std::uint64_t Region::Usage(int dev) const {
  if (region_ == nullptr || dev < 0 || dev >= HAMI_REGION_MAX_DEVICES) return 0;
  int n = Load(&region_->proc_num);
  if (n > HAMI_REGION_MAX_PROCS) n = HAMI_REGION_MAX_PROCS;
  std::uint64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    const hami_proc_slot_t* slot = &region_->procs[i];
    if (Load(&slot->pid) == 0) continue;
    std::uint64_t total = ReadSlotTotal(slot, dev);
    sum = (UINT64_MAX - sum < total) ? UINT64_MAX : sum + total;
  }
  return sum;
}

std::uint64_t Region::Limit(int dev) const {
  if (region_ == nullptr || dev < 0 || dev >= HAMI_REGION_MAX_DEVICES) return 0;
  return trusted_ ? trusted_limit_[dev] : Load(&region_->limit[dev]);
}

std::uint64_t Region::SmLimit(int dev) const {
  if (region_ == nullptr || dev < 0 || dev >= HAMI_REGION_MAX_DEVICES) return 100;
  return trusted_ ? trusted_sm_limit_[dev] : Load(&region_->sm_limit[dev]);
}

void Region::SetDeviceInfo(int count, const char (*uuids)[HAMI_REGION_UUID_LEN]) {
  if (region_ == nullptr) return;
  if (count > HAMI_REGION_MAX_DEVICES) count = HAMI_REGION_MAX_DEVICES;
  bool locked = Lock();
  for (int i = 0; i < count; ++i) {
    if (std::strncmp(region_->uuids[i], uuids[i], HAMI_REGION_UUID_LEN) != 0) {
      std::memset(region_->uuids[i], 0, HAMI_REGION_UUID_LEN);
      std::strncpy(region_->uuids[i], uuids[i], HAMI_REGION_UUID_LEN - 1);
    }
  }
  Store(&region_->device_num, static_cast<std::uint64_t>(count));
  if (locked) Unlock();
}

void Region::RecordKernelTime(std::uint64_t unix_seconds) {
  std::uint64_t prev = Load(&region_->last_kernel_time);
  while (prev < unix_seconds &&
         !__atomic_compare_exchange_n(&region_->last_kernel_time, &prev, unix_seconds, true,
                                      __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
  }
}

void Region::SetOwnSmUtil(int dev, std::uint64_t percent) {
  hami_proc_slot_t* slot = OwnSlot();
  if (slot == nullptr || dev < 0 || dev >= HAMI_REGION_MAX_DEVICES) return;
  Store(&slot->device_util[dev].sm_util, percent);
}

void Region::SetOwnHostPid(std::int32_t hostpid) {
  own_hostpid_ = hostpid;
  hami_proc_slot_t* slot = OwnSlot();
  if (slot != nullptr) Store(&slot->hostpid, hostpid);
}

}  // namespace hami::vgpu
