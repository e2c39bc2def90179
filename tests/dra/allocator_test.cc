// The structured allocator (src/dra/allocator.h) on ResourceSlices as hami-dra-plugin publishes
// them (draplugin::ShareableGpuDevice) and claims as the DRA webhook writes them
// (src/scheduler/dra_webhook.cc).
#include "dra/allocator.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "dra/capacity.h"
#include "draplugin/slices.h"
#include "sim/apiserver/dra_validation.h"

namespace hami::dra {
namespace {

constexpr const char* kDriver = "hami-core-gpu.project-hami.io";

// A shareable 40Gi A100 as hami-dra-plugin publishes it.
Json Gpu(int minor) {
  draplugin::GpuFacts g;
  g.gpu.index = static_cast<uint64_t>(minor);
  g.gpu.uuid = "GPU-" + std::to_string(minor);
  g.gpu.model = "NVIDIA A100-SXM4-40GB";
  g.gpu.memory_mib = 40960;
  return draplugin::ShareableGpuDevice(g, 1.0);
}

Json Slice(const std::string& node, Json devices, int64_t generation = 1, int64_t count = 1,
           int index = 0) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-hami-core-gpu-" + std::to_string(index)}}},
          {"spec",
           {{"driver", kDriver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", count}}},
            {"devices", std::move(devices)}}}};
}

Json Class() {
  return Json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
      "metadata": {"name": "hami-core-gpu.project-hami.io"},
      "spec": {"selectors": [{"cel": {"expression":
          "device.driver == \"hami-core-gpu.project-hami.io\""}}]}})");
}

Json Node(const std::string& name) {
  return {{"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}}};
}

// The request the webhook writes for gpumem/gpucores (its Template), `memory` empty: none.
Json GpuRequest(const std::string& memory, const std::string& cores, int count = 1) {
  Json requests = Json::object();
  if (!cores.empty()) requests["cores"] = cores;
  if (!memory.empty()) requests["memory"] = memory;
  return {
      {"name", "gpu"},
      {"exactly",
       {{"deviceClassName", kDriver},
        {"allocationMode", "ExactCount"},
        {"count", count},
        {"selectors", Json::array({{{"cel",
                                     {{"expression", std::string("device.attributes[\"") + kDriver +
                                                         "\"].type == \"hami-gpu\""}}}}})},
        {"capacity", {{"requests", requests}}}}}};
}

Json Claim(const std::string& name, Json requests, Json constraints = nullptr) {
  Json c = {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}, {"namespace", "default"}}},
            {"spec", {{"devices", {{"requests", std::move(requests)}}}}}};
  if (!constraints.is_null()) c["spec"]["devices"]["constraints"] = std::move(constraints);
  return c;
}

Json GpuClaim(const std::string& name, const std::string& memory, const std::string& cores,
              int count = 1) {
  Json constraints = nullptr;
  if (count > 1) {
    constraints = Json::array(
        {{{"requests", {"gpu"}}, {"distinctAttribute", std::string(kDriver) + "/uuid"}}});
  }
  return Claim(name, Json::array({GpuRequest(memory, cores, count)}), constraints);
}

class AllocatorTest : public ::testing::Test {
 protected:
  Inventory inventory_;
  int shares_ = 0;

  void SetUp() override { inventory_.device_classes[kDriver] = Class(); }

  Allocator Make() {
    return Allocator(inventory_, [this] {
      char id[40];
      std::snprintf(id, sizeof id, "00000000-0000-4000-8000-%012d", ++shares_);
      return std::string(id);
    });
  }

  // Allocates `claims` on `node`, expecting success, and assumes the allocations.
  std::vector<Json> Fit(Allocator& a, const std::string& node, const std::vector<Json>& claims) {
    auto r = a.AllocateOnNode(Node(node), claims);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
    if (!r.ok()) return {};
    EXPECT_TRUE(r->fits) << ::testing::PrintToString(r->failure.details);
    for (const Json& allocation : r->allocations) a.Assume(allocation);
    return r->allocations;
  }

