// Claims for MIG devices (docs/DRA.md "Prepare: enforcing a claim"): PreparedClaims creates the
// GPU and compute instance at the device's placement through a MigDriver (the fake below), the
// container sees the MIG UUID without libvgpu, the checkpoint records the instance so Unprepare
// destroys exactly it after a restart, and errors name the claim, device and driver answer.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "deviceplugin/mig_apply_lock.h"
#include "draplugin/fake_mig_driver.h"
#include "draplugin/state.h"
#include "support/fake_mig_lock_wait.h"

namespace hami::draplugin {
namespace {

namespace fs = std::filesystem;
using testing::FakeMigDriver;

// GPU `index` of an A100-80GB, minor = index; in MIG mode it publishes 1g.10gb at 0..6 and
// 3g.40gb at 0 and 4.
GpuFacts Gpu(uint32_t index, bool mig) {
  GpuFacts g;
  g.gpu.index = index;
  g.gpu.uuid = "GPU-" + std::to_string(index);
  g.gpu.model = "NVIDIA A100-SXM4-80GB";
  g.gpu.memory_mib = 81920;
  if (mig) {
    deviceplugin::MigProfileCapacity one{{"1g.10gb", 9856, 15, 1, {}}, 7};
    for (uint32_t s = 0; s < 7; ++s) one.profile.placements.push_back({s, 1});
    deviceplugin::MigProfileCapacity three{{"3g.40gb", 40192, 43, 3, {{0, 4}, {4, 4}}}, 2};
    g.gpu.mig_profiles = {one, three};
  }
  return g;
}

AllocationResult Mig(const std::string& device) { return {"gpu", "node-a", device, "", -1, -1}; }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class MigClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-dra-mig-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_.hook_path = dir_ + "/hook";
    env_.cdi_dir = dir_ + "/cdi";
    checkpoint_ = dir_ + "/checkpoint.json";
    lock_ = dir_ + "/lock/hami-mig-apply.lock";
    driver_.AddGpu(0, true);
    driver_.AddGpu(1, false);
    gpus_ = {Gpu(0, true), Gpu(1, false)};
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<PreparedClaims> Claims(deviceplugin::MigDriver* driver) {
    auto claims = std::make_unique<PreparedClaims>(checkpoint_, env_, driver, lock_);
    EXPECT_TRUE(claims->Load());
    return claims;
  }
  Json Spec(const std::string& uid) {
    return Json::parse(
        Read(env_.cdi_dir + "/hami-core-gpu.project-hami.io-claim_" + uid + ".json"));
  }

  std::string dir_, checkpoint_, lock_;
  PrepareEnv env_;
  FakeMigDriver driver_;
  std::vector<GpuFacts> gpus_;
};

TEST_F(MigClaimsTest, PrepareCreatesTheInstanceAndGivesItsMigUuid) {
  auto claims = Claims(&driver_);
  const ClaimAllocation claim{"u-1", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-3")}};
  auto devices = claims->Prepare(claim, gpus_);
  ASSERT_TRUE(devices) << devices.error();
  ASSERT_EQ(driver_.instances(0).size(), 1u);
  const deviceplugin::MigInstance inst = driver_.instances(0)[0];
  EXPECT_EQ(inst.profile_id, 0u);  // 1g
  EXPECT_EQ(inst.placement, (protocol::MigPlacement{3, 1}));
  ASSERT_EQ(inst.mig_uuid.rfind("MIG-", 0), 0u);
  EXPECT_EQ(driver_.creates, 2);  // GPU instance, compute instance
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].device, "hami-gpu-0-mig-1g-10gb-3");
  EXPECT_EQ(
      (*devices)[0].cdi_device_ids,
      (std::vector<std::string>{"hami-core-gpu.project-hami.io/claim=u-1-hami-gpu-0-mig-1g-10gb-3",
                                "nvidia.com/gpu=" + inst.mig_uuid}));
  // The CDI spec: the MIG UUID, the parent GPU's device node, and no libvgpu (no limits, no
  // mounts, no limits file).
  const Json spec = Spec("u-1");
  EXPECT_EQ(spec["containerEdits"]["env"],
            Json::array({"NVIDIA_VISIBLE_DEVICES=" + inst.mig_uuid}));
  EXPECT_EQ(spec["containerEdits"]["mounts"], Json::array());
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"],
            Json::parse(R"([{"path": "/dev/nvidia0"}])"));
  EXPECT_FALSE(fs::exists(env_.hook_path + "/vgpu/claim-limits/u-1.limits"));
  // The checkpoint records the instance.
  const Json checkpoint = Json::parse(Read(checkpoint_));
  const Json& recorded = checkpoint["claims"]["u-1"]["migInstances"][0];
  EXPECT_EQ(recorded["gpuInstanceID"], inst.gpu_instance_id);
  EXPECT_EQ(recorded["migUUID"], inst.mig_uuid);
  EXPECT_EQ(recorded["placement"], Json::parse(R"({"start": 3, "size": 1})"));
  EXPECT_EQ(recorded["gpuIndex"], 0);

  // kubelet retries: the same answer, nothing created.
  auto again = claims->Prepare(claim, gpus_);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *devices);
  EXPECT_EQ(driver_.creates, 2);
  EXPECT_EQ(driver_.instances(0).size(), 1u);

  ASSERT_TRUE(claims->Unprepare("u-1"));
  EXPECT_TRUE(driver_.instances(0).empty());
  EXPECT_EQ(driver_.destroys, 1);
  EXPECT_FALSE(fs::exists(env_.cdi_dir + "/hami-core-gpu.project-hami.io-claim_u-1.json"));
  EXPECT_TRUE(claims->Unprepare("u-1"));  // done already
  EXPECT_EQ(driver_.destroys, 1);
}

