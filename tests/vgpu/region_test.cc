#include "vgpu/region.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "tests/vgpu/region_reader.h"

namespace hami::vgpu {
namespace {

using testing::RawRegion;

constexpr std::uint64_t kMiB = 1ULL << 20;

class RegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu_region_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/r.cache";
    std::memset(&config_, 0, sizeof(config_));
    for (int i = 0; i < kMaxDevices; ++i) config_.sm_limit[i] = 100;
    config_.memory_limit[0] = 64 * kMiB;
    config_.memory_limit[3] = 5 * kMiB;
    config_.sm_limit[0] = 30;
    config_.priority = 0;
    std::snprintf(config_.cache_path, sizeof(config_.cache_path), "%s", path_.c_str());
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  bool OpenAndJoin(Region* r, std::int32_t pid) {
    char err[256];
    return r->Open(config_, err, sizeof(err)) && r->Join(pid);
  }

  std::string dir_, path_;
  VgpuConfig config_;
};

TEST_F(RegionTest, FileWrittenByLibraryReadsBackAtSpecOffsets) {
  mode_t old = umask(077);
  Region region;
  ASSERT_TRUE(OpenAndJoin(&region, getpid()));
  EXPECT_EQ(umask(old), 077u);  // the host program's umask is untouched
  char uuids[2][HAMI_REGION_UUID_LEN] = {"GPU-aaaa", "GPU-bbbb"};
  region.SetDeviceInfo(2, uuids);
  ASSERT_EQ(region.Charge(0, 10 * kMiB, ChargeKind::kData, nullptr, nullptr), ChargeResult::kOk);
  ASSERT_EQ(region.Charge(0, 3 * kMiB, ChargeKind::kContext, nullptr, nullptr), ChargeResult::kOk);
  region.SetOwnSmUtil(0, 37);

  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 2008953);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  RawRegion raw;
  ASSERT_TRUE(raw.Load(path_));
  ASSERT_EQ(raw.size(), RawRegion::kFileSize);
  EXPECT_EQ(raw.magic(), 19920718);
  EXPECT_EQ(raw.major(), 1u);
  EXPECT_EQ(raw.minor(), 2u);
  EXPECT_EQ(raw.owner_pid(), 0u);
  EXPECT_EQ(raw.device_num(), 2u);
  EXPECT_EQ(raw.uuid(0), "GPU-aaaa");
  EXPECT_EQ(raw.uuid(1), "GPU-bbbb");
  EXPECT_EQ(raw.limit(0), 64 * kMiB);
  EXPECT_EQ(raw.limit(3), 5 * kMiB);
  EXPECT_EQ(raw.limit(1), 0u);
  EXPECT_EQ(raw.sm_limit(0), 30u);
  EXPECT_EQ(raw.sm_limit(1), 100u);
  EXPECT_EQ(raw.proc_num(), 1);
  EXPECT_EQ(raw.utilization_switch(), 1);
  EXPECT_EQ(raw.recent_kernel(), 2);
  EXPECT_EQ(raw.priority(), 0);
  EXPECT_NEAR(static_cast<double>(raw.last_kernel_time()), static_cast<double>(time(nullptr)), 5);
  EXPECT_EQ(raw.slot_pid(0), getpid());
  EXPECT_EQ(raw.slot_status(0), 1);
  EXPECT_EQ(raw.slot_data(0, 0), 10 * kMiB);
  EXPECT_EQ(raw.slot_context(0, 0), 3 * kMiB);
  EXPECT_EQ(raw.slot_total(0, 0), 13 * kMiB);
  EXPECT_EQ(raw.slot_sm_util(0, 0), 37u);
  EXPECT_EQ(raw.slot_seqlock(0) % 2, 0u);
  EXPECT_EQ(raw.MonitorUsage(0), 13 * kMiB);

  region.Leave();
  ASSERT_TRUE(raw.Load(path_));
  EXPECT_EQ(raw.slot_status(0), 0);
  EXPECT_EQ(raw.MonitorUsage(0), 0u);
}