  // Allocates `claims` on `node`, expecting no fit; the failure's details.
  std::vector<std::string> Fail(Allocator& a, const std::string& node,
                                const std::vector<Json>& claims) {
    auto r = a.AllocateOnNode(Node(node), claims);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
    if (!r.ok()) return {};
    EXPECT_FALSE(r->fits) << r->allocations[0].dump();
    EXPECT_EQ(r->failure.reason, "cannot allocate all claims");
    return r->failure.details;
  }
};

bool Has(const std::vector<std::string>& lines, const std::string& want) {
  for (const std::string& l : lines) {
    if (l == want) return true;
  }
  ADD_FAILURE() << "no line " << want << " in " << ::testing::PrintToString(lines);
  return false;
}

// --- requestPolicy ---------------------------------------------------------------------------

Consumption Consumed(const std::string& capacity, const char* requested) {
  std::optional<Amount> want;
  if (requested != nullptr) want = *ParseAmount(requested);
  auto c = ConsumedCapacity(Json::parse(capacity), want);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error());
  return c.ok() ? *c : Consumption{};
}

TEST(ConsumedCapacityTest, RoundsUpByTheStepFromMin) {
  const std::string range = R"({"value": "100", "requestPolicy": {"default": "8",
      "validRange": {"min": "4", "max": "64", "step": "4"}}})";
  EXPECT_EQ(FormatAmount(Consumed(range, "5").amount), "8");
  EXPECT_EQ(FormatAmount(Consumed(range, "8").amount), "8");
  EXPECT_EQ(FormatAmount(Consumed(range, "1").amount), "4");      // below min: min
  EXPECT_EQ(FormatAmount(Consumed(range, nullptr).amount), "8");  // not asked: the default
  const Consumption above = Consumed(range, "65");
  EXPECT_EQ(FormatAmount(above.amount), "68");
  EXPECT_EQ(above.violation, "above the requestPolicy's validRange.max 64");
  // Bytes round up to a whole MiB, written as the plugin writes them.
  const std::string memory = R"({"value": "40Gi", "requestPolicy": {"default": "40Gi",
      "validRange": {"min": "1Mi", "max": "40Gi", "step": "1Mi"}}})";
  EXPECT_EQ(FormatAmount(Consumed(memory, "1000000000").amount), "954Mi");
  EXPECT_EQ(FormatAmount(Consumed(memory, "3000Mi").amount), "3000Mi");
  EXPECT_EQ(FormatAmount(Consumed(memory, "3G").amount), "2862Mi");
  EXPECT_EQ(FormatAmount(Consumed(memory, nullptr).amount), "40Gi");
}

TEST(ConsumedCapacityTest, ValidValuesTakeTheSmallestNotBelowTheRequest) {
  const std::string values = R"({"value": "8Gi", "requestPolicy": {"default": "1Gi",
      "validValues": ["1Gi", "2Gi", "4Gi"]}})";
  EXPECT_EQ(FormatAmount(Consumed(values, "1.5Gi").amount), "2Gi");
  EXPECT_EQ(FormatAmount(Consumed(values, "4Gi").amount), "4Gi");
  EXPECT_EQ(Consumed(values, "5Gi").violation,
            "not one of the requestPolicy's validValues (1Gi, 2Gi, 4Gi)");
}

TEST(ConsumedCapacityTest, WithoutPolicyTheRequestOrAllOfIt) {
  EXPECT_EQ(FormatAmount(Consumed(R"({"value": "10"})", "3").amount), "3");
  EXPECT_EQ(FormatAmount(Consumed(R"({"value": "10"})", nullptr).amount), "10");
  EXPECT_EQ(FormatAmount(Consumed(R"({"value": "10Gi"})", nullptr).amount), "10Gi");
  auto bad = ConsumedCapacity(Json::parse(R"({"value": "lots"})"), std::nullopt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("capacity.value: \"lots\""), std::string::npos) << bad.error();
}

