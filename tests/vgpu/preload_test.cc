// End-to-end tests of libvgpu.so: driver_app runs under LD_PRELOAD with the fake libcuda.so.1 and
// libnvidia-ml.so.1, each test with its own region file in a fresh temporary directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/vgpu/region_reader.h"
#include "tests/vgpu/test_env.h"

namespace hami::vgpu {
namespace {

using testing::AppPath;
using testing::FakesDir;
using testing::LibPath;
using testing::RawRegion;

constexpr unsigned long long kMiB = 1ULL << 20;
constexpr unsigned long long kGiB = 1ULL << 30;

struct AppResult {
  int status = -1;  // raw wait status
  std::string out;
  std::string err;
  bool ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

struct Child {
  pid_t pid = -1;
  int in = -1;   // write end of the child's stdin
  int out = -1;  // read end of the child's stdout
  std::string err_path;
};

class PreloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu_preload_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    cache_ = dir_ + "/vgpu.cache";
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf " + dir_).c_str()), 0); }

  std::vector<std::string> Env(const std::vector<std::string>& extra) {
    std::string lib = lib_.value_or(LibPath());
    std::vector<std::string> env = {
        "LD_PRELOAD=" + lib,    "LD_LIBRARY_PATH=" + library_path_.value_or(FakesDir()),
        "VGPU_LIB_PATH=" + lib, "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + cache_,
        "PATH=/usr/bin:/bin",
    };
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  Child Spawn(const std::vector<std::string>& extra_env, const std::vector<std::string>& args) {
    static int counter = 0;
    Child c;
    c.err_path = dir_ + "/stderr." + std::to_string(counter++);
    int in[2], out[2];
    // Close-on-exec, or every later sibling would hold these pipe ends open.
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    std::vector<std::string> env = Env(extra_env);
    std::vector<std::string> argv = {AppPath()};
    argv.insert(argv.end(), args.begin(), args.end());
    c.pid = fork();
    if (c.pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      int err = open(c.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      close(in[1]);
      close(out[0]);
      std::vector<char*> cargv, cenv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      for (auto& e : env) cenv.push_back(e.data());
      cenv.push_back(nullptr);
      execve(cargv[0], cargv.data(), cenv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c.in = in[1];
    c.out = out[0];
    return c;
  }

  static std::string ReadLine(int fd) {
    std::string line;
    char ch;
    while (read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
    return line;
  }

  AppResult Finish(Child& c) {
    AppResult r;
    if (c.in >= 0) close(c.in);
    char buf[4096];
    ssize_t n;
    while ((n = read(c.out, buf, sizeof(buf))) > 0) r.out.append(buf, n);
    close(c.out);
    waitpid(c.pid, &r.status, 0);
    std::FILE* f = std::fopen(c.err_path.c_str(), "r");
    while (f && (n = static_cast<ssize_t>(std::fread(buf, 1, sizeof(buf), f))) > 0) {
      r.err.append(buf, n);
    }
    if (f) std::fclose(f);
    return r;
  }

  AppResult Run(const std::vector<std::string>& extra_env, const std::vector<std::string>& args) {
    Child c = Spawn(extra_env, args);
    return Finish(c);
  }

  static int Count(const std::string& haystack, const std::string& needle) {
    int n = 0;
    for (std::size_t pos = haystack.find(needle); pos != std::string::npos;
         pos = haystack.find(needle, pos + 1)) {
      ++n;
    }
    return n;
  }

  // Preloads libvgpu.so through a link in a directory of this test that also holds a limits
  // file (vgpu.limits beside the library, as the device plugin mounts it) with `content`.
  void UseLimitsFile(const std::string& content) {
    std::string lib_dir = dir_ + "/lib";
    mkdir(lib_dir.c_str(), 0755);
    unlink((lib_dir + "/libvgpu.so").c_str());
    ASSERT_EQ(symlink(LibPath().c_str(), (lib_dir + "/libvgpu.so").c_str()), 0);
    std::FILE* f = std::fopen((lib_dir + "/vgpu.limits").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(content.c_str(), f);
    std::fclose(f);
    lib_ = lib_dir + "/libvgpu.so";
  }

  std::string dir_, cache_;
  std::optional<std::string> library_path_;
  std::optional<std::string> lib_;
};

#define EXPECT_APP_OK(r) EXPECT_TRUE((r).ok()) << "status " << (r).status << "\n" << (r).err

TEST_F(PreloadTest, MemoryLimitSuffixesAndPerDeviceOverride) {
  struct Case {
    std::vector<std::string> env;
    int dev;
    unsigned long long want_total;
  } cases[] = {
      {{}, 0, 8 * kGiB},  // unlimited: the physical figures
      {{"CUDA_DEVICE_MEMORY_LIMIT=1g"}, 0, kGiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT=1G"}, 1, kGiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT=3000m"}, 0, 3000 * kMiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT=1048576k"}, 0, kGiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT=536870912"}, 0, 512 * kMiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT=0x20000000"}, 0, 512 * kMiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT=64g"}, 0, 8 * kGiB},  // never above the physical total
      {{"CUDA_DEVICE_MEMORY_LIMIT=1g", "CUDA_DEVICE_MEMORY_LIMIT_1=2g"}, 1, 2 * kGiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT=1g", "CUDA_DEVICE_MEMORY_LIMIT_1=2g"}, 0, kGiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT_0=100m"}, 0, 100 * kMiB},
      {{"CUDA_DEVICE_MEMORY_LIMIT_0=100m"}, 1, 8 * kGiB},
  };
  int i = 0;
  for (const Case& c : cases) {
    cache_ = dir_ + "/case" + std::to_string(i++) + ".cache";
    AppResult r = Run(c.env, {"info", std::to_string(c.dev), std::to_string(c.want_total)});
    EXPECT_APP_OK(r) << " case " << i;
  }
}

TEST_F(PreloadTest, OutOfMemoryCodeAtTheLimit) {
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=64m"}, {"oom", std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
  EXPECT_NE(r.err.find("[HAMI-core ERROR (pid:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Device 0 OOM 67108865 / 67108864"), std::string::npos) << r.err;
}

TEST_F(PreloadTest, EveryAllocationFamilyIsCounted) {
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=64m"}, {"families", std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, NvmlMemoryInfoIsVirtualised) {
  AppResult r =
      Run({"CUDA_DEVICE_MEMORY_LIMIT=1g"},
          {"nvml", std::to_string(100 * kMiB), std::to_string(kGiB), std::to_string(100 * kMiB)});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, PrimaryContextIsChargedOnce) {
  AppResult r =
      Run({"CUDA_DEVICE_MEMORY_LIMIT=1g", "FAKE_GPU_CONTEXT_BYTES=314572800"},
          {"nvml", std::to_string(100 * kMiB), std::to_string(kGiB), std::to_string(400 * kMiB)});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, FreeNeverAboveThePhysicalFree) {
  // Co-tenants use 7.5 of 8 GiB: a 1 GiB container sees 0.5 GiB free, used + free = total.
  std::vector<std::string> env = {"CUDA_DEVICE_MEMORY_LIMIT=1g",
                                  "FAKE_GPU_OTHER_USED=" + std::to_string(7 * kGiB + kGiB / 2)};
  AppResult r = Run(env, {"info", "0", std::to_string(kGiB)});
  EXPECT_APP_OK(r);
  EXPECT_NE(r.out.find("free=536870912"), std::string::npos) << r.out;
  r = Run(env, {"nvml", "1", std::to_string(kGiB), std::to_string(kGiB / 2 + 1)});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, VisibleDevicesByUuidAndOrdinalShareOneIndexSpace) {
  std::vector<std::string> limits = {"CUDA_DEVICE_MEMORY_LIMIT_0=1g",
                                     "CUDA_DEVICE_MEMORY_LIMIT_1=2g"};
  auto with = [&](const std::string& visible) {
    std::vector<std::string> env = limits;
    env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
    return env;
  };
  EXPECT_APP_OK(Run(with("GPU-fa4e0000-0000-0000-0000-000000000001"), {"info", "0", "2147483648"}));
  EXPECT_APP_OK(
      Run(with("GPU-fa4e0000-0000-0000-0000-000000000001,GPU-fa4e0000-0000-0000-0000-000000000000"),
          {"info", "1", "1073741824"}));
  EXPECT_APP_OK(Run(with("1,0"), {"info", "0", "2147483648"}));
  EXPECT_APP_OK(Run(with("1,0"), {"info", "1", "1073741824"}));
}

TEST_F(PreloadTest, GetProcAddressForCuda11To13AndPerThreadStreams) {
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=64m", "TEST_LIMIT=67108864"}, {"procaddr"});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, GetProcAddressMapsDriverInternalAliasesByName) {
  AppResult r =
      Run({"CUDA_DEVICE_MEMORY_LIMIT=64m", "TEST_LIMIT=67108864", "FAKE_CUDA_PROC_ALIASES=1"},
          {"procaddr"});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, EveryDlsymPath) {
  AppResult r = Run({}, {"dlsym"});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, NoWayAroundTheHooksThroughTheDynamicLinker) {
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=64m"}, {"escapes", std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, MemoryOfUnsizedCallsIsChargedAsCommitted) {
  // Arrays, mipmapped arrays, module and library globals, context limits, the v1 allocator.
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=1g"}, {"measured", std::to_string(kGiB)});
  EXPECT_APP_OK(r);
}

// The escape attempts tests/gpu/run.sh makes against a real driver (driver_app `attack`), here
// against the fake one: every path the fake driver has is refused, none escapes.
TEST_F(PreloadTest, AttackScenarioForRealDriversIsRefusedOnTheFakeDriver) {
  UseLimitsFile("CUDA_DEVICE_MEMORY_LIMIT=1g\nCUDA_DEVICE_MEMORY_SHARED_CACHE=" + cache_ + "\n");
  AppResult r = Run({"FAKE_GPU_CONTEXT_BYTES=314572800"}, {"attack", std::to_string(kGiB)});
  EXPECT_APP_OK(r) << r.out;
  EXPECT_EQ(r.out.find("ESCAPED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ERROR"), std::string::npos) << r.out;
  const char* refused[] = {
      "cuMemAlloc_v2 of 2x the limit (baseline): refused",
      "dlvsym(RTLD_DEFAULT, \"dlsym\", \"GLIBC_2.34\") + dlsym: refused",
      "dlsym(libc, \"dlsym\") + dlsym: refused",
      "dlmopen(LM_ID_NEWLM, \"libcuda.so.1\") + dlsym: refused",
      "dlsym(RTLD_NEXT) from a library loaded before libcuda: refused",
      "cuGetProcAddress_v2(\"cuMemAlloc\", cudaVersion 99000): refused",
      "cuMemAlloc (v1) through dlsym: refused",
      "cuMemAlloc (v1) through cuGetProcAddress(cudaVersion 3010): refused",
      "cuArrayCreate_v2: refused",
      "cuArray3DCreate_v2: refused",
      "cuMipmappedArrayCreate: refused",
      "cuCtxCreate x8: refused (_v4, 2 created",
      "cuCtxSetLimit(MALLOC_HEAP_SIZE, 2x the limit): refused",
      "cuCtxSetLimit(STACK_SIZE, 2x the limit over all resident threads): refused",
      "cuCtxSetLimit(PRINTF_FIFO_SIZE, 2x the limit): refused",
      "cuModuleLoadData (2x the limit of __device__ globals): refused",
      "cuLibraryLoadData: refused",
      "cuModuleLoadDataEx: refused",
      "cuModuleLoad (file): refused",
      "cuModuleLoadFatBinary: refused",
      "cuLibraryLoadFromFile: refused",
      "cuGreenCtxCreate x8 (all SMs): refused (2 created",
      "cuGraphAddMemAllocNode, 3 instantiations of 0.4x the headroom: refused",
      "cuImportExternalMemory of 2x the limit: refused",
      "cuMemRelease while mapped, then cuMemCreate of 0.6x the headroom: refused",
      "pool at RELEASE_THRESHOLD max, cuMemFreeAsync, then 0.6x the headroom again: refused",
  };
  for (const char* line : refused) {
    EXPECT_NE(r.out.find(std::string("attack: ") + line), std::string::npos) << line << "\n"
                                                                             << r.out;
  }
}

TEST_F(PreloadTest, CreatedContextsAreChargedUpToTheLimit) {
  // Each context commits 300 MiB, the primary one included: 1 + 2 fit in 1 GiB, 6 are refused;
  // green contexts alike.
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=1g", "FAKE_GPU_CONTEXT_BYTES=314572800"},
                    {"contexts", std::to_string(kGiB)});
  EXPECT_APP_OK(r);
  EXPECT_NE(r.out.find("contexts=2 refused=6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("green=2 refused=6"), std::string::npos) << r.out;
}

TEST_F(PreloadTest, LegacyAndMultiDeviceLaunchesAreThrottled) {
  EXPECT_APP_OK(
      Run({"CUDA_DEVICE_SM_LIMIT=50", "GPU_CORE_UTILIZATION_POLICY=force"}, {"legacylaunch"}));
}

TEST_F(PreloadTest, ANewProcessStartsThrottled) {
  std::vector<std::string> env = {"CUDA_DEVICE_SM_LIMIT=50", "GPU_CORE_UTILIZATION_POLICY=force",
                                  "FAKE_NVML_SM_UTIL=100"};
  // The first process measures 100 % against a 50 % limit: calibrated.
  EXPECT_APP_OK(Run(env, {"watch", "100"}));
  auto bucket = [&](int field) {  // device 0 of "<region>.limiter": rate at +8, tokens at +16
    double value = 0;
    int fd = open((cache_ + ".limiter").c_str(), O_RDONLY);
    if (fd < 0 || pread(fd, &value, sizeof(value), 16 + 8 * field) != sizeof(value)) value = 0;
    if (fd >= 0) close(fd);
    return value;
  };
  ASSERT_GT(bucket(1), 0.0);
  // A new process's very first launch is charged to the container's calibrated bucket: its
  // debt delays the next launch of any process of the container.
  EXPECT_APP_OK(Run(env, {"bigkernel"}));
  EXPECT_LT(bucket(2), -1e8);
}

TEST_F(PreloadTest, ARegionWriteOfTheSwitchDoesNotStopThrottling) {
  // Issue 29 finding 1: the plugin's limits file sets a core limit (policy default); a process of
  // the container writes utilization_switch = 0 into the region. Launches stay charged.
  UseLimitsFile("CUDA_DEVICE_SM_LIMIT=50\nCUDA_DEVICE_MEMORY_SHARED_CACHE=" + cache_ + "\n");
  std::vector<std::string> env = {"FAKE_NVML_SM_UTIL=100"};
  EXPECT_APP_OK(Run(env, {"watch", "100"}));
  int fd = open(cache_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::int32_t off = 0;
  ASSERT_EQ(pwrite(fd, &off, sizeof(off), 2008900), static_cast<ssize_t>(sizeof(off)));
  close(fd);
  EXPECT_APP_OK(Run(env, {"bigkernel"}));
  double tokens = 0;
  fd = open((cache_ + ".limiter").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pread(fd, &tokens, sizeof(tokens), 32), static_cast<ssize_t>(sizeof(tokens)));
  close(fd);
  EXPECT_LT(tokens, -1e8);
}

TEST_F(PreloadTest, ALaunchIsChargedToItsStreamsDevice) {
  // Issue 29 finding 7: a launch on device 1's stream from device 0's context was charged to
  // device 0, so device 1 ran unthrottled.
  EXPECT_APP_OK(
      Run({"CUDA_DEVICE_SM_LIMIT_1=50", "GPU_CORE_UTILIZATION_POLICY=force"}, {"streamkernel"}));
  auto tokens = [&](int dev) {  // "<region>.limiter": 16-byte header, 64-byte buckets
    double value = 0;
    int fd = open((cache_ + ".limiter").c_str(), O_RDONLY);
    if (fd < 0 || pread(fd, &value, sizeof(value), 16 + 64 * dev + 16) != sizeof(value)) value = 0;
    if (fd >= 0) close(fd);
    return value;
  };
  EXPECT_LT(tokens(1), -1e8);
  EXPECT_EQ(tokens(0), 0.0);
}

TEST_F(PreloadTest, WholeGpusAreNeverThrottledOrBlocked) {
  // A container with no core limit: the monitor's block (recent_kernel = -1) and the switch do
  // not hold its launches (the priority wait would take 30 s), and no bucket is charged.
  EXPECT_APP_OK(Run({}, {"bigkernel"}));
  int fd = open(cache_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::int32_t block = -1;
  ASSERT_EQ(pwrite(fd, &block, sizeof(block), 2008904), static_cast<ssize_t>(sizeof(block)));
  close(fd);
  auto start = std::chrono::steady_clock::now();
  EXPECT_APP_OK(Run({"GPU_CORE_UTILIZATION_POLICY=force"}, {"launch"}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  struct stat st;
  EXPECT_NE(stat((cache_ + ".limiter").c_str(), &st), 0);  // never opened: nothing to share
}

TEST_F(PreloadTest, ALinkInPlaceOfTheSideFileIsNotFollowed) {
  // Issue 29 finding 5: the side file sits in the container's writable directory. A link there
  // must not make libvgpu map (and initialise) whatever it points to.
  std::string target = dir_ + "/elsewhere";
  {
    std::FILE* f = std::fopen(target.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("precious", f);
    std::fclose(f);
  }
  ASSERT_EQ(symlink(target.c_str(), (cache_ + ".limiter").c_str()), 0);
  AppResult r =
      Run({"CUDA_DEVICE_SM_LIMIT=50", "GPU_CORE_UTILIZATION_POLICY=force"}, {"bigkernel"});
  EXPECT_APP_OK(r);
  struct stat st;
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8);  // untouched (ed374e3 sized it to the limiter file and wrote it)
  EXPECT_NE(r.err.find("limiter file"), std::string::npos) << r.err;
}

TEST_F(PreloadTest, TruncatingTheLimiterFileKillsNoLauncher) {
  // Issue 29 item 3: the side file is mapped shared and sits where the container can write; one
  // process truncating it made the next launch of every throttled process fault (SIGBUS).
  AppResult r =
      Run({"CUDA_DEVICE_SM_LIMIT=50", "GPU_CORE_UTILIZATION_POLICY=force"}, {"limitertruncate"});
  EXPECT_APP_OK(r);
  EXPECT_NE(r.out.find("survived"), std::string::npos) << r.err;
  struct stat st;
  ASSERT_EQ(stat((cache_ + ".limiter").c_str(), &st), 0);
  EXPECT_GE(st.st_size, 16 + 16 * 64);  // extended again by the guard
}

TEST_F(PreloadTest, NvmlEarlierOnTheLibraryPathDoesNotTurnTheLimitOff) {
  // A libnvidia-ml.so.1 that is not NVML, ahead of the driver's directory on the search path.
  std::string evil = dir_ + "/evil";
  ASSERT_EQ(mkdir(evil.c_str(), 0755), 0);
  ASSERT_EQ(symlink((FakesDir() + "/libvgpu_escape_probe.so").c_str(),
                    (evil + "/libnvidia-ml.so.1").c_str()),
            0);
  library_path_ = evil + ":" + FakesDir();
  AppResult r =
      Run({"CUDA_DEVICE_SM_LIMIT=50", "GPU_CORE_UTILIZATION_POLICY=force", "FAKE_NVML_SM_UTIL=100"},
          {"watch", "100"});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, ReleasedWhileMappedStaysChargedUntilTheLastUnmap) {
  EXPECT_APP_OK(Run({"CUDA_DEVICE_MEMORY_LIMIT=1g"}, {"releasemapped", std::to_string(kGiB)}));
}

TEST_F(PreloadTest, AsyncAllocationsAreChargedToTheStreamsOrPoolsDevice) {
  EXPECT_APP_OK(
      Run({"CUDA_DEVICE_MEMORY_LIMIT_0=1g", "CUDA_DEVICE_MEMORY_LIMIT_1=2g"}, {"asyncdevice"}));
}

TEST_F(PreloadTest, AsyncCallsAsTheFirstDriverCallsAreServed) {
  EXPECT_APP_OK(Run({"CUDA_DEVICE_MEMORY_LIMIT=1g"}, {"asyncfirst"}));
}

TEST_F(PreloadTest, MemoryAPoolKeepsAfterAFreeStaysCharged) {
  EXPECT_APP_OK(Run({"CUDA_DEVICE_MEMORY_LIMIT=1g"}, {"poolkeep", std::to_string(kGiB)}));
}

TEST_F(PreloadTest, ImportedExternalMemoryIsCharged) {
  EXPECT_APP_OK(Run({"CUDA_DEVICE_MEMORY_LIMIT=1g"}, {"import", std::to_string(kGiB)}));
}

TEST_F(PreloadTest, GraphMemoryNodesAreChargedPerInstantiation) {
  EXPECT_APP_OK(Run({"CUDA_DEVICE_MEMORY_LIMIT=1g"}, {"graphmem", std::to_string(kGiB)}));
}

TEST_F(PreloadTest, EveryLaunchPathReachesItsOwnRealEntry) {
  EXPECT_APP_OK(Run({}, {"launch"}));
  cache_ = dir_ + "/limited.cache";
  EXPECT_APP_OK(Run({"CUDA_DEVICE_SM_LIMIT=50", "GPU_CORE_UTILIZATION_POLICY=force"}, {"launch"}));
}

TEST_F(PreloadTest, WatcherPublishesUtilisationAndFeedsTheLimiter) {
  AppResult r =
      Run({"CUDA_DEVICE_SM_LIMIT=50", "GPU_CORE_UTILIZATION_POLICY=force", "FAKE_NVML_SM_UTIL=100"},
          {"watch", "100"});
  EXPECT_APP_OK(r);
  // A scripted curve: idle samples first, then 55 %; the first published non-zero value is 55.
  cache_ = dir_ + "/scripted.cache";
  r = Run({"CUDA_DEVICE_SM_LIMIT=50", "GPU_CORE_UTILIZATION_POLICY=force",
           "FAKE_NVML_SM_UTIL_SCRIPT=0,0,55"},
          {"watch", "55"});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, EightProcessesAllocatingAtOnceNeverExceedTheLimit) {
  constexpr unsigned long long kLimit = 256 * kMiB;
  constexpr unsigned long long kChunk = 3 * kMiB;
  std::vector<std::string> env = {"CUDA_DEVICE_MEMORY_LIMIT=256m", "LIBCUDA_LOG_LEVEL=0"};
  // Create the region first so the sampler can map it while the children race.
  EXPECT_APP_OK(Run(env, {"info", "0", std::to_string(kLimit)}));
  std::atomic<bool> stop{false};
  std::atomic<unsigned long long> max_seen{0};
  std::thread sampler([&] {
    while (!stop.load()) {
      RawRegion raw;
      if (raw.Load(cache_) && raw.size() == RawRegion::kFileSize) {
        unsigned long long u = raw.MonitorUsage(0);
        if (u > max_seen.load()) max_seen.store(u);
      }
    }
  });
  std::vector<Child> children;
  for (int i = 0; i < 8; ++i) children.push_back(Spawn(env, {"fill", std::to_string(kChunk)}));
  unsigned long long total = 0;
  for (Child& c : children) {
    std::string line = ReadLine(c.out);
    unsigned long count = 0;
    int rc = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "count=%lu rc=%d", &count, &rc), 2) << line;
    EXPECT_EQ(rc, 2);
    total += count * kChunk;
  }
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.MonitorUsage(0), total);
  EXPECT_GE(raw.proc_num(), 8);
  stop = true;
  sampler.join();
  EXPECT_EQ(total, kLimit / kChunk * kChunk);  // filled to the last whole chunk, never beyond
  EXPECT_LE(max_seen.load(), kLimit);
  for (Child& c : children) EXPECT_APP_OK(Finish(c));
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.MonitorUsage(0), 0u);  // every child left its slot on exit
}

TEST_F(PreloadTest, KilledProcessMemoryIsReclaimed) {
  std::vector<std::string> env = {"CUDA_DEVICE_MEMORY_LIMIT=256m"};
  AppResult dead = Run(env, {"hold", std::to_string(200 * kMiB), "die"});
  ASSERT_TRUE(WIFSIGNALED(dead.status)) << dead.status;
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.MonitorUsage(0), 200 * kMiB);  // stale until someone sweeps
  AppResult next = Run(env, {"hold", std::to_string(200 * kMiB), "exit"});
  EXPECT_APP_OK(next);
  EXPECT_NE(next.out.find("rc=0"), std::string::npos) << next.out << next.err;
}

TEST_F(PreloadTest, KilledLockHolderDoesNotWedgeTheContainer) {
  std::vector<std::string> env = {"CUDA_DEVICE_MEMORY_LIMIT=64m"};
  EXPECT_APP_OK(Run(env, {"info", "0", std::to_string(64 * kMiB)}));
  for (bool reap : {true, false}) {
    pid_t holder = fork();
    if (holder == 0) {
      int fd = open(cache_.c_str(), O_RDWR);
      void* map = mmap(nullptr, 2008952, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (map == MAP_FAILED) _exit(1);
      std::uint64_t expected = 0;
      auto* owner = reinterpret_cast<std::uint64_t*>(static_cast<char*>(map) + 16);
      if (__atomic_compare_exchange_n(owner, &expected, static_cast<std::uint64_t>(getpid()), false,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        raise(SIGKILL);
      }
      _exit(1);
    }
    int status = 0;
    if (reap) {
      ASSERT_EQ(waitpid(holder, &status, 0), holder);
    } else {
      siginfo_t info;
      ASSERT_EQ(waitid(P_PID, holder, &info, WEXITED | WNOWAIT), 0);  // zombie holder
    }
    auto start = std::chrono::steady_clock::now();
    AppResult r = Run(env, {"oom", std::to_string(64 * kMiB)});
    EXPECT_APP_OK(r) << "reap=" << reap;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
    if (!reap) {
      ASSERT_EQ(waitpid(holder, &status, 0), holder);
    }
  }
}

TEST_F(PreloadTest, ThreadsAllocatingConcurrentlyKeepTheBooksBalanced) {
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=64m", "LIBCUDA_LOG_LEVEL=0"},
                    {"threads", std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.MonitorUsage(0), 0u);
}

TEST_F(PreloadTest, ForkedChildGetsItsOwnSlotUnderTheSameLimit) {
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=64m"},
                    {"fork", std::to_string(16 * kMiB), std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, RegionFileReadByIndependentReader) {
  std::vector<std::string> env = {"CUDA_DEVICE_MEMORY_LIMIT=64m", "CUDA_DEVICE_SM_LIMIT=30",
                                  "CUDA_TASK_PRIORITY=0"};
  Child c = Spawn(env, {"hold", std::to_string(5 * kMiB), "wait"});
  ASSERT_EQ(ReadLine(c.out), "rc=0");
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.size(), 2008953u);
  EXPECT_EQ(raw.magic(), 19920718);
  EXPECT_EQ(raw.major(), 1u);
  EXPECT_EQ(raw.minor(), 2u);
  EXPECT_EQ(raw.device_num(), 2u);
  EXPECT_EQ(raw.uuid(0), "GPU-fa4e0000-0000-0000-0000-000000000000");
  EXPECT_EQ(raw.uuid(1), "GPU-fa4e0000-0000-0000-0000-000000000001");
  EXPECT_EQ(raw.limit(0), 64 * kMiB);
  EXPECT_EQ(raw.limit(15), 64 * kMiB);
  EXPECT_EQ(raw.sm_limit(0), 30u);
  EXPECT_EQ(raw.priority(), 0);
  EXPECT_EQ(raw.utilization_switch(), 1);
  EXPECT_EQ(raw.proc_num(), 1);
  EXPECT_EQ(raw.slot_pid(0), c.pid);
  EXPECT_EQ(raw.slot_status(0), 1);
  EXPECT_EQ(raw.slot_data(0, 0), 5 * kMiB);
  EXPECT_EQ(raw.slot_total(0, 0), 5 * kMiB);
  EXPECT_EQ(raw.MonitorUsage(0), 5 * kMiB);
  EXPECT_NEAR(static_cast<double>(raw.last_kernel_time()), static_cast<double>(time(nullptr)), 5);
  EXPECT_APP_OK(Finish(c));
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.slot_status(0), 0);
  EXPECT_EQ(raw.MonitorUsage(0), 0u);
}

TEST_F(PreloadTest, HostPidIsDiscoveredAroundContextCreation) {
  // The fake NVML reports this process as pid + 100000, as a host sees a namespaced process.
  Child c = Spawn({"FAKE_NVML_PID_OFFSET=100000", "FAKE_NVML_OTHER_PID=4242"},
                  {"hold", std::to_string(kMiB), "wait"});
  ASSERT_EQ(ReadLine(c.out), "rc=0");
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.slot_pid(0), c.pid);
  EXPECT_EQ(raw.slot_hostpid(0), c.pid + 100000);
  EXPECT_APP_OK(Finish(c));
}

TEST_F(PreloadTest, HostPidDiscoveryIsSerialisedAcrossTheContainer) {
  // Two processes create their contexts at the same time (each creation takes 500 ms, and the
  // driver lists a process as soon as its creation starts): each still finds its own host pid.
  std::string procs = dir_ + "/procs";
  ASSERT_EQ(mkdir(procs.c_str(), 0755), 0);
  std::vector<std::string> env = {"FAKE_NVML_PID_OFFSET=100000", "FAKE_GPU_PROC_DIR=" + procs,
                                  "FAKE_CUDA_CTX_DELAY_MS=500"};
  Child a = Spawn(env, {"hold", std::to_string(kMiB), "wait"});
  Child b = Spawn(env, {"hold", std::to_string(kMiB), "wait"});
  ASSERT_EQ(ReadLine(a.out), "rc=0");
  ASSERT_EQ(ReadLine(b.out), "rc=0");
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  int found = 0;
  for (int i = 0; i < raw.proc_num(); ++i) {
    if (raw.slot_pid(i) == a.pid || raw.slot_pid(i) == b.pid) {
      EXPECT_EQ(raw.slot_hostpid(i), raw.slot_pid(i) + 100000) << "slot " << i;
      ++found;
    }
  }
  EXPECT_EQ(found, 2);
  EXPECT_APP_OK(Finish(a));
  EXPECT_APP_OK(Finish(b));
}

TEST_F(PreloadTest, FirstProcessDecidesTheLimit) {
  EXPECT_APP_OK(Run({"CUDA_DEVICE_MEMORY_LIMIT=64m"}, {"info", "0", std::to_string(64 * kMiB)}));
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=128m"}, {"info", "0", std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
  EXPECT_NE(r.err.find("Limit inconsistency"), std::string::npos) << r.err;
}

TEST_F(PreloadTest, UnusableRegionFileRefusesAllocationsWhileLimited) {
  // A missing directory, and the path replaced by a directory: nothing can be accounted, so
  // nothing is handed out while a limit is set.
  ASSERT_EQ(mkdir((dir_ + "/a-dir").c_str(), 0755), 0);
  for (const std::string& path : {dir_ + "/missing-dir/vgpu.cache", dir_ + "/a-dir"}) {
    cache_ = path;
    AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=1g"}, {"refuse", std::to_string(kMiB)});
    EXPECT_APP_OK(r) << path;
    EXPECT_NE(r.err.find("shared region unusable"), std::string::npos) << r.err;
    // Without a limit there is nothing to enforce: calls pass through, one ERROR line.
    r = Run({}, {"info", "0", std::to_string(8 * kGiB)});
    EXPECT_APP_OK(r) << path;
    EXPECT_EQ(Count(r.err, "[HAMI-core ERROR"), 1) << r.err;
  }
}

TEST_F(PreloadTest, EveryProcessSlotTakenRefusesAllocations) {
  std::vector<std::string> env = {"CUDA_DEVICE_MEMORY_LIMIT=1g"};
  EXPECT_APP_OK(Run(env, {"info", "0", std::to_string(kGiB)}));
  int fd = open(cache_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* map = mmap(nullptr, 2008952, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  char* base = static_cast<char*>(map);
  for (int i = 0; i < 1024; ++i) {  // every slot held by a live process (this test)
    *reinterpret_cast<std::int32_t*>(base + 1856 + i * 1960) = getpid();
    *reinterpret_cast<std::int32_t*>(base + 1856 + i * 1960 + 1928) = 1;
  }
  *reinterpret_cast<std::int32_t*>(base + 2008896) = 1024;
  AppResult r = Run(env, {"refuse", std::to_string(kMiB)});
  EXPECT_APP_OK(r);
  EXPECT_NE(r.err.find("no free process slot"), std::string::npos) << r.err;
  munmap(map, 2008952);
  close(fd);
}

TEST_F(PreloadTest, FullAllocationTableRefusesInsteadOfPassingUncharged) {
  // A table of 64 entries holds 56; the 57th allocation is released and refused.
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=1g", "HAMI_VGPU_MAX_TRACKED=64"},
                    {"tablefull", std::to_string(kMiB)});
  EXPECT_APP_OK(r);
  EXPECT_NE(r.out.find("count=56"), std::string::npos) << r.out << r.err;
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.MonitorUsage(0), 0u);  // everything freed, nothing left charged
}

TEST_F(PreloadTest, MissingNvmlKeepsMemoryLimitsWithOneErrorLine) {
  // A library directory holding only the fake driver.
  std::string only_cuda = dir_ + "/only-cuda";
  ASSERT_EQ(mkdir(only_cuda.c_str(), 0755), 0);
  for (const char* lib : {"libcuda.so.1", "libvgpu_escape_probe.so"}) {
    ASSERT_EQ(symlink((FakesDir() + "/" + lib).c_str(), (only_cuda + "/" + lib).c_str()), 0);
  }
  library_path_ = only_cuda;
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=64m"}, {"oom", std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
  EXPECT_EQ(Count(r.err, "NVML"), 1) << r.err;
}

TEST_F(PreloadTest, LogLinesHaveHamiCoreShape) {
  AppResult r = Run({"LIBCUDA_LOG_LEVEL=4"}, {"info", "0", std::to_string(8 * kGiB)});
  EXPECT_APP_OK(r);
  EXPECT_NE(r.err.find("[HAMI-core Msg("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Initializing....."), std::string::npos) << r.err;
  AppResult quiet = Run({"LIBCUDA_LOG_LEVEL=0"}, {"info", "0", std::to_string(8 * kGiB)});
  EXPECT_EQ(quiet.err.find("Initializing"), std::string::npos) << quiet.err;
}

TEST_F(PreloadTest, LimitsFileBeatsTheEnvironment) {
  UseLimitsFile(
      "# written by the device plugin\nCUDA_DEVICE_MEMORY_LIMIT_0=64m\n"
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=" +
      cache_ + "\n");
  std::string other = dir_ + "/other.cache";
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=8g", "CUDA_DEVICE_MEMORY_LIMIT_0=8g",
                     "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + other},
                    {"oom", std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
  EXPECT_EQ(access(other.c_str(), F_OK), -1);
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.limit(0), 64 * kMiB);
  EXPECT_EQ(raw.limit(1), 0u);  // absent from the file: unlimited, whatever the env says
}

TEST_F(PreloadTest, SetenvBeforeTheFirstCudaCallDoesNotEscape) {
  UseLimitsFile("CUDA_DEVICE_MEMORY_LIMIT=64m\nCUDA_DEVICE_MEMORY_SHARED_CACHE=" + cache_ + "\n");
  AppResult r = Run({"CUDA_DEVICE_MEMORY_LIMIT=64m"}, {"setenv", std::to_string(128 * kMiB)});
  EXPECT_APP_OK(r);
}

TEST_F(PreloadTest, FirstProcessWithoutLimitsDoesNotPoisonTheRegion) {
  // A process without the limits file (and without limits) creates the region unlimited.
  EXPECT_APP_OK(Run({}, {"info", "0", std::to_string(8 * kGiB)}));
  RawRegion raw;
  ASSERT_TRUE(raw.Load(cache_));
  ASSERT_EQ(raw.limit(0), 0u);
  UseLimitsFile("CUDA_DEVICE_MEMORY_LIMIT=64m\nCUDA_DEVICE_MEMORY_SHARED_CACHE=" + cache_ + "\n");
  AppResult r = Run({}, {"oom", std::to_string(64 * kMiB)});
  EXPECT_APP_OK(r);
  EXPECT_EQ(r.err.find("Limit inconsistency"), std::string::npos) << r.err;
  ASSERT_TRUE(raw.Load(cache_));
  EXPECT_EQ(raw.limit(0), 64 * kMiB);  // the region now shows the trusted limit
}

TEST_F(PreloadTest, LimitsWrittenIntoTheRegionAreIgnoredUnderALimitsFile) {
  UseLimitsFile("CUDA_DEVICE_MEMORY_LIMIT=64m\nCUDA_DEVICE_MEMORY_SHARED_CACHE=" + cache_ + "\n");
  EXPECT_APP_OK(Run({}, {"tamper", std::to_string(128 * kMiB)}));
}

TEST_F(PreloadTest, UnusableLimitsFileRefusesAllocations) {
  for (const std::string& content : {std::string("NOT_A_LIMIT=1\n"), std::string("garbage\n"),
                                     std::string("CUDA_DEVICE_MEMORY_LIMIT=1g\n"
                                                 "CUDA_DEVICE_MEMORY_LIMIT=2g\n")}) {
    UseLimitsFile(content);
    AppResult r = Run({}, {"refuse", std::to_string(kMiB)});
    EXPECT_APP_OK(r) << content;
    EXPECT_NE(r.err.find("limits file unusable"), std::string::npos) << r.err;
  }
}

TEST_F(PreloadTest, PolicyComesFromTheLimitsFile) {
  // The file says throttle (FORCE at 50 %); the environment's DISABLE is not read, so the
  // watcher runs and publishes the utilisation.
  UseLimitsFile(
      "CUDA_DEVICE_SM_LIMIT=50\nGPU_CORE_UTILIZATION_POLICY=force\n"
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=" +
      cache_ + "\n");
  AppResult r = Run(
      {"GPU_CORE_UTILIZATION_POLICY=disable", "CUDA_DEVICE_SM_LIMIT=0", "FAKE_NVML_SM_UTIL=100"},
      {"watch", "100"});
  EXPECT_APP_OK(r);
}

}  // namespace
}  // namespace hami::vgpu