TEST_F(RegionTest, LimitIsEnforcedAcrossSlotsAndFirstProcessWins) {
  Region a;
  ASSERT_TRUE(OpenAndJoin(&a, getpid()));
  config_.memory_limit[0] = 999 * kMiB;  // a later process with other env keeps the file's limit
  Region b;
  ASSERT_TRUE(OpenAndJoin(&b, getpid() + 100000));
  EXPECT_EQ(b.Limit(0), 64 * kMiB);
  EXPECT_NE(a.slot_index(), b.slot_index());
  std::uint64_t usage = 0, limit = 0;
  EXPECT_EQ(a.Charge(0, 40 * kMiB, ChargeKind::kData, &usage, &limit), ChargeResult::kOk);
  EXPECT_EQ(b.Charge(0, 24 * kMiB, ChargeKind::kData, &usage, &limit), ChargeResult::kOk);
  EXPECT_EQ(b.Charge(0, 1, ChargeKind::kData, &usage, &limit), ChargeResult::kOverLimit);
  EXPECT_EQ(usage, 64 * kMiB);
  EXPECT_EQ(limit, 64 * kMiB);
  EXPECT_EQ(b.Charge(0, 1, ChargeKind::kContext, nullptr, nullptr, false), ChargeResult::kOk);
  a.Uncharge(0, 40 * kMiB, ChargeKind::kData);
  EXPECT_EQ(b.Usage(0), 24 * kMiB + 1);
  EXPECT_EQ(b.Charge(99, 1, ChargeKind::kData, nullptr, nullptr), ChargeResult::kUnaccounted);
  // Uncharging more than charged saturates at zero.
  a.Uncharge(0, 1 << 30, ChargeKind::kData);
  EXPECT_EQ(a.Usage(0), 24 * kMiB + 1);
}