TEST(ConsumedCapacityTest, FormatsAsKubernetesDoes) {
  EXPECT_EQ(FormatAmount(*ParseAmount("1024Mi")), "1Gi");
  EXPECT_EQ(FormatAmount(*ParseAmount("1536")), "1536");
  EXPECT_EQ(FormatAmount(*ParseAmount("1000")), "1k");
  EXPECT_EQ(FormatAmount(*ParseAmount("1.5")), "1500m");
  EXPECT_EQ(FormatAmount(*ParseAmount("0")), "0");
  EXPECT_EQ(FormatAmount(*ParseAmount("1e-9")), "1n");
  EXPECT_FALSE(ParseAmount("1e-10").ok());  // finer than Kubernetes keeps
}

// --- shares ----------------------------------------------------------------------------------

TEST_F(AllocatorTest, TwoSharesOfOneGpuAndTheThirdDoesNotFitOnMemory) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  auto first = Fit(a, "node-1", {GpuClaim("a", "3000Mi", "30")});
  auto second = Fit(a, "node-1", {GpuClaim("b", "3000Mi", "30")});
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0], Json::parse(R"({"devices": {"results": [{"request": "gpu",
      "driver": "hami-core-gpu.project-hami.io", "pool": "node-1", "device": "hami-gpu-0",
      "shareID": "00000000-0000-4000-8000-000000000001",
      "consumedCapacity": {"memory": "3000Mi", "cores": "30"}}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
          {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}})"));
  EXPECT_EQ(second[0]["devices"]["results"][0]["shareID"], "00000000-0000-4000-8000-000000000002");
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("c", "36000Mi", "30")}),
                  "claim default/c request \"gpu\": hami-gpu-0: memory: wants 36000Mi "
                  "(36000Mi after requestPolicy), 34960Mi of 40Gi free"));
}

TEST_F(AllocatorTest, CoresRunOut) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  for (const char* name : {"a", "b", "c"}) Fit(a, "node-1", {GpuClaim(name, "1000Mi", "30")});
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("d", "1000Mi", "30")}),
                  "claim default/d request \"gpu\": hami-gpu-0: cores: wants 30 "
                  "(30 after requestPolicy), 10 of 100 free"));
}

TEST_F(AllocatorTest, RequestsRoundUpByStepAndValidValues) {
  Json gpu = Gpu(0);
  gpu["capacity"]["slots"] = Json::parse(
      R"({"value": "8", "requestPolicy": {"default": "1", "validValues": ["1", "2", "4"]}})");
  inventory_.slices = {Slice("node-1", Json::array({gpu}))};
  Allocator a = Make();
  Json claim = GpuClaim("a", "1000000000", "30");
  claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["slots"] = "3";
  auto out = Fit(a, "node-1", {claim});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["devices"]["results"][0]["consumedCapacity"],
            Json::parse(R"({"memory": "954Mi", "cores": "30", "slots": "4"})"));
  claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["slots"] = "5";
  EXPECT_TRUE(Has(Fail(a, "node-1", {claim}),
                  "claim default/a request \"gpu\": hami-gpu-0: slots: wants 5 (5 after "
                  "requestPolicy): not one of the requestPolicy's validValues (1, 2, 4)"));
}

TEST_F(AllocatorTest, CapacityNotRequestedTakesTheDefault) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  auto out = Fit(a, "node-1", {GpuClaim("a", "3000Mi", "")});
  EXPECT_EQ(out[0]["devices"]["results"][0]["consumedCapacity"],
            Json::parse(R"({"memory": "3000Mi", "cores": "100"})"));
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("b", "3000Mi", "")}),
                  "claim default/b request \"gpu\": hami-gpu-0: cores: wants 100 (not requested: "
                  "the default), 0 of 100 free"));
}

// --- dedicated devices -----------------------------------------------------------------------

