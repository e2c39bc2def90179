// kube-apiserver's resource.k8s.io/v1 validation in the sim API server (dra_validation.h): one
// test per rule, each refused write named by the field path and value kube-apiserver prints;
// then the store: 422 on create and update, defaults, metadata.generation, a claim's status, and
// counter sets looked up across the slices of a pool.
#include "sim/apiserver/dra_validation.h"

#include <gtest/gtest.h>

#include "sim/apiserver/store.h"

namespace hami::sim {
namespace {

// Whether some error of `errors` contains `want` (a field path and what follows it).
::testing::AssertionResult Rejects(const FieldErrors& errors, const std::string& want) {
  for (const auto& e : errors) {
    if (e.find(want) != std::string::npos) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error contains \"" << want << "\"; got "
                                       << (errors.empty() ? "none" : JoinFieldErrors(errors));
}

::testing::AssertionResult Valid(const FieldErrors& errors) {
  if (errors.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << JoinFieldErrors(errors);
}

// One GPU as HAMi's DRA driver publishes it: shareable by memory and cores.
Json HamiDevice(const std::string& name) {
  return Json::parse(R"({
    "name": ")" + name +
                     R"(",
    "allowMultipleAllocations": true,
    "attributes": {
      "type": {"string": "hami-gpu"},
      "minor": {"int": 0},
      "productName": {"string": "NVIDIA A100-SXM4-80GB"},
      "driverVersion": {"version": "550.54.15"},
      "gpu.example.com/healthy": {"bool": true}
    },
    "capacity": {
      "memory": {"value": "80Gi", "requestPolicy": {"default": "80Gi",
                 "validRange": {"min": "1Mi", "max": "80Gi", "step": "1Mi"}}},
      "cores": {"value": "100", "requestPolicy": {"default": "100",
                "validRange": {"min": "0", "max": "100", "step": "1"}}}
    }
  })");
}

Json Slice(const std::string& name = "node1-gpus") {
  Json slice = Json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "spec": {
      "driver": "hami-core-gpu.project-hami.io",
      "nodeName": "node1",
      "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1},
      "devices": []
    }
  })");
  slice["metadata"]["name"] = name;
  slice["spec"]["devices"].push_back(HamiDevice("hami-gpu-0"));
  return slice;
}

// The MIG layout of KEP-4815: the counters in one slice, the partitions in another.
Json CounterSlice() {
  Json slice = Slice("node1-counters");
  slice["spec"].erase("devices");
  slice["spec"]["pool"]["resourceSliceCount"] = 2;
  slice["spec"]["sharedCounters"] = Json::parse(R"([
    {"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"},
                                           "multiprocessors": {"value": "98"}}}
  ])");
  return slice;
}

Json MigDevice(const std::string& name) {
  return Json::parse(R"({"name": ")" + name + R"(",
    "attributes": {"profile": {"string": "1g.10gb"}},
    "capacity": {"memory": {"value": "10Gi"}},
    "consumesCounters": [{"counterSet": "gpu-0-counters",
                          "counters": {"memory": {"value": "10Gi"},
                                       "multiprocessors": {"value": "14"}}}]})");
}

Json MigSlice() {
  Json slice = Slice("node1-mig");
  slice["spec"]["pool"]["resourceSliceCount"] = 2;
  slice["spec"]["devices"] = Json::array({MigDevice("gpu-0-mig-1g-0")});
  return slice;
}

const CounterSets kPool = {{"gpu-0-counters", {"memory", "multiprocessors"}}};

FieldErrors SliceErrors(const Json& slice, const CounterSets& pool = {}) {
  return ValidateResourceSlice(slice, nullptr, pool);
}

Json& Dev0(Json& slice) { return slice["spec"]["devices"][0]; }
Json& Memory(Json& slice) { return Dev0(slice)["capacity"]["memory"]; }
Json& Range(Json& slice) { return Memory(slice)["requestPolicy"]["validRange"]; }

// --- ResourceSlice ---------------------------------------------------------------------------

TEST(DraSliceTest, HamiAndMigSlicesAreValid) {
  EXPECT_TRUE(Valid(SliceErrors(Slice())));
  EXPECT_TRUE(Valid(SliceErrors(CounterSlice())));
  EXPECT_TRUE(Valid(SliceErrors(MigSlice(), kPool)));
}

TEST(DraSliceTest, DriverIsRequiredAndADnsSubdomain) {
  Json s = Slice();
  s["spec"].erase("driver");
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.driver: Required value"));
  s["spec"]["driver"] = "bad_driver!";
  EXPECT_TRUE(
      Rejects(SliceErrors(s), "spec.driver: Invalid value: \"bad_driver!\": a lowercase RFC 1123"));
  s["spec"]["driver"] = std::string(64, 'a');
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.driver: Too long: may not be more than 63 bytes"));
}

TEST(DraSliceTest, PoolNameGenerationAndSliceCount) {
  Json s = Slice();
  s["spec"]["pool"].erase("name");
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.pool.name: Required value"));
  s["spec"]["pool"]["name"] = "node1/Bad";
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.pool.name: Invalid value: \"node1/Bad\""));
  s = Slice();
  s["spec"]["pool"].erase("resourceSliceCount");
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"));
  s["spec"]["pool"]["resourceSliceCount"] = 0;
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.pool.resourceSliceCount: Invalid value: 0"));
  s = Slice();
  s["spec"]["pool"]["generation"] = -1;
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.pool.generation: Invalid value: -1: must be greater "
                      "than or equal to zero"));
  s["spec"]["pool"]["generation"] = "1";
  EXPECT_TRUE(
      Rejects(SliceErrors(s), "spec.pool.generation: Invalid value: \"1\": must be an integer"));
  s = Slice();
  s["spec"].erase("pool");
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.pool.name: Required value"));
}

