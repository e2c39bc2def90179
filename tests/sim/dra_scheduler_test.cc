// The simulated kube-scheduler in DRA mode (DraSchedulerLoop) against the in-process sim API
// server: two nodes publishing hami-dra-plugin's slices (one 8000Mi GPU each), the chart's
// DeviceClass, claims made as the claim controller makes them from a template. Pods get their
// claims allocated (status.allocation with shareID and consumedCapacity, reservedFor the pod)
// and are bound; a claim no GPU can hold leaves the pod unschedulable with kube-scheduler's
// message; two pods sharing a claim land on its node; a pod whose claim is not made yet waits;
// a failed status write backs off and is retried.
#include "sim/dra_scheduler.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "draplugin/slices.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "scheduling_test_util.h"
#include "sim/apiserver/apiserver.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

const k8s::Resource& kSlices = k8s::resources::kResourceSlices;
const k8s::Resource& kClaims = k8s::resources::kResourceClaims;
const k8s::Resource& kClasses = k8s::resources::kDeviceClasses;
constexpr const char* kClass = "hami-core-gpu.project-hami.io";
constexpr const char* kGpu =
    "device.attributes[\"hami-core-gpu.project-hami.io\"].type == \"hami-gpu\"";

using testutil::Eventually;
using testutil::ReadyNode;

// The DeviceClass of charts/hami/templates/dra/deviceclass.yaml.
json DeviceClass() {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", kClass}}},
          {"spec",
           {{"selectors",
             json::array(
                 {{{"cel",
                    {{"expression", "device.driver == \"hami-core-gpu.project-hami.io\""}}}}})}}}};
}

// A claim's spec as the webhook's template has it (src/scheduler/dra_webhook.cc): one GPU with
// `memory_mib` of memory and 30 cores.
json ClaimSpec(int64_t memory_mib) {
  json requests = {{"memory", std::to_string(memory_mib) + "Mi"}, {"cores", "30"}};
  return {{"devices",
           {{"requests",
             json::array({{{"name", "gpu"},
                           {"exactly",
                            {{"deviceClassName", kClass},
                             {"allocationMode", "ExactCount"},
                             {"count", 1},
                             {"selectors", json::array({{{"cel", {{"expression", kGpu}}}}})},
                             {"capacity", {{"requests", requests}}}}}}})}}}};
}

json Pod(const std::string& name, const json& pod_claim) {
  json ctr = {{"name", "main"}, {"image", "busybox"}};
  ctr["resources"]["claims"] = json::array({{{"name", "gpu"}}});
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}};
  pod["spec"] = {{"schedulerName", "hami-scheduler"},
                 {"containers", json::array({ctr})},
                 {"resourceClaims", json::array({pod_claim})}};
  return pod;
}

json TemplatePod(const std::string& name) {
  return Pod(name, {{"name", "gpu"}, {"resourceClaimTemplateName", "hami-gpu-1x3000mi-30c"}});
}

json NamedClaimPod(const std::string& name, const std::string& claim) {
  return Pod(name, {{"name", "gpu"}, {"resourceClaimName", claim}});
}

class DraSchedulerTest : public ::testing::Test {
 protected:
  void StartApi(ApiServerOptions options = {}) {
    api_ = std::make_unique<ApiServer>(std::move(options));
    ASSERT_TRUE(api_->Start());
    k8s::RestConfig cfg;
    cfg.server = api_->url();
    cfg.qps = 0;
    client_ = std::make_unique<k8s::Client>(cfg);
    Create(kClasses, DeviceClass());
    for (const std::string node : {"node-a", "node-b"}) {
      Create(k8s::resources::kNodes, ReadyNode(node));
      draplugin::GpuFacts gpu;
      gpu.gpu.uuid = "GPU-" + node;
      gpu.gpu.model = "Tesla T4";
      gpu.gpu.memory_mib = 8000;
      gpu.attributes.minor = 0;
      auto slices = draplugin::BuildSlices({gpu}, {node, 1.0}, 1);
      ASSERT_TRUE(slices.ok()) << slices.error();
      for (const json& s : *slices) Create(kSlices, s);
    }
  }
  void StartLoop() {
    DraSchedulerOptions o;
    o.initial_backoff = milliseconds(50);
    o.max_backoff = milliseconds(200);
    int n = 0;
    o.share_id = [n]() mutable {
      char buf[40];
      std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012d", ++n);
      return std::string(buf);
    };
    loop_ = std::make_unique<DraSchedulerLoop>(*client_, o);
    ASSERT_TRUE(loop_->Start().ok());
  }
  void TearDown() override {
    if (loop_) loop_->Stop();
  }