TEST_F(AllocatorTest, DedicatedDeviceIsExclusiveAndItsCapacityAMinimum) {
  Json gpu = Gpu(0);
  gpu.erase("allowMultipleAllocations");
  gpu["capacity"] = {{"memory", {{"value", "40Gi"}}}};
  inventory_.slices = {Slice("node-1", Json::array({gpu}))};
  Allocator a = Make();
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("big", "50Gi", "")}),
                  "claim default/big request \"gpu\": hami-gpu-0: memory: wants 50Gi, the device "
                  "has 40Gi"));
  auto out = Fit(a, "node-1", {GpuClaim("a", "10Gi", "")});
  const Json& result = out[0]["devices"]["results"][0];
  EXPECT_EQ(result["device"], "hami-gpu-0");
  EXPECT_FALSE(result.contains("shareID"));
  EXPECT_FALSE(result.contains("consumedCapacity"));
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("b", "1Gi", "")}),
                  "claim default/b request \"gpu\": hami-gpu-0: allocated to another claim"));
  // Two requests of one pod do not get it twice either.
  a.Forget(out[0]);
  Fail(a, "node-1", {GpuClaim("c", "1Gi", ""), GpuClaim("d", "1Gi", "")});
}

TEST_F(AllocatorTest, ADedicatedAllocationBlocksSharingUntilItEnds) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Json whole = GpuClaim("old", "", "");
  whole["status"]["allocation"] = Json::parse(R"({"devices": {"results": [{"request": "gpu",
      "driver": "hami-core-gpu.project-hami.io", "pool": "node-1", "device": "hami-gpu-0"}]}})");
  inventory_.allocated_claims = {whole};
  Allocator a = Make();
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("a", "1Gi", "10")}),
                  "claim default/a request \"gpu\": hami-gpu-0: allocated whole to a claim; it is "
                  "shared only when that allocation ends"));
  a.Forget(whole["status"]["allocation"]);
  Fit(a, "node-1", {GpuClaim("a", "1Gi", "10")});
}

// --- count, constraints, All, firstAvailable -------------------------------------------------

TEST_F(AllocatorTest, CountTwoWithDistinctUuidTakesTwoGpus) {
  inventory_.slices = {Slice("node-2", Json::array({Gpu(0), Gpu(1)})),
                       Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  auto out = Fit(a, "node-2", {GpuClaim("a", "3000Mi", "30", 2)});
  const Json& results = out[0]["devices"]["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["device"], "hami-gpu-0");
  EXPECT_EQ(results[1]["device"], "hami-gpu-1");
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("b", "3000Mi", "30", 2)}),
                  "claim default/b request \"gpu\": wants 2 devices: hami-gpu-0 fits alone, not "
                  "together with the pod's other requests and the constraints distinctAttribute "
                  "hami-core-gpu.project-hami.io/uuid"));
}

TEST_F(AllocatorTest, TheExplanationPointsAtTheRequestNoDeviceServes) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  const std::vector<std::string> details =
      Fail(a, "node-1", {GpuClaim("ok", "1Gi", "10"), GpuClaim("big", "50Gi", "10")});
  EXPECT_EQ(details, std::vector<std::string>({"claim default/big request \"gpu\": hami-gpu-0: "
                                               "memory: wants 50Gi (50Gi after requestPolicy): "
                                               "above the requestPolicy's validRange.max 40Gi"}));
  // Both fit alone, not together: each request says so.
  EXPECT_EQ(Fail(a, "node-1", {GpuClaim("x", "30Gi", "10"), GpuClaim("y", "30Gi", "10")}).size(),
            2u);
}

TEST_F(AllocatorTest, CountTwoWithoutConstraintMayShareOneGpuTwice) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  Json claim = Claim("a", Json::array({GpuRequest("3000Mi", "30", 2)}));
  auto out = Fit(a, "node-1", {claim});
  const Json& results = out[0]["devices"]["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["device"], "hami-gpu-0");
  EXPECT_EQ(results[1]["device"], "hami-gpu-0");
  EXPECT_NE(results[0]["shareID"], results[1]["shareID"]);
  // Both shares count: 60 cores are taken.
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("b", "1Gi", "50")}),
                  "claim default/b request \"gpu\": hami-gpu-0: cores: wants 50 (50 after "
                  "requestPolicy), 40 of 100 free"));
}

