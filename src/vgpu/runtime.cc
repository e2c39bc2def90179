#include "vgpu/runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "vgpu/hooks.h"
#include "vgpu/log.h"

namespace hami::vgpu {
namespace {

alignas(Runtime) unsigned char g_storage[sizeof(Runtime)];
Runtime* g_rt = nullptr;
std::atomic<bool> g_ready{false};
pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_nvml_mu = PTHREAD_MUTEX_INITIALIZER;
bool g_process_hooks_registered = false;
thread_local bool t_initialising = false;
std::atomic<bool> g_guardian_started{false};

constexpr std::size_t kAllocTableCapacity = 1 << 12;
constexpr std::size_t kVmmTableCapacity = 1 << 10;
constexpr std::int64_t kMaxSleepNs = 100'000'000;
// A monitor that died with recent_kernel < 0 must not stall the application forever.
constexpr int kMaxPriorityWaitRounds = 300;

// HAMI_VGPU_MAX_TRACKED lowers the allocation tables' capacity (tests reach "table full" with a
// few dozen allocations instead of millions). It can only lower it: a smaller table means more
// refusals, never an uncharged allocation.
std::size_t MaxTracked() {
  const char* text = std::getenv("HAMI_VGPU_MAX_TRACKED");
  if (text == nullptr) return AllocTable::kMaxCapacity;
  unsigned long long value = std::strtoull(text, nullptr, 10);
  return value == 0 || value > AllocTable::kMaxCapacity ? AllocTable::kMaxCapacity
                                                        : static_cast<std::size_t>(value);
}

// Our threads take no asynchronous signal of the application's, but keep the synchronous ones: a
// blocked SIGBUS from a fault kills the process, and the region's SIGBUS guard must see it.
void BlockAsyncSignals() {
  sigset_t set;
  sigfillset(&set);
  sigdelset(&set, SIGBUS);
  sigdelset(&set, SIGSEGV);
  sigdelset(&set, SIGFPE);
  sigdelset(&set, SIGILL);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void SleepNs(std::int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

void OnExit() {
  if (g_rt != nullptr && g_ready.load()) g_rt->region.Leave();
}

void ForkPrepare() { pthread_mutex_lock(&g_init_mu); }
void ForkParent() { pthread_mutex_unlock(&g_init_mu); }
void ForkChild() {
  // The child is a new process: it re-joins the region under its own pid on first use and
  // starts with no charges (the parent's allocations stay the parent's).
  pthread_mutex_init(&g_init_mu, nullptr);
  pthread_mutex_init(&g_nvml_mu, nullptr);
  ResetLoaderAfterFork();
  if (g_rt != nullptr) {
    g_rt->region.Close();
    g_rt->accounting = false;
    g_rt->allocs.ResetLockAfterFork();
    g_rt->vmm.ResetLockAfterFork();
    g_rt->allocs.Clear();
    g_rt->vmm.Clear();
    g_rt->measured.ResetLockAfterFork();
    g_rt->measured.Clear();
    for (AllocTable* t :
         {&g_rt->vmm_maps, &g_rt->vmm_allocs, &g_rt->vmm_handles, &g_rt->vmm_exports, &g_rt->pools,
          &g_rt->pool_kept, &g_rt->async_pool, &g_rt->graph_allocs, &g_rt->graph_execs}) {
      t->ResetLockAfterFork();
      t->Clear();
    }
    pthread_mutex_init(&g_rt->vmm_mu, nullptr);
    pthread_mutex_init(&g_rt->pool_mu, nullptr);
    pthread_mutex_init(&g_rt->measure_mu, nullptr);
    for (auto& net : g_rt->exact_net) net.store(0);
    for (ComputeLimiter& limiter : g_rt->limiters) limiter.ResetLockAfterFork();
    pthread_mutex_init(&g_rt->ctx_mu, nullptr);
    g_rt->watcher_started.store(false);
    g_guardian_started.store(false);
    std::memset(g_rt->ctx_charge, 0, sizeof(g_rt->ctx_charge));
    std::memset(g_rt->ctx_refs, 0, sizeof(g_rt->ctx_refs));
    std::memset(g_rt->primary_ctx, 0, sizeof(g_rt->primary_ctx));
    g_rt->live_contexts.store(0);
  }
  g_ready.store(false);
}

// Reads the limits file beside this library into rt->config. Absent: the environment (HAMi
// compatibility). Present but unreadable or invalid: limits_broken, so allocations are refused
// rather than falling back to an environment the container controls.
void LoadLimits(Runtime* rt) {
  static LimitsFile file;  // 35 KiB: static, initialisation is serialised by g_init_mu
  rt->limits_broken = false;
  Dl_info info{};
  const char* self = nullptr;
  if (dladdr(reinterpret_cast<void*>(&LoadLimits), &info) != 0) self = info.dli_fname;
  char path[1024] = "";
  const char* slash = self != nullptr ? std::strrchr(self, '/') : nullptr;
  int dir_len = slash != nullptr ? static_cast<int>(slash - self) : 1;
  std::snprintf(path, sizeof(path), "%.*s/%s", dir_len, slash != nullptr ? self : ".",
                kLimitsFileName);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) {
    LoadConfigFromProcessEnv(&rt->config);
    return;
  }
  static char text[kLimitsFileMaxBytes + 1];
  ssize_t total = 0;
  if (fd >= 0) {
    for (ssize_t n;
         total <= static_cast<ssize_t>(kLimitsFileMaxBytes) &&
         (n = read(fd, text + total, sizeof(text) - static_cast<std::size_t>(total))) > 0;) {
      total += n;
    }
    close(fd);
  }
  char err[256];
  if (fd < 0 || total > static_cast<ssize_t>(kLimitsFileMaxBytes)) {
    std::snprintf(err, sizeof(err), "%s: %s", path,
                  fd < 0 ? std::strerror(errno) : "larger than 16 KiB");
  } else if (ParseLimitsFile(text, static_cast<std::size_t>(total), &file, err, sizeof(err))) {
    LoadConfigFromLimitsFile(file, &rt->config);
    return;
  }
  VGPU_ERROR("limits file unusable (%s); device memory allocations are refused", err);
  LoadConfigFromProcessEnv(&rt->config);
  rt->limits_broken = true;
}

// Maps "<region>.limiter" (created and initialised under lockf like the region), once per
// process image: a fork child keeps the parent's mapping. Null when it cannot be used; the
// limiters then keep per-process buckets.
LimiterFile* g_limiter_file = nullptr;

LimiterFile* OpenLimiterFile(const char* region_path) {
  if (g_limiter_file != nullptr) return g_limiter_file;
  char path[600];
  std::snprintf(path, sizeof(path), "%s.limiter", region_path);
  // The device plugin makes it a file mount (docs/vgpu.md "Compute limiter"); a link or anything
  // but a regular file in its place is not followed.
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
  void* map = MAP_FAILED;
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    fd = -1;
  }
  if (fd >= 0) fchmod(fd, 0666);
  if (fd >= 0 && lockf(fd, F_LOCK, 0) == 0) {
    if (fstat(fd, &st) == 0 && (st.st_size >= static_cast<off_t>(sizeof(LimiterFile)) ||
                                ftruncate(fd, sizeof(LimiterFile)) == 0)) {
      map = mmap(nullptr, sizeof(LimiterFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (map != MAP_FAILED) {
      auto* file = static_cast<LimiterFile*>(map);
      if (__atomic_load_n(&file->magic, __ATOMIC_ACQUIRE) != kLimiterFileMagic ||
          file->version != kLimiterFileVersion) {
        std::memset(static_cast<void*>(file), 0, sizeof(*file));
        file->version = kLimiterFileVersion;
        __atomic_store_n(&file->magic, kLimiterFileMagic, __ATOMIC_RELEASE);
      }
    }
    lockf(fd, F_ULOCK, 0);
  }
  if (map == MAP_FAILED) {
    if (fd >= 0) close(fd);
    VGPU_WARN("limiter file \"%s\" unusable; each process calibrates on its own", path);
    return nullptr;
  }
  // Kept open for the SIGBUS guard: a process of the container that truncates the file must not
  // kill the others at their next launch (the limiter repairs what it then reads, limiter.cc).
  GuardAgainstTruncation(kBusGuardLimiter, fd, map, sizeof(LimiterFile), sizeof(LimiterFile));
  g_limiter_file = static_cast<LimiterFile*>(map);
  return g_limiter_file;
}

// The region guardian (one per process while accounting): repairs the region file when someone
// truncated or overwrote it, and re-publishes this process's slot (Region::Guard).

void* GuardianMain(void* arg) {
  BlockAsyncSignals();
  auto* rt = static_cast<Runtime*>(arg);
  for (;;) {
    SleepNs(static_cast<std::int64_t>(kGuardPeriodMs) * 1'000'000);
    if (g_ready.load(std::memory_order_acquire) && rt->accounting) rt->region.Guard();
  }
  return nullptr;
}

void StartGuardian(Runtime* rt) {
  if (g_guardian_started.exchange(true)) return;
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  if (pthread_create(&thread, &attr, GuardianMain, rt) != 0) {
    g_guardian_started.store(false);
    VGPU_WARN("cannot start the region guardian");
  }
  pthread_attr_destroy(&attr);
}

void ConfigureLimiters(Runtime* rt) {
  int pct[kMaxDevices];
  rt->any_sm_limit = false;
  for (int d = 0; d < kMaxDevices; ++d) {
    std::uint64_t sm = rt->accounting ? rt->region.SmLimit(d) : rt->config.sm_limit[d];
    pct[d] = (sm > 0 && sm < 100 && rt->config.policy != kPolicyDisable) ? static_cast<int>(sm) : 0;
    if (pct[d] > 0) rt->any_sm_limit = true;
  }
  // Whole GPUs (no core limit anywhere): the limiter stays out of the way, side file included.
  LimiterFile* shared =
      rt->accounting && rt->any_sm_limit ? OpenLimiterFile(rt->config.cache_path) : nullptr;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (shared != nullptr) rt->limiters[d].Share(&shared->dev[d]);
    rt->limiters[d].Configure(pct[d], NowNs());
  }
}

bool ConfiguredMemoryLimit(const Runtime* rt) {
  if (rt->limits_broken) return true;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (rt->config.memory_limit[d] != 0) return true;
  }
  return false;
}

void InitLocked(Runtime* rt) {
  const char* level = std::getenv("LIBCUDA_LOG_LEVEL");
  if (level != nullptr) SetLogThreshold(std::atoi(level));
  LoadLimits(rt);
  SetLogThreshold(rt->config.log_level);
  VGPU_MSG("Initializing.....");
  ForceEagerModuleLoading(rt);
  LoadCudaTable();
  for (int d = 0; d < kMaxDevices; ++d) rt->cuda_to_nvml[d] = d;
  char err[640];
  rt->accounting = false;
  if (rt->limits_broken) {
    // Nothing to account with: every allocation is refused (cuda_hooks.cc).
  } else if (!rt->region.Open(rt->config, err, sizeof(err))) {
    VGPU_ERROR("%s; limits are not enforced in this process (pass-through)", err);
  } else if (!rt->region.Join(static_cast<std::int32_t>(getpid()))) {
    VGPU_ERROR("cannot join shared region \"%s\"; limits are not enforced (pass-through)",
               rt->config.cache_path);
  } else {
    rt->accounting = true;
    StartGuardian(rt);
  }
  ConfigureLimiters(rt);
  if (!g_process_hooks_registered) {
    g_process_hooks_registered = true;
    atexit(OnExit);
    pthread_atfork(ForkPrepare, ForkParent, ForkChild);
  }
  VGPU_MSG("Initialized");
}

std::uint64_t CoarseUnixSeconds() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec);
}

// Container utilisation of one device in percent: the sum of our processes' SM samples since
// `last_seen_us`, or the device-wide figure when none of our pids appear (PID namespace without a
// known host pid). `*own` gets this process's part (its pid's samples; -1 when unknown), from
// which the limiter learns its kernels' prices.
double MeasureUtil(Runtime* rt, nvmlDevice_t dev, unsigned long long last_seen_us, double* own) {
  *own = -1;
  nvmlProcessUtilizationSample_t samples[64];
  unsigned int count = 64;
  auto get_samples = VGPU_REAL_NVML(nvmlDeviceGetProcessUtilization);
  bool have_samples =
      get_samples != nullptr && get_samples(dev, samples, &count, last_seen_us) == NVML_SUCCESS;
  if (have_samples) {
    hami_shared_region_t* r = rt->region.raw();
    int n = __atomic_load_n(&r->proc_num, __ATOMIC_ACQUIRE);
    const unsigned int me = static_cast<unsigned>(getpid());
    const unsigned int my_host = static_cast<unsigned>(rt->region.own_hostpid());
    double sum = 0;
    double own_sum = 0;
    int matched = 0;
    for (unsigned int s = 0; s < count && s < 64; ++s) {
      for (int i = 0; i < n && i < HAMI_REGION_MAX_PROCS; ++i) {
        std::int32_t pid = __atomic_load_n(&r->procs[i].pid, __ATOMIC_RELAXED);
        std::int32_t host = __atomic_load_n(&r->procs[i].hostpid, __ATOMIC_RELAXED);
        if (pid != 0 && (static_cast<unsigned>(pid) == samples[s].pid ||
                         (host != 0 && static_cast<unsigned>(host) == samples[s].pid))) {
          sum += samples[s].smUtil;
          ++matched;
          break;
        }
      }
      if (samples[s].pid == me || (my_host != 0 && samples[s].pid == my_host)) {
        own_sum += samples[s].smUtil;
      }
    }
    if (matched > 0) {
      *own = own_sum > 100 ? 100 : own_sum;
      return sum > 100 ? 100 : sum;
    }
  }
  nvmlUtilization_t util{};
  auto rates = VGPU_REAL_NVML(nvmlDeviceGetUtilizationRates);
  if (rates != nullptr && rates(dev, &util) == NVML_SUCCESS) return util.gpu;
  return 0;
}

void* WatcherMain(void* arg) {
  BlockAsyncSignals();
  Runtime* rt = static_cast<Runtime*>(arg);
  EnsureNvml(rt);
  auto by_index = VGPU_REAL_NVML(nvmlDeviceGetHandleByIndex_v2);
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  unsigned long long last_seen = static_cast<unsigned long long>(wall.tv_sec) * 1000000ULL;
  for (bool first = true;; first = false) {
    SleepNs(first ? kWatcherFirstNs : kWatcherPeriodNs);
    if (!rt->nvml_ready.load() || by_index == nullptr || !rt->accounting) continue;
    for (int d = 0; d < kMaxDevices && d < rt->nvml_count; ++d) {
      if (!rt->limiters[d].active()) continue;
      nvmlDevice_t handle = nullptr;
      if (by_index(static_cast<unsigned>(d), &handle) != NVML_SUCCESS) continue;
      double own = -1;
      double util = MeasureUtil(rt, handle, last_seen, &own);
      rt->limiters[d].Observe(util, NowNs(), own);
      rt->region.SetOwnSmUtil(d, static_cast<std::uint64_t>(util));
    }
    clock_gettime(CLOCK_REALTIME, &wall);
    last_seen = static_cast<unsigned long long>(wall.tv_sec) * 1000000ULL +
                static_cast<unsigned long long>(wall.tv_nsec / 1000);
  }
  return nullptr;
}

void StartWatcherOnce(Runtime* rt) {
  bool expected = false;
  if (!rt->watcher_started.compare_exchange_strong(expected, true)) return;
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&thread, &attr, WatcherMain, rt) != 0) {
    VGPU_ERROR("cannot start the utilisation watcher; SM limit not enforced");
  }
  pthread_attr_destroy(&attr);
}