TEST(DraSliceTest, ExactlyOneNodeSelection) {
  Json s = Slice();
  s["spec"].erase("nodeName");
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec: Required value: exactly one of `nodeName`, "
                      "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
                      "required"));
  s["spec"]["allNodes"] = true;
  EXPECT_TRUE(Valid(SliceErrors(s)));
  s["spec"]["nodeName"] = "node1";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly "
                      "one of"));
  s = Slice();
  s["spec"]["nodeName"] = "";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.nodeName: Invalid value: \"\": must be either unset or "
                      "set to a non-empty string"));
  s = Slice();
  s["spec"].erase("nodeName");
  s["spec"]["allNodes"] = false;
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.allNodes: Invalid value: false"));
  s = Slice();
  s["spec"].erase("nodeName");
  s["spec"]["nodeSelector"] = Json::parse(R"({"nodeSelectorTerms": [{}, {}]})");
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.nodeSelector.nodeSelectorTerms: Invalid value: "));
  s["spec"]["nodeSelector"]["nodeSelectorTerms"].erase(1);
  EXPECT_TRUE(Valid(SliceErrors(s)));
}

TEST(DraSliceTest, PerDeviceNodeSelection) {
  Json s = Slice();
  s["spec"].erase("nodeName");
  s["spec"]["perDeviceNodeSelection"] = true;
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0]: Required value: exactly one of `nodeName`, "
                      "`nodeSelector`, or `allNodes` is required"));
  Dev0(s)["nodeName"] = "node1";
  EXPECT_TRUE(Valid(SliceErrors(s)));
  s = Slice();
  Dev0(s)["nodeName"] = "node1";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0]: Invalid value: null: `nodeName`, "
                      "`nodeSelector` and `allNodes` can only be set if "
                      "`perDeviceNodeSelection` is set to true"));
}

TEST(DraSliceTest, AtMost128DevicesOr64WithCounters) {
  Json s = Slice();
  s["spec"]["devices"] = Json::array();
  for (int i = 0; i < 128; ++i)
    s["spec"]["devices"].push_back(HamiDevice("gpu-" + std::to_string(i)));
  EXPECT_TRUE(Valid(SliceErrors(s)));
  s["spec"]["devices"].push_back(HamiDevice("gpu-128"));
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.devices: Too many: 129: must have at most 128 items"));
  Json m = MigSlice();
  m["spec"]["devices"] = Json::array();
  for (int i = 0; i < 65; ++i)
    m["spec"]["devices"].push_back(MigDevice("mig-" + std::to_string(i)));
  EXPECT_TRUE(
      Rejects(SliceErrors(m, kPool), "spec.devices: Too many: 65: must have at most 64 items"));
}

TEST(DraSliceTest, DeviceNamesAreUniqueDnsLabels) {
  Json s = Slice();
  s["spec"]["devices"].push_back(HamiDevice("hami-gpu-0"));
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.devices[1]: Duplicate value: \"hami-gpu-0\""));
  s = Slice();
  Dev0(s)["name"] = "GPU_0";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].name: Invalid value: \"GPU_0\": a lowercase "
                      "RFC 1123 label"));
  Dev0(s).erase("name");
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.devices[0].name: Required value"));
}

TEST(DraSliceTest, AtMost32AttributesAndCapacities) {
  Json s = Slice();
  Json& attrs = Dev0(s)["attributes"];  // 5 attributes + 2 capacities
  for (int i = 0; i < 25; ++i) attrs["a" + std::to_string(i)] = Json{{"int", i}};
  EXPECT_TRUE(Valid(SliceErrors(s)));
  attrs["one_more"] = Json{{"bool", true}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0]: Invalid value: 33: the total number of "
                      "attributes and capacities must not exceed 32"));
}

TEST(DraSliceTest, AttributeHasExactlyOneTypedValue) {
  Json s = Slice();
  Dev0(s)["attributes"]["type"] = Json::object();
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].attributes[type]: Invalid value: \"\": "
                      "exactly one value must be specified"));
  Dev0(s)["attributes"]["type"] = Json{{"string", "a"}, {"int", 1}};
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.devices[0].attributes[type]: Invalid value: {"));
  s = Slice();
  Dev0(s)["attributes"]["minor"] = Json{{"int", "0"}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].attributes[minor].int: Invalid value: "
                      "\"0\": must be an integer"));
  Dev0(s)["attributes"]["minor"] = Json{{"bool", 1}};
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.devices[0].attributes[minor].bool: Invalid value: 1"));
  s = Slice();
  Dev0(s)["attributes"]["driverVersion"] = Json{{"version", "550.54"}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].attributes[driverVersion].version: Invalid "
                      "value: \"550.54\": must be a string compatible with semver"));
  Dev0(s)["attributes"]["driverVersion"] = Json{{"version", "1.2.3-rc.1+build.5"}};
  EXPECT_TRUE(Valid(SliceErrors(s)));
  Dev0(s)["attributes"]["productName"] = Json{{"string", std::string(65, 'x')}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].attributes[productName].string: Too long: "
                      "may not be more than 64 bytes"));
}

TEST(DraSliceTest, AttributeAndCapacityNamesAreQualified) {
  Json s = Slice();
  Dev0(s)["attributes"]["bad-name"] = Json{{"int", 1}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].attributes: Invalid value: \"bad-name\": a "
                      "valid C identifier"));
  s = Slice();
  Dev0(s)["capacity"]["a/b/c"] = Json{{"value", "1"}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].capacity: Invalid value: \"a/b/c\": must "
                      "not contain more than one slash"));
}

TEST(DraSliceTest, CapacityValueIsAQuantity) {
  Json s = Slice();
  Memory(s)["value"] = "80GB";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].capacity[memory].value: Invalid value: "
                      "\"80GB\": must be a quantity"));
  Memory(s).erase("value");
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.devices[0].capacity[memory].value: Required value"));
  Memory(s)["value"] = 85899345920;  // a JSON number is a quantity too
  EXPECT_TRUE(Valid(SliceErrors(s)));
}

TEST(DraSliceTest, RequestPolicyNeedsAllowMultipleAllocations) {
  Json s = Slice();
  Dev0(s).erase("allowMultipleAllocations");
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].capacity[memory].requestPolicy: Forbidden: "
                      "allowMultipleAllocations must be true"));
  Dev0(s)["allowMultipleAllocations"] = false;
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.devices[0].capacity[cores].requestPolicy: Forbidden"));
}