TEST_F(AllocatorTest, MatchAttributeKeepsDevicesTogether) {
  Json g1 = Gpu(1);
  g1["attributes"]["productName"]["string"] = "Tesla T4";
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0), g1, Gpu(2)}))};
  Allocator a = Make();
  Json claim = GpuClaim("a", "30Gi", "", 2);
  claim["spec"]["devices"]["constraints"].push_back(
      {{"matchAttribute", std::string(kDriver) + "/productName"}});
  // hami-gpu-0 then hami-gpu-1 breaks matchAttribute; the search moves on to hami-gpu-2.
  auto out = Fit(a, "node-1", {claim});
  EXPECT_EQ(out[0]["devices"]["results"][1]["device"], "hami-gpu-2");
}

TEST_F(AllocatorTest, AllocationModeAllTakesEveryMatchingDevice) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0), Gpu(1)}))};
  Allocator a = Make();
  Json request = GpuRequest("1Gi", "10");
  request["exactly"].erase("count");
  request["exactly"]["allocationMode"] = "All";
  auto out = Fit(a, "node-1", {Claim("a", Json::array({request}))});
  const Json& results = out[0]["devices"]["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1]["device"], "hami-gpu-1");
}

TEST_F(AllocatorTest, FirstAvailablePicksTheFirstSubrequestThatFits) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  Json big = GpuRequest("80Gi", "")["exactly"];
  big["name"] = "big";
  Json small = GpuRequest("3000Mi", "30")["exactly"];
  small["name"] = "small";
  Json request = {{"name", "gpu"}, {"firstAvailable", Json::array({big, small})}};
  auto out = Fit(a, "node-1", {Claim("a", Json::array({request}))});
  EXPECT_EQ(out[0]["devices"]["results"][0]["request"], "gpu/small");
  EXPECT_EQ(out[0]["devices"]["results"][0]["consumedCapacity"]["memory"], "3000Mi");
}

TEST_F(AllocatorTest, APodsClaimsAreAllocatedTogetherWithBacktracking) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0), Gpu(1)}))};
  Allocator a = Make();
  Json pinned = GpuClaim("pinned", "30Gi", "");
  pinned["spec"]["devices"]["requests"][0]["exactly"]["selectors"].push_back(
      {{"cel",
        {{"expression",
          std::string("device.attributes[\"") + kDriver + "\"].uuid == \"GPU-0\""}}}});
  // "any" first takes hami-gpu-0; "pinned" then fits only if "any" moves to hami-gpu-1.
  auto out = Fit(a, "node-1", {GpuClaim("any", "30Gi", ""), pinned});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["devices"]["results"][0]["device"], "hami-gpu-1");
  EXPECT_EQ(out[1]["devices"]["results"][0]["device"], "hami-gpu-0");
}

// --- counters (MIG) ---------------------------------------------------------------------------

Json CounterSlice(const std::string& node) {
  Json counters = Json::object();
  for (int i = 0; i < 8; ++i) counters["memory-slice-" + std::to_string(i)] = {{"value", "1"}};
  Json s = Slice(node, Json::array(), 1, 2, 0);
  s["spec"].erase("devices");
  s["spec"]["sharedCounters"] =
      Json::array({{{"name", "hami-gpu-0-counters"}, {"counters", counters}}});
  return s;
}

Json Mig(const std::string& profile, int start, int size) {
  Json counters = Json::object();
  for (int i = start; i < start + size; ++i) {
    counters["memory-slice-" + std::to_string(i)] = {{"value", "1"}};
  }
  return {{"name", "hami-gpu-0-mig-" + profile + "-" + std::to_string(start)},
          {"attributes", {{"type", {{"string", "hami-mig"}}}, {"profile", {{"string", profile}}}}},
          {"capacity", {{"memory", {{"value", "20Gi"}}}, {"cores", {{"value", "42"}}}}},
          {"consumesCounters",
           Json::array({{{"counterSet", "hami-gpu-0-counters"}, {"counters", counters}}})}};
}

