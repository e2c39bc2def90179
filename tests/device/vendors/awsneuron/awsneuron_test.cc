// AWS Neuron: vectors from HAMi v2.10 pkg/device/awsneuron/device_test.go.
#include "device/vendors/awsneuron/awsneuron.h"

#include <gtest/gtest.h>
#include "support/vendor_test_util.h"

namespace hami::device::awsneuron {
namespace {

using vendor_test::Ptrs;

// The upstream vectors' container is "c".
ContainerView Ctr(StringMap limits, StringMap requests = {}) {
  return vendor_test::NamedCtr("c", std::move(limits), std::move(requests));
}

// makeAWSDeviceUsage
DeviceUsage Dev(std::string id, uint64_t index, int32_t used, int32_t count, int32_t totalcore,
                int32_t usedcores, bool health = true) {
  return DeviceUsage{.id = std::move(id),
                     .index = index,
                     .type = "AWSNeuron",
                     .vendor = "AWSNeuron",
                     .health = health,
                     .count = count,
                     .used = used,
                     .totalcore = totalcore,
                     .usedcores = usedcores};
}

DeviceRequest Req(int32_t nums, int32_t cores, std::string type = "AWSNeuron") {
  return DeviceRequest{
      .nums = nums, .type = std::move(type), .memreq = 0, .mem_percentage = 0, .coresreq = cores};
}

TEST(AwsNeuron, NodeDevices) {  // Test_GetNodeDevices
  auto devs = NodeDevices("test", 1, 2);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0], (DeviceUsage{.id = "test-AWSNeuron-0",
                                  .index = 0,
                                  .type = "AWSNeuron",
                                  .vendor = "AWSNeuron",
                                  .health = true,
                                  .count = 2,
                                  .totalcore = 3}));
  auto trn = NodeDevices("n", 16, 32);
  ASSERT_EQ(trn.size(), 16u);
  EXPECT_EQ(trn[15].id, "n-AWSNeuron-15");
  EXPECT_EQ(NodeDevices("n", 2, 16)[1].totalcore, 255);
  EXPECT_TRUE(NodeDevices("n", 0, 2).empty());
  EXPECT_EQ(NodeDevices("n", 2, 0)[0].count, 0);
}