// The plugin restarts between Prepare and Unprepare: the new one destroys exactly the recorded
// instance, not another that took a GPU instance id since.
TEST_F(MigClaimsTest, ARestartedPluginDestroysExactlyTheRecordedInstance) {
  {
    auto claims = Claims(&driver_);
    ASSERT_TRUE(claims->Prepare({"u-1", "ml", "c", {Mig("hami-gpu-0-mig-3g-40gb-4")}}, gpus_));
    ASSERT_TRUE(claims->Prepare({"u-2", "ml", "d", {Mig("hami-gpu-0-mig-1g-10gb-0")}}, gpus_));
  }
  ASSERT_EQ(driver_.instances(0).size(), 2u);
  const deviceplugin::MigInstance kept = driver_.instances(0)[1];  // u-2's
  auto restarted = Claims(&driver_);
  EXPECT_TRUE(restarted->Has("u-1"));
  ASSERT_TRUE(restarted->Unprepare("u-1"));
  ASSERT_EQ(driver_.instances(0).size(), 1u);
  EXPECT_EQ(driver_.instances(0)[0], kept);

  // u-2's instance was destroyed behind the plugin's back and its id reused by another
  // instance: Unprepare leaves that one alone.
  ASSERT_TRUE(driver_.DestroyGpuInstance(0, kept.gpu_instance_id));
  ASSERT_TRUE(driver_.CreateGpuInstance(0, 0, {6, 1}));
  auto other = driver_.CreateComputeInstance(0, driver_.instances(0)[0].gpu_instance_id);
  ASSERT_TRUE(other);
  const int destroys = driver_.destroys;
  // (The fake never reuses ids; rewrite the recorded one to the new instance's id.)
  Json checkpoint = Json::parse(Read(checkpoint_));
  checkpoint["claims"]["u-2"]["migInstances"][0]["gpuInstanceID"] = other->gpu_instance_id;
  std::ofstream(checkpoint_) << checkpoint.dump();
  auto again = Claims(&driver_);
  ASSERT_TRUE(again->Unprepare("u-2"));
  EXPECT_EQ(driver_.destroys, destroys);
  EXPECT_EQ(driver_.instances(0).size(), 1u);
  EXPECT_FALSE(again->Has("u-2"));
}