// `type` first: a GPU has no `profile`, and reading it would be a CEL runtime error.
std::string MigSelector(const std::string& profile) {
  const std::string attrs = std::string("device.attributes[\"") + kDriver + "\"]";
  return attrs + ".type == \"hami-mig\" && " + attrs + ".profile == \"" + profile + "\"";
}

Json MigClaim(const std::string& name, const std::string& profile) {
  Json request = {
      {"name", "mig"},
      {"exactly",
       {{"deviceClassName", kDriver},
        {"selectors", Json::array({{{"cel", {{"expression", MigSelector(profile)}}}}})}}}};
  return Claim(name, Json::array({request}));
}

TEST_F(AllocatorTest, OverlappingMigPlacementsCannotBothBeAllocated) {
  inventory_.slices = {
      CounterSlice("node-1"),
      Slice("node-1", Json::array({Mig("4g-20gb", 0, 4), Mig("7g-40gb", 0, 8)}), 1, 2, 1)};
  Allocator a = Make();
  auto out = Fit(a, "node-1", {MigClaim("a", "4g-20gb")});
  EXPECT_EQ(out[0]["devices"]["results"][0]["device"], "hami-gpu-0-mig-4g-20gb-0");
  EXPECT_TRUE(Has(Fail(a, "node-1", {MigClaim("b", "7g-40gb")}),
                  "claim default/b request \"mig\": hami-gpu-0-mig-7g-40gb-0: counter "
                  "hami-gpu-0-counters/memory-slice-0: wants 1, 0 of 1 free"));
  // Nor within one pod.
  a.Forget(out[0]);
  Fail(a, "node-1", {MigClaim("c", "4g-20gb"), MigClaim("d", "7g-40gb")});
  Fit(a, "node-1", {MigClaim("e", "7g-40gb")});
}

TEST_F(AllocatorTest, ASharedGpuDrawsItsCountersOnceAndExcludesItsMigDevices) {
  Json gpu = Gpu(0);
  Json all = Json::object();
  for (int i = 0; i < 8; ++i) all["memory-slice-" + std::to_string(i)] = {{"value", "1"}};
  gpu["consumesCounters"] =
      Json::array({{{"counterSet", "hami-gpu-0-counters"}, {"counters", all}}});
  inventory_.slices = {CounterSlice("node-1"),
                       Slice("node-1", Json::array({gpu, Mig("4g-20gb", 4, 4)}), 1, 2, 1)};
  Allocator a = Make();
  Fit(a, "node-1", {GpuClaim("a", "3000Mi", "30")});
  Fit(a, "node-1", {GpuClaim("b", "3000Mi", "30")});  // the second share draws nothing more
  EXPECT_TRUE(Has(Fail(a, "node-1", {MigClaim("c", "4g-20gb")}),
                  "claim default/c request \"mig\": hami-gpu-0-mig-4g-20gb-4: counter "
                  "hami-gpu-0-counters/memory-slice-4: wants 1, 0 of 1 free"));
}

// --- taints ----------------------------------------------------------------------------------

TEST_F(AllocatorTest, TaintsNeedATolerationOfTheRequest) {
  Json gpu = Gpu(0);
  gpu["taints"] = Json::parse(R"([{"key": "hami.io/unhealthy", "effect": "NoSchedule"}])");
  Json soft = Gpu(1);
  soft["taints"] = Json::parse(R"([{"key": "x", "value": "y", "effect": "None"}])");
  inventory_.slices = {Slice("node-1", Json::array({gpu})), Slice("node-2", Json::array({soft}))};
  Allocator a = Make();
  EXPECT_TRUE(
      Has(Fail(a, "node-1", {GpuClaim("a", "1Gi", "10")}),
          "claim default/a request \"gpu\": hami-gpu-0: taint hami.io/unhealthy=:NoSchedule "
          "is not tolerated"));
  Json wrong = GpuClaim("b", "1Gi", "10");
  wrong["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = Json::parse(
      R"([{"key": "hami.io/unhealthy", "operator": "Equal", "value": "yes"},
          {"key": "hami.io/unhealthy", "operator": "Exists", "effect": "NoExecute"}])");
  Fail(a, "node-1", {wrong});
  Json tolerating = GpuClaim("c", "1Gi", "10");
  const Json toleration = Json::parse(R"([{"key": "hami.io/unhealthy", "operator": "Exists"}])");
  tolerating["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = toleration;
  auto out = Fit(a, "node-1", {tolerating});
  EXPECT_EQ(out[0]["devices"]["results"][0]["tolerations"], toleration);
  Fit(a, "node-2", {GpuClaim("d", "1Gi", "10")});  // effect None does not keep claims off
}