TEST(AwsNeuron, MutateAdmission) {  // Test_MutateAdmission
  NeuronConfig cfg;
  struct Case {
    const char* name;
    ContainerView ctr;
    bool want;
    std::string error;  // "" = no error
  };
  const std::vector<Case> cases = {
      {"set neuron number", Ctr({{"aws.amazon.com/neuron", "1"}}), true, ""},
      {"request-only neuron number", Ctr({}, {{"aws.amazon.com/neuron", "1"}}), true, ""},
      {"request-only neuron number overflows", Ctr({}, {{"aws.amazon.com/neuron", "2147483648"}}),
       false, "aws.amazon.com/neuron must not exceed 2147483647"},
      {"set neuron cores", Ctr({{"aws.amazon.com/neuroncore", "2"}}), true, ""},
      {"odd core count above one", Ctr({{"aws.amazon.com/neuroncore", "3"}}), false,
       "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"},
      {"request-only odd core count", Ctr({}, {{"aws.amazon.com/neuroncore", "3"}}), false,
       "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"},
      {"zero cores", Ctr({{"aws.amazon.com/neuroncore", "0"}}), false,
       "aws.amazon.com/neuroncore must be greater than 0"},
      {"negative cores", Ctr({{"aws.amazon.com/neuroncore", "-2"}}), false,
       "aws.amazon.com/neuroncore must be greater than 0"},
      {"cores overflow the device count", Ctr({{"aws.amazon.com/neuroncore", "4294967296"}}), false,
       "aws.amazon.com/neuroncore must not exceed 4294967294"},
      {"fractional count", Ctr({{"aws.amazon.com/neuron", "1500m"}}), false,
       "aws.amazon.com/neuron must be an integer (value \"1500m\")"},
      {"no neuron devices", Ctr({{"cpu", "1"}}), false, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = MutateAdmission(cfg, c.ctr);
    if (c.error.empty()) {
      ASSERT_TRUE(r) << r.error();
      EXPECT_EQ(*r, c.want);
    } else {
      ASSERT_FALSE(r);
      EXPECT_NE(r.error().find(c.error), std::string::npos) << r.error();
      EXPECT_NE(r.error().find("container \"c\""), std::string::npos) << r.error();
    }
  }
}

TEST(AwsNeuron, NormalizeRequest) {  // Test_GenerateResourceRequests
  NeuronConfig cfg;
  EXPECT_EQ(NormalizeRequest(cfg, Ctr({{"aws.amazon.com/neuron", "1"}})), Req(1, 2));
  EXPECT_EQ(NormalizeRequest(cfg, Ctr({}, {{"aws.amazon.com/neuron", "2147483648"}})),
            DeviceRequest{});
  EXPECT_EQ(NormalizeRequest(cfg, Ctr({{"aws.amazon.com/neuroncore", "1"}})), Req(1, 1));
  EXPECT_EQ(NormalizeRequest(cfg, Ctr({{"aws.amazon.com/neuroncore", "4"}})), Req(2, 2));
  for (const char* bad : {"3", "0", "-2", "4294967296"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(NormalizeRequest(cfg, Ctr({{"aws.amazon.com/neuroncore", bad}})), DeviceRequest{});
    EXPECT_EQ(NormalizeRequest(cfg, Ctr({}, {{"aws.amazon.com/neuroncore", bad}})),
              DeviceRequest{});
  }
  EXPECT_EQ(NormalizeRequest(cfg, Ctr({{"cpu", "1"}})), DeviceRequest{});
}

TEST(AwsNeuron, SplitCoreRequest) {  // Test_splitCoreRequest
  struct Case {
    const char* name;
    int64_t per;
    int64_t cores;
    int32_t nums;
    int32_t coresreq;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"single core takes one device", 2, 1, 1, 1, ""},
      {"a full device is one device", 2, 2, 1, 2, ""},
      {"whole devices divide evenly", 2, 6, 3, 2, ""},
      {"odd count above one", 2, 3, 0, 0,
       "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"},
      {"per-device cores above the addressable limit are bounded", 4, 4, 2, 2, ""},
      {"unknown per-device cores falls back to the limit", 0, 4, 2, 2, ""},
      {"device count stays within int32", 1, 2147483648, 0, 0,
       "aws.amazon.com/neuroncore needs 2147483648 devices, which exceeds the maximum of "
       "2147483647"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NeuronConfig cfg;
    cfg.cores_per_device = c.per;
    auto r = SplitCoreRequest(cfg, c.cores);
    if (c.error.empty()) {
      ASSERT_TRUE(r) << r.error();
      EXPECT_EQ(*r, std::make_pair(c.nums, c.coresreq));
    } else {
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error(), c.error);
    }
  }
}

TEST(AwsNeuron, Masks) {  // Test_countMaskAvailable, addCoreUsage
  EXPECT_EQ(CountMask(3), 2);
  EXPECT_EQ(CountMask(2), 1);
  EXPECT_EQ(CountMask(1), 1);
  EXPECT_EQ(CountMask(0), 0);
  EXPECT_EQ(CountMask(-1), 0);
  EXPECT_EQ(AddCoreUsage(0, 2), 3);
  EXPECT_EQ(AddCoreUsage(0, 1), 1);
  EXPECT_EQ(AddCoreUsage(1, 1), 2);
  EXPECT_EQ(AddCoreUsage(2, 1), 1);
  EXPECT_EQ(AddCoreUsage(0, 0), 3);
}

TEST(AwsNeuron, GraphSelect) {  // Test_graphSelect
  auto sixteen = [](std::vector<uint64_t> used) {
    std::vector<DeviceUsage> out;
    for (uint64_t i = 0; i < 16; ++i) {
      DeviceUsage d = Dev("d" + std::to_string(i), i, 0, 2, 3, 0);
      for (uint64_t u : used) {
        if (u == i) d.used = 1;
      }
      out.push_back(d);
    }
    return out;
  };
  auto seq = [](size_t from, size_t n) {
    std::vector<size_t> v;
    for (size_t i = 0; i < n; ++i) v.push_back(from + i);
    return v;
  };
  auto all = sixteen({});
  EXPECT_EQ(GraphSelect(Ptrs(all), 16, "inf2"), seq(0, 16));
  auto t1 = sixteen({7, 13});
  EXPECT_TRUE(GraphSelect(Ptrs(t1), 8, "trn").empty());
  auto t2 = sixteen({7});
  EXPECT_EQ(GraphSelect(Ptrs(t2), 8, "trn"), seq(8, 8));
  auto i1 = sixteen({5, 14});
  EXPECT_EQ(GraphSelect(Ptrs(i1), 8, "inf"), seq(6, 8));
  EXPECT_TRUE(GraphSelect(Ptrs(all), 2, "trn").empty());  // not an aligned block size
  EXPECT_EQ(GraphSelect(Ptrs(all), 2, "Inf1"), seq(0, 2));
  EXPECT_TRUE(GraphSelect({}, 1, "trn").empty());
  auto sick = sixteen({});
  sick[0].health = false;
  EXPECT_EQ(GraphSelect(Ptrs(sick), 4, "trn"), seq(4, 4));
}

TEST(AwsNeuron, FitTable) {  // TestDevices_Fit
  struct Case {
    const char* name;
    std::vector<DeviceUsage> devices;
    DeviceRequest request;
    StringMap annos;
    bool mutex;
    bool fit;
    std::vector<std::string> ids;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"fit success",
       {Dev("dev-0", 0, 0, 2, 3, 0), Dev("dev-1", 0, 0, 12, 3, 0)},
       Req(1, 2),
       {},
       false,
       true,
       {"dev-1"},
       ""},
      {"memory not enough",
       {Dev("dev-0", 0, 0, 2, 3, 0)},
       Req(2, 2),
       {},
       false,
       false,
       {},
       "1/1 NumaNotFit"},
      {"core not enough",
       {Dev("dev-0", 0, 0, 2, 3, 1)},
       Req(1, 2),
       {},
       false,
       false,
       {},
       "1/1 CardInsufficientCore"},
      {"type mismatch",
       {Dev("dev-0", 0, 0, 2, 3, 0)},
       Req(1, 2, "OtherType"),
       {},
       false,
       false,
       {},
       "1/1 CardTypeMismatch"},
      {"use uuid mismatch",
       {Dev("dev-1", 0, 0, 2, 3, 0)},
       Req(1, 2),
       {{"aws.amazon.com/use-neuron-uuid", "dev-0"}},
       false,
       false,
       {},
       "1/1 CardUuidMismatch"},
      {"nouse uuid match",
       {Dev("dev-0", 0, 0, 2, 3, 0)},
       Req(1, 2),
       {{"aws.amazon.com/nouse-neuron-uuid", "dev-0"}},
       false,
       false,
       {},
       "1/1 CardUuidMismatch"},
      {"card overused",
       {Dev("dev-0", 0, 2, 2, 3, 0)},
       Req(1, 2),
       {},
       false,
       false,
       {},
       "1/1 CardTimeSlicingExhausted"},
      {"mutex rejects used device",
       {Dev("dev-0", 0, 1, 2, 3, 0)},
       Req(1, 2),
       {},
       true,
       false,
       {},
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"NumaNotFit with multiple devices",
       {Dev("dev-0", 0, 0, 2, 3, 0), Dev("dev-1", 1, 0, 2, 3, 0)},
       Req(2, 2),
       {},
       false,
       false,
       {},
       "1/2 NumaNotFit"},
      {"CardNotHealth",
       {Dev("dev-0", 0, 0, 2, 3, 0, false)},
       Req(1, 2),
       {},
       false,
       false,
       {},
       "1/1 CardNotHealth"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PodView pod{.annotations = c.annos};
    FitContext ctx{.pod = &pod};
    ctx.policy.mutex = c.mutex;
    FitResult r = Fit(Ptrs(c.devices), c.request, ctx, "trn");
    EXPECT_EQ(r.fit, c.fit);
    EXPECT_EQ(r.Reason(), c.reason);
    EXPECT_EQ(vendor_test::Ids(r), c.ids);
  }
}

TEST(AwsNeuron, FitCoresAndRuns) {
  PodView pod;
  FitContext ctx{.pod = &pod};
  // One core on a half-used device takes the other core.
  auto half = std::vector<DeviceUsage>{Dev("d0", 0, 1, 2, 3, 1)};
  FitResult r = Fit(Ptrs(half), Req(1, 1), ctx, "inf2");
  ASSERT_TRUE(r.fit);
  EXPECT_EQ(r.devices[0],
            (protocol::ContainerDevice{.uuid = "d0", .type = "AWSNeuron", .usedcores = 2}));
  // Four devices on an Inferentia ring: the first free run, whole masks.
  std::vector<DeviceUsage> ring;
  for (uint64_t i = 0; i < 6; ++i) ring.push_back(Dev("r" + std::to_string(i), i, i == 0, 2, 3, 0));
  r = Fit(Ptrs(ring), Req(4, 2), ctx, "inf2.24xlarge");
  ASSERT_TRUE(r.fit);
  ASSERT_EQ(r.devices.size(), 4u);
  EXPECT_EQ(r.devices[0].uuid, "r1");
  EXPECT_EQ(r.devices[3].uuid, "r4");
  EXPECT_EQ(r.devices[0].usedcores, 3);
  // A run whose positions name indexes the node lacks is no fit (HAMi reads them as indexes).
  std::vector<DeviceUsage> odd = {Dev("x", 10, 0, 2, 3, 0), Dev("y", 11, 0, 2, 3, 0)};
  r = Fit(Ptrs(odd), Req(2, 2), ctx, "inf2");
  EXPECT_FALSE(r.fit);
  EXPECT_EQ(r.Reason(), "1/2 NumaNotFit");
}

TEST(AwsNeuron, PatchAnnotations) {  // Test_PatchAnnotations
  NeuronConfig cfg;
  std::map<std::string, uint64_t> idx = {{"test1", 0}, {"test2", 1}};
  protocol::PodDevices two = {{{.uuid = "test1", .type = "AWSNeuron", .usedcores = 3},
                               {.uuid = "test2", .type = "AWSNeuron", .usedcores = 3}}};
  StringMap got = PatchAnnotations(cfg, two, {{.count_in_limits = true, .count_positive = true}},
                                   idx, "node-a", 42);
  EXPECT_EQ(got, (StringMap{{"hami.io/aws-neuron-devices-allocated",
                             "test1,AWSNeuron,0,3:test2,AWSNeuron,0,3:;"},
                            {"AWS_NEURON_IDS", "0,1"},
                            {"NEURON_ALLOC_TIME", "42"},
                            {"NEURON_ALLOCATED", "false"},
                            {"aws.amazon.com/predicate-node", "node-a"}}));

  protocol::PodDevices cores = {{{.uuid = "test1", .type = "AWSNeuron", .usedcores = 3}}};
  got = PatchAnnotations(cfg, cores, {{}}, idx, "", 42);
  EXPECT_EQ(got["AWS_NEURON_IDS"], "0,1");
  EXPECT_EQ(got["NEURON_RESOURCE_TYPE"], "aws.amazon.com/neuroncore");
  EXPECT_EQ(got["aws.amazon.com/predicate-node"], "");
  protocol::PodDevices second_core = {{{.uuid = "test2", .type = "AWSNeuron", .usedcores = 2}}};
  EXPECT_EQ(PatchAnnotations(cfg, second_core, {{}}, idx, "n", 1)["AWS_NEURON_IDS"], "3");

  // Init container with a device, the app container without.
  protocol::PodDevices init = {{{.uuid = "test1", .type = "AWSNeuron", .usedcores = 3}}, {}};
  got = PatchAnnotations(cfg, init, {{.count_in_limits = true, .count_positive = true}, {}}, idx,
                         "", 1);
  EXPECT_EQ(got["AWS_NEURON_IDS"], "0");
  EXPECT_EQ(got.count("NEURON_RESOURCE_TYPE"), 0u);

  // A count of zero in the limits names no index.
  got = PatchAnnotations(cfg, cores, {{.count_in_limits = true}}, idx, "", 1);
  EXPECT_EQ(got.count("AWS_NEURON_IDS"), 0u);
  EXPECT_EQ(got.size(), 1u);
  EXPECT_TRUE(PatchAnnotations(cfg, {{}}, {{}}, idx, "", 1).empty());

  EXPECT_EQ(AskOf(cfg, Ctr({{"aws.amazon.com/neuron", "2"}})),
            (ContainerAsk{.count_in_limits = true, .count_positive = true}));
  EXPECT_EQ(AskOf(cfg, Ctr({}, {{"aws.amazon.com/neuron", "2"}})), ContainerAsk{});
}

TEST(AwsNeuron, KeysAreTheVendorTables) {
  auto info = protocol::FindVendor(kVendorKey);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->extra_pod_keys,
            (std::vector<std::string>{std::string(kAssignedIndexKey), std::string(kAssignedNodeKey),
                                      std::string(kPredicateTimeKey), std::string(kResourceTypeKey),
                                      std::string(kAllocatedFlagKey)}));
}

}  // namespace
}  // namespace hami::device::awsneuron