TEST(DraSliceTest, RequestPolicyValidValues) {
  Json s = Slice();
  Memory(s)["requestPolicy"] =
      Json{{"default", "20Gi"}, {"validValues", {"10Gi", "20Gi", "40Gi", "80Gi"}}};
  EXPECT_TRUE(Valid(SliceErrors(s)));
  Memory(s)["requestPolicy"]["validValues"] = {"10Gi", "40Gi", "20Gi"};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].capacity[memory].requestPolicy."
                      "validValues[2]: Invalid value: \"20Gi\": values must be "
                      "sorted in ascending order"));
  Memory(s)["requestPolicy"]["validValues"] = {"10Gi", "40Gi"};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validValues: Invalid value: \"20Gi\": default "
                      "value is not valid according to the requestPolicy"));
  Memory(s)["requestPolicy"]["validValues"] = {"20Gi", "160Gi"};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validValues[1]: Invalid value: \"160Gi\": "
                      "option is larger than capacity value: 80Gi"));
  Memory(s)["requestPolicy"]["validValues"] = {"20Gi", "20480Mi"};
  EXPECT_TRUE(
      Rejects(SliceErrors(s), "requestPolicy.validValues[1]: Duplicate value: \"20480Mi\""));
  Json eleven = Json::array();
  for (int i = 1; i <= 11; ++i) eleven.push_back(std::to_string(i) + "Gi");
  Memory(s)["requestPolicy"]["validValues"] = eleven;
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validValues: Too many: 11: must have at most "
                      "10 items"));
  Memory(s)["requestPolicy"] = Json{{"validValues", {"10Gi"}}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.default: Required value: required when "
                      "validValues is defined"));
  Memory(s)["requestPolicy"] =
      Json{{"default", "10Gi"}, {"validValues", {"10Gi"}}, {"validRange", {{"min", "1Gi"}}}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].capacity[memory].requestPolicy: Forbidden: "
                      "exactly one policy can be specified"));
}

TEST(DraSliceTest, RequestPolicyValidRangeBounds) {
  Json s = Slice();
  Range(s).erase("min");
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.min: Required value: required when "
                      "validRange is defined"));
  s = Slice();
  Range(s)["min"] = "2Gi";
  Range(s)["max"] = "1Gi";
  Memory(s)["requestPolicy"]["default"] = "1Gi";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.max: Invalid value: \"2Gi\": min is "
                      "larger than max: 1Gi"));
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.default: Invalid value: \"1Gi\": "
                      "default is less than min: 2Gi"));
  s = Slice();
  Range(s)["max"] = "160Gi";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.max: Invalid value: \"160Gi\": max "
                      "is larger than capacity value: 80Gi"));
  s = Slice();
  Range(s)["max"] = "40Gi";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.default: Invalid value: \"80Gi\": "
                      "default is more than max: 40Gi"));
  s = Slice();
  Range(s)["min"] = "100Gi";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.min: Invalid value: \"100Gi\": min "
                      "is larger than capacity value: 80Gi"));
  s = Slice();
  Memory(s)["requestPolicy"].erase("default");
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.default: Required value: required when "
                      "validRange is defined"));
}

TEST(DraSliceTest, RequestPolicyValidRangeStep) {
  Json s = Slice();
  Range(s)["step"] = "0";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.step: Invalid value: \"0\": must be "
                      "greater than zero"));
  s = Slice();
  Memory(s)["requestPolicy"]["default"] = "1500Ki";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.step: Invalid value: \"1500Ki\": "
                      "value is not a multiple of a given step (1Mi) from (1Mi)"));
  s = Slice();
  Range(s)["max"] = "79.5Gi";
  Memory(s)["requestPolicy"]["default"] = "1Mi";
  Range(s)["step"] = "1Gi";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.step: Invalid value: \"79.5Gi\": "
                      "value is not a multiple of a given step (1Gi) from (1Mi)"));
  s = Slice();
  Range(s)["step"] = "80Gi";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "requestPolicy.validRange.step: Invalid value: \"80Gi\": one "
                      "step \"85900394496\" is larger than capacity value: 80Gi"));
  // Fractional bounds are compared in milli-units (DRAFractionalCapacityRange).
  s = Slice();
  Json& cores = Dev0(s)["capacity"]["cores"]["requestPolicy"];
  cores =
      Json{{"default", "1.5"}, {"validRange", {{"min", "0.5"}, {"max", "100"}, {"step", "0.5"}}}};
  EXPECT_TRUE(Valid(SliceErrors(s)));
  cores["default"] = "1.25";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "capacity[cores].requestPolicy.validRange.step: Invalid value: "
                      "\"1.25\": value is not a multiple of a given step (0.5) from "
                      "(0.5)"));
  cores["validRange"]["step"] = "0.0001";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "capacity[cores].requestPolicy.validRange.step: Invalid value: "
                      "\"0.0001\": value cannot be represented as a milli value"));
}

TEST(DraSliceTest, SharedCountersOnlyInASliceWithoutDevices) {
  Json s = CounterSlice();
  s["spec"]["devices"] = Json::array({HamiDevice("hami-gpu-0")});
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec: Invalid value: \"\": only one of `sharedCounters` or "
                      "`devices` is allowed"));
}