// --- what is allocated -----------------------------------------------------------------------

TEST_F(AllocatorTest, AllocatedClaimsConsumeAndAssumeForgetTrackTheRest) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Json old = GpuClaim("old", "38Gi", "10");
  old["status"]["allocation"] = Json::parse(R"({"devices": {"results": [{"request": "gpu",
      "driver": "hami-core-gpu.project-hami.io", "pool": "node-1", "device": "hami-gpu-0",
      "shareID": "3f1c6a9e-0000-4000-8000-000000000001",
      "consumedCapacity": {"memory": "38Gi", "cores": "10"}}]}})");
  inventory_.allocated_claims = {old};
  Allocator a = Make();
  EXPECT_TRUE(Has(Fail(a, "node-1", {GpuClaim("a", "3000Mi", "10")}),
                  "claim default/a request \"gpu\": hami-gpu-0: memory: wants 3000Mi (3000Mi "
                  "after requestPolicy), 2Gi of 40Gi free"));
  auto out = Fit(a, "node-1", {GpuClaim("b", "2Gi", "10")});
  Fail(a, "node-1", {GpuClaim("c", "1Mi", "10")});
  a.Forget(out[0]);
  Fit(a, "node-1", {GpuClaim("c", "1Mi", "10")});
}

TEST_F(AllocatorTest, OnlyTheNodesSlicesAtTheNewestGenerationCount) {
  Json shared = Slice("elsewhere", Json::array({Gpu(7)}));
  shared["spec"].erase("nodeName");
  shared["spec"]["nodeSelector"] = Json::parse(R"({"nodeSelectorTerms": [{"matchExpressions": [
      {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-9"]}]}]})");
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}), 1),
                       Slice("node-1", Json::array({Gpu(1)}), 2), shared};
  Allocator a = Make();
  auto out = Fit(a, "node-1", {GpuClaim("a", "1Gi", "10")});
  EXPECT_EQ(out[0]["devices"]["results"][0]["device"], "hami-gpu-1");
  auto selected = Fit(a, "node-9", {GpuClaim("b", "1Gi", "10")});
  EXPECT_EQ(selected[0]["devices"]["results"][0]["device"], "hami-gpu-7");
  EXPECT_EQ(selected[0]["nodeSelector"], shared["spec"]["nodeSelector"]);
  EXPECT_TRUE(Has(Fail(a, "node-3", {GpuClaim("c", "1Gi", "10")}),
                  "claim default/c request \"gpu\": no device of class "
                  "\"hami-core-gpu.project-hami.io\" on the node"));
  // A pool the driver is still writing is not used.
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}), 3, 2)};
  Allocator partial = Make();
  EXPECT_TRUE(Has(Fail(partial, "node-1", {GpuClaim("d", "1Gi", "10")}),
                  "pool hami-core-gpu.project-hami.io/node-1 is being updated (1 of 2 slices at "
                  "generation 3): its devices are not used"));
}