  json Create(const k8s::Resource& r, const json& obj) {
    auto made = client_->Create(r, r.namespaced ? "default" : "", obj);
    EXPECT_TRUE(made.ok()) << made.error().ToString();
    return made.ok() ? *made : json();
  }
  json Get(const k8s::Resource& r, const std::string& name) {
    auto got = client_->Get(r, r.namespaced ? "default" : "", name);
    return got.ok() ? *got : json();
  }
  // What the claim controller does for a template claim: the claim, owned by the pod, then its
  // name in pod.status.resourceClaimStatuses.
  json ClaimFor(const std::string& pod_name, int64_t memory_mib) {
    const json pod = Get(k8s::resources::kPods, pod_name);
    const std::string claim_name = pod_name + "-gpu-x7k2q";
    json claim = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceClaim"},
                  {"metadata",
                   {{"name", claim_name},
                    {"namespace", "default"},
                    {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                                      {"kind", "Pod"},
                                                      {"name", pod_name},
                                                      {"uid", k8s::Uid(pod)},
                                                      {"controller", true},
                                                      {"blockOwnerDeletion", true}}})}}},
                  {"spec", ClaimSpec(memory_mib)}};
    json made = Create(kClaims, claim);
    json patch = {{"status",
                   {{"resourceClaimStatuses",
                     json::array({{{"name", "gpu"}, {"resourceClaimName", claim_name}}})}}}};
    auto r = client_->Patch(k8s::resources::kPods, "default", pod_name, k8s::PatchType::kMerge,
                            patch, "status");
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return made;
  }
  std::optional<PodScheduleRecord> Record(const std::string& name) {
    for (const PodScheduleRecord& r : loop_->Records()) {
      if (r.name == name) return r;
    }
    return std::nullopt;
  }
  std::string LastFailure(const std::string& name) {
    auto r = Record(name);
    return r ? r->last_failure : "no record";
  }
  std::string NodeOf(const std::string& pod) {
    return k8s::FieldString(Get(k8s::resources::kPods, pod), "spec.nodeName");
  }
  bool Bound(const std::string& pod) { return !NodeOf(pod).empty(); }

  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<DraSchedulerLoop> loop_;
};

TEST_F(DraSchedulerTest, AllocatesATemplateClaimWritesItsStatusThenBinds) {
  StartApi();
  StartLoop();
  Create(k8s::resources::kPods, TemplatePod("p1"));
  ClaimFor("p1", 3000);
  ASSERT_TRUE(Eventually([&] { return Bound("p1"); }));
  const json pod = Get(k8s::resources::kPods, "p1");
  const json claim = Get(kClaims, "p1-gpu-x7k2q");
  const json& status = claim["status"];
  ASSERT_TRUE(status.contains("allocation")) << claim.dump();
  const json& result = status["allocation"]["devices"]["results"][0];
  EXPECT_EQ(result["request"], "gpu");
  EXPECT_EQ(result["driver"], kClass);
  EXPECT_EQ(result["pool"], NodeOf("p1"));
  EXPECT_EQ(result["device"], "hami-gpu-0");
  EXPECT_EQ(result["shareID"].get<std::string>().rfind("00000000-0000-4000-8000-", 0), 0u);
  EXPECT_EQ(result["consumedCapacity"]["memory"], "3000Mi");
  EXPECT_EQ(result["consumedCapacity"]["cores"], "30");
  EXPECT_EQ(status["reservedFor"],
            json::array({{{"resource", "pods"}, {"name", "p1"}, {"uid", k8s::Uid(pod)}}}));
  EXPECT_EQ(loop_->ClaimsAllocated(), 1u);
  ASSERT_TRUE(Eventually([&] { return loop_->Idle(); }));
  auto rec = Record("p1");
  ASSERT_TRUE(rec.has_value());
  EXPECT_TRUE(rec->bound);
  EXPECT_EQ(rec->failures, 0);
  EXPECT_EQ(rec->attempts, 1);  // a wait for the claim before it is no attempt
  EXPECT_EQ(loop_->FilterLatenciesMs().size(), 1u);
}

