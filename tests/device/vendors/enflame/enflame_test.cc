// Enflame GCU and DRS: vectors from HAMi v2.10 pkg/device/enflame/gcu_test.go and
// device_test.go, plus the edges our decoder owns (errors name the key and quote the value).
#include "device/vendors/enflame/enflame.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "common/json.h"
#include "protocol/pod_devices.h"
#include "support/vendor_test_util.h"

namespace hami::device::enflame {
namespace {

using vendor_test::Ptrs;

DeviceUsage Gcu(std::string id, int32_t used = 0, bool health = true) {
  return DeviceUsage{.id = std::move(id),
                     .type = "GCU",
                     .vendor = "GCU",
                     .health = health,
                     .count = 1,
                     .used = used,
                     .totalmem = 100,
                     .totalcore = 100};
}

DeviceRequest GcuReq(int32_t nums, std::string type = "GCU") {
  return DeviceRequest{
      .nums = nums, .type = std::move(type), .memreq = 100, .mem_percentage = 100, .coresreq = 100};
}

// The upstream vectors' container is "c".
ContainerView Ctr(StringMap limits, StringMap requests = {}) {
  return vendor_test::NamedCtr("c", std::move(limits), std::move(requests));
}

// ---- GCU ----

TEST(EnflameGcu, NodeDevicesFromCapacity) {  // TestGCUDevices_GetNodeDevices
  auto devs = GcuNodeDevices("testnode", 2);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0], (DeviceUsage{.id = "testnode-GCU-0",
                                  .index = 0,
                                  .type = "GCU",
                                  .vendor = "GCU",
                                  .health = true,
                                  .count = 1,
                                  .totalmem = 100,
                                  .totalcore = 100}));
  EXPECT_EQ(devs[1].id, "testnode-GCU-1");
  EXPECT_EQ(devs[1].index, 1u);
  EXPECT_TRUE(GcuNodeDevices("testnode", 0).empty());  // "Test with missing resource"
  EXPECT_TRUE(GcuNodeDevices("testnode", -3).empty());
}

TEST(EnflameGcu, CheckHealth) {  // TestGCUDevices_CheckHealth
  EXPECT_EQ(GcuCheckHealth(2), HealthPair(true, true));
  EXPECT_EQ(GcuCheckHealth(0), HealthPair(false, true));
}

TEST(EnflameGcu, MutateAdmissionLooksAtLimitsOnly) {  // TestGCUDevices_MutateAdmission
  EnflameConfig cfg;
  EXPECT_TRUE(GcuMutateAdmission(cfg, Ctr({{"enflame.com/gcu", "1"}})));
  EXPECT_FALSE(GcuMutateAdmission(cfg, Ctr({{"cpu", "1"}})));
  EXPECT_FALSE(GcuMutateAdmission(cfg, Ctr({}, {{"enflame.com/gcu", "1"}})));
}