void MarkRecentKernel(hami_shared_region_t* r) {
  if (__atomic_load_n(&r->recent_kernel, __ATOMIC_RELAXED) != 2) {
    __atomic_store_n(&r->recent_kernel, 2, __ATOMIC_RELAXED);
  }
}

}  // namespace

std::int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Runtime* Rt() {
  if (g_ready.load(std::memory_order_acquire)) return g_rt;
  if (t_initialising) return g_rt;  // Re-entered from dlopen during init: tables only.
  pthread_mutex_lock(&g_init_mu);
  if (g_rt == nullptr) g_rt = new (g_storage) Runtime();
  if (!g_ready.load(std::memory_order_relaxed)) {
    t_initialising = true;
    if (g_rt->allocs.size() == 0 && !g_process_hooks_registered) {
      std::size_t max = MaxTracked();
      g_rt->allocs.Init(kAllocTableCapacity, max);
      g_rt->vmm.Init(kVmmTableCapacity, max);
      g_rt->measured.Init(kVmmTableCapacity, max);
      g_rt->vmm_maps.Init(kVmmTableCapacity, max);
      g_rt->vmm_allocs.Init(kVmmTableCapacity, max);
      g_rt->vmm_handles.Init(kVmmTableCapacity, max);
      g_rt->vmm_exports.Init(kVmmTableCapacity, max);
      g_rt->pools.Init(kVmmTableCapacity, max);
      g_rt->pool_kept.Init(kVmmTableCapacity, max);
      g_rt->graph_allocs.Init(kVmmTableCapacity, max);
      g_rt->graph_execs.Init(kVmmTableCapacity, max);
      g_rt->async_pool.Init(kAllocTableCapacity, max);
    }
    InitLocked(g_rt);
    t_initialising = false;
    g_ready.store(true, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_init_mu);
  return g_rt;
}

void EnsureNvml(Runtime* rt) {
  if (rt->nvml_ready.load(std::memory_order_acquire)) return;
  pthread_mutex_lock(&g_nvml_mu);
  static bool attempted = false;
  if (!attempted) {
    attempted = true;
    auto init = VGPU_REAL_NVML(nvmlInit_v2);
    auto count_fn = VGPU_REAL_NVML(nvmlDeviceGetCount_v2);
    auto by_index = VGPU_REAL_NVML(nvmlDeviceGetHandleByIndex_v2);
    auto uuid_fn = VGPU_REAL_NVML(nvmlDeviceGetUUID);
    unsigned int count = 0;
    if (!LoadNvmlTable() || (init = VGPU_REAL_NVML(nvmlInit_v2)) == nullptr ||
        (count_fn = VGPU_REAL_NVML(nvmlDeviceGetCount_v2)) == nullptr ||
        (by_index = VGPU_REAL_NVML(nvmlDeviceGetHandleByIndex_v2)) == nullptr ||
        (uuid_fn = VGPU_REAL_NVML(nvmlDeviceGetUUID)) == nullptr || init() != NVML_SUCCESS ||
        count_fn(&count) != NVML_SUCCESS) {
      VGPU_ERROR("NVML (libnvidia-ml.so.1) unusable: identity device map, no SM limiting");
    } else {
      char uuids[kMaxDevices][HAMI_REGION_UUID_LEN] = {};
      int n = count > kMaxDevices ? kMaxDevices : static_cast<int>(count);
      for (int i = 0; i < n; ++i) {
        nvmlDevice_t dev = nullptr;
        if (by_index(static_cast<unsigned>(i), &dev) == NVML_SUCCESS) {
          uuid_fn(dev, uuids[i], HAMI_REGION_UUID_LEN);
          uuids[i][HAMI_REGION_UUID_LEN - 1] = '\0';
        }
      }
      if (rt->accounting) rt->region.SetDeviceInfo(n, uuids);
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      if (visible != nullptr) {
        char tokens[kMaxDevices][HAMI_REGION_UUID_LEN];
        int t = SplitVisibleDevices(visible, tokens, kMaxDevices);
        for (int k = 0; k < t; ++k) {
          int idx = ResolveVisibleDevice(tokens[k], uuids, n);
          if (idx >= 0) rt->cuda_to_nvml[k] = idx;
        }
      }
      rt->nvml_count = n;
      rt->nvml_ready.store(true, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_nvml_mu);
}

void ForceEagerModuleLoading(Runtime* rt) {
  if (!ConfiguredMemoryLimit(rt) && !(rt->accounting && AnyMemoryLimit(rt))) return;
  const char* mode = std::getenv("CUDA_MODULE_LOADING");
  if (mode != nullptr && std::strcmp(mode, "EAGER") == 0) return;
  if (mode != nullptr)
    VGPU_WARN("CUDA_MODULE_LOADING=%s replaced by EAGER under a memory limit", mode);
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);
}

// At load time (before the application's main, before cudart or the driver read their
// environment): a memory limit in the environment, or the limits file beside this library,
// switches module loading to EAGER. Rt() asserts it again once the limits are parsed.
__attribute__((constructor)) void EagerModulesAtLoad() {
  bool limited = false;
  for (char** e = environ; e != nullptr && *e != nullptr && !limited; ++e) {
    if (std::strncmp(*e, "CUDA_DEVICE_MEMORY_LIMIT", 24) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    limited = eq != nullptr && eq[1] != '\0' && std::strtoull(eq + 1, nullptr, 0) != 0;
  }
  Dl_info info{};
  if (!limited && dladdr(reinterpret_cast<void*>(&EagerModulesAtLoad), &info) != 0 &&
      info.dli_fname != nullptr) {
    const char* slash = std::strrchr(info.dli_fname, '/');
    char path[1024];
    std::snprintf(path, sizeof(path), "%.*s/%s",
                  slash != nullptr ? static_cast<int>(slash - info.dli_fname) : 1,
                  slash != nullptr ? info.dli_fname : ".", kLimitsFileName);
    limited = access(path, F_OK) == 0;
  }
  const char* mode = std::getenv("CUDA_MODULE_LOADING");
  if (limited && (mode == nullptr || std::strcmp(mode, "EAGER") != 0)) {
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  }
}

bool AnyMemoryLimit(Runtime* rt) {
  if (rt->limits_broken) return true;
  for (int d = 0; d < kMaxDevices; ++d) {
    std::uint64_t limit = rt->accounting ? rt->region.Limit(d) : rt->config.memory_limit[d];
    if (limit != 0) return true;
  }
  return false;
}

CUresult RefuseUnaccounted(int dev, std::uint64_t bytes, const char* why) {
  VGPU_ERROR("Device %d OOM: %lu bytes refused, %s", dev, static_cast<unsigned long>(bytes), why);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

bool ProcessUsedBytes(Runtime* rt, int dev, std::uint64_t* bytes) {
  EnsureNvml(rt);
  auto by_index = VGPU_REAL_NVML(nvmlDeviceGetHandleByIndex_v2);
  auto list = VGPU_REAL_NVML(nvmlDeviceGetComputeRunningProcesses);
  nvmlDevice_t handle = nullptr;
  if (!rt->nvml_ready.load() || by_index == nullptr ||
      by_index(static_cast<unsigned>(dev), &handle) != NVML_SUCCESS) {
    return false;
  }
  std::int32_t host = 0;
  if (rt->accounting && rt->region.slot_index() >= 0) {
    host = __atomic_load_n(&rt->region.raw()->procs[rt->region.slot_index()].hostpid,
                           __ATOMIC_RELAXED);
  }
  const unsigned int me = static_cast<unsigned>(getpid());
  nvmlProcessInfo_v1_t infos[64];
  unsigned int count = 64;
  if (list != nullptr && list(handle, &count, infos) == NVML_SUCCESS) {
    for (unsigned int i = 0; i < count && i < 64; ++i) {
      if (infos[i].pid == me || (host != 0 && infos[i].pid == static_cast<unsigned>(host))) {
        *bytes = infos[i].usedGpuMemory;
        return true;
      }
    }
    if (rt->live_contexts.load(std::memory_order_relaxed) <= 0) {
      *bytes = 0;  // not listed and no context: nothing of ours on the device
      return true;
    }
  }
  return false;
}

CUcontext CurrentContext() {
  CUcontext ctx = nullptr;
  auto get = VGPU_REAL_CUDA(cuCtxGetCurrent);
  if (get == nullptr || get(&ctx) != CUDA_SUCCESS) return nullptr;
  return ctx;
}

int NvmlIndexOf(Runtime* rt, CUdevice dev) {
  if (dev < 0 || dev >= kMaxDevices) return -1;
  EnsureNvml(rt);
  return rt->cuda_to_nvml[dev];
}

int CurrentNvmlIndex(Runtime* rt) {
  CUdevice dev = 0;
  auto get = VGPU_REAL_CUDA(cuCtxGetDevice);
  if (get == nullptr || get(&dev) != CUDA_SUCCESS) dev = 0;
  return NvmlIndexOf(rt, dev);
}

int StreamNvmlIndex(Runtime* rt, CUstream stream) {
  if (reinterpret_cast<std::uintptr_t>(stream) <= 2) return CurrentNvmlIndex(rt);
  auto get_ctx = VGPU_REAL_CUDA(cuStreamGetCtx);
  auto current = VGPU_REAL_CUDA(cuCtxGetCurrent);
  CUcontext ctx = nullptr;
  CUcontext cur = nullptr;
  if (get_ctx == nullptr || current == nullptr || get_ctx(stream, &ctx) != CUDA_SUCCESS ||
      ctx == nullptr || current(&cur) != CUDA_SUCCESS || ctx == cur) {
    return CurrentNvmlIndex(rt);
  }
  // Another context's stream: its device, found by making it current for one call. A context's
  // device never changes, so the last answer is kept per thread.
  thread_local CUcontext last_ctx = nullptr;
  thread_local int last_index = -1;
  if (ctx == last_ctx) return last_index;
  auto push = VGPU_REAL_CUDA(cuCtxPushCurrent_v2);
  auto pop = VGPU_REAL_CUDA(cuCtxPopCurrent_v2);
  auto get_dev = VGPU_REAL_CUDA(cuCtxGetDevice);
  if (push == nullptr || pop == nullptr || get_dev == nullptr || push(ctx) != CUDA_SUCCESS) {
    return CurrentNvmlIndex(rt);
  }
  CUdevice dev = 0;
  CUresult r = get_dev(&dev);
  CUcontext popped = nullptr;
  pop(&popped);
  if (r != CUDA_SUCCESS) return CurrentNvmlIndex(rt);
  last_ctx = ctx;
  last_index = NvmlIndexOf(rt, dev);
  return last_index;
}

std::uint64_t KernelKey(const void* fn, std::uint64_t cost) {
  if (fn == nullptr) return 0;
  std::uint64_t key = reinterpret_cast<std::uintptr_t>(fn) ^ (cost * 0xff51afd7ed558ccdULL);
  return key != 0 ? key : 1;
}

void BeforeLaunch(const void* fn, std::uint64_t cost, CUstream stream) {
  Runtime* rt = Rt();
  if (!rt->accounting) return;
  hami_shared_region_t* r = rt->region.raw();
  std::uint64_t now_s = CoarseUnixSeconds();
  std::uint64_t last = rt->last_kernel_second.load(std::memory_order_relaxed);
  if (now_s >= last + static_cast<std::uint64_t>(rt->config.record_kernel_interval_s)) {
    rt->last_kernel_second.store(now_s, std::memory_order_relaxed);
    rt->region.RecordKernelTime(now_s);
  }
  if (!rt->any_sm_limit) {
    if (__atomic_load_n(&r->recent_kernel, __ATOMIC_RELAXED) >= 0) MarkRecentKernel(r);
    return;
  }
  int dev = StreamNvmlIndex(rt, stream);
  if (dev < 0 || !rt->limiters[dev].active() ||
      !ThrottleEnabled(rt->config.policy, __atomic_load_n(&r->utilization_switch, __ATOMIC_RELAXED),
                       rt->config.from_limits_file)) {
    if (__atomic_load_n(&r->recent_kernel, __ATOMIC_RELAXED) >= 0) MarkRecentKernel(r);
    return;
  }
  StartWatcherOnce(rt);
  for (int i = 0;
       i < kMaxPriorityWaitRounds && __atomic_load_n(&r->recent_kernel, __ATOMIC_ACQUIRE) < 0;
       ++i) {
    SleepNs(kMaxSleepNs);
  }
  MarkRecentKernel(r);
  const std::uint64_t key = KernelKey(fn, cost);
  for (;;) {
    std::int64_t wait = rt->limiters[dev].Admit(key, cost, NowNs());
    if (wait == 0) break;
    SleepNs(wait < kMaxSleepNs ? wait : kMaxSleepNs);
  }
}

}  // namespace hami::vgpu