TEST_F(DraSchedulerTest, SharesOfOneGpuAreCountedAcrossPods) {
  StartApi();
  StartLoop();
  // 8000Mi per GPU: two 3000Mi shares fit on one, a third goes to the other node.
  for (const std::string p : {"p1", "p2", "p3"}) {
    Create(k8s::resources::kPods, TemplatePod(p));
    ClaimFor(p, 3000);
    ASSERT_TRUE(Eventually([&] { return Bound(p); })) << p;
  }
  EXPECT_EQ(NodeOf("p1"), NodeOf("p2"));
  EXPECT_NE(NodeOf("p1"), NodeOf("p3"));
  EXPECT_EQ(loop_->ClaimsAllocated(), 3u);
}

TEST_F(DraSchedulerTest, AClaimNoGpuCanHoldLeavesThePodUnschedulable) {
  StartApi();
  StartLoop();
  Create(k8s::resources::kPods, TemplatePod("big"));
  ClaimFor("big", 20000);
  const std::string want = "0/2 nodes are available: 2 cannot allocate all claims.";
  ASSERT_TRUE(Eventually([&] {
    auto r = Record("big");
    return r && r->last_failure == want && loop_->Unschedulable() == 1;
  })) << LastFailure("big");
  auto rec = Record("big");
  EXPECT_FALSE(rec->bound);
  ASSERT_FALSE(rec->failure_details.empty());
  // Per node, the allocator's line: which claim, request, device and capacity.
  ASSERT_EQ(rec->failure_details.size(), 2u);
  EXPECT_EQ(rec->failure_details[0].rfind(
                "node-a: claim default/big-gpu-x7k2q request \"gpu\": hami-gpu-0: memory: ", 0),
            0u)
      << rec->failure_details[0];
  EXPECT_EQ(rec->failure_details[1].rfind("node-b: ", 0), 0u) << rec->failure_details[1];
  ASSERT_TRUE(Eventually([&] {
    const json pod = Get(k8s::resources::kPods, "big");
    for (const json& c : pod["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "PodScheduled") {
        return c.value("status", "") == "False" && c.value("reason", "") == "Unschedulable" &&
               c.value("message", "") == want;
      }
    }
    return false;
  }));
  EXPECT_FALSE(Get(kClaims, "big-gpu-x7k2q")["status"].contains("allocation"));
}

TEST_F(DraSchedulerTest, TwoPodsSharingOneClaimLandOnItsNode) {
  StartApi();
  StartLoop();
  // node-a (first in order) keeps 2000Mi after the filler: the shared claim goes to node-b.
  Create(k8s::resources::kPods, TemplatePod("filler"));
  ClaimFor("filler", 6000);
  ASSERT_TRUE(Eventually([&] { return Bound("filler"); }));
  json shared = {{"apiVersion", "resource.k8s.io/v1"},
                 {"kind", "ResourceClaim"},
                 {"metadata", {{"name", "shared"}, {"namespace", "default"}}},
                 {"spec", ClaimSpec(3000)}};
  Create(kClaims, shared);
  Create(k8s::resources::kPods, NamedClaimPod("s1", "shared"));
  ASSERT_TRUE(Eventually([&] { return Bound("s1"); }));
  Create(k8s::resources::kPods, NamedClaimPod("s2", "shared"));
  ASSERT_TRUE(Eventually([&] { return Bound("s2"); }));
  EXPECT_NE(NodeOf("filler"), NodeOf("s1"));
  EXPECT_EQ(NodeOf("s1"), NodeOf("s2"));
  const json claim = Get(kClaims, "shared");
  EXPECT_EQ(claim["status"]["reservedFor"].size(), 2u) << claim.dump();
  EXPECT_EQ(claim["status"]["allocation"]["devices"]["results"].size(), 1u);
  EXPECT_EQ(loop_->ClaimsAllocated(), 2u);  // the filler's and the shared one, once
}