TEST(DraSliceTest, SharedCounterLimitsAndNames) {
  Json s = CounterSlice();
  Json& sets = s["spec"]["sharedCounters"];
  for (int i = 1; i < 9; ++i) {
    sets.push_back(
        Json{{"name", "gpu-" + std::to_string(i)}, {"counters", {{"m", {{"value", "1"}}}}}});
  }
  EXPECT_TRUE(
      Rejects(SliceErrors(s), "spec.sharedCounters: Too many: 9: must have at most 8 items"));
  sets.erase(8);
  EXPECT_TRUE(Valid(SliceErrors(s)));
  sets[1]["name"] = "gpu-0-counters";
  EXPECT_TRUE(
      Rejects(SliceErrors(s), "spec.sharedCounters[1]: Duplicate value: \"gpu-0-counters\""));
  s = CounterSlice();
  Json& counters = s["spec"]["sharedCounters"][0]["counters"];
  for (int i = 0; i < 31; ++i) counters["c" + std::to_string(i)] = {{"value", "1"}};
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.sharedCounters[0].counters: Too many: 33: must have at "
                      "most 32 items"));
  s = CounterSlice();
  s["spec"]["sharedCounters"][0]["name"] = "GPU0";
  s["spec"]["sharedCounters"][0]["counters"]["memory"]["value"] = "lots";
  FieldErrors errors = SliceErrors(s);
  EXPECT_TRUE(Rejects(errors, "spec.sharedCounters[0].name: Invalid value: \"GPU0\""));
  EXPECT_TRUE(Rejects(errors,
                      "spec.sharedCounters[0].counters[memory].value: Invalid value: "
                      "\"lots\": must be a quantity"));
  s["spec"]["sharedCounters"][0].erase("counters");
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.sharedCounters[0].counters: Required value"));
}

TEST(DraSliceTest, ConsumesCountersNamesACounterSetOfThePool) {
  EXPECT_TRUE(Rejects(SliceErrors(MigSlice(), {}),
                      "spec.devices[0].consumesCounters[0].counterSet: Invalid value: "
                      "\"gpu-0-counters\": must be the name of a counter set in the sharedCounters "
                      "of a ResourceSlice of driver \"hami-core-gpu.project-hami.io\" pool "
                      "\"node1\""));
  Json s = MigSlice();
  Dev0(s)["consumesCounters"][0]["counters"]["nope"] = {{"value", "1"}};
  EXPECT_TRUE(Rejects(SliceErrors(s, kPool),
                      "spec.devices[0].consumesCounters[0].counters[nope]: "
                      "Invalid value: \"nope\": must be a counter of "
                      "counter set \"gpu-0-counters\""));
  s = MigSlice();
  Json& consumes = Dev0(s)["consumesCounters"];
  consumes.push_back(consumes[0]);
  EXPECT_TRUE(Rejects(SliceErrors(s, kPool),
                      "spec.devices[0].consumesCounters[1]: Duplicate value: \"gpu-0-counters\""));
  consumes.push_back(consumes[0]);
  EXPECT_TRUE(Rejects(SliceErrors(s, kPool),
                      "spec.devices[0].consumesCounters: Too many: 3: must have at most 2 items"));
}

TEST(DraSliceTest, DeviceTaints) {
  Json s = Slice();
  Dev0(s)["taints"] =
      Json::parse(R"([{"key": "gpu.example.com/unhealthy", "effect": "NoSchedule"}])");
  EXPECT_TRUE(Valid(SliceErrors(s)));
  Dev0(s)["taints"][0].erase("effect");
  EXPECT_TRUE(Rejects(SliceErrors(s), "spec.devices[0].taints[0].effect: Required value"));
  Dev0(s)["taints"][0]["effect"] = "Evict";
  EXPECT_TRUE(Rejects(SliceErrors(s),
                      "spec.devices[0].taints[0].effect: Unsupported value: "
                      "\"Evict\""));
}

TEST(DraSliceTest, DriverPoolAndNodeAreImmutable) {
  Json old = Slice();
  Json s = Slice();
  s["spec"]["pool"]["generation"] = 2;
  EXPECT_TRUE(Valid(ValidateResourceSlice(s, &old, {})));
  s["spec"]["pool"]["name"] = "node2";
  s["spec"]["driver"] = "other.example.com";
  s["spec"]["nodeName"] = "node2";
  FieldErrors errors = ValidateResourceSlice(s, &old, {});
  EXPECT_TRUE(Rejects(errors, "spec.pool.name: Invalid value: \"node2\": field is immutable"));
  EXPECT_TRUE(Rejects(errors,
                      "spec.driver: Invalid value: \"other.example.com\": field is "
                      "immutable"));
  EXPECT_TRUE(Rejects(errors, "spec.nodeName: Invalid value: \"node2\": field is immutable"));
}

// --- ResourceClaim and ResourceClaimTemplate -------------------------------------------------

// What HAMi-DRA's webhook makes of nvidia.com/gpumem: 3000, gpucores: 30.
Json Claim() {
  return Json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "default"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
      "deviceClassName": "hami-core-gpu.project-hami.io",
      "allocationMode": "ExactCount", "count": 1,
      "selectors": [{"cel": {"expression":
        "device.attributes[\"hami-core-gpu.project-hami.io\"].type == \"hami-gpu\""}}],
      "capacity": {"requests": {"memory": "3000Mi", "cores": "30"}}}}]}}
  })");
}

Json& Req0(Json& claim) { return claim["spec"]["devices"]["requests"][0]; }

FieldErrors ClaimErrors(const Json& claim) { return ValidateResourceClaim(claim, nullptr); }

TEST(DraClaimTest, HamiClaimAndFirstAvailableAreValid) {
  EXPECT_TRUE(Valid(ClaimErrors(Claim())));
  Json c = Claim();
  Req0(c).erase("exactly");
  Req0(c)["firstAvailable"] = Json::parse(R"([
    {"name": "big", "deviceClassName": "hami-core-gpu.project-hami.io",
     "capacity": {"requests": {"memory": "40Gi"}}},
    {"name": "small", "deviceClassName": "hami-core-gpu.project-hami.io", "count": 2}])");
  EXPECT_TRUE(Valid(ClaimErrors(c)));
}

TEST(DraClaimTest, RequestNamesAreUniqueDnsLabels) {
  Json c = Claim();
  c["spec"]["devices"]["requests"].push_back(Req0(c));
  EXPECT_TRUE(Rejects(ClaimErrors(c), "spec.devices.requests[1]: Duplicate value: \"gpu\""));
  c = Claim();
  Req0(c)["name"] = "GPU";
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].name: Invalid value: \"GPU\": a "
                      "lowercase RFC 1123 label"));
  Req0(c).erase("name");
  EXPECT_TRUE(Rejects(ClaimErrors(c), "spec.devices.requests[0].name: Required value"));
  c = Claim();
  Json requests = Json::array();
  for (int i = 0; i < 33; ++i) {
    Json r = Req0(c);
    r["name"] = "r" + std::to_string(i);
    requests.push_back(r);
  }
  c["spec"]["devices"]["requests"] = requests;
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests: Too many: 33: must have at most 32 "
                      "items"));
}

