// The simulated kubelets in DRA mode (KubeletOptions::dra): the real hami-dra-plugin on the node
// publishes its pool and registers; a pod bound to the node waits until its claim is allocated
// and reserved for it, runs with the env of the CDI spec NodePrepareResources wrote (the claim's
// consumed capacity as libvgpu's limits), and its claim is unprepared when it ends or is deleted;
// a claim the plugin cannot prepare fails the pod after the configured tries. With the claim
// controller: a template's claim, made, prepared and deleted with its pod.
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "k8s/object.h"
#include "sim/apiserver/apiserver.h"
#include "sim/claim_controller.h"
#include "sim/kubelet.h"
#include "support/wait_for.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::WaitFor;

const auto& kClaims = k8s::resources::kResourceClaims;
const auto& kTemplates = k8s::resources::kResourceClaimTemplates;
const auto& kSlices = k8s::resources::kResourceSlices;
const auto& kPods = k8s::resources::kPods;
constexpr const char* kUuid = "GPU-00000000-0000-0000-0000-000000000000";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json ClaimSpec() {
  return json::parse(R"({"devices": {"requests": [{"name": "gpu", "exactly": {
      "deviceClassName": "hami-core-gpu.project-hami.io",
      "capacity": {"requests": {"memory": "3000Mi", "cores": "30"}}}}]}})");
}

// What kube-scheduler writes for a claim it gave 3000Mi and 30 cores of `device` on gpu-0.
json Allocation(const std::string& device = "hami-gpu-0") {
  json a = json::parse(R"({
      "devices": {"results": [{"request": "gpu", "driver": "hami-core-gpu.project-hami.io",
          "pool": "gpu-0", "shareID": "3f1c6a9e-0000-4000-8000-000000000001",
          "consumedCapacity": {"memory": "3000Mi", "cores": "30"}}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
          {"key": "metadata.name", "operator": "In", "values": ["gpu-0"]}]}]}})");
  a["devices"]["results"][0]["device"] = device;
  return a;
}

// Pod `name` bound to gpu-0 whose container uses claim entry "gpu": claim `claim`, or a claim
// from template `tmpl`.
json Pod(const std::string& name, const std::string& claim, const std::string& tmpl = "",
         const std::string& duration = "") {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}};
  if (!duration.empty())
    pod["metadata"]["annotations"][std::string(kDurationAnnotation)] = duration;
  pod["spec"]["nodeName"] = "gpu-0";
  pod["spec"]["containers"] = json::array(
      {{{"name", "cuda"}, {"image", "sim"}, {"resources", {{"claims", {{{"name", "gpu"}}}}}}},
       {{"name", "sidecar"}, {"image", "sim"}}});
  json entry = {{"name", "gpu"}};
  if (tmpl.empty()) {
    entry["resourceClaimName"] = claim;
  } else {
    entry["resourceClaimTemplateName"] = tmpl;
  }
  pod["spec"]["resourceClaims"] = json::array({entry});
  return pod;
}

class KubeletDraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-kd-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(api_.Start());
    k8s::RestConfig cfg;
    cfg.server = api_.url();
    cfg.qps = 0;
    client_ = std::make_unique<k8s::Client>(cfg);
  }
  void TearDown() override {
    if (controller_) controller_->Stop();
    if (fleet_) fleet_->Stop();
    client_.reset();
    api_.Stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // gpu-0 with a T4 (and, with `mig`, an A10 in MIG mode offering four 1g.6gb instances).
  void StartFleet(int prepare_attempts = 5, bool mig = false) {
    SimNode node{"gpu-0", {}, {}};
    deviceplugin::GpuDevice gpu;
    gpu.uuid = kUuid;
    gpu.model = "Tesla T4";
    gpu.memory_mib = 15360;
    node.gpus.push_back(gpu);
    if (mig) {
      gpu.index = 1;
      gpu.uuid = "GPU-00000000-0000-0000-0000-000000000001";
      gpu.model = "NVIDIA A10";
      gpu.memory_mib = 24576;
      gpu.mig_profiles = {{{"1g.6gb", 5952, 25, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}}}, 4}};
      node.gpus.push_back(gpu);
    }
    KubeletOptions o;
    o.socket_dir = dir_;
    o.dra = true;
    o.dra_prepare_attempts = prepare_attempts;
    o.dra_max_backoff = milliseconds(50);
    fleet_ = std::make_unique<KubeletFleet>(*client_, std::vector<SimNode>{node}, o);
    Status s = fleet_->Start();
    ASSERT_TRUE(s) << s.error();
  }
  std::optional<PodRunRecord> Run(const std::string& name) const {
    for (const PodRunRecord& r : fleet_->Records()) {
      if (r.name == name) return r;
    }
    return std::nullopt;
  }
  // Claim `name` allocated as Allocation(device) and reserved for pod `pod`.
  void Allocate(const std::string& name, const json& pod,
                const std::string& device = "hami-gpu-0") {
    json claim = *client_->Get(kClaims, "default", name);
    claim["status"]["allocation"] = Allocation(device);
    claim["status"]["reservedFor"] =
        json::array({{{"resource", "pods"}, {"name", k8s::Name(pod)}, {"uid", k8s::Uid(pod)}}});
    auto r = client_->UpdateStatus(kClaims, claim);
    ASSERT_TRUE(r) << r.error().ToString();
  }
  std::string Checkpoint() const { return ReadFile(dir_ + "/0/dra/checkpoint.json"); }

  std::string dir_;
  ApiServer api_{ApiServerOptions{}};
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<KubeletFleet> fleet_;
  std::unique_ptr<ClaimController> controller_;
};

TEST_F(KubeletDraTest, TheNodesPluginPublishesItsPoolAndRegisters) {
  StartFleet();
  json node = *client_->Get(k8s::resources::kNodes, "", "gpu-0");
  EXPECT_FALSE(node["status"]["capacity"].contains("nvidia.com/gpu")) << node["status"].dump();
  EXPECT_EQ(node["status"]["capacity"]["pods"], "110");
  auto slices = client_->ListAll(kSlices, "", {});
  ASSERT_TRUE(slices);
  ASSERT_EQ(slices->items.size(), 1u);
  const json& spec = slices->items[0]["spec"];
  EXPECT_EQ(spec["pool"]["name"], "gpu-0");
  EXPECT_EQ(spec["nodeName"], "gpu-0");
  EXPECT_EQ(spec["devices"][0]["name"], "hami-gpu-0");
  EXPECT_EQ(spec["devices"][0]["attributes"]["uuid"], json({{"string", kUuid}}));
  EXPECT_TRUE(fleet_->Registered(0));
  EXPECT_EQ(fleet_->Registrations(0), 1);
  EXPECT_FALSE(fleet_->KillPlugin(0));  // not simulated on a DRA node
}

// A GPU in MIG mode publishes its placements (and their counter set); unhealthyGpu taints the
// device through the plugin's health check.
TEST_F(KubeletDraTest, MigGpusAndGpuHealthReachThePool) {
  StartFleet(5, /*mig=*/true);
  auto devices = [&] {
    std::map<std::string, json> out;
    auto slices = client_->ListAll(kSlices, "", {});
    EXPECT_TRUE(slices);
    for (const json& slice : slices ? slices->items : std::vector<json>{}) {
      for (const json& d : slice["spec"].value("devices", json::array())) out[d["name"]] = d;
    }
    return out;
  };
  std::map<std::string, json> all = devices();
  EXPECT_EQ(all.size(), 5u);  // hami-gpu-0 and four 1g.6gb placements of GPU 1
  EXPECT_EQ(all.count("hami-gpu-1"), 0u);
  ASSERT_TRUE(fleet_->SetGpuHealth(0, 0, false));
  EXPECT_TRUE(devices()["hami-gpu-0"].contains("taints"));
  ASSERT_TRUE(fleet_->SetGpuHealth(0, 0, true));
  EXPECT_FALSE(devices()["hami-gpu-0"].contains("taints"));
}

