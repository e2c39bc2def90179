// The device plugin's MIG lifecycle (docs/MIG.md "Device plugin") against the fake
// libnvidia-ml.so.1 (fake_nvml.cc; its MIG state lives in a file the tests read and seed):
// NVML's MIG calls, creating and reusing the reserved instance, roll-back, the start-up
// adoption, the 5 s reconciler on an injected clock, and the apply lock.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "deviceplugin/mig_apply_lock.h"
#include "deviceplugin/mig_manager.h"
#include "deviceplugin/nvml.h"
#include "support/fake_mig_lock_wait.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
using protocol::MigAllocation;

constexpr const char* kGpu0 = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kGpu1 = "GPU-66666666-7777-8888-9999-000000000000";

class MigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hami-mig-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    state_ = (dir_ / "mig.state").string();
    setenv("HAMI_FAKE_NVML_DEVICES",
           (std::string(kGpu0) + "|NVIDIA A100-SXM4-40GB|40960|0:0:0.0;" + kGpu1 +
            "|NVIDIA A100-SXM4-40GB|40960|0:0:0.0")
               .c_str(),
           1);
    setenv("HAMI_FAKE_NVML_MIG", "0", 1);  // GPU 1 is not in MIG mode
    setenv("HAMI_FAKE_NVML_MIG_STATE", state_.c_str(), 1);
    unsetenv("HAMI_FAKE_NVML_MIG_FAIL");
  }
  void TearDown() override {
    for (const char* v : {"HAMI_FAKE_NVML_DEVICES", "HAMI_FAKE_NVML_MIG",
                          "HAMI_FAKE_NVML_MIG_STATE", "HAMI_FAKE_NVML_MIG_FAIL"}) {
      unsetenv(v);
    }
    fs::remove_all(dir_);
  }
  // A fresh NVML session: nvmlInit_v2 reads the environment and the state file again.
  std::unique_ptr<NvmlDiscovery> Nvml() {
    return std::make_unique<NvmlDiscovery>(NvmlOptions{HAMI_FAKE_NVML_PATH, "/nonexistent"});
  }
  std::unique_ptr<MigManager> Manager(MigDriver* driver) {
    return std::make_unique<MigManager>(driver, std::vector<MigGpu>{{0, kGpu0}, {1, kGpu1}},
                                        (dir_ / "lock" / "hami-mig-apply.lock").string());
  }
  // The fake's instance lines ("gpu gi profile start size ci uuid"), without the serial line.
  std::vector<std::string> StateLines() const {
    std::ifstream in(state_);
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("serial", 0) != 0) out.push_back(line);
    }
    return out;
  }
  void Seed(const std::string& text) { std::ofstream(state_) << text; }

  fs::path dir_;
  std::string state_;
};

MigAllocation Reservation(const std::string& gpu, const std::string& profile, uint32_t start,
                          uint32_t size, int64_t container = 0, int64_t device = 0) {
  MigAllocation a;
  a.container_index = container;
  a.device_index = device;
  a.gpu_uuid = gpu;
  a.profile = profile;
  a.placement = {start, size};
  return a;
}

