// monitor::ParseRegion against region bytes written at raw offsets (region_writer.h), for the v1
// and v0 layouts: sums over live slots only, limits, uuids cut at 40 bytes, and every rejection.
#include "monitor/region_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "monitor/region_writer.h"

namespace hami::monitor {
namespace {

using testing::kV0;
using testing::kV1;
using testing::RegionWriter;

constexpr const char* kUuid0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
constexpr const char* kUuid1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";

// Host PIDs 100 and 200 are alive, every other one is dead.
bool Alive(int32_t pid) { return pid == 100 || pid == 200; }

// Two devices; slot 0 (hostpid 100) and slot 2 (hostpid unknown) count; slot 1 is inactive,
// slot 3 belongs to a dead process, slot 4 lies past proc_num.
RegionWriter Sample(const testing::Offsets& o) {
  RegionWriter w(o);
  w.Devices(2).Uuid(0, kUuid0).Uuid(1, kUuid1).Limit(0, 3000ull << 20).Limit(1, 1000ull << 20);
  w.ProcNum(4);
  w.Slot(0, 10, 100, 1).Used(0, 0, 1, 2, 3, 100).Used(0, 1, 10, 20, 30, 1000).SmUtil(0, 0, 30);
  w.Slot(1, 11, 200, 0).Used(1, 0, 5, 5, 5, 5000).SmUtil(1, 0, 99);
  w.Slot(2, 12, 0, 2).Used(2, 0, 4, 5, 6, 200).SmUtil(2, 0, 10).SmUtil(2, 1, 7);
  w.Slot(3, 13, 999, 1).Used(3, 0, 7, 7, 7, 7000).SmUtil(3, 0, 50);
  w.Slot(4, 14, 100, 1).Used(4, 0, 8, 8, 8, 8000);
  return w;
}

void ExpectSample(const RegionUsage& r) {
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.device_index, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.devices[0].uuid, kUuid0);
  EXPECT_EQ(r.devices[0].limit, 3000ull << 20);
  EXPECT_EQ(r.devices[0].context, 1u + 4u);
  EXPECT_EQ(r.devices[0].module, 2u + 5u);
  EXPECT_EQ(r.devices[0].buffer, 3u + 6u);
  EXPECT_EQ(r.devices[0].total, 300u);
  EXPECT_EQ(r.devices[0].sm_util, 40u);
  EXPECT_EQ(r.devices[1].uuid, kUuid1);
  EXPECT_EQ(r.devices[1].limit, 1000ull << 20);
  EXPECT_EQ(r.devices[1].total, 1000u);
  EXPECT_EQ(r.devices[1].context, 10u);
  EXPECT_EQ(r.devices[1].sm_util, 7u);
}

TEST(RegionReader, V1SumsLiveSlotsOnly) {
  RegionWriter w = Sample(kV1);
  w.LastKernel(1787306400);
  auto r = ParseRegion(w.bytes(), Alive);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->version, 1);
  EXPECT_EQ(r->last_kernel_time, 1787306400);
  ExpectSample(*r);
}

TEST(RegionReader, V0ToldApartBySize) {
  RegionWriter w = Sample(kV0);
  auto r = ParseRegion(w.bytes(), Alive);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->version, 0);
  EXPECT_EQ(r->last_kernel_time, 0);
  ExpectSample(*r);
}

TEST(RegionReader, DeviceWithoutUuidIsLeftOut) {
  RegionWriter w(kV1);
  w.Devices(2).Uuid(1, kUuid1).ProcNum(1).Slot(0, 1, 0, 1).Used(0, 1, 0, 0, 0, 42);
  auto r = ParseRegion(w.bytes(), Alive);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->devices.size(), 1u);
  EXPECT_EQ(r->device_index, std::vector<int>{1});
  EXPECT_EQ(r->devices[0].total, 42u);
}

TEST(RegionReader, UuidLabelIsTheFirst40Bytes) {
  RegionWriter w(kV1);
  w.Devices(1).Uuid(0, std::string(kUuid0) + "-MIG-extra");
  auto r = ParseRegion(w.bytes(), Alive);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->devices[0].uuid, kUuid0);
}

TEST(RegionReader, ProcNumIsClamped) {
  RegionWriter w(kV1);
  w.Devices(1).Uuid(0, kUuid0).ProcNum(-5).Slot(0, 1, 0, 1).Used(0, 0, 0, 0, 0, 9);
  auto r = ParseRegion(w.bytes(), Alive);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->devices[0].total, 0u);
  w.ProcNum(1 << 30);
  r = ParseRegion(w.bytes(), Alive);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->devices[0].total, 9u);
}

TEST(RegionReader, Rejections) {
  RegionWriter good = Sample(kV1);
  auto small = ParseRegion(good.bytes().substr(0, 1000), Alive);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error(), "region of 1000 bytes: smaller than a region (1197896 bytes)");
  auto truncated = ParseRegion(good.bytes().substr(0, 2000000), Alive);
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.error(), "region of 2000000 bytes: truncated (v1 needs 2008952)");
  RegionWriter bad_magic = Sample(kV1);
  bad_magic.Magic(12345);
  auto magic = ParseRegion(bad_magic.bytes(), Alive);
  ASSERT_FALSE(magic.ok());
  EXPECT_EQ(magic.error(),
            "region initialized_flag 12345: not 19920718 (not initialised, or not a region)");
  RegionWriter many(kV1);
  many.Devices(17);
  auto devices = ParseRegion(many.bytes(), Alive);
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.error(), "region device_num 17: more than 16");
}

TEST(RegionReader, ReadRegionFileNamesThePath) {
  char dir[] = "/tmp/hami-monitor-rr-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/a.cache";
  ASSERT_TRUE(Sample(kV1).Save(path));
  auto r = ReadRegionFile(path, Alive);
  ASSERT_TRUE(r.ok()) << r.error();
  ExpectSample(*r);
  ASSERT_TRUE(Sample(kV1).Save(path, 2000000));
  auto t = ReadRegionFile(path, Alive);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(),
            "region file \"" + path + "\": region of 2000000 bytes: truncated (v1 needs 2008952)");
  unlink(path.c_str());
  auto missing = ReadRegionFile(path, Alive);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), "region file \"" + path + "\": No such file or directory");
  rmdir(dir);
}

TEST(RegionReader, ProcPidAliveLooksUnderProcRoot) {
  char dir[] = "/tmp/hami-monitor-proc-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string live = std::string(dir) + "/4242";
  ASSERT_EQ(mkdir(live.c_str(), 0755), 0);
  PidAlive alive = ProcPidAlive(dir);
  EXPECT_TRUE(alive(4242));
  EXPECT_FALSE(alive(4243));
  EXPECT_TRUE(ProcPidAlive()(getpid()));
  rmdir(live.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace hami::monitor