TEST(DraClaimTest, ExactlyOneOfExactlyOrFirstAvailable) {
  Json c = Claim();
  Json exactly = Req0(c)["exactly"];
  Req0(c).erase("exactly");
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0]: Required value: exactly one of "
                      "`exactly` or `firstAvailable` is required"));
  Req0(c)["exactly"] = exactly;
  Json sub = exactly;
  sub["name"] = "sub";
  Req0(c)["firstAvailable"] = Json::array({sub});
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0]: Invalid value: null: exactly one "
                      "of `exactly` or `firstAvailable` is required, but multiple "
                      "fields are set"));
  Req0(c).erase("exactly");
  Json nine = Json::array();
  for (int i = 0; i < 9; ++i) {
    sub["name"] = "s" + std::to_string(i);
    nine.push_back(sub);
  }
  Req0(c)["firstAvailable"] = nine;
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].firstAvailable: Too many: 9: must "
                      "have at most 8 items"));
  nine[1]["name"] = "s0";
  nine.erase(8);
  Req0(c)["firstAvailable"] = nine;
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].firstAvailable[1]: Duplicate "
                      "value: \"s0\""));
}

TEST(DraClaimTest, DeviceClassNameIsRequired) {
  Json c = Claim();
  Req0(c)["exactly"].erase("deviceClassName");
  EXPECT_TRUE(
      Rejects(ClaimErrors(c), "spec.devices.requests[0].exactly.deviceClassName: Required value"));
  Req0(c)["exactly"]["deviceClassName"] = "Not A Class";
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].exactly.deviceClassName: Invalid "
                      "value: \"Not A Class\""));
  c = Claim();
  Req0(c)["firstAvailable"] = Json::parse(R"([{"name": "a"}])");
  Req0(c).erase("exactly");
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].firstAvailable[0]."
                      "deviceClassName: Required value"));
}

TEST(DraClaimTest, AllocationModeAndCount) {
  Json c = Claim();
  Req0(c)["exactly"]["count"] = 0;
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].exactly.count: Invalid value: 0: "
                      "must be greater than zero"));
  Req0(c)["exactly"]["allocationMode"] = "All";
  Req0(c)["exactly"]["count"] = 2;
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].exactly.count: Invalid value: 2: "
                      "must not be specified when allocationMode is 'All'"));
  Req0(c)["exactly"].erase("count");
  EXPECT_TRUE(Valid(ClaimErrors(c)));
  Req0(c)["exactly"]["allocationMode"] = "Some";
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].exactly.allocationMode: "
                      "Unsupported value: \"Some\": supported values: \"All\", "
                      "\"ExactCount\""));
}

TEST(DraClaimTest, DefaultsAreExactCountOfOne) {
  Json c = Claim();
  Req0(c)["exactly"].erase("allocationMode");
  Req0(c)["exactly"].erase("count");
  Req0(c)["exactly"]["tolerations"] = Json::parse(R"([{"key": "k", "value": "v"}])");
  Json all = Req0(c);
  all["name"] = "all";
  all["exactly"]["allocationMode"] = "All";
  c["spec"]["devices"]["requests"].push_back(all);
  DefaultDeviceClaimSpec(c["spec"]);
  EXPECT_EQ(Req0(c)["exactly"]["allocationMode"], "ExactCount");
  EXPECT_EQ(Req0(c)["exactly"]["count"], 1);
  EXPECT_EQ(Req0(c)["exactly"]["tolerations"][0]["operator"], "Equal");
  EXPECT_FALSE(c["spec"]["devices"]["requests"][1]["exactly"].contains("count"));
  EXPECT_TRUE(Valid(ClaimErrors(c)));
}

TEST(DraClaimTest, CapacityRequestsAreQuantities) {
  Json c = Claim();
  Req0(c)["exactly"]["capacity"]["requests"]["memory"] = "3000MB";
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].exactly.capacity.requests[memory]: "
                      "Invalid value: \"3000MB\": must be a quantity"));
  Req0(c)["exactly"]["capacity"]["requests"]["memory"] = "-1Gi";
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].exactly.capacity.requests[memory]: "
                      "Invalid value: \"-1Gi\": must be greater than or equal to 0"));
}

TEST(DraClaimTest, SelectorsNeedACelExpression) {
  Json c = Claim();
  Req0(c)["exactly"]["selectors"][0] = Json::object();
  EXPECT_TRUE(
      Rejects(ClaimErrors(c), "spec.devices.requests[0].exactly.selectors[0].cel: Required value"));
  Req0(c)["exactly"]["selectors"][0] = Json{{"cel", {{"expression", ""}}}};
  EXPECT_TRUE(Rejects(ClaimErrors(c),
                      "spec.devices.requests[0].exactly.selectors[0].cel."
                      "expression: Required value"));
}

TEST(DraClaimTest, ConstraintsAndConfigNameRequests) {
  Json c = Claim();
  c["spec"]["devices"]["constraints"] =
      Json::parse(R"([{"requests": ["nope"], "matchAttribute": "gpu.example.com/numa"}, {}])");
  FieldErrors errors = ClaimErrors(c);
  EXPECT_TRUE(Rejects(errors,
                      "spec.devices.constraints[0].requests[0]: Invalid value: \"nope\": "
                      "must be the name of a request in the claim"));
  EXPECT_TRUE(Rejects(errors,
                      "spec.devices.constraints[1]: Required value: exactly one of "
                      "\"matchAttribute\" or \"distinctAttribute\" is required"));
  c = Claim();
  c["spec"]["devices"]["config"] = Json::parse(R"([{"requests": ["gpu"]}])");
  EXPECT_TRUE(Rejects(ClaimErrors(c), "spec.devices.config[0].opaque: Required value"));
}