TEST(EnflameGcu, NormalizeRequest) {  // TestGCUDevices_GenerateResourceRequests
  EnflameConfig cfg;
  EXPECT_EQ(*GcuNormalizeRequest(cfg, Ctr({{"enflame.com/gcu", "3"}})), GcuReq(3));
  EXPECT_EQ(*GcuNormalizeRequest(cfg, Ctr({}, {{"enflame.com/gcu", "2"}})), GcuReq(2));
  EXPECT_EQ(*GcuNormalizeRequest(cfg, Ctr({{"cpu", "2"}})), DeviceRequest{});
  EXPECT_EQ(*GcuNormalizeRequest(cfg, Ctr({{"enflame.com/gcu", "0"}})), DeviceRequest{});
  auto bad = GcuNormalizeRequest(cfg, Ctr({{"enflame.com/gcu", "1.5"}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("enflame.com/gcu"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("\"1.5\""), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("container \"c\""), std::string::npos) << bad.error();
  // A renamed resource is the one read.
  EnflameConfig renamed;
  renamed.resource_name_gcu = "example.com/gcu";
  EXPECT_EQ(*GcuNormalizeRequest(renamed, Ctr({{"example.com/gcu", "1"}})), GcuReq(1));
  EXPECT_EQ(*GcuNormalizeRequest(renamed, Ctr({{"enflame.com/gcu", "1"}})), DeviceRequest{});
}

TEST(EnflameGcu, FitTable) {  // TestGCUDevices_Fit
  struct Case {
    const char* name;
    std::vector<DeviceUsage> devices;
    DeviceRequest request;
    bool fit;
    std::vector<std::string> ids;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"fit success", {Gcu("dev-0"), Gcu("dev-1")}, GcuReq(1), true, {"dev-1"}, ""},
      {"type mismatch", {Gcu("dev-0")}, GcuReq(1, "OtherType"), false, {}, "1/1 CardTypeMismatch"},
      {"device already used",
       {Gcu("dev-0", 1)},
       GcuReq(1),
       false,
       {},
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"insufficient devices",
       {Gcu("dev-0")},
       GcuReq(2),
       false,
       {"dev-0"},
       "1/1 AllocatedCardsInsufficientRequest"},
      {"partial allocation for multiple cards",
       {Gcu("dev-0"), Gcu("dev-1")},
       GcuReq(3),
       false,
       {"dev-1", "dev-0"},
       "2/2 AllocatedCardsInsufficientRequest"},
      {"CardNotHealth", {Gcu("dev-0", 0, false)}, GcuReq(1), false, {}, "1/1 CardNotHealth"},
      {"two of three, one busy",
       {Gcu("dev-0"), Gcu("dev-1", 1), Gcu("dev-2")},
       GcuReq(2),
       true,
       {"dev-2", "dev-0"},
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FitResult r = GcuFit(Ptrs(c.devices), c.request);
    EXPECT_EQ(r.fit, c.fit);
    EXPECT_EQ(r.Reason(), c.reason);
    EXPECT_EQ(vendor_test::Ids(r), c.ids);
    for (const auto& d : r.devices) {
      EXPECT_EQ(d.type, "GCU");
      EXPECT_EQ(d.usedmem, 100);
      EXPECT_EQ(d.usedcores, 100);
    }
  }
}

TEST(EnflameGcu, PatchAnnotations) {  // TestGCUDevices_PatchAnnotations
  EXPECT_TRUE(GcuPatchAnnotations({}).empty());
  EXPECT_TRUE(GcuPatchAnnotations({{}, {}}).empty());
  protocol::PodDevices pd = {{{.uuid = "testnode-GCU-0", .type = "GCU"}}};
  StringMap got = GcuPatchAnnotations(pd);
  EXPECT_EQ(got,
            (StringMap{{"hami.io/enflame-gcu-devices-to-allocate", "testnode-GCU-0,GCU,0,0:;"},
                       {"hami.io/enflame-gcu-devices-allocated", "testnode-GCU-0,GCU,0,0:;"}}));
}

// ---- DRS ----

constexpr const char* kDrsAnno = R"({"devices":[{"index":"0","minor":"0","capacity":6}],)"
                                 R"("profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}})";

const std::map<std::string, std::string> kProfiles = {
    {"1g.6gb", "0"}, {"3g.20gb", "1"}, {"6g.40gb", "2"}};

DeviceUsage Drs(int32_t count = 6, int32_t used = 0, bool health = true) {
  return DeviceUsage{.id = "node-a-enflame-drs-0",
                     .type = "Enflame",
                     .vendor = "Enflame",
                     .health = health,
                     .count = count,
                     .used = used,
                     .totalmem = 40960,
                     .totalcore = 100};
}

DeviceRequest Direct(int32_t size) {
  return DeviceRequest{
      .nums = 1, .type = "Enflame", .memreq = size, .mem_percentage = kDrsModeDirect};
}

DeviceRequest BySpec(int32_t mem, int32_t cores) {
  return DeviceRequest{.nums = 1,
                       .type = "Enflame",
                       .memreq = mem,
                       .mem_percentage = kDrsModeBySpec,
                       .coresreq = cores};
}

