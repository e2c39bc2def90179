// hami-sim's resource claim controller against the sim API server: a template's claim made for
// a pod (name, owner, annotation, labels, spec) and named in the pod's status, once only (API
// errors retried, a restarted controller finds the claim it made), deleted with its pod; a
// shared claim's reservedFor cleaned of a finished and a deleted pod, and deallocated when the
// last one goes.
#include "sim/claim_controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "k8s/object.h"
#include "sim/apiserver/apiserver.h"
#include "support/wait_for.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::WaitFor;

const auto& kClaims = k8s::resources::kResourceClaims;
const auto& kTemplates = k8s::resources::kResourceClaimTemplates;
const auto& kPods = k8s::resources::kPods;

json Template() {
  return json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
      "metadata": {"name": "gpu-3000", "namespace": "default"},
      "spec": {"metadata": {"labels": {"hami.io/dra": "true"}, "annotations": {"a": "b"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
          "deviceClassName": "hami-core-gpu.project-hami.io",
          "capacity": {"requests": {"memory": "3000Mi"}}}}]}}}})");
}

// A pod whose claim entry `entry` names template gpu-3000 (or, with `shared`, claim `shared`).
json Pod(const std::string& name, const std::string& entry = "gpu", bool shared = false) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}};
  pod["spec"]["containers"] =
      json::array({{{"name", "cuda"},
                    {"image", "sim"},
                    {"resources", {{"claims", json::array({{{"name", entry}}})}}}}});
  json claim = {{"name", entry}};
  claim[shared ? "resourceClaimName" : "resourceClaimTemplateName"] =
      shared ? "shared" : "gpu-3000";
  pod["spec"]["resourceClaims"] = json::array({claim});
  return pod;
}

class ClaimControllerTest : public ::testing::Test {
 protected:
  ClaimControllerTest() {
    ApiServerOptions options;
    options.fail_request = [this](const std::string& method, const std::string& path) {
      if (method == "POST" && path == "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims")
        return fail_creates_-- > 0;
      if (method == "PATCH" && path.ends_with("/status")) return fail_status_-- > 0;
      return false;
    };
    server_ = std::make_unique<ApiServer>(std::move(options));
  }
  void SetUp() override {
    ASSERT_TRUE(server_->Start());
    k8s::RestConfig cfg;
    cfg.server = server_->url();
    cfg.qps = 0;
    client_ = std::make_unique<k8s::Client>(cfg);
    ASSERT_TRUE(client_->Create(kTemplates, "default", Template()));
  }
  void TearDown() override {
    if (controller_) controller_->Stop();
    client_.reset();
    server_->Stop();
  }
  void StartController() {
    ClaimControllerOptions o;
    o.initial_backoff = milliseconds(5);
    controller_ = std::make_unique<ClaimController>(*client_, clock_, o);
    ASSERT_TRUE(controller_->Start());
  }
  json Get(const k8s::Resource& r, const std::string& name) {
    auto got = client_->Get(r, "default", name);
    return got ? *got : json();
  }
  std::vector<json> Claims() {
    auto got = client_->ListAll(kClaims, "default", {});
    return got ? got->items : std::vector<json>{};
  }
  // The claim named in the pod's status for entry `entry`, "" while none is.
  std::string StatusClaim(const std::string& pod, const std::string& entry = "gpu") {
    json p = Get(kPods, pod);
    if (!p.contains("status") || !p["status"].contains("resourceClaimStatuses")) return "";
    for (const json& s : p["status"]["resourceClaimStatuses"]) {
      if (s.value("name", "") == entry) return s.value("resourceClaimName", "");
    }
    return "";
  }

  std::atomic<int> fail_creates_{0}, fail_status_{0};
  FakeClock clock_;
  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<ClaimController> controller_;
};

TEST(ClaimGenerateNameTest, ShortensBothPartsInProportion) {
  EXPECT_EQ(ClaimGenerateName("trainer", "gpu"), "trainer-gpu-");
  const std::string pod(60, 'p'), claim(30, 'c');
  const std::string name = ClaimGenerateName(pod, claim);
  // 92 characters would be too many: 60*57/92 = 37 of the pod, 30*57/92 = 18 of the claim.
  EXPECT_EQ(name, std::string(37, 'p') + "-" + std::string(18, 'c'));
  EXPECT_LE(name.size() + 5, 63u);
}