TEST(DraClaimTest, SpecIsImmutable) {
  Json old = Claim();
  Json c = Claim();
  c["metadata"]["labels"] = {{"a", "b"}};
  EXPECT_TRUE(Valid(ValidateResourceClaim(c, &old)));
  Req0(c)["exactly"]["capacity"]["requests"]["memory"] = "4000Mi";
  EXPECT_TRUE(Rejects(ValidateResourceClaim(c, &old), "spec: Invalid value: {"));
  EXPECT_TRUE(Rejects(ValidateResourceClaim(c, &old), "}: field is immutable"));
}

TEST(DraClaimTest, TemplateValidatesItsClaimSpec) {
  Json t = Json{
      {"metadata", {{"name", "t"}}},
      {"spec", {{"metadata", {{"labels", {{"hami.io/dra", "true"}}}}}, {"spec", Claim()["spec"]}}}};
  EXPECT_TRUE(Valid(ValidateResourceClaimTemplate(t, nullptr)));
  Json old = t;
  t["spec"]["spec"]["devices"]["requests"][0]["exactly"].erase("deviceClassName");
  EXPECT_TRUE(Rejects(ValidateResourceClaimTemplate(t, nullptr),
                      "spec.spec.devices.requests[0].exactly.deviceClassName: Required value"));
  EXPECT_TRUE(Rejects(ValidateResourceClaimTemplate(t, &old), "spec: Invalid value: "));
  t = old;
  t["spec"]["metadata"]["labels"]["n"] = 1;
  EXPECT_TRUE(Rejects(ValidateResourceClaimTemplate(t, nullptr),
                      "spec.metadata.labels[n]: Invalid value: 1: must be a string"));
}

Json Allocation() {
  return Json::parse(R"({"devices": {"results": [{"request": "gpu",
    "driver": "hami-core-gpu.project-hami.io", "pool": "node1", "device": "hami-gpu-0",
    "shareID": "0f7e3c1a-5b2d-4c6e-9a8b-7d1e2f3a4b5c",
    "consumedCapacity": {"memory": "3000Mi", "cores": "30"}}]}})");
}

TEST(DraClaimStatusTest, AllocationOnceThenImmutable) {
  Json old = Claim();
  Json c = Claim();
  c["status"]["allocation"] = Allocation();
  c["status"]["reservedFor"] = Json::parse(R"([{"resource": "pods", "name": "p", "uid": "u-1"}])");
  EXPECT_TRUE(Valid(ValidateResourceClaimStatus(c, old)));
  Json next = c;
  next["status"]["allocation"]["devices"]["results"][0]["device"] = "hami-gpu-1";
  EXPECT_TRUE(Rejects(ValidateResourceClaimStatus(next, c), "status.allocation: Invalid value: {"));
  next = c;
  next["status"].erase("allocation");
  next["status"].erase("reservedFor");
  EXPECT_TRUE(Valid(ValidateResourceClaimStatus(next, c)));  // deallocation
}

TEST(DraClaimStatusTest, ReservedForNeedsAnAllocation) {
  Json c = Claim();
  c["status"]["reservedFor"] = Json::parse(R"([{"resource": "pods", "name": "p"}])");
  FieldErrors errors = ValidateResourceClaimStatus(c, Claim());
  EXPECT_TRUE(Rejects(errors,
                      "status.reservedFor: Forbidden: may not be specified when "
                      "`allocated` is not set"));
  EXPECT_TRUE(Rejects(errors, "status.reservedFor[0].uid: Required value"));
}

TEST(DraClaimStatusTest, ResultsNameRequestsAndShares) {
  Json c = Claim();
  c["status"]["allocation"] = Allocation();
  Json& r = c["status"]["allocation"]["devices"]["results"][0];
  r["request"] = "nope";
  r["shareID"] = "NOT-A-UUID";
  r["consumedCapacity"]["memory"] = "3000 Mi";
  r.erase("driver");
  FieldErrors errors = ValidateResourceClaimStatus(c, Claim());
  EXPECT_TRUE(Rejects(errors,
                      "status.allocation.devices.results[0].request: Invalid value: "
                      "\"nope\""));
  EXPECT_TRUE(Rejects(errors,
                      "status.allocation.devices.results[0].shareID: Invalid value: "
                      "\"NOT-A-UUID\""));
  EXPECT_TRUE(Rejects(errors,
                      "status.allocation.devices.results[0].consumedCapacity[memory]: "
                      "Invalid value: \"3000 Mi\": must be a quantity"));
  EXPECT_TRUE(Rejects(errors, "status.allocation.devices.results[0].driver: Required value"));
}

// --- DeviceClass -----------------------------------------------------------------------------

Json Class() {
  return Json::parse(R"({"metadata": {"name": "hami-core-gpu.project-hami.io"},
    "spec": {"selectors": [{"cel": {"expression":
      "device.driver == \"hami-core-gpu.project-hami.io\""}}],
      "extendedResourceName": "nvidia.com/gpu"}})");
}

TEST(DraDeviceClassTest, SelectorsConfigAndExtendedResourceName) {
  EXPECT_TRUE(Valid(ValidateDeviceClass(Class())));
  Json c = Class();
  c["spec"]["selectors"][0]["cel"]["expression"] = "";
  EXPECT_TRUE(Rejects(ValidateDeviceClass(c), "spec.selectors[0].cel.expression: Required value"));
  c = Class();
  c["spec"]["extendedResourceName"] = "gpu";
  EXPECT_TRUE(Rejects(ValidateDeviceClass(c),
                      "spec.extendedResourceName: Invalid value: \"gpu\": "
                      "must be a valid extended resource name"));
  c["spec"]["extendedResourceName"] = "kubernetes.io/gpu";
  EXPECT_TRUE(Rejects(ValidateDeviceClass(c), "spec.extendedResourceName: Invalid value"));
  c = Class();
  c["spec"]["config"] = Json::parse(R"([{}, {"opaque": {"driver": "d.example.com",
                                                         "parameters": [1]}}])");
  FieldErrors errors = ValidateDeviceClass(c);
  EXPECT_TRUE(Rejects(errors, "spec.config[0].opaque: Required value"));
  EXPECT_TRUE(Rejects(errors,
                      "spec.config[1].opaque.parameters: Invalid value: \"<value "
                      "omitted>\": must be a valid JSON object"));
}