TEST_F(AllocatorTest, ConfigOfTheClassAndTheClaimIsCopied) {
  inventory_.device_classes[kDriver]["spec"]["config"] =
      Json::parse(R"([{"opaque": {"driver": "hami-core-gpu.project-hami.io",
          "parameters": {"from": "class"}}}])");
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  Json claim = Claim("a", Json::array({GpuRequest("1Gi", "10"), GpuRequest("1Gi", "10")}));
  claim["spec"]["devices"]["requests"][1]["name"] = "gpu2";
  claim["spec"]["devices"]["config"] = Json::parse(R"([{"requests": ["gpu2"], "opaque": {
      "driver": "hami-core-gpu.project-hami.io", "parameters": {"from": "claim"}}}])");
  auto out = Fit(a, "node-1", {claim});
  EXPECT_EQ(out[0]["devices"]["config"], Json::parse(R"([
      {"source": "FromClass", "opaque": {"driver": "hami-core-gpu.project-hami.io",
          "parameters": {"from": "class"}}},
      {"source": "FromClaim", "requests": ["gpu2"], "opaque": {
          "driver": "hami-core-gpu.project-hami.io", "parameters": {"from": "claim"}}}])"));
}

TEST_F(AllocatorTest, SelectorsThatFailAreNamed) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0)}))};
  Allocator a = Make();
  Json claim = GpuClaim("a", "1Gi", "10");
  const std::string uuid_in =
      std::string("device.attributes[\"") + kDriver + "\"].uuid in [\"GPU-a\"]";
  claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"].push_back(
      {{"cel", {{"expression", uuid_in}}}});
  EXPECT_TRUE(Has(Fail(a, "node-1", {claim}),
                  "claim default/a request \"gpu\": hami-gpu-0: "
                  "selector " +
                      uuid_in + " is false"));
  inventory_.device_classes["other"] = Class();
  inventory_.device_classes["other"]["spec"]["selectors"][0]["cel"]["expression"] =
      "device.driver == \"x\"";
  Allocator b = Make();
  Json other = GpuClaim("b", "1Gi", "10");
  other["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "other";
  EXPECT_TRUE(Has(Fail(b, "node-1", {other}),
                  "claim default/b request \"gpu\": hami-gpu-0: class \"other\" selector "
                  "device.driver == \"x\" is false"));
  // A runtime error (an attribute the device lacks) is the claim's failure on the node.
  Json missing = GpuClaim("m", "1Gi", "10");
  missing["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"] =
      std::string("device.attributes[\"") + kDriver + "\"].profile == \"x\"";
  auto r = b.AllocateOnNode(Node("node-1"), {missing});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->fits);
  ASSERT_EQ(r->failure.details.size(), 1u);
  EXPECT_NE(r->failure.details[0].find("claim default/m request \"gpu\": hami-gpu-0: selector #0 "
                                       "device.attributes[\"hami-core-gpu.project-hami.io\"]."
                                       "profile == \"x\": CEL runtime error: "),
            std::string::npos)
      << r->failure.details[0];
  other["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "missing";
  EXPECT_TRUE(Has(Fail(b, "node-1", {other}),
                  "claim default/b request \"gpu\": device class \"missing\" not found"));
}

TEST_F(AllocatorTest, MalformedClaimsAreErrors) {
  Allocator a = Make();
  auto r = a.AllocateOnNode(Node("n"), {Json::parse(R"({"metadata": {"name": "x",
      "namespace": "default"}, "spec": {}})")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "ResourceClaim default/x: spec.devices.requests: missing");
  Json claim = GpuClaim("y", "lots", "");
  r = a.AllocateOnNode(Node("n"), {claim});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("spec.devices.requests[0].exactly.capacity.requests.memory: \"lots\""),
            std::string::npos)
      << r.error();
}

TEST_F(AllocatorTest, TheAllocationPassesTheApiServersValidation) {
  inventory_.slices = {Slice("node-1", Json::array({Gpu(0), Gpu(1)}))};
  Allocator a = Make();
  Json claim = GpuClaim("a", "3000Mi", "30", 2);
  sim::DefaultDeviceClaimSpec(claim["spec"]);
  claim["metadata"]["uid"] = "u-1";
  auto out = Fit(a, "node-1", {claim});
  ASSERT_EQ(out.size(), 1u);
  Json allocated = claim;
  allocated["status"]["allocation"] = out[0];
  const sim::FieldErrors errors = sim::ValidateResourceClaimStatus(allocated, claim);
  EXPECT_TRUE(errors.empty()) << sim::JoinFieldErrors(errors);
}

}  // namespace
}  // namespace hami::dra