TEST_F(RegionTest, DeadProcessSlotIsReclaimedOnOverLimit) {
  pid_t child = fork();
  if (child == 0) {
    Region r;
    bool ok = OpenAndJoin(&r, getpid()) &&
              r.Charge(0, 60 * kMiB, ChargeKind::kData, nullptr, nullptr) == ChargeResult::kOk;
    if (ok) raise(SIGKILL);  // dies holding 60 MiB, no exit handler
    _exit(1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  Region region;
  ASSERT_TRUE(OpenAndJoin(&region, getpid()));
  // Joining swept the dead slot already; charge the whole limit to prove it.
  EXPECT_EQ(region.Charge(0, 64 * kMiB, ChargeKind::kData, nullptr, nullptr), ChargeResult::kOk);
  RawRegion raw;
  ASSERT_TRUE(raw.Load(path_));
  EXPECT_EQ(raw.MonitorUsage(0), 64 * kMiB);
}

TEST_F(RegionTest, SweepOnOomFreesSlotOfProcessThatDiedAfterWeJoined) {
  Region region;
  ASSERT_TRUE(OpenAndJoin(&region, getpid()));
  pid_t child = fork();
  if (child == 0) {
    Region r;
    bool ok = OpenAndJoin(&r, getpid()) &&
              r.Charge(0, 60 * kMiB, ChargeKind::kData, nullptr, nullptr) == ChargeResult::kOk;
    _exit(ok ? 0 : 1);  // _exit: no Leave(), the slot stays behind
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(region.Usage(0), 60 * kMiB);
  EXPECT_EQ(region.Charge(0, 10 * kMiB, ChargeKind::kData, nullptr, nullptr), ChargeResult::kOk);
  EXPECT_EQ(region.Usage(0), 10 * kMiB);
}

TEST_F(RegionTest, LockHeldBySigkilledProcessIsTakenOver) {
  Region region;
  ASSERT_TRUE(OpenAndJoin(&region, getpid()));
  for (bool reap_first : {true, false}) {
    pid_t child = fork();
    if (child == 0) {
      Region r;
      char err[256];
      if (r.Open(config_, err, sizeof(err)) && r.Lock()) raise(SIGKILL);
      _exit(1);
    }
    int status = 0;
    if (reap_first) {
      ASSERT_EQ(waitpid(child, &status, 0), child);
      ASSERT_TRUE(WIFSIGNALED(status));
    } else {
      // Leave it a zombie until the lock was recovered: zombies count as dead.
      while (true) {
        RawRegion raw;
        ASSERT_TRUE(raw.Load(path_));
        if (raw.owner_pid() == static_cast<std::uint64_t>(child)) break;
        sched_yield();
      }
      siginfo_t info;
      ASSERT_EQ(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
    }
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(region.Lock(3000)) << "reap_first=" << reap_first;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
    region.Unlock();
    if (!reap_first) {
      ASSERT_EQ(waitpid(child, &status, 0), child);
    }
  }
}

TEST_F(RegionTest, HolderKilledMidUpdateIsSweptWhenItsLockIsTakenOver) {
  Region region;
  ASSERT_TRUE(OpenAndJoin(&region, getpid()));
  pid_t child = fork();
  if (child == 0) {
    Region r;
    if (!OpenAndJoin(&r, getpid()) ||
        r.Charge(0, 8 * kMiB, ChargeKind::kData, nullptr, nullptr) != ChargeResult::kOk ||
        !r.Lock()) {
      _exit(1);
    }
    hami_proc_slot_t* slot = &r.raw()->procs[r.slot_index()];
    __atomic_fetch_add(&slot->seqlock, 1, __ATOMIC_SEQ_CST);  // "mid-update": odd
    raise(SIGKILL);
    _exit(1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_TRUE(region.Lock(3000));
  region.Unlock();
  RawRegion raw;
  ASSERT_TRUE(raw.Load(path_));
  EXPECT_EQ(raw.proc_num(), 1);  // the dead slot (index 1) was reclaimed at the takeover
  EXPECT_EQ(raw.slot_pid(1), 0);
  EXPECT_EQ(raw.slot_seqlock(1) % 2, 0u);
  EXPECT_EQ(region.Usage(0), 0u);
}

TEST_F(RegionTest, LockHeldTooLongByLiveProcessIsTakenOverAfterTheTimeout) {
  Region region;
  ASSERT_TRUE(OpenAndJoin(&region, getpid()));
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    close(pipefd[1]);
    Region r;
    char err[256];
    if (!r.Open(config_, err, sizeof(err)) || !r.Lock()) _exit(1);
    char c;
    while (read(pipefd[0], &c, 1) > 0) {
    }
    r.Unlock();  // no longer the owner: must not release our lock
    _exit(0);
  }
  close(pipefd[0]);
  RawRegion raw;
  do {
    ASSERT_TRUE(raw.Load(path_));
  } while (raw.owner_pid() != static_cast<std::uint64_t>(child));
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(region.Lock(200));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  close(pipefd[1]);  // the old holder wakes up and "releases"
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(raw.Load(path_));
  EXPECT_EQ(raw.owner_pid(), static_cast<std::uint64_t>(getpid()));
  region.Unlock();
  ASSERT_TRUE(raw.Load(path_));
  EXPECT_EQ(raw.owner_pid(), 0u);
}

TEST_F(RegionTest, SlotsAreReusedAndProcNumShrinks) {
  Region a, b, c;
  ASSERT_TRUE(OpenAndJoin(&a, getpid()));
  ASSERT_TRUE(OpenAndJoin(&b, getpid() + 200000));  // pids that do not exist count as dead...
  // ...so b's slot is swept when c joins, and c takes it.
  ASSERT_TRUE(OpenAndJoin(&c, getpid()));  // PID reuse: c takes a's stale slot
  EXPECT_EQ(c.slot_index(), a.slot_index());
  RawRegion raw;
  ASSERT_TRUE(raw.Load(path_));
  EXPECT_EQ(raw.proc_num(), 1);
}

TEST_F(RegionTest, OpenFailureIsAnErrorNotACrash) {
  std::snprintf(config_.cache_path, sizeof(config_.cache_path), "%s", "/nonexistent/dir/x.cache");
  Region region;
  char err[256] = "";
  EXPECT_FALSE(region.Open(config_, err, sizeof(err)));
  EXPECT_NE(std::string(err).find("/nonexistent/dir/x.cache"), std::string::npos);
  EXPECT_FALSE(region.is_open());
}

TEST(ProcessAliveTest, SelfDeadAndZombie) {
  EXPECT_TRUE(ProcessAlive(getpid()));
  EXPECT_FALSE(ProcessAlive(0));
  EXPECT_FALSE(ProcessAlive(-1));
  pid_t child = fork();
  if (child == 0) _exit(0);
  siginfo_t info;
  ASSERT_EQ(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(ProcessAlive(child));  // zombie
  int status;
  waitpid(child, &status, 0);
  EXPECT_FALSE(ProcessAlive(child));
}

}  // namespace
}  // namespace hami::vgpu
