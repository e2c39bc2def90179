// Enflame DRS's allocation annotations written with the scheduler's decision: the chosen slice's
// index and minor from the node's row, the profile Fit chose (id, name, slice count) and the
// assignment time from the caller's clock, byte for byte as HAMi v2.10's PatchAnnotations writes
// them (pkg/device/enflame/device.go).
#include <gtest/gtest.h>

#include <chrono>

#include "device/config.h"
#include "device/device.h"
#include "device/schedule.h"
#include "device/vendors/enflame/enflame.h"

namespace hami::device::enflame {
namespace {

// Device 1 has minor 7 (not its index), so index and minor are told apart.
constexpr const char* kDrsAnno =
    R"({"devices":[{"index":"0","minor":"5","capacity":6},{"index":"1","minor":"7","capacity":6}],)"
    R"("profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}})";

Registry Load() {
  auto config = LoadDeviceConfig("nvidia: {}\nenflame: {}\n");
  EXPECT_TRUE(config) << config.error();
  return MakeRegistry(*config);
}

TEST(EnflameAllocation, DrsAnnotationsCarryProfileMinorAndTime) {
  Registry r = Load();
  NodeView view{.name = "node-a", .annotations = {{std::string(kDrsCapacityKey), kDrsAnno}}};
  auto row = NodeUsageFromView(r, view);
  ASSERT_TRUE(row) << row.error();
  PodView pod{.name = "p", .namespace_name = "default"};
  pod.init_containers = {ContainerView{.name = "setup"}};
  pod.containers = {ContainerView{.name = "main", .limits = {{"enflame.com/gcu-memory", "20480"}}}};
  auto d = Schedule(r, pod, {*row}, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr) << d->nodes[0].reason;
  const SystemTime now{std::chrono::seconds(1700000000) + std::chrono::nanoseconds(42)};
  auto annos = AllocationAnnotations(r, pod, *d, now);
  const protocol::ContainerDevice& pick = d->Chosen()->devices.at("Enflame").at(1).at(0);
  ASSERT_EQ(pick.uuid, "node-a-enflame-drs-1");  // the scan starts from the last device
  EXPECT_EQ(annos.at("hami.io/enflame-vgpu-devices-allocated"),
            ";node-a-enflame-drs-1,Enflame,20480,50:;");
  EXPECT_EQ(annos.at("enflame.com/gcu-assigned"), "false");
  EXPECT_EQ(annos.at("enflame.com/gcu-assigned-time"), "1700000000000000042");
  EXPECT_EQ(annos.at("enflame.com/gcu-assigned-index"), "1");
  EXPECT_EQ(annos.at("enflame.com/gcu-assigned-id"), "1");
  EXPECT_EQ(annos.at("enflame.com/gcu-assigned-minor"), "7");
  EXPECT_EQ(annos.at("enflame.com/gcu-request-size"), "3");
  EXPECT_EQ(annos.at("assigned-containers"),
            R"({"main":{"allocated":false,"request":3,"profileID":"1","profileName":"3g.20gb"}})");
  // A direct slice request selects the profile of that size.
  PodView direct = pod;
  direct.containers[0].limits = {{"enflame.com/drs-gcu", "6"}};
  auto dd = Schedule(r, direct, {*row}, {}, ScheduleOptions{});
  ASSERT_TRUE(dd && dd->Chosen());
  auto da = AllocationAnnotations(r, direct, *dd, now);
  EXPECT_EQ(da.at("assigned-containers"),
            R"({"main":{"allocated":false,"request":6,"profileID":"2","profileName":"6g.40gb"}})");
  EXPECT_EQ(da.at("enflame.com/gcu-request-size"), "6");
  // Without a time the time key is left out; the rest is the same.
  auto untimed = AllocationAnnotations(r, pod, *d);
  EXPECT_EQ(untimed.count("enflame.com/gcu-assigned-time"), 0u);
  EXPECT_EQ(untimed.at("assigned-containers"), annos.at("assigned-containers"));
}

// Without the node (the PodView form): index and minor from the device id, no profile.
TEST(EnflameAllocation, WithoutTheNodeTheIdsStandIn) {
  Registry r = Load();
  const Device& drs = *r.Find("Enflame");
  PodView pod;
  pod.containers = {ContainerView{.name = "main"}};
  StringMap a = drs.AllocationAnnotations(pod, {{{"node-a-enflame-drs-1", "Enflame", 20480, 50}}});
  EXPECT_EQ(a.at("enflame.com/gcu-assigned-minor"), "1");
  EXPECT_EQ(a.at("assigned-containers"), R"({"main":{"allocated":false,"request":1}})");
  EXPECT_EQ(a.count("enflame.com/gcu-assigned-time"), 0u);
}

}  // namespace
}  // namespace hami::device::enflame
