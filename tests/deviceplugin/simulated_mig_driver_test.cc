// SimulatedMigDriver (hami-sim's GPUs in MIG mode, DRA mode): NVIDIA's geometry per model,
// instances that cannot overlap, placements the profile must offer, and a GPU not in MIG mode
// refusing instances, each as NVML answers.
#include "deviceplugin/simulated_mig_driver.h"

#include <gtest/gtest.h>

namespace hami::deviceplugin {
namespace {

SimulatedMigDriver Driver() {
  return SimulatedMigDriver({{0, {"NVIDIA A100-SXM4-40GB", 40960, true, "GPU-0fc3eda5-1111"}},
                             {1, {"NVIDIA A100-SXM4-40GB", 40960, false, "GPU-22222222-2222"}}});
}

TEST(SimulatedMigDriverTest, CreatesAtOfferedPlacementsWithoutOverlap) {
  SimulatedMigDriver d = Driver();
  EXPECT_TRUE(*d.MigEnabled(0));
  EXPECT_FALSE(*d.MigEnabled(1));
  EXPECT_NE(d.MigEnabled(7).error().find("NVML error 2"), std::string::npos);
  auto profiles = d.GpuInstanceProfiles(0);
  ASSERT_TRUE(profiles);
  ASSERT_FALSE(profiles->empty());
  const GpuInstanceProfile& one = profiles->front();  // 1 slice
  ASSERT_EQ(one.slice_count, 1u);
  auto gi = d.CreateGpuInstance(0, one.profile_id, one.placements[0]);
  ASSERT_TRUE(gi) << gi.error();
  EXPECT_FALSE(gi->compute_instance_id);
  auto ci = d.CreateComputeInstance(0, gi->gpu_instance_id);
  ASSERT_TRUE(ci);
  EXPECT_EQ(ci->mig_uuid.rfind("MIG-0fc3eda5-", 0), 0u) << ci->mig_uuid;
  // The same slices again: NVML_ERROR_INSUFFICIENT_RESOURCES; a placement the profile does not
  // offer: NVML_ERROR_INVALID_ARGUMENT; a GPU not in MIG mode: NVML_ERROR_NOT_SUPPORTED.
  EXPECT_NE(d.CreateGpuInstance(0, one.profile_id, one.placements[0]).error().find("error 23"),
            std::string::npos);
  EXPECT_NE(d.CreateGpuInstance(0, one.profile_id, {0, 5}).error().find("error 2"),
            std::string::npos);
  EXPECT_NE(d.CreateGpuInstance(1, one.profile_id, one.placements[0]).error().find("error 3"),
            std::string::npos);
  ASSERT_EQ(d.MigInstances(0)->size(), 1u);
  ASSERT_TRUE(d.DestroyGpuInstance(0, gi->gpu_instance_id));
  EXPECT_TRUE(d.MigInstances(0)->empty());
  EXPECT_TRUE(d.DestroyGpuInstance(0, gi->gpu_instance_id));  // gone already: not an error
  EXPECT_TRUE(d.CreateGpuInstance(0, one.profile_id, one.placements[0]));
}

}  // namespace
}  // namespace hami::deviceplugin
