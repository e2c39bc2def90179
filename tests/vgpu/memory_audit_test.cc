// The memory side of the libvgpu audit against a fake driver that behaves as cuda.h documents
// (issue 29; docs/vgpu.md "Threat model: memory"). Each test runs mem_app (or driver_app) under
// LD_PRELOAD=libvgpu.so with a 1 GiB limit. VGPU_TEST_LIB runs them against another build of the
// library (how the findings were shown to fail on the library before the fixes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/vgpu/test_env.h"

namespace hami::vgpu {
namespace {

constexpr unsigned long long kGiB = 1ULL << 30;

std::string Lib() {
  const char* lib = std::getenv("VGPU_TEST_LIB");
  return lib != nullptr ? lib : testing::LibPath();
}

struct Outcome {
  int status = -1;
  bool timed_out = false;
  std::string err;
  bool ok() const { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

class MemoryAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu_audit_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf " + dir_).c_str()), 0); }

  // Starts mem_app <scenario> <1 GiB>; its stdin is *in (close it to end a "hold").
  pid_t Start(const std::string& scenario, const std::vector<std::string>& extra, int* in,
              int* out) {
    int in_pipe[2], out_pipe[2];
    EXPECT_EQ(pipe2(in_pipe, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
    std::vector<std::string> env = Env(extra);
    std::vector<std::string> argv = {VGPU_MEM_APP_FILE, scenario, std::to_string(kGiB)};
    std::string err_path = dir_ + "/stderr.start." + scenario;
    pid_t pid = fork();
    if (pid == 0) {
      dup2(in_pipe[0], 0);
      dup2(out_pipe[1], 1);
      int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      std::vector<char*> cargv, cenv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      for (auto& e : env) cenv.push_back(e.data());
      cenv.push_back(nullptr);
      execve(cargv[0], cargv.data(), cenv.data());
      _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    *in = in_pipe[1];
    *out = out_pipe[0];
    return pid;
  }

  // The environment of a run: LD_PRELOAD, the fakes, the region and a 1 GiB limit; each of
  // `extra` ("K=V") replaces K's entry or is added, and "!K" removes K.
  std::vector<std::string> Env(const std::vector<std::string>& extra) {
    std::vector<std::string> env = {
        "LD_PRELOAD=" + Lib(),
        "LD_LIBRARY_PATH=" + testing::FakesDir(),
        "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir_ + "/vgpu.cache",
        "CUDA_DEVICE_MEMORY_LIMIT=1g",
        "VGPU_LIB_PATH=" + Lib(),
        "PATH=/usr/bin:/bin",
    };
    for (const std::string& e : extra) {
      const bool remove = !e.empty() && e[0] == '!';
      const std::string key = remove ? e.substr(1) + "=" : e.substr(0, e.find('=') + 1);
      std::erase_if(env, [&](const std::string& have) { return have.starts_with(key); });
      if (!remove) env.push_back(e);
    }
    return env;
  }

  // Runs mem_app <scenario> <1 GiB> with `extra` environment; killed after `timeout_s`.
  Outcome Run(const std::string& scenario, const std::vector<std::string>& extra,
              int timeout_s = 30) {
    std::vector<std::string> env = Env(extra);
    std::vector<std::string> argv = {VGPU_MEM_APP_FILE, scenario, std::to_string(kGiB)};
    std::string err_path = dir_ + "/stderr." + scenario;
    pid_t pid = fork();
    if (pid == 0) {
      int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      std::vector<char*> cargv, cenv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      for (auto& e : env) cenv.push_back(e.data());
      cenv.push_back(nullptr);
      execve(cargv[0], cargv.data(), cenv.data());
      _exit(127);
    }
    Outcome o;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (waitpid(pid, &o.status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &o.status, 0);
        o.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (std::FILE* f = std::fopen(err_path.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) o.err.append(buf, n);
      std::fclose(f);
    }
    return o;
  }

  std::string dir_;
};

#define EXPECT_SCENARIO(o)                                                             \
  EXPECT_TRUE((o).ok()) << ((o).timed_out ? "timed out (deadlock)" : "") << " status " \
                        << (o).status                                                  \
                        << (WIFSIGNALED((o).status)                                    \
                                ? " signal " + std::to_string(WTERMSIG((o).status))    \
                                : std::string())                                       \
                        << "\n"                                                        \
                        << (o).err

// Finding 8: contexts own their allocations; their destruction returns the charges.
TEST_F(MemoryAuditTest, DestroyedContextsGiveTheirAllocationsBack) {
  EXPECT_SCENARIO(Run("ctxdestroy", {}));
}

TEST_F(MemoryAuditTest, OneUnmapOverTwoReleasedMappingsGivesBothBack) {
  EXPECT_SCENARIO(Run("unmaprange", {}));
}

TEST_F(MemoryAuditTest, HostPoolsAreNotChargedToTheDevice) { EXPECT_SCENARIO(Run("hostpool", {})); }

TEST_F(MemoryAuditTest, ResetOfAPrimaryContextRetainedUnseenGivesItsAllocationsBack) {
  EXPECT_SCENARIO(Run("resetunseen", {}));
}

TEST_F(MemoryAuditTest, AnotherTenantAllocatingDuringOurContextCreationIsNotOurs) {
  EXPECT_SCENARIO(Run("otherpod", {"FAKE_GPU_OTHER_ALLOCS_ON_RETAIN=966367641"}));
}

// Finding 4: charges follow the memory's real lifetime.
TEST_F(MemoryAuditTest, RetainedHandleKeepsTheChargeUntilItsRelease) {
  EXPECT_SCENARIO(Run("retain", {}));
}

TEST_F(MemoryAuditTest, ExportedAndImportedMemoryStaysCharged) {
  EXPECT_SCENARIO(Run("exportimport", {}));
}

TEST_F(MemoryAuditTest, MemFreeOfAPoolAllocationKeepsWhatThePoolKeeps) {
  EXPECT_SCENARIO(Run("poolfree", {}));
}

// Finding 2: lazily loaded modules, and libraries loaded before any context.
TEST_F(MemoryAuditTest, LazilyLoadedModuleGlobalsAreRefusedAtTheLoad) {
  EXPECT_SCENARIO(Run("lazy", {}));
  EXPECT_SCENARIO(Run("lazy", {"CUDA_MODULE_LOADING=LAZY"}));
}

TEST_F(MemoryAuditTest, LibraryLoadedBeforeAnyContextIsRefusedAtTheLoad) {
  EXPECT_SCENARIO(Run("precontext", {}));
  EXPECT_SCENARIO(Run("precontext", {"CUDA_MODULE_LOADING=EAGER"}));
}

// Finding 3: entries that were not hooked.
TEST_F(MemoryAuditTest, PerThreadGraphInstantiationAndCuda2EntriesAreHooked) {
  EXPECT_SCENARIO(Run("legacy", {}));
}

TEST_F(MemoryAuditTest, ResolverAliasesOfEveryHookedFamilyAreHooked) {
  EXPECT_SCENARIO(Run("aliases", {"FAKE_CUDA_PROC_ALIASES=1"}));
}

// Finding 9: crashes and hangs.
TEST_F(MemoryAuditTest, HookedEntryCalledByTheDriverInsideAHookDoesNotDeadlock) {
  EXPECT_SCENARIO(Run("nested", {"FAKE_CUDA_NESTED_LOAD=1"}, 20));
}

TEST_F(MemoryAuditTest, MultiDeviceLaunchWithAShortListDoesNotCrash) {
  EXPECT_SCENARIO(Run("multidevice", {}));
}

// Finding 6: measurements.
TEST_F(MemoryAuditTest, DestroyDuringAMeasuredCreateDoesNotMakeItFree) {
  EXPECT_SCENARIO(Run("racedestroy", {"FAKE_CUDA_CREATE_DELAY_MS=400"}));
}

// Item 5: a container with whole GPUs (no memory limit) measures nothing, so two creations run
// at once. Under a limit the second waits for the first's measurement, which the fake's
// rendezvous shows as a failed creation (the control: the rendezvous detects serialisation).
TEST_F(MemoryAuditTest, WholeGpusCreateConcurrentlyWithoutMeasuring) {
  EXPECT_SCENARIO(
      Run("overlap", {"!CUDA_DEVICE_MEMORY_LIMIT", "FAKE_CUDA_CREATE_RENDEZVOUS_MS=10000"}));
  // A region of its own: the first run's holds no limit, and a region's limits are its first
  // process's.
  Outcome limited = Run("overlap", {"CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir_ + "/limited.cache",
                                    "FAKE_CUDA_CREATE_RENDEZVOUS_MS=300"});
  EXPECT_FALSE(limited.ok());
  EXPECT_NE(limited.err.find("no second creation came"), std::string::npos) << limited.err;
}

TEST_F(MemoryAuditTest, UnrecognisableProcessIsNeverMeasuredDeviceWide) {
  EXPECT_SCENARIO(Run("pidns", {"FAKE_NVML_HIDE_SELF=1", "FAKE_GPU_OTHER_USED=2147483648",
                                "FAKE_GPU_OTHER_FREES_ON_CREATE=2147483648"}));
}

// Finding 5: the region file is writable from inside the container. A holder of 0.9 GiB keeps
// its memory charged whatever happens to the file, and survives it; a new process is refused.
class RegionTamperTest : public MemoryAuditTest,
                         public ::testing::WithParamInterface<const char*> {};

void Tamper(const std::string& path, const std::string& how) {
  constexpr off_t kProcNum = 2008896;
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  if (how == "truncate") {
    ASSERT_EQ(ftruncate(fd, 0), 0);
  } else if (how == "magic") {
    std::int32_t zero = 0;
    ASSERT_EQ(pwrite(fd, &zero, sizeof(zero), 0), 4);
  } else if (how == "procnum0" || how == "procnum-5") {
    std::int32_t n = how == "procnum0" ? 0 : -5;
    ASSERT_EQ(pwrite(fd, &n, sizeof(n), kProcNum), 4);
  } else if (how == "garbage") {
    std::vector<unsigned char> junk(2008953);
    unsigned int seed = 29;
    for (auto& b : junk) b = static_cast<unsigned char>(rand_r(&seed));
    ASSERT_EQ(pwrite(fd, junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
  }
  close(fd);
}

TEST_P(RegionTamperTest, HolderStaysChargedAndAlive) {
  int in = -1, out = -1;
  pid_t holder = Start("hold", {}, &in, &out);
  char line[16] = {};
  ASSERT_GT(read(out, line, sizeof(line) - 1), 0);  // "holding"
  Tamper(dir_ + "/vgpu.cache", GetParam());
  Outcome o = Run("refused", {});
  EXPECT_SCENARIO(o);
  close(in);
  int status = 0;
  waitpid(holder, &status, 0);
  close(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "holder status " << status
      << (WIFSIGNALED(status) ? " signal " + std::to_string(WTERMSIG(status)) : std::string());
}

INSTANTIATE_TEST_SUITE_P(Tampering, RegionTamperTest,
                         ::testing::Values("truncate", "magic", "procnum0", "procnum-5", "garbage"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace hami::vgpu