TEST_F(DraSchedulerTest, PodsSharingAClaimBeingAllocatedWaitForItsAllocation) {
  StartApi();
  StartLoop();
  Create(kClaims, {{"apiVersion", "resource.k8s.io/v1"},
                   {"kind", "ResourceClaim"},
                   {"metadata", {{"name", "team"}, {"namespace", "default"}}},
                   {"spec", ClaimSpec(3000)}});
  // Created together: the second one's cycle may find the claim's allocation in flight.
  for (const std::string p : {"t1", "t2", "t3"}) {
    Create(k8s::resources::kPods, NamedClaimPod(p, "team"));
  }
  for (const std::string p : {"t1", "t2", "t3"}) {
    ASSERT_TRUE(Eventually([&] { return Bound(p); })) << p;
  }
  EXPECT_EQ(NodeOf("t1"), NodeOf("t2"));
  EXPECT_EQ(NodeOf("t1"), NodeOf("t3"));
  const json claim = Get(kClaims, "team");
  EXPECT_EQ(claim["status"]["reservedFor"].size(), 3u) << claim.dump();
  EXPECT_EQ(loop_->ClaimsAllocated(), 1u);
}

// A claim allocated elsewhere: to node-c's GPU (no such Ready node), or reserved for 256 pods.
TEST_F(DraSchedulerTest, AnAllocatedClaimBindsThePodToItsNodeAndItsConsumerLimit) {
  StartApi();
  StartLoop();
  auto allocated = [&](const std::string& name, const std::string& node, size_t consumers) {
    json claim = Create(kClaims, {{"apiVersion", "resource.k8s.io/v1"},
                                  {"kind", "ResourceClaim"},
                                  {"metadata", {{"name", name}, {"namespace", "default"}}},
                                  {"spec", ClaimSpec(1000)}});
    claim["status"]["allocation"] = {
        {"devices",
         {{"results", json::array({{{"request", "gpu"},
                                    {"driver", kClass},
                                    {"pool", node},
                                    {"device", "hami-gpu-0"},
                                    {"shareID", "00000000-0000-4000-8000-00000000ffff"},
                                    {"consumedCapacity", {{"memory", "1000Mi"}}}}})}}},
        {"nodeSelector",
         {{"nodeSelectorTerms",
           json::array({{{"matchFields", json::array({{{"key", "metadata.name"},
                                                       {"operator", "In"},
                                                       {"values", json::array({node})}}})}}})}}}};
    json reserved = json::array();
    for (size_t i = 0; i < consumers; ++i) {
      reserved.push_back({{"resource", "pods"},
                          {"name", "other-" + std::to_string(i)},
                          {"uid", "00000000-0000-4000-8000-" + std::to_string(100000000000 + i)}});
    }
    claim["status"]["reservedFor"] = reserved;
    auto r = client_->UpdateStatus(kClaims, claim);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  };
  allocated("elsewhere", "node-c", 1);
  allocated("full", "node-a", kDraMaxReservedFor);
  Create(k8s::resources::kPods, NamedClaimPod("e", "elsewhere"));
  Create(k8s::resources::kPods, NamedClaimPod("f", "full"));
  ASSERT_TRUE(Eventually([&] {
    auto e = Record("e"), f = Record("f");
    return e && f &&
           e->last_failure ==
               "0/2 nodes are available: 2 resourceclaim not available on the node." &&
           f->last_failure == "0/2 nodes are available: resourceclaim in use.";
  })) << LastFailure("e")
      << " / " << LastFailure("f");
  EXPECT_FALSE(Bound("e"));
  EXPECT_FALSE(Bound("f"));
}