k8s::Json Pod(const std::string& name, const std::string& phase, const std::string& mig) {
  k8s::Json pod = {{"metadata", {{"name", name}, {"namespace", "default"}}},
                   {"status", {{"phase", phase}}}};
  if (!mig.empty()) pod["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] = mig;
  return pod;
}

TEST_F(MigTest, FakeNvmlAnswersTheMigCalls) {
  auto nvml = Nvml();
  auto on = nvml->MigEnabled(0);
  ASSERT_TRUE(on) << on.error();
  EXPECT_TRUE(*on);
  EXPECT_FALSE(*nvml->MigEnabled(1));
  auto profiles = nvml->GpuInstanceProfiles(0);
  ASSERT_TRUE(profiles) << profiles.error();
  ASSERT_EQ(profiles->size(), 5u);
  EXPECT_EQ((*profiles)[0],
            (GpuInstanceProfile{
                0, 1, 7, 14, 4864, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}}));
  EXPECT_EQ((*profiles)[4].placements, (std::vector<protocol::MigPlacement>{{0, 8}}));

  auto gi = nvml->CreateGpuInstance(0, 2, {4, 4});  // 3g at slices 4..7
  ASSERT_TRUE(gi) << gi.error();
  EXPECT_FALSE(gi->compute_instance_id);
  EXPECT_EQ(gi->mig_uuid, "");
  auto overlap = nvml->CreateGpuInstance(0, 0, {5, 1});
  ASSERT_FALSE(overlap);
  EXPECT_EQ(overlap.error(),
            "nvmlDeviceCreateGpuInstanceWithPlacement for GPU 0 failed: NVML error 23");
  auto ci = nvml->CreateComputeInstance(0, gi->gpu_instance_id);
  ASSERT_TRUE(ci) << ci.error();
  EXPECT_EQ(ci->compute_instance_id, 0u);
  EXPECT_EQ(ci->mig_uuid.rfind("MIG-", 0), 0u);
  auto listed = nvml->MigInstances(0);
  ASSERT_TRUE(listed) << listed.error();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0], (MigInstance{gi->gpu_instance_id, 2, {4, 4}, 0u, ci->mig_uuid}));
  ASSERT_TRUE(nvml->DestroyGpuInstance(0, gi->gpu_instance_id));
  EXPECT_TRUE(nvml->MigInstances(0)->empty());
  EXPECT_TRUE(nvml->DestroyGpuInstance(0, 9));  // already gone: fine
}

TEST_F(MigTest, EnsureCreatesTheReservedInstanceThenReusesIt) {
  auto nvml = Nvml();
  auto manager = Manager(nvml.get());
  const std::vector<MigAllocation> want = {Reservation(kGpu0, "1g.5gb", 6, 1),
                                           Reservation(kGpu0, "3g.20gb", 0, 4, 0, 1)};
  auto first = manager->Ensure(want);
  ASSERT_TRUE(first) << first.error();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_TRUE((*first)[0].created);
  EXPECT_TRUE((*first)[1].created);
  EXPECT_NE((*first)[0].identity.mig_uuid, (*first)[1].identity.mig_uuid);
  EXPECT_EQ(StateLines().size(), 2u);
  // A second Allocate for the same reservations (a retried call, or a restarted plugin) finds
  // them: same GPU instance, same MIG UUID, nothing created.
  auto nvml2 = Nvml();
  auto again = Manager(nvml2.get())->Ensure(want);
  ASSERT_TRUE(again) << again.error();
  EXPECT_FALSE((*again)[0].created);
  EXPECT_EQ((*again)[0].identity, (*first)[0].identity);
  EXPECT_EQ((*again)[1].identity, (*first)[1].identity);
  EXPECT_EQ(StateLines().size(), 2u);
  // The line of the 1g instance: GPU 0, profile 0, slice 6, one slice, compute instance 0.
  std::ostringstream line;
  line << "0 " << (*first)[0].identity.gpu_instance_id << " 0 6 1 0 "
       << (*first)[0].identity.mig_uuid;
  EXPECT_EQ(StateLines()[0], line.str());
}

TEST_F(MigTest, EnsureRefusesWhatTheGpuCannotDoAndRollsBack) {
  auto nvml = Nvml();
  auto manager = Manager(nvml.get());
  struct Case {
    MigAllocation r;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {Reservation(kGpu0, "1g.5gb", 6, 2),
            "MIG reservation \"1g.5gb\" at {start 6, size 2} on GPU \"" + std::string(kGpu0) +
                "\": the GPU offers no such placement for the profile"},
           {Reservation(kGpu1, "1g.5gb", 0, 1),
            "MIG reservation \"1g.5gb\" at {start 0, size 1} on GPU \"" + std::string(kGpu1) +
                "\": the GPU is not in MIG mode"},
           {Reservation("GPU-x", "1g.5gb", 0, 1),
            "MIG reservation \"1g.5gb\" at {start 0, size 1} on GPU \"GPU-x\": not a GPU of "
            "this plugin"},
           {Reservation(kGpu0, "5g.30gb", 0, 1),
            "MIG reservation \"5g.30gb\" at {start 0, size 1} on GPU \"" + std::string(kGpu0) +
                "\": profile has no known slice count"}}) {
    // The first reservation is fine; the failing second one takes it back down.
    auto r = manager->Ensure({Reservation(kGpu0, "2g.10gb", 0, 2), c.r});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), c.want);
    EXPECT_TRUE(StateLines().empty()) << c.want;
  }
  // A compute instance the driver refuses: the GPU instance created for it is destroyed.
  setenv("HAMI_FAKE_NVML_MIG_FAIL", "ci", 1);
  auto failing = Nvml();
  auto r = Manager(failing.get())->Ensure({Reservation(kGpu0, "1g.5gb", 3, 1)});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("nvmlGpuInstanceCreateComputeInstance for GPU 0 failed: NVML error 23"),
            std::string::npos)
      << r.error();
  EXPECT_TRUE(StateLines().empty());
}