TEST(EnflameDrs, ParseCapacity) {  // TestGetNodeDevices_DRSAnnotation
  auto node = ParseDrsCapacity("node-a", kDrsAnno);
  ASSERT_TRUE(node) << node.error();
  EXPECT_EQ(node->max_slice, 6);
  EXPECT_EQ(node->max_memory_gb, 40);
  EXPECT_EQ(node->profiles, kProfiles);
  auto devs = node->Devices("node-a");
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0], Drs());
  EXPECT_EQ(node->MinorOf(0), "0");
}

TEST(EnflameDrs, ParseCapacityForms) {
  // Index that does not parse -> position; empty minor -> index; string capacity; several devices.
  auto node = ParseDrsCapacity(
      "n", R"({"devices":[{"index":"x","capacity":"4"},{"index":"7","minor":" 3 ","capacity":2}],)"
           R"("profiles":{"2G.10GB":"a","bad":"b"}})");
  ASSERT_TRUE(node) << node.error();
  ASSERT_EQ(node->devices.size(), 2u);
  EXPECT_EQ(node->devices[0], (DrsDevice{.index = 0, .minor = "0", .capacity = 4}));
  EXPECT_EQ(node->devices[1], (DrsDevice{.index = 7, .minor = "3", .capacity = 2}));
  EXPECT_EQ(node->Devices("n")[1].id, "n-enflame-drs-7");
  EXPECT_EQ(node->Devices("n")[1].totalmem, 10 * 1024);
  // Profiles without memory: memory falls back to the largest slice count.
  auto nomem = ParseDrsCapacity("n", R"({"devices":[{"capacity":1}],"profiles":{"4g.x":"0"}})");
  ASSERT_TRUE(nomem) << nomem.error();
  EXPECT_EQ(nomem->max_memory_gb, 4);
  // Capacity beyond int32 as a string is clamped (parseDRSCapacity("2147483648")).
  auto big =
      ParseDrsCapacity("n", R"({"devices":[{"capacity":"2147483648"}],"profiles":{"1g.1gb":"0"}})");
  ASSERT_TRUE(big) << big.error();
  EXPECT_EQ(big->devices[0].capacity, std::numeric_limits<int32_t>::max());
}

TEST(EnflameDrs, ParseCapacityErrors) {  // TestParseDRSCapacity_RejectsNaNAndInf and friends
  struct Case {
    std::string value;
    std::string want;  // a substring of the error
  };
  const std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"devices":[{"capacity":1}]})", "no valid DRS profile"},
      {R"({"devices":[{"capacity":1}],"profiles":{"x.6gb":"0"}})", "no valid DRS profile"},
      {R"({"devices":[],"profiles":{"1g.6gb":"0"}})", "no DRS devices"},
      {R"({"profiles":{"1g.6gb":"0"}})", "no DRS devices"},
      {R"({"devices":[{"capacity":0}],"profiles":{"1g.6gb":"0"}})", "capacity \"0\""},
      {R"({"devices":[{"capacity":1e300}],"profiles":{"1g.6gb":"0"}})", "capacity \"1e+300\""},
      {R"({"devices":[{"capacity":"abc"}],"profiles":{"1g.6gb":"0"}})", "capacity"},
      {R"({"devices":[{"capacity":true}],"profiles":{"1g.6gb":"0"}})", "capacity \"true\""},
      {R"({"devices":[{}],"profiles":{"1g.6gb":"0"}})", "capacity"},
      {R"({"devices":[3],"profiles":{"1g.6gb":"0"}})", "device 0: not an object"},
      {R"({"devices":[{"index":1,"capacity":1}],"profiles":{"1g.6gb":"0"}})",
       "\"index\" is not a string"},
      {R"({"devices":[{"index":"-1","capacity":1}],"profiles":{"1g.6gb":"0"}})", "negative"},
      {R"({"devices":{},"profiles":{"1g.6gb":"0"}})", "\"devices\" is not an array"},
      {R"({"devices":[{"capacity":1}],"profiles":[]})", "\"profiles\" is not an object"},
      {R"({"devices":[{"capacity":1}],"profiles":{"1g.6gb":0}})", "id is not a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    auto r = ParseDrsCapacity("node-a", c.value);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find(c.want), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("enflame.com/gcu-drs-capacity"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("node \"node-a\""), std::string::npos) << r.error();
  }
}