// An instance already at exactly the placement (a plugin that died before checkpointing the
// claim) is adopted: nothing created, its MIG UUID given, destroyed at Unprepare.
TEST_F(MigClaimsTest, AnInstanceAtExactlyThePlacementIsAdopted) {
  auto gi = driver_.CreateGpuInstance(0, 0, {3, 1});
  ASSERT_TRUE(gi);
  auto ci = driver_.CreateComputeInstance(0, gi->gpu_instance_id);
  ASSERT_TRUE(ci);
  const int creates = driver_.creates;
  auto claims = Claims(&driver_);
  auto devices = claims->Prepare({"u-1", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-3")}}, gpus_);
  ASSERT_TRUE(devices) << devices.error();
  EXPECT_EQ(driver_.creates, creates);
  EXPECT_EQ((*devices)[0].cdi_device_ids[1], "nvidia.com/gpu=" + ci->mig_uuid);
  ASSERT_TRUE(claims->Unprepare("u-1"));
  EXPECT_TRUE(driver_.instances(0).empty());
}

TEST_F(MigClaimsTest, AGpuNotInMigModeIsAClearErrorAndNothingIsMade) {
  driver_.AddGpu(0, false);  // MIG mode turned off since the slices were published
  auto claims = Claims(&driver_);
  auto devices = claims->Prepare({"u-1", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-3")}}, gpus_);
  ASSERT_FALSE(devices);
  EXPECT_EQ(devices.error(),
            R"(ResourceClaim ml/c: MIG device "hami-gpu-0-mig-1g-10gb-3" (1g.10gb at {start 3, )"
            R"(size 1} on GPU "GPU-0"): the GPU is not in MIG mode)");
  EXPECT_EQ(claims->size(), 0u);
  EXPECT_EQ(driver_.creates, 0);
  EXPECT_FALSE(fs::exists(env_.cdi_dir));
}

// The second device's placement overlaps an instance the plugin did not make: the error names
// it, and the first device's instance, created by this Prepare, is destroyed again.
TEST_F(MigClaimsTest, ATakenPlacementIsAClearErrorAndNothingIsHalfMade) {
  auto gi = driver_.CreateGpuInstance(0, 0, {5, 1});
  ASSERT_TRUE(gi);
  auto foreign = driver_.CreateComputeInstance(0, gi->gpu_instance_id);
  ASSERT_TRUE(foreign);
  auto claims = Claims(&driver_);
  auto devices = claims->Prepare(
      {"u-1", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-0"), Mig("hami-gpu-0-mig-3g-40gb-4")}},
      gpus_);
  ASSERT_FALSE(devices);
  EXPECT_EQ(devices.error(),
            R"(ResourceClaim ml/c: MIG device "hami-gpu-0-mig-3g-40gb-4" (3g.40gb at {start 4, )"
            R"(size 4} on GPU "GPU-0"): the placement is taken by GPU instance )" +
                std::to_string(gi->gpu_instance_id) + " (profile id 0 at {start 5, size 1}, " +
                foreign->mig_uuid + ")");
  ASSERT_EQ(driver_.instances(0).size(), 1u);
  EXPECT_EQ(driver_.instances(0)[0].mig_uuid, foreign->mig_uuid);
  EXPECT_EQ(driver_.destroys, 1);  // the 1g at 0, rolled back
  EXPECT_EQ(claims->size(), 0u);
  EXPECT_FALSE(fs::exists(env_.cdi_dir));
}

// A MIG device of GPU 0 and a share of GPU 1 in one claim: CUDA device 0 is the MIG device
// (no limit), device 1 the share, limited by libvgpu.
TEST_F(MigClaimsTest, AClaimWithAMigDeviceAndAShareOfAnotherGpu) {
  auto claims = Claims(&driver_);
  const ClaimAllocation claim{
      "u-1",
      "ml",
      "c",
      {Mig("hami-gpu-0-mig-1g-10gb-2"), {"gpu", "node-a", "hami-gpu-1", "s1", 3000LL << 20, 30}}};
  auto devices = claims->Prepare(claim, gpus_);
  ASSERT_TRUE(devices) << devices.error();
  const std::string mig_uuid = driver_.instances(0).at(0).mig_uuid;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].cdi_device_ids[1], "nvidia.com/gpu=" + mig_uuid);
  EXPECT_EQ((*devices)[1].share_id, "s1");
  EXPECT_EQ((*devices)[1].cdi_device_ids,
            (std::vector<std::string>{"hami-core-gpu.project-hami.io/claim=u-1-s1",
                                      "nvidia.com/gpu=GPU-1"}));
  const Json env = Spec("u-1")["containerEdits"]["env"];
  EXPECT_EQ(env[0], "NVIDIA_VISIBLE_DEVICES=" + mig_uuid + ",GPU-1");
  auto has = [&](const std::string& e) {
    return std::find(env.begin(), env.end(), Json(e)) != env.end();
  };
  EXPECT_TRUE(has("CUDA_DEVICE_MEMORY_LIMIT_1=3000m"));
  EXPECT_TRUE(has("CUDA_DEVICE_SM_LIMIT_1=30"));
  EXPECT_FALSE(has("CUDA_DEVICE_MEMORY_LIMIT_0=81920m"));
  const std::string limits = Read(env_.hook_path + "/vgpu/claim-limits/u-1.limits");
  EXPECT_NE(limits.find("CUDA_DEVICE_MEMORY_LIMIT_1=3000m"), std::string::npos);
  EXPECT_EQ(limits.find("CUDA_DEVICE_MEMORY_LIMIT_0"), std::string::npos);
  ASSERT_TRUE(claims->Unprepare("u-1"));
  EXPECT_TRUE(driver_.instances(0).empty());
}

TEST_F(MigClaimsTest, WithoutAMigDriverAMigClaimFailsSayingWhy) {
  auto claims = Claims(nullptr);
  auto devices = claims->Prepare({"u-1", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-3")}}, gpus_);
  ASSERT_FALSE(devices);
  EXPECT_EQ(devices.error(),
            R"(ResourceClaim ml/c: MIG device "hami-gpu-0-mig-1g-10gb-3": this plugin has no MIG )"
            R"(driver (GPUs from an inventory, not NVML))");
  // A placement this node does not publish is not a device of it.
  auto unknown =
      Claims(&driver_)->Prepare({"u-2", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-9")}}, gpus_);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error(),
            R"(ResourceClaim ml/c: result 0 ("hami-gpu-0-mig-1g-10gb-9"): no MIG instance of this )"
            R"(device on this node)");
  EXPECT_EQ(driver_.creates, 0);
}

// A driver that checks, on every create and destroy, that the apply lock is held (a second
// holder cannot take it).
class LockCheckingDriver : public FakeMigDriver {
 public:
  explicit LockCheckingDriver(std::string path) : path_(std::move(path)) {}
  Result<deviceplugin::MigInstance> CreateGpuInstance(uint32_t gpu, uint32_t p,
                                                      protocol::MigPlacement at) override {
    Check();
    return FakeMigDriver::CreateGpuInstance(gpu, p, at);
  }
  Result<deviceplugin::MigInstance> CreateComputeInstance(uint32_t gpu, uint32_t gi) override {
    Check();
    return FakeMigDriver::CreateComputeInstance(gpu, gi);
  }
  Status DestroyGpuInstance(uint32_t gpu, uint32_t gi) override {
    Check();
    return FakeMigDriver::DestroyGpuInstance(gpu, gi);
  }
  int checks = 0, free_seen = 0;

 private:
  void Check() {
    ++checks;
    deviceplugin::MigApplyLock other(path_);
    auto got = other.TryAcquire();
    if (!got || *got) ++free_seen;
  }
  std::string path_;
};

TEST_F(MigClaimsTest, TheApplyLockIsHeldWhileApplying) {
  LockCheckingDriver driver(lock_);
  driver.AddGpu(0, true);
  auto claims = Claims(&driver);
  ASSERT_TRUE(claims->Prepare({"u-1", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-3")}}, gpus_));
  ASSERT_TRUE(claims->Unprepare("u-1"));
  EXPECT_EQ(driver.checks, 3);  // create GI, create CI, destroy
  EXPECT_EQ(driver.free_seen, 0);
  deviceplugin::MigApplyLock after(lock_);  // released after each call
  EXPECT_TRUE(*after.TryAcquire());
}

// Another process holding the apply lock (the device plugin, an operator's tool): the prepare
// polls for it on the injected clock and fails naming the lock after MigLockWait.timeout,
// creating nothing, instead of blocking the gRPC handler (and every other claim) indefinitely.
TEST_F(MigClaimsTest, ALockHeldElsewhereFailsThePrepareAfterTheWaitNotForever) {
  deviceplugin::MigApplyLock other(lock_);
  ASSERT_TRUE(*other.TryAcquire());
  FakeClock clock;
  int sleeps = 0;
  MigLockWait wait = hami::testing::FakeMigLockWait(&clock, &sleeps);
  PreparedClaims claims(checkpoint_, env_, &driver_, lock_, wait);
  ASSERT_TRUE(claims.Load());
  auto s = claims.Prepare({"u-1", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-3")}}, gpus_);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find(lock_), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("more than 1000 ms"), std::string::npos) << s.error();
  EXPECT_EQ(sleeps, 10);
  EXPECT_TRUE(driver_.instances(0).empty());
}

// The holder lets go while the prepare waits: the prepare goes on and creates the instance.
TEST_F(MigClaimsTest, APrepareWaitingForTheLockGoesOnOnceItIsFree) {
  auto other = std::make_unique<deviceplugin::MigApplyLock>(lock_);
  ASSERT_TRUE(*other->TryAcquire());
  FakeClock clock;
  int sleeps = 0;
  MigLockWait wait = hami::testing::FakeMigLockWait(&clock, &sleeps, [&](int n) {
    if (n == 3) other.reset();  // releases
  });
  PreparedClaims claims(checkpoint_, env_, &driver_, lock_, wait);
  ASSERT_TRUE(claims.Load());
  ASSERT_TRUE(claims.Prepare({"u-1", "ml", "c", {Mig("hami-gpu-0-mig-1g-10gb-3")}}, gpus_));
  EXPECT_EQ(sleeps, 3);
  EXPECT_EQ(driver_.instances(0).size(), 1u);
}

}  // namespace
}  // namespace hami::draplugin