TEST_F(MigTest, ReleaseDestroysOnlyWhatEnsureCreated) {
  auto nvml = Nvml();
  auto manager = Manager(nvml.get());
  auto kept = manager->Ensure({Reservation(kGpu0, "1g.5gb", 6, 1)});
  ASSERT_TRUE(kept);
  auto both =
      manager->Ensure({Reservation(kGpu0, "1g.5gb", 6, 1), Reservation(kGpu0, "1g.5gb", 5, 1)});
  ASSERT_TRUE(both);
  ASSERT_TRUE(manager->Release(*both));
  ASSERT_EQ(StateLines().size(), 1u);
  EXPECT_NE(StateLines()[0].find((*kept)[0].identity.mig_uuid), std::string::npos);
}

TEST_F(MigTest, StartAdoptsReferencedInstancesAndDestroysTheOthers) {
  // Left by an earlier plugin: a 1g at slice 6 a running pod holds, a 2g at slices 0-1 whose
  // pod finished, and a 3g at slices 4-7 that no pod names.
  Seed(
      "serial 7\n"
      "0 3 0 6 1 0 MIG-00000001-0000-4000-8000-000000000005\n"
      "0 5 1 0 2 0 MIG-00000001-0000-4000-8000-000000000006\n"
      "0 2 2 4 4 0 MIG-00000001-0000-4000-8000-000000000007\n");
  auto nvml = Nvml();
  auto manager = Manager(nvml.get());
  const std::string running =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" + std::string(kGpu0) +
      R"(","profile":"1g.5gb","placement":{"start":6,"size":1},)"
      R"("migUUID":"MIG-00000001-0000-4000-8000-000000000005","gpuInstanceID":3,"computeInstanceID":0}])";
  const std::string done = R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" +
                           std::string(kGpu0) +
                           R"(","profile":"2g.10gb","placement":{"start":0,"size":2}}])";
  std::vector<k8s::Json> pods = {Pod("running", "Running", running), Pod("done", "Succeeded", done),
                                 Pod("plain", "Running", "")};
  MigReconciler reconciler(
      manager.get(), [&] { return Result<std::vector<k8s::Json>>(pods); }, RealClock());
  auto report = reconciler.RunOnce();
  ASSERT_TRUE(report) << report.error();
  ASSERT_EQ(report->kept.size(), 1u);
  EXPECT_EQ(report->kept[0].instance.gpu_instance_id, 3u);
  EXPECT_EQ(report->destroyed.size(), 2u);
  EXPECT_TRUE(report->mismatches.empty());
  EXPECT_EQ(StateLines(),
            (std::vector<std::string>{"0 3 0 6 1 0 MIG-00000001-0000-4000-8000-000000000005"}));

  // An annotation that does not decode stops the pass before anything is destroyed.
  pods.push_back(Pod("bad", "Running", "[{"));
  auto bad = reconciler.RunOnce();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("MIG reconcile: pod default/bad: hami.io/vgpu-mig-allocations: ", 0),
            0u)
      << bad.error();
  pods.pop_back();
  // A kept instance whose recorded identity differs is kept and reported.
  pods[0] = Pod("running", "Running",
                R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" + std::string(kGpu0) +
                    R"(","profile":"1g.5gb","placement":{"start":6,"size":1},)"
                    R"("migUUID":"MIG-gone","gpuInstanceID":9,"computeInstanceID":0}])");
  auto mismatch = reconciler.RunOnce();
  ASSERT_TRUE(mismatch) << mismatch.error();
  ASSERT_EQ(mismatch->mismatches.size(), 1u);
  EXPECT_EQ(StateLines().size(), 1u);
}