TEST_F(KubeletDraTest, AnAllocatedClaimIsPreparedIntoTheEnvAndUnpreparedAfterThePod) {
  StartFleet();
  json claim = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"}};
  claim["metadata"] = {{"name", "c"}, {"namespace", "default"}};
  claim["spec"] = ClaimSpec();
  auto created = client_->Create(kClaims, "default", claim);
  ASSERT_TRUE(created);
  const std::string uid = k8s::Uid(*created);
  json spec_pod = Pod("p", "c", "", "0.5");
  // What the scenario's `usage:` declares: the kubelet writes it into the claim's region.
  spec_pod["metadata"]["annotations"]["sim.hami.io/usage"] =
      R"({"cuda": {"memory": 1000, "utilization": 40}})";
  auto pod = client_->Create(kPods, "default", spec_pod);
  ASSERT_TRUE(pod);
  // The kubelet knows the pod but keeps it pending while its claim is not allocated.
  ASSERT_TRUE(WaitFor([&] { return Run("p").has_value(); }));
  EXPECT_FALSE(Run("p")->running);
  Allocate("c", *pod);
  ASSERT_TRUE(WaitFor([&] { return Run("p")->running; }));
  PodRunRecord run = *Run("p");
  ASSERT_EQ(run.container_envs.size(), 1u);  // the sidecar names no claim
  std::map<std::string, std::string> env = run.container_envs[0];
  EXPECT_EQ(env["CUDA_DEVICE_MEMORY_LIMIT_0"], "3000m");
  EXPECT_EQ(env["CUDA_DEVICE_SM_LIMIT_0"], "30");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], kUuid);
  EXPECT_EQ(env["CUDA_DEVICE_MEMORY_SHARED_CACHE"], dir_ + "/hook/vgpu/" + uid + ".cache");
  EXPECT_NE(Checkpoint().find(uid), std::string::npos);
  // The region is where the CDI spec mounts the container's shared cache from: the claim's.
  const std::string region = dir_ + "/hook/vgpu/claims/" + uid + "/" + uid + ".cache";
  EXPECT_GT(std::filesystem::file_size(region), 1000u);
  const std::string spec = dir_ + "/0/cdi/hami-core-gpu.project-hami.io-claim_" + uid + ".json";
  EXPECT_TRUE(std::filesystem::exists(spec));
  EXPECT_EQ(k8s::FieldString(*client_->Get(kPods, "default", "p"), "status.phase"), "Running");

  ASSERT_TRUE(WaitFor([&] { return Run("p")->finished; }));
  EXPECT_FALSE(Run("p")->failed);
  ASSERT_TRUE(WaitFor([&] { return Checkpoint().find(uid) == std::string::npos; }));
  EXPECT_FALSE(std::filesystem::exists(spec));
}

// One claim for two pods of the node: kubelet unprepares it after the last of them only. Pod a
// also has a claim of its own, unprepared in the same call when a ends: once that one is gone,
// the shared one must still be there.
TEST_F(KubeletDraTest, ASharedClaimIsUnpreparedAfterItsLastPod) {
  StartFleet();
  std::map<std::string, std::string> uids;
  for (const char* name : {"c", "own"}) {
    json claim = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"}};
    claim["metadata"] = {{"name", name}, {"namespace", "default"}};
    claim["spec"] = ClaimSpec();
    auto created = client_->Create(kClaims, "default", claim);
    ASSERT_TRUE(created);
    uids[name] = k8s::Uid(*created);
  }
  json spec_a = Pod("a", "c", "", "0.2");
  spec_a["spec"]["resourceClaims"].push_back({{"name", "own"}, {"resourceClaimName", "own"}});
  spec_a["spec"]["containers"][1]["resources"]["claims"] = {{{"name", "own"}}};
  auto a = client_->Create(kPods, "default", spec_a);
  auto b = client_->Create(kPods, "default", Pod("b", "c"));
  ASSERT_TRUE(a && b);
  for (const char* name : {"c", "own"}) {
    json allocated = *client_->Get(kClaims, "default", name);
    allocated["status"]["allocation"] = Allocation();
    allocated["status"]["reservedFor"] =
        json::array({{{"resource", "pods"}, {"name", "a"}, {"uid", k8s::Uid(*a)}}});
    if (std::string(name) == "c") {
      allocated["status"]["reservedFor"].push_back(
          {{"resource", "pods"}, {"name", "b"}, {"uid", k8s::Uid(*b)}});
    }
    ASSERT_TRUE(client_->UpdateStatus(kClaims, allocated));
  }
  // Both ran (a's claims were prepared), then a ends after 0.2 s.
  ASSERT_TRUE(
      WaitFor([&] { return Run("a") && Run("b") && Run("a")->running && Run("b")->running; }));
  EXPECT_EQ(Run("b")->container_envs[0]["CUDA_DEVICE_MEMORY_LIMIT_0"], "3000m");
  ASSERT_TRUE(WaitFor([&] { return Checkpoint().find(uids["own"]) == std::string::npos; }));
  const std::string uid = uids["c"];
  EXPECT_NE(Checkpoint().find(uid), std::string::npos);  // b still uses it
  ASSERT_TRUE(client_->Delete(kPods, "default", "b"));
  ASSERT_TRUE(WaitFor([&] { return Checkpoint().find(uid) == std::string::npos; }));
}