// --- the store -------------------------------------------------------------------------------

const ResourceType& Type(const char* plural) {
  return *FindResourceType("resource.k8s.io", "v1", plural);
}

class DraStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store_.Create(NamespaceType(), "", Json{{"metadata", {{"name", "default"}}}}));
  }
  FakeClock clock_;
  Store store_{clock_};
};

TEST_F(DraStoreTest, ServedKinds) {
  for (const char* plural :
       {"deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"}) {
    ASSERT_NE(FindResourceType("resource.k8s.io", "v1", plural), nullptr) << plural;
  }
  EXPECT_FALSE(Type("deviceclasses").namespaced);
  EXPECT_FALSE(Type("resourceslices").namespaced);
  EXPECT_TRUE(Type("resourceclaims").namespaced);
  EXPECT_TRUE(Type("resourceclaims").has_status);
  EXPECT_TRUE(Type("resourceclaimtemplates").namespaced);
  EXPECT_EQ(Type("resourceclaimtemplates").kind, "ResourceClaimTemplate");
}

TEST_F(DraStoreTest, InvalidWritesAre422WithEveryFieldError) {
  Json s = Slice();
  s["spec"].erase("driver");
  auto one = store_.Create(Type("resourceslices"), "", s);
  ASSERT_FALSE(one);
  EXPECT_EQ(one.error().code, 422);
  EXPECT_EQ(one.error().message,
            "ResourceSlice \"node1-gpus\" is invalid: spec.driver: Required value");
  s["spec"]["pool"]["resourceSliceCount"] = 0;
  auto two = store_.Create(Type("resourceslices"), "", s);
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().message,
            "ResourceSlice \"node1-gpus\" is invalid: [spec.driver: Required value, "
            "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero]");
  ASSERT_TRUE(store_.Create(Type("resourceslices"), "", Slice()));
  auto update = store_.Update(Type("resourceslices"), "", "node1-gpus", [](const Json& cur) {
    Json next = cur;
    next["spec"]["devices"][0]["name"] = "GPU";
    return k8s::ApiResult<Json>(next);
  });
  ASSERT_FALSE(update);
  EXPECT_EQ(update.error().code, 422);
  EXPECT_NE(update.error().message.find("spec.devices[0].name: Invalid value: \"GPU\""),
            std::string::npos)
      << update.error().message;
}

TEST_F(DraStoreTest, GenerationCountsSpecChanges) {
  auto created = store_.Create(Type("resourceslices"), "", Slice());
  ASSERT_TRUE(created);
  EXPECT_EQ((*created)->json["metadata"]["generation"], 1);
  auto bump = [](const Json& cur) {
    Json next = cur;
    next["spec"]["pool"]["generation"] = 2;
    return k8s::ApiResult<Json>(next);
  };
  auto changed = store_.Update(Type("resourceslices"), "", "node1-gpus", bump);
  ASSERT_TRUE(changed);
  EXPECT_EQ((*changed)->json["metadata"]["generation"], 2);
  auto labelled = store_.Update(Type("resourceslices"), "", "node1-gpus", [](const Json& cur) {
    Json next = cur;
    next["metadata"]["labels"] = {{"a", "b"}};
    return k8s::ApiResult<Json>(next);
  });
  ASSERT_TRUE(labelled);
  EXPECT_EQ((*labelled)->json["metadata"]["generation"], 2);
}

TEST_F(DraStoreTest, CountersAreLookedUpInThePoolsOtherSlices) {
  auto early = store_.Create(Type("resourceslices"), "", MigSlice());
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().message.find("spec.devices[0].consumesCounters[0].counterSet"),
            std::string::npos);
  Json elsewhere = CounterSlice();
  elsewhere["metadata"]["name"] = "node2-counters";
  elsewhere["spec"]["pool"]["name"] = "node2";
  elsewhere["spec"]["nodeName"] = "node2";
  ASSERT_TRUE(store_.Create(Type("resourceslices"), "", elsewhere));
  EXPECT_FALSE(store_.Create(Type("resourceslices"), "", MigSlice()));  // another pool's sets
  ASSERT_TRUE(store_.Create(Type("resourceslices"), "", CounterSlice()));
  EXPECT_TRUE(store_.Create(Type("resourceslices"), "", MigSlice()));
}