TEST_F(MigTest, ReconcilerRunsEveryFiveSecondsOnTheClock) {
  auto nvml = Nvml();
  auto manager = Manager(nvml.get());
  ASSERT_TRUE(manager->Ensure({Reservation(kGpu0, "1g.5gb", 6, 1)}));
  FakeClock clock;
  bool list_fails = false;
  int lists = 0;
  MigReconciler reconciler(
      manager.get(),
      [&]() -> Result<std::vector<k8s::Json>> {
        ++lists;
        if (list_fails) return Error{"apiserver down"};
        return std::vector<k8s::Json>{};  // the pod is gone
      },
      clock);
  auto none = reconciler.Tick();
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  clock.Advance(std::chrono::milliseconds(4999));
  EXPECT_FALSE(reconciler.Tick()->has_value());
  EXPECT_EQ(lists, 0);
  // A failed list destroys nothing; the next pass is again 5 s later.
  list_fails = true;
  clock.Advance(std::chrono::milliseconds(1));
  auto failed = reconciler.Tick();
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error(), "MIG reconcile: list pods: apiserver down");
  EXPECT_EQ(StateLines().size(), 1u);
  list_fails = false;
  clock.Advance(std::chrono::seconds(5));
  auto ran = reconciler.Tick();
  ASSERT_TRUE(ran) << ran.error();
  ASSERT_TRUE(ran->has_value());
  EXPECT_EQ((*ran)->destroyed.size(), 1u);
  EXPECT_TRUE(StateLines().empty());
  EXPECT_EQ(lists, 2);
}

// An Allocate between the reconciler's pod list and its pass: the instance it creates (or
// reuses) for a pod the list does not show yet survives that pass; the next pass, listed after
// it, judges it by the pods again.
TEST_F(MigTest, APassKeepsWhatAnAllocateHandedOutAfterItsList) {
  auto nvml = Nvml();
  auto manager = Manager(nvml.get());
  ASSERT_TRUE(manager->Ensure({Reservation(kGpu0, "2g.10gb", 0, 2)}));  // its pod is gone
  bool allocate_during_list = true;
  MigReconciler reconciler(
      manager.get(),
      [&]() -> Result<std::vector<k8s::Json>> {
        if (allocate_during_list) {
          auto made = manager->Ensure({Reservation(kGpu0, "1g.5gb", 6, 1)});
          if (!made) return Error{made.error()};
        }
        return std::vector<k8s::Json>{};  // listed before the new pod was annotated
      },
      RealClock());
  auto first = reconciler.RunOnce();
  ASSERT_TRUE(first) << first.error();
  ASSERT_EQ(first->destroyed.size(), 1u);
  EXPECT_EQ(first->destroyed[0].instance.placement, (protocol::MigPlacement{0, 2}));
  ASSERT_EQ(StateLines().size(), 1u);
  // Listed after that Allocate, with no pod naming the instance: destroyed.
  allocate_during_list = false;
  auto second = reconciler.RunOnce();
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(second->destroyed.size(), 1u);
  EXPECT_TRUE(StateLines().empty());
}

// A driver that checks, on every create and destroy, that the apply lock is held (a second
// holder cannot take it).
class LockCheckingDriver : public MigDriver {
 public:
  LockCheckingDriver(MigDriver* inner, std::string path) : inner_(inner), path_(std::move(path)) {}
  Result<bool> MigEnabled(uint32_t gpu) override { return inner_->MigEnabled(gpu); }
  Result<std::vector<GpuInstanceProfile>> GpuInstanceProfiles(uint32_t gpu) override {
    return inner_->GpuInstanceProfiles(gpu);
  }
  Result<std::vector<MigInstance>> MigInstances(uint32_t gpu) override {
    return inner_->MigInstances(gpu);
  }
  Result<MigInstance> CreateGpuInstance(uint32_t gpu, uint32_t p,
                                        protocol::MigPlacement at) override {
    Check();
    return inner_->CreateGpuInstance(gpu, p, at);
  }
  Result<MigInstance> CreateComputeInstance(uint32_t gpu, uint32_t gi) override {
    Check();
    return inner_->CreateComputeInstance(gpu, gi);
  }
  Status DestroyGpuInstance(uint32_t gpu, uint32_t gi) override {
    Check();
    return inner_->DestroyGpuInstance(gpu, gi);
  }
  int checks = 0, free_seen = 0;