TEST_F(KubeletDraTest, AClaimThePluginCannotPrepareFailsThePodAfterItsTries) {
  StartFleet(/*prepare_attempts=*/2);
  json claim = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"}};
  claim["metadata"] = {{"name", "elsewhere"}, {"namespace", "default"}};
  claim["spec"] = ClaimSpec();
  ASSERT_TRUE(client_->Create(kClaims, "default", claim));
  auto pod = client_->Create(kPods, "default", Pod("p", "elsewhere"));
  ASSERT_TRUE(pod);
  Allocate("elsewhere", *pod, "hami-gpu-7");  // no such GPU on the node
  ASSERT_TRUE(WaitFor([&] {
    auto r = Run("p");
    return r && r->finished;
  }));
  PodRunRecord run = *Run("p");
  EXPECT_TRUE(run.failed);
  EXPECT_NE(run.message.find("no such device on this node"), std::string::npos) << run.message;
  json got = *client_->Get(kPods, "default", "p");
  EXPECT_EQ(k8s::FieldString(got, "status.phase"), "Failed");
  auto events = client_->ListAll(k8s::resources::kEvents, "default", {});
  ASSERT_TRUE(events);
  bool warned = false;
  for (const json& e : events->items)
    warned = warned || e["reason"] == "FailedPrepareDynamicResources";
  EXPECT_TRUE(warned);
}

// The claim controller and the kubelet together: a template's claim is made for the pod, the
// kubelet prepares it once allocated, and deleting the pod unprepares and deletes it.
TEST_F(KubeletDraTest, ATemplatesClaimIsMadePreparedAndRemovedWithThePod) {
  json tmpl = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaimTemplate"}};
  tmpl["metadata"] = {{"name", "gpu-3000"}, {"namespace", "default"}};
  tmpl["spec"]["spec"] = ClaimSpec();
  ASSERT_TRUE(client_->Create(kTemplates, "default", tmpl));
  StartFleet();
  controller_ = std::make_unique<ClaimController>(*client_);
  ASSERT_TRUE(controller_->Start());
  auto pod = client_->Create(kPods, "default", Pod("trainer", "", "gpu-3000"));
  ASSERT_TRUE(pod);
  std::string name;
  ASSERT_TRUE(WaitFor([&] {
    json p = *client_->Get(kPods, "default", "trainer");
    name = k8s::FieldString(p, "status.resourceClaimStatuses.0.resourceClaimName");
    if (name.empty() && p["status"].contains("resourceClaimStatuses"))
      name = p["status"]["resourceClaimStatuses"][0].value("resourceClaimName", "");
    return !name.empty();
  }));
  const std::string uid = k8s::Uid(*client_->Get(kClaims, "default", name));
  Allocate(name, *pod);
  ASSERT_TRUE(WaitFor([&] { return Run("trainer") && Run("trainer")->running; }));
  EXPECT_EQ(Run("trainer")->container_envs[0]["CUDA_DEVICE_MEMORY_LIMIT_0"], "3000m");
  EXPECT_NE(Checkpoint().find(uid), std::string::npos);
  ASSERT_TRUE(client_->Delete(kPods, "default", "trainer"));
  ASSERT_TRUE(WaitFor([&] { return Checkpoint().find(uid) == std::string::npos; }));
  ASSERT_TRUE(WaitFor([&] { return !client_->Get(kClaims, "default", name).ok(); }));
}

}  // namespace
}  // namespace hami::sim