TEST_F(DraSchedulerTest, APodWhoseClaimIsNotMadeYetWaitsThenSchedules) {
  StartApi();
  StartLoop();
  Create(k8s::resources::kPods, TemplatePod("w"));
  ASSERT_TRUE(Eventually([&] {
    auto r = Record("w");
    return r && r->last_failure == "pod \"default/w\": ResourceClaim not created yet" &&
           loop_->Unschedulable() == 1;
  }));
  EXPECT_EQ(Record("w")->attempts, 0);  // PreEnqueue keeps it from a scheduling attempt
  Create(k8s::resources::kPods, NamedClaimPod("n", "later"));
  ASSERT_TRUE(Eventually([&] {
    auto r = Record("n");
    return r && r->last_failure == "resourceclaim.resource.k8s.io \"later\" not found";
  }));
  EXPECT_FALSE(Bound("w"));
  EXPECT_FALSE(Bound("n"));

  ClaimFor("w", 3000);
  ASSERT_TRUE(Eventually([&] { return Bound("w"); }));
  Create(kClaims, {{"apiVersion", "resource.k8s.io/v1"},
                   {"kind", "ResourceClaim"},
                   {"metadata", {{"name", "later"}, {"namespace", "default"}}},
                   {"spec", ClaimSpec(1000)}});
  ASSERT_TRUE(Eventually([&] { return Bound("n"); }));
  EXPECT_EQ(loop_->Unschedulable(), 0u);
}

TEST_F(DraSchedulerTest, AMissingDeviceClassKeepsThePodWaiting) {
  StartApi();
  StartLoop();
  json spec = ClaimSpec(1000);
  spec["devices"]["requests"][0]["exactly"]["deviceClassName"] = "no-such-class";
  Create(kClaims, {{"apiVersion", "resource.k8s.io/v1"},
                   {"kind", "ResourceClaim"},
                   {"metadata", {{"name", "odd"}, {"namespace", "default"}}},
                   {"spec", spec}});
  Create(k8s::resources::kPods, NamedClaimPod("o", "odd"));
  const std::string want =
      "0/2 nodes are available: request gpu: device class no-such-class does not exist.";
  ASSERT_TRUE(Eventually([&] {
    auto r = Record("o");
    return r && r->last_failure == want;
  })) << LastFailure("o");
  EXPECT_FALSE(Bound("o"));
}

TEST_F(DraSchedulerTest, AFailedStatusWriteBacksOffAndRetries) {
  std::atomic<int> failed{0};
  ApiServerOptions o;
  o.fail_request = [&failed](const std::string& method, const std::string& path) {
    const bool status_write = method == "PUT" &&
                              path.find("/resourceclaims/") != std::string::npos &&
                              path.find("/status") != std::string::npos;
    return status_write && failed.fetch_add(1) == 0;  // the first one only
  };
  StartApi(std::move(o));
  StartLoop();
  Create(k8s::resources::kPods, TemplatePod("r"));
  ClaimFor("r", 3000);
  ASSERT_TRUE(Eventually([&] { return Bound("r"); }));
  auto rec = Record("r");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->failures, 1);
  EXPECT_GE(failed.load(), 2);
  const json claim = Get(kClaims, "r-gpu-x7k2q");
  EXPECT_EQ(claim["status"]["reservedFor"].size(), 1u);
  // The forgotten first allocation took nothing: the GPU still has room for 5000Mi.
  Create(k8s::resources::kPods, TemplatePod("r2"));
  ClaimFor("r2", 5000);
  ASSERT_TRUE(Eventually([&] { return Bound("r2"); }));
  EXPECT_EQ(NodeOf("r"), NodeOf("r2"));
}

}  // namespace
}  // namespace hami::sim