 private:
  void Check() {
    ++checks;
    MigApplyLock other(path_);
    auto got = other.TryAcquire();
    if (!got || *got) ++free_seen;
  }
  MigDriver* inner_;
  std::string path_;
};

TEST_F(MigTest, TheApplyLockIsHeldWhileApplying) {
  const std::string path = (dir_ / "lock" / "hami-mig-apply.lock").string();
  auto nvml = Nvml();
  LockCheckingDriver driver(nvml.get(), path);
  auto manager = Manager(&driver);
  ASSERT_TRUE(manager->Ensure({Reservation(kGpu0, "1g.5gb", 6, 1)}));
  ASSERT_TRUE(manager->Sync({}));
  EXPECT_EQ(driver.checks, 3);  // create GI, create CI, destroy
  EXPECT_EQ(driver.free_seen, 0);
  // Released after each pass.
  MigApplyLock after(path);
  EXPECT_TRUE(*after.TryAcquire());
}

TEST_F(MigTest, ASecondHolderBlocksTheManager) {
  const std::string path = (dir_ / "lock" / "hami-mig-apply.lock").string();
  auto nvml = Nvml();
  auto manager = Manager(nvml.get());
  MigApplyLock other(path);
  ASSERT_TRUE(other.Acquire());
  MigApplyLock third(path);
  EXPECT_FALSE(*third.TryAcquire());  // exclusive, within one process too
  std::atomic<bool> done{false};
  std::thread t([&] {
    auto r = manager->Ensure({Reservation(kGpu0, "1g.5gb", 6, 1)});
    EXPECT_TRUE(r) << (r ? "" : r.error());
    done = true;
  });
  // While the other holder has the lock the manager cannot have created anything.
  EXPECT_FALSE(done.load());
  EXPECT_TRUE(StateLines().empty());
  other.Release();
  t.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(StateLines().size(), 1u);
}

// A holder that keeps the lock (a stuck tool) fails the pass after the manager's wait, naming
// the lock, instead of holding the kubelet's Allocate for as long as it keeps it.
TEST_F(MigTest, ALockHeldElsewhereFailsThePassAfterTheWaitNotForever) {
  const std::string path = (dir_ / "lock" / "hami-mig-apply.lock").string();
  auto nvml = Nvml();
  MigApplyLock other(path);
  ASSERT_TRUE(other.Acquire());
  FakeClock clock;
  int sleeps = 0;
  MigManager manager(nvml.get(), {{0, kGpu0}, {1, kGpu1}}, path,
                     hami::testing::FakeMigLockWait(&clock, &sleeps));
  auto r = manager.Ensure({Reservation(kGpu0, "1g.5gb", 6, 1)});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find(path), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("more than 1000 ms"), std::string::npos) << r.error();
  EXPECT_EQ(sleeps, 10);
  EXPECT_TRUE(StateLines().empty());
  auto sync = manager.Sync({});
  EXPECT_FALSE(sync);
  // Once the holder lets go the next pass goes on.
  other.Release();
  EXPECT_TRUE(manager.Ensure({Reservation(kGpu0, "1g.5gb", 6, 1)}));
  EXPECT_EQ(StateLines().size(), 1u);
}

TEST(LiveMigReservations, SkipsFinishedPodsAndNamesABadOne) {
  auto live = LiveMigReservations(
      {Pod("a", "Pending",
           R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":1,"size":1}}])"),
       Pod("b", "Failed",
           R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":2,"size":1}}])"),
       Pod("c", "Running", "[]")});
  ASSERT_TRUE(live) << live.error();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].placement, (protocol::MigPlacement{1, 1}));
}

}  // namespace
}  // namespace hami::deviceplugin