TEST_F(DraStoreTest, ClaimIsDefaultedItsStatusDroppedAndItsSpecFixed) {
  Json c = Claim();
  Req0(c)["exactly"].erase("allocationMode");
  Req0(c)["exactly"].erase("count");
  c["status"]["allocation"] = Allocation();
  auto created = store_.Create(Type("resourceclaims"), "default", c);
  ASSERT_TRUE(created);
  const Json& stored = (*created)->json;
  EXPECT_FALSE(stored.contains("status"));
  EXPECT_EQ(stored["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"], "ExactCount");
  EXPECT_EQ(stored["spec"]["devices"]["requests"][0]["exactly"]["count"], 1);
  auto respec = store_.Update(Type("resourceclaims"), "default", "c", [](const Json& cur) {
    Json next = cur;
    next["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2;
    return k8s::ApiResult<Json>(next);
  });
  ASSERT_FALSE(respec);
  EXPECT_NE(respec.error().message.find("spec: Invalid value: "), std::string::npos);
  EXPECT_NE(respec.error().message.find("field is immutable"), std::string::npos);
  auto allocate = [](const Json& cur) {
    Json next = cur;
    next["status"]["allocation"] = Allocation();
    return k8s::ApiResult<Json>(next);
  };
  ASSERT_TRUE(store_.Update(Type("resourceclaims"), "default", "c", allocate));
  auto reallocate = store_.Update(Type("resourceclaims"), "default", "c", [](const Json& cur) {
    Json next = cur;
    next["status"]["allocation"]["devices"]["results"][0]["pool"] = "node2";
    return k8s::ApiResult<Json>(next);
  });
  ASSERT_FALSE(reallocate);
  EXPECT_NE(reallocate.error().message.find("status.allocation: Invalid value: "),
            std::string::npos);
}

TEST_F(DraStoreTest, TemplateIsDefaultedAndImmutable) {
  Json t = Json{{"metadata", {{"name", "t"}}}, {"spec", {{"spec", Claim()["spec"]}}}};
  t["spec"]["spec"]["devices"]["requests"][0]["exactly"].erase("count");
  auto created = store_.Create(Type("resourceclaimtemplates"), "default", t);
  ASSERT_TRUE(created);
  EXPECT_EQ((*created)->json["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"], 1);
  auto changed = store_.Update(Type("resourceclaimtemplates"), "default", "t", [](const Json& cur) {
    Json next = cur;
    next["spec"]["spec"]["devices"]["requests"][0]["name"] = "other";
    return k8s::ApiResult<Json>(next);
  });
  ASSERT_FALSE(changed);
  EXPECT_NE(changed.error().message.find("field is immutable"), std::string::npos);
}

TEST_F(DraStoreTest, MalformedShapesAre422NotExceptions) {
  // Each replaces one field of a valid object with the wrong JSON type.
  const std::vector<std::pair<const char*, std::string>> slices = {
      {"/spec", "5"},
      {"/spec/pool", "\"x\""},
      {"/spec/pool/name", "7"},
      {"/spec/devices", "\"x\""},
      {"/spec/devices/0", "5"},
      {"/spec/devices/0/attributes", "[1]"},
      {"/spec/devices/0/attributes/type", "\"x\""},
      {"/spec/devices/0/capacity/memory", "[]"},
      {"/spec/devices/0/capacity/memory/value", "{}"},
      {"/spec/devices/0/capacity/memory/requestPolicy", "3"},
      {"/spec/devices/0/capacity/memory/requestPolicy/validRange", "[]"},
      {"/spec/devices/0/capacity/memory/requestPolicy/validValues", "{}"},
      {"/spec/devices/0/consumesCounters", "{}"},
      {"/spec/devices/0/consumesCounters", "[5, {\"counterSet\": 1, \"counters\": []}]"},
      {"/spec/devices/0/taints", "[\"x\"]"},
      {"/spec/nodeSelector", "\"x\""},
      {"/spec/sharedCounters", "[5, {\"name\": [], \"counters\": {\"a\": 5}}]"},
  };
  for (const auto& [pointer, value] : slices) {
    Json s = Slice("bad");
    s[Json::json_pointer(pointer)] = Json::parse(value);
    auto r = store_.Create(Type("resourceslices"), "", s);
    ASSERT_FALSE(r) << pointer << " = " << value;
    EXPECT_EQ(r.error().code, 422) << pointer << ": " << r.error().message;
  }
  ASSERT_TRUE(store_.Create(Type("resourceslices"), "", Slice()));
  auto update = store_.Update(Type("resourceslices"), "", "node1-gpus", [](const Json& cur) {
    Json next = cur;
    next["spec"]["pool"] = "x";  // the immutability check reads spec.pool.name of both
    return k8s::ApiResult<Json>(next);
  });
  ASSERT_FALSE(update);
  EXPECT_EQ(update.error().code, 422) << update.error().message;
  const std::vector<std::pair<const char*, std::string>> claims = {
      {"/spec/devices", "[]"},
      {"/spec/devices/requests", "\"x\""},
      {"/spec/devices/requests/0", "5"},
      {"/spec/devices/requests/0/exactly", "[]"},
      {"/spec/devices/requests/0/exactly/count", "\"1\""},
      {"/spec/devices/requests/0/exactly/allocationMode", "5"},
      {"/spec/devices/requests/0/exactly/selectors", "[5]"},
      {"/spec/devices/requests/0/exactly/capacity", "[]"},
      {"/spec/devices/requests/0/exactly/capacity/requests", "[]"},
      {"/spec/devices/requests/0/exactly/tolerations", "[5]"},
      {"/spec/devices/requests/0/firstAvailable", "[5]"},
      {"/spec/devices/constraints", "[5]"},
      {"/spec/devices/config", "[{\"requests\": [5], \"opaque\": 5}]"},
  };
  for (const auto& [pointer, value] : claims) {
    Json c = Claim();
    c[Json::json_pointer(pointer)] = Json::parse(value);
    auto r = store_.Create(Type("resourceclaims"), "default", c);
    ASSERT_FALSE(r) << pointer << " = " << value;
    EXPECT_EQ(r.error().code, 422) << pointer << ": " << r.error().message;
  }
  ASSERT_TRUE(store_.Create(Type("resourceclaims"), "default", Claim()));
  for (const char* status : {"5", "{\"allocation\": 5}", "{\"reservedFor\": {}}",
                             "{\"allocation\": {\"devices\": {\"results\": [5]}}}"}) {
    auto r = store_.Update(Type("resourceclaims"), "default", "c", [&](const Json& cur) {
      Json next = cur;
      next["status"] = Json::parse(status);
      return k8s::ApiResult<Json>(next);
    });
    ASSERT_FALSE(r) << status;
    EXPECT_EQ(r.error().code, 422) << status << ": " << r.error().message;
  }
}

TEST_F(DraStoreTest, DeviceClassGetsAGeneration) {
  auto created = store_.Create(Type("deviceclasses"), "", Class());
  ASSERT_TRUE(created);
  EXPECT_EQ((*created)->json["metadata"]["generation"], 1);
  Json bad = Class();
  bad["metadata"]["name"] = "bad";
  bad["spec"]["extendedResourceName"] = "gpu";
  auto refused = store_.Create(Type("deviceclasses"), "", bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message,
            "DeviceClass \"bad\" is invalid: spec.extendedResourceName: Invalid value: \"gpu\": "
            "must be a valid extended resource name");
}

}  // namespace
}  // namespace hami::sim