TEST(EnflameDrs, ParseProfileName) {
  EXPECT_EQ(ParseProfileName("3g.20gb"), std::make_pair(int64_t{3}, int64_t{20}));
  EXPECT_EQ(ParseProfileName(" 6G.40GB "), std::make_pair(int64_t{6}, int64_t{40}));
  EXPECT_EQ(ParseProfileName("6g"), std::make_pair(int64_t{0}, int64_t{0}));
  EXPECT_EQ(ParseProfileName("g.4gb"), std::make_pair(int64_t{0}, int64_t{0}));
  EXPECT_EQ(ParseProfileName("2g.lots"), std::make_pair(int64_t{2}, int64_t{0}));
  EXPECT_EQ(ParseProfileName("4294967299g.20gb"), std::make_pair(int64_t{4294967299}, int64_t{20}));
}

TEST(EnflameDrs, NormalizeRequest) {  // TestGenerateResourceRequests{,_ByMemoryCore}
  EnflameConfig cfg;
  EXPECT_EQ(*DrsNormalizeRequest(cfg, Ctr({{"enflame.com/drs-gcu", "3"}})), Direct(3));
  EXPECT_EQ(*DrsNormalizeRequest(cfg, Ctr({}, {{"enflame.com/drs-gcu", "3"}})), Direct(3));
  EXPECT_EQ(*DrsNormalizeRequest(
                cfg, Ctr({{"enflame.com/gcu-memory", "20480"}, {"enflame.com/gcu-core", "40"}})),
            BySpec(20480, 40));
  EXPECT_EQ(*DrsNormalizeRequest(cfg, Ctr({{"enflame.com/gcu-core", "40"}})), BySpec(0, 40));
  // Memory rounds up to a whole number as Kubernetes' Value() does.
  EXPECT_EQ(*DrsNormalizeRequest(cfg, Ctr({{"enflame.com/gcu-memory", "1500m"}})), BySpec(2, 0));
  EXPECT_EQ(*DrsNormalizeRequest(cfg, Ctr({{"cpu", "1"}})), DeviceRequest{});
  // Beyond int32: no request (HAMi logs and ignores it).
  EXPECT_EQ(*DrsNormalizeRequest(cfg, Ctr({{"enflame.com/gcu-memory", "3Gi"}})), DeviceRequest{});
  // A zero DRS count falls through to memory/core.
  EXPECT_EQ(*DrsNormalizeRequest(
                cfg, Ctr({{"enflame.com/drs-gcu", "0"}, {"enflame.com/gcu-core", "10"}})),
            BySpec(0, 10));
  auto bad = DrsNormalizeRequest(cfg, Ctr({{"enflame.com/gcu-memory", "lots"}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("enflame.com/gcu-memory"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("\"lots\""), std::string::npos) << bad.error();
  auto bad_count = DrsNormalizeRequest(cfg, Ctr({{"enflame.com/drs-gcu", "x"}}));
  ASSERT_FALSE(bad_count);
  EXPECT_NE(bad_count.error().find("\"x\""), std::string::npos) << bad_count.error();
}

TEST(EnflameDrs, MutateAdmission) {  // TestMutateAdmission_ByMemoryCoreAPI and the error texts
  EnflameConfig cfg;
  ContainerView c = Ctr({{"enflame.com/gcu-memory", "20480"}, {"enflame.com/gcu-core", "50"}});
  auto r = DrsMutateAdmission(cfg, &c);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(*r);
  EXPECT_EQ(c.requests,
            (StringMap{{"enflame.com/gcu-core", "50"}, {"enflame.com/gcu-memory", "20480"}}));

  ContainerView direct = Ctr({}, {{"enflame.com/drs-gcu", "2"}});
  ASSERT_TRUE(*DrsMutateAdmission(cfg, &direct));
  EXPECT_EQ(direct.limits, (StringMap{{"enflame.com/drs-gcu", "2"}}));

  ContainerView none = Ctr({{"cpu", "1"}});
  EXPECT_FALSE(*DrsMutateAdmission(cfg, &none));
  EXPECT_EQ(none, Ctr({{"cpu", "1"}}));

  struct Case {
    StringMap limits;
    std::string want;
  };
  const std::vector<Case> errors = {
      {{{"enflame.com/drs-gcu", "0"}}, "enflame.com/drs-gcu must be greater than 0"},
      {{{"enflame.com/drs-gcu", "-2"}}, "enflame.com/drs-gcu must be greater than 0"},
      {{{"enflame.com/gcu-memory", "0"}}, "enflame.com/gcu-memory must be greater than 0"},
      {{{"enflame.com/gcu-core", "0"}}, "enflame.com/gcu-core must be in range (0,100]"},
      {{{"enflame.com/gcu-core", "101"}}, "enflame.com/gcu-core must be in range (0,100]"},
      {{{"enflame.com/gcu-core", "junk"}}, "\"junk\""},
  };
  for (const Case& e : errors) {
    ContainerView bad = Ctr(e.limits);
    auto got = DrsMutateAdmission(cfg, &bad);
    ASSERT_FALSE(got) << e.want;
    EXPECT_NE(got.error().find(e.want), std::string::npos) << got.error();
    EXPECT_EQ(bad, Ctr(e.limits));  // never half-written
  }
}

TEST(EnflameDrs, ConfigDefaults) {
  EnflameConfig empty{.resource_name_gcu = "enflame.com/gcu",
                      .resource_name_drs_gcu = "",
                      .resource_name_gcu_memory = "",
                      .resource_name_gcu_core = ""};
  EXPECT_EQ(Normalized(empty), EnflameConfig{});
  empty.resource_name_vgcu = "enflame.com/vgcu";
  EXPECT_EQ(Normalized(empty).resource_name_drs_gcu, "enflame.com/vgcu");
}

struct FitCase {
  const char* name;
  std::vector<DeviceUsage> devices;
  DeviceRequest request;
  std::map<std::string, std::string> profiles;
  int64_t max_slice;
  StringMap annotations;
  bool mutex;
  bool fit;
  std::string reason;
  int32_t usedmem;
  int32_t usedcores;
  std::string profile;
};

TEST(EnflameDrs, FitTable) {  // TestFit_* in device_test.go
  const std::vector<FitCase> cases = {
      {"SelectProfileByRequest",
       {Drs()},
       Direct(3),
       kProfiles,
       6,
       {},
       false,
       true,
       "",
       20480,
       50,
       "3g.20gb"},
      {"SelectProfileByMemoryCoreRequest",
       {Drs()},
       BySpec(20480, 40),
       kProfiles,
       6,
       {},
       false,
       true,
       "",
       20480,
       50,
       "3g.20gb"},
      {"memory in GB",
       {Drs()},
       BySpec(7, 0),
       kProfiles,
       6,
       {},
       false,
       true,
       "",
       20480,
       50,
       "3g.20gb"},
      {"core only",
       {Drs()},
       BySpec(0, 60),
       kProfiles,
       6,
       {},
       false,
       true,
       "",
       40960,
       100,
       "6g.40gb"},
      {"ProfileNotFound",
       {Drs()},
       Direct(3),
       {{"1g.6gb", "0"}},
       1,
       {},
       false,
       false,
       "1/1 ModeNotFit",
       0,
       0,
       ""},
      {"no profile big enough",
       {Drs(), Drs()},
       BySpec(41, 0),
       kProfiles,
       6,
       {},
       false,
       false,
       "1/2 ModeNotFit",
       0,
       0,
       ""},
      {"MutexRejectsUsedDevice",
       {Drs(2, 1)},
       Direct(3),
       kProfiles,
       6,
       {},
       true,
       false,
       "1/1 ExclusiveDeviceAllocateConflict",
       0,
       0,
       ""},
      {"UnhealthyDeviceRejected",
       {Drs(6, 0, false)},
       Direct(3),
       kProfiles,
       6,
       {},
       false,
       false,
       "1/1 CardNotHealth",
       0,
       0,
       ""},
      {"type mismatch",
       {Drs()},
       DeviceRequest{.nums = 1, .type = "GCU", .memreq = 3},
       kProfiles,
       6,
       {},
       false,
       false,
       "1/1 CardTypeMismatch",
       0,
       0,
       ""},
      {"slices exhausted",
       {Drs(2, 2)},
       Direct(1),
       kProfiles,
       6,
       {},
       false,
       false,
       "1/1 CardTimeSlicingExhausted",
       0,
       0,
       ""},
      {"nouse uuid",
       {Drs()},
       Direct(1),
       kProfiles,
       6,
       {{"enflame.com/nouse-gpuuuid", "node-a-enflame-drs-0"}},
       false,
       false,
       "1/1 CardUuidMismatch",
       0,
       0,
       ""},
      {"use uuid other",
       {Drs()},
       Direct(1),
       kProfiles,
       6,
       {{"enflame.com/use-gpuuuid", "other"}},
       false,
       false,
       "1/1 CardUuidMismatch",
       0,
       0,
       ""},
      {"use uuid empty is no constraint",
       {Drs()},
       Direct(1),
       kProfiles,
       6,
       {{"enflame.com/use-gpuuuid", " "}},
       false,
       true,
       "",
       6144,
       17,
       "1g.6gb"},
      {"OversizedProfileRejected size",
       {Drs()},
       Direct(3),
       {{"4294967299g.4294967299gb", "0"}},
       4294967299,
       {},
       false,
       false,
       "1/1 ModeNotFit",
       0,
       0,
       ""},
      {"OversizedProfileRejected memory",
       {Drs()},
       BySpec(3, 0),
       {{"2g.4294967299gb", "0"}},
       2,
       {},
       false,
       false,
       "1/1 ModeNotFit",
       0,
       0,
       ""},
      {"OversizedProfileRejected cores",
       {Drs()},
       BySpec(3, 0),
       {{"2147483647g.20gb", "0"}},
       1,
       {},
       false,
       false,
       "1/1 ModeNotFit",
       0,
       0,
       ""},
  };
  for (const FitCase& c : cases) {
    SCOPED_TRACE(c.name);
    PodView pod{.annotations = c.annotations};
    FitContext ctx{.pod = &pod};
    ctx.policy.mutex = c.mutex;
    DrsPick pick = DrsFit(Ptrs(c.devices), c.request, ctx, c.profiles, c.max_slice);
    EXPECT_EQ(pick.result.fit, c.fit);
    EXPECT_EQ(pick.result.Reason(), c.reason);
    if (c.fit) {
      ASSERT_EQ(pick.result.devices.size(), 1u);
      EXPECT_EQ(pick.result.devices[0].uuid, "node-a-enflame-drs-0");
      EXPECT_EQ(pick.result.devices[0].type, "Enflame");
      EXPECT_EQ(pick.result.devices[0].usedmem, c.usedmem);
      EXPECT_EQ(pick.result.devices[0].usedcores, c.usedcores);
      EXPECT_EQ(pick.profile.name, c.profile);
    } else {
      EXPECT_TRUE(pick.result.devices.empty());
    }
  }
}

TEST(EnflameDrs, FitMemoryAndCoreLeft) {
  DeviceUsage full_mem = Drs();
  full_mem.usedmem = 40960 - 20479;
  DeviceUsage full_core = Drs();
  full_core.usedcores = 51;
  PodView pod;
  FitContext ctx{.pod = &pod};
  auto mem = DrsFit(Ptrs({full_mem}), Direct(3), ctx, kProfiles, 6);
  EXPECT_EQ(mem.result.Reason(), "1/1 CardInsufficientMemory");
  auto core = DrsFit(Ptrs({full_core}), Direct(3), ctx, kProfiles, 6);
  EXPECT_EQ(core.result.Reason(), "1/1 CardInsufficientCore");
  // The last candidate is tried first.
  DeviceUsage second = Drs();
  second.id = "node-a-enflame-drs-1";
  auto both = DrsFit(Ptrs({Drs(), second}), Direct(3), ctx, kProfiles, 6);
  ASSERT_TRUE(both.result.fit);
  EXPECT_EQ(both.result.devices[0].uuid, "node-a-enflame-drs-1");
}

TEST(EnflameDrs, PatchAnnotations) {  // TestPatchAnnotations_DRSFields
  protocol::PodDevices pd = {
      {{.uuid = "node-a-enflame-drs-0", .type = "Enflame", .usedmem = 20480, .usedcores = 50}}};
  DrsAssignment a{.container = "pod-gcu-example1",
                  .device_index = 0,
                  .minor = "0",
                  .profile = {.name = "3g.20gb", .id = "1", .size = 3, .memory_gb = 20}};
  StringMap got = DrsPatchAnnotations(pd, {a}, 1700000000123456789);
  EXPECT_EQ(
      got,
      (StringMap{
          {"hami.io/enflame-vgpu-devices-allocated", "node-a-enflame-drs-0,Enflame,20480,50:;"},
          {"enflame.com/gcu-assigned", "false"},
          {"enflame.com/gcu-assigned-time", "1700000000123456789"},
          {"enflame.com/gcu-assigned-index", "0"},
          {"enflame.com/gcu-assigned-id", "0"},
          {"enflame.com/gcu-assigned-minor", "0"},
          {"enflame.com/gcu-request-size", "3"},
          {"assigned-containers",
           R"({"pod-gcu-example1":{"allocated":false,"request":3,"profileID":"1",)"
           R"("profileName":"3g.20gb"}})"},
      }));
  auto parsed = ParseJson(got["assigned-containers"]);
  ASSERT_TRUE(parsed);
  EXPECT_EQ((*parsed)["pod-gcu-example1"]["request"], 3);

  // Two containers: keys sorted, the first assignment names the index; HTML escaped as Go.
  DrsAssignment b{.container = "a<b",
                  .device_index = 4,
                  .minor = "9",
                  .profile = {.name = "1g.6gb", .id = "", .size = 1, .memory_gb = 6}};
  protocol::PodDevices two = {pd[0], {{.uuid = "x", .type = "Enflame"}}};
  StringMap got2 = DrsPatchAnnotations(two, {a, b}, 5);
  EXPECT_EQ(got2["assigned-containers"],
            R"({"a\u003cb":{"allocated":false,"request":1,"profileName":"1g.6gb"},)"
            R"("pod-gcu-example1":{"allocated":false,"request":3,"profileID":"1",)"
            R"("profileName":"3g.20gb"}})");
  EXPECT_EQ(got2["enflame.com/gcu-assigned-index"], "0");
  EXPECT_EQ(got2["enflame.com/gcu-request-size"], "3");

  EXPECT_TRUE(DrsPatchAnnotations({{}}, {}, 5).empty());
}

TEST(EnflameDrs, Health) { EXPECT_EQ(DrsCheckHealth(), HealthPair(true, true)); }

TEST(EnflameDrs, KeysAreTheVendorTables) {
  auto info = protocol::FindVendor(kDrsVendorKey);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->register_key, kDrsCapacityKey);
  for (std::string_view key :
       {kPodRequestGcuSize, kPodAssignedGcuId, kPodHasAssignedGcu, kPodAssignedGcuIndex,
        kPodAssignedGcuMinor, kPodAssignedGcuTime, kAssignedContainers}) {
    EXPECT_NE(std::find(info->extra_pod_keys.begin(), info->extra_pod_keys.end(), key),
              info->extra_pod_keys.end())
        << key;
  }
  EXPECT_TRUE(protocol::FindVendor(kGcuVendorKey));
}

}  // namespace
}  // namespace hami::device::enflame