TEST_F(ClaimControllerTest, ATemplateBecomesAClaimThePodOwns) {
  fail_creates_ = 2;  // injected 500s: retried, and still one claim
  fail_status_ = 1;
  StartController();
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("trainer")));
  ASSERT_TRUE(WaitFor([&] { return !StatusClaim("trainer").empty(); }));
  const std::string name = StatusClaim("trainer");
  EXPECT_TRUE(std::regex_match(name, std::regex("trainer-gpu-[a-z0-9]{5}"))) << name;
  json claim = Get(kClaims, name);
  json pod = Get(kPods, "trainer");
  EXPECT_EQ(claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"], "gpu");
  EXPECT_EQ(claim["metadata"]["annotations"]["a"], "b");
  EXPECT_EQ(claim["metadata"]["labels"]["hami.io/dra"], "true");
  const json owner = claim["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["apiVersion"], "v1");
  EXPECT_EQ(owner["kind"], "Pod");
  EXPECT_EQ(owner["name"], "trainer");
  EXPECT_EQ(owner["uid"], k8s::Uid(pod));
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(owner["blockOwnerDeletion"], true);
  EXPECT_EQ(claim["spec"], Get(kTemplates, "gpu-3000")["spec"]["spec"]);
  EXPECT_EQ(claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["memory"],
            "3000Mi");
  EXPECT_EQ(Claims().size(), 1u);
  EXPECT_EQ(controller_->stats().claims_created, 1);
  EXPECT_GE(controller_->stats().retries, 3);
}

// The status write is lost (the controller stopped first, or a 500 it gave up on): a new
// controller finds the claim by owner and annotation instead of making a second one.
TEST_F(ClaimControllerTest, ARestartedControllerDoesNotMakeTheClaimAgain) {
  StartController();
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("trainer")));
  ASSERT_TRUE(WaitFor([&] { return !StatusClaim("trainer").empty(); }));
  const std::string name = StatusClaim("trainer");
  controller_->Stop();
  ASSERT_TRUE(client_->Patch(kPods, "default", "trainer", k8s::PatchType::kMerge,
                             json{{"status", {{"resourceClaimStatuses", nullptr}}}}, "status"));
  ASSERT_EQ(StatusClaim("trainer"), "");
  StartController();
  ASSERT_TRUE(WaitFor([&] { return !StatusClaim("trainer").empty(); }));
  EXPECT_EQ(StatusClaim("trainer"), name);
  EXPECT_EQ(Claims().size(), 1u);
  EXPECT_EQ(controller_->stats().claims_created, 0);
}

TEST_F(ClaimControllerTest, APodsClaimGoesWithThePod) {
  StartController();
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("a")));
  ASSERT_TRUE(client_->Create(kPods, "default", Pod("b")));
  ASSERT_TRUE(WaitFor([&] { return !StatusClaim("a").empty() && !StatusClaim("b").empty(); }));
  ASSERT_EQ(Claims().size(), 2u);
  const std::string b_claim = StatusClaim("b");
  ASSERT_TRUE(client_->Delete(kPods, "default", "a"));
  ASSERT_TRUE(WaitFor([&] { return Claims().size() == 1u; }));
  EXPECT_EQ(k8s::Name(Claims()[0]), b_claim);
  // A finished pod's claim goes too (upstream's controller deletes it before the pod is).
  ASSERT_TRUE(client_->Patch(kPods, "default", "b", k8s::PatchType::kMerge,
                             json{{"status", {{"phase", "Succeeded"}}}}, "status"));
  ASSERT_TRUE(WaitFor([&] { return Claims().empty(); }));
  // The count follows the API's answer to the delete, which the test may see first.
  EXPECT_TRUE(WaitFor([&] { return controller_->stats().claims_deleted == 2; }))
      << controller_->stats().claims_deleted;
}

// One claim for two pods (resourceClaimName): each pod leaves reservedFor when it ends; the
// allocation goes with the last, and the claim stays (nobody owns it).
TEST_F(ClaimControllerTest, ASharedClaimIsReleasedWhenItsLastPodEnds) {
  json claim = json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
      "metadata": {"name": "shared", "namespace": "default"}})");
  claim["spec"] = Template()["spec"]["spec"];
  auto created = client_->Create(kClaims, "default", claim);
  ASSERT_TRUE(created);
  auto a = client_->Create(kPods, "default", Pod("a", "gpu", true));
  auto b = client_->Create(kPods, "default", Pod("b", "gpu", true));
  ASSERT_TRUE(a && b);
  json allocated = *created;
  allocated["status"] = json::parse(R"({"allocation": {
      "devices": {"results": [{"request": "gpu", "driver": "hami-core-gpu.project-hami.io",
          "pool": "node-1", "device": "hami-gpu-0",
          "shareID": "3f1c6a9e-0000-4000-8000-000000000001",
          "consumedCapacity": {"memory": "3000Mi", "cores": "100"}}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
          {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}})");
  allocated["status"]["reservedFor"] =
      json::array({{{"resource", "pods"}, {"name", "a"}, {"uid", k8s::Uid(*a)}},
                   {{"resource", "pods"}, {"name", "b"}, {"uid", k8s::Uid(*b)}}});
  ASSERT_TRUE(client_->UpdateStatus(kClaims, allocated));
  StartController();
  ASSERT_TRUE(client_->Patch(kPods, "default", "a", k8s::PatchType::kMerge,
                             json{{"status", {{"phase", "Failed"}}}}, "status"));
  ASSERT_TRUE(WaitFor([&] { return Get(kClaims, "shared")["status"]["reservedFor"].size() == 1; }));
  json one = Get(kClaims, "shared");
  EXPECT_EQ(one["status"]["reservedFor"][0]["name"], "b");
  EXPECT_TRUE(one["status"].contains("allocation"));
  ASSERT_TRUE(client_->Delete(kPods, "default", "b"));
  ASSERT_TRUE(WaitFor([&] { return !Get(kClaims, "shared")["status"].contains("allocation"); }));
  json none = Get(kClaims, "shared");
  EXPECT_FALSE(none["status"].contains("reservedFor"));
  // The count follows the API's answer to the status write, which the test may see first.
  EXPECT_TRUE(WaitFor([&] { return controller_->stats().claims_deallocated == 1; }))
      << controller_->stats().claims_deallocated;
  EXPECT_EQ(controller_->stats().claims_deleted, 0);
  EXPECT_EQ(Claims().size(), 1u);
}

}  // namespace
}  // namespace hami::sim
