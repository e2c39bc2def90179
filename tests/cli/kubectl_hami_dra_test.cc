// kubectl-hami in DRA mode: inspect and pods from crafted ResourceSlices (as hami-dra-plugin
// publishes them, src/draplugin/slices.cc), ResourceClaims (as kube-scheduler allocates them)
// and pods (as kube-controller-manager leaves them), no server.
#include "cli/kubectl_hami_dra.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/kubectl_hami_view.h"
#include "common/time_format.h"

namespace hami::cli {
namespace {

using nlohmann::json;

const SystemTime kNow = ParseRfc3339("2024-01-23T04:31:04Z").value().instant;
constexpr const char* kDriver = "hami-core-gpu.project-hami.io";

json Attr(const std::string& s) { return {{"string", s}}; }

// A shareable GPU as ShareableGpuDevice writes it.
json Gpu(int minor, const std::string& uuid, const std::string& product, const std::string& mem,
         bool healthy = true) {
  json d = {{"name", "hami-gpu-" + std::to_string(minor)},
            {"attributes",
             {{"type", Attr("hami-gpu")},
              {"uuid", Attr(uuid)},
              {"minor", {{"int", minor}}},
              {"productName", Attr(product)}}},
            {"capacity",
             {{"memory",
               {{"value", mem},
                {"requestPolicy",
                 {{"default", mem}, {"validRange", {{"min", "1Mi"}, {"step", "1Mi"}}}}}}},
              {"cores", {{"value", "100"}}}}},
            {"allowMultipleAllocations", true}};
  if (!healthy) d["taints"] = {{{"key", "hami.io/unhealthy"}, {"effect", "NoSchedule"}}};
  return d;
}

json Mig(const std::string& name, const std::string& uuid, const std::string& mem,
         const std::string& cores) {
  return {{"name", name},
          {"attributes",
           {{"type", Attr("hami-mig")},
            {"uuid", Attr(uuid)},
            {"minor", {{"int", 0}}},
            {"productName", Attr("NVIDIA A100-SXM4-80GB")},
            {"profile", Attr("1g.10gb")}}},
          {"capacity", {{"memory", {{"value", mem}}}, {"cores", {{"value", cores}}}}},
          {"consumesCounters",
           {{{"counterSet", "hami-gpu-0-counters"},
             {"counters", {{"memory-slice-0", {{"value", "1"}}}}}}}}};
}

json Slice(const std::string& node, int64_t generation, json devices,
           const std::string& driver = kDriver) {
  if (devices.is_object()) devices = json::array({devices});  // see Claim
  return {{"metadata", {{"name", node + "-hami-core-gpu-0"}}},
          {"spec",
           {{"driver", driver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

json AllocResult(const std::string& pool, const std::string& device, const std::string& share,
                 json consumed, const std::string& request = "gpu") {
  json r = {{"request", request}, {"driver", kDriver}, {"pool", pool}, {"device", device}};
  if (!share.empty()) r["shareID"] = share;
  if (!consumed.is_null()) r["consumedCapacity"] = consumed;
  return r;
}

json Claim(const std::string& ns, const std::string& name, json results,
           std::vector<std::string> pods = {}) {
  json c = {{"metadata", {{"namespace", ns}, {"name", name}, {"uid", "uid-" + name}}},
            {"spec",
             {{"devices",
               {{"requests", {{{"name", "gpu"}, {"exactly", {{"deviceClassName", kDriver}}}}}}}}}}};
  if (results.is_null()) return c;
  // `{AllocResult(...)}`: one element in braces is an array of one under g++ but a copy of the
  // element under clang (nlohmann::json and CWG 2137): make it the array either way.
  if (results.is_object()) results = json::array({results});
  c["status"]["allocation"]["devices"]["results"] = results;
  for (const auto& p : pods) {
    c["status"]["reservedFor"].push_back({{"resource", "pods"}, {"name", p}, {"uid", "u-" + p}});
  }
  return c;
}

// A pod with one claim entry; `uses` lists the containers naming it in resources.claims.
json Pod(const std::string& ns, const std::string& name, const std::string& node, json claim_entry,
         std::vector<std::pair<std::string, bool>> containers,
         const std::string& phase = "Running") {
  json ctrs = json::array();
  for (const auto& [c, uses] : containers) {
    json ctr = {{"name", c}};
    if (uses) ctr["resources"]["claims"] = {{{"name", claim_entry["name"]}}};
    ctrs.push_back(ctr);
  }
  json pod = {{"metadata",
               {{"namespace", ns},
                {"name", name},
                {"uid", "u-" + name},
                {"creationTimestamp", "2024-01-23T04:30:00Z"}}},
              {"spec", {{"containers", ctrs}, {"resourceClaims", {claim_entry}}}},
              {"status", {{"phase", phase}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

json Named(const std::string& entry, const std::string& claim) {
  return {{"name", entry}, {"resourceClaimName", claim}};
}
json FromTemplate(const std::string& entry) {
  return {{"name", entry}, {"resourceClaimTemplateName", "hami-gpu-1x3000mi-30c"}};
}

json Node(const std::string& name, json annotations = json::object()) {
  return {{"metadata", {{"name", name}, {"annotations", annotations}}}};
}

// node-1: two shareable GPUs (the second tainted unhealthy) at generation 2 (a stale generation
// 1 slice beside it); node-2: an A100 in MIG mode; gpu-1: device-plugin mode, whose slice is
// not shown. Claims: train's from a template (3000Mi, 30), "shared" with two shares of one GPU
// and two pods, "whole" without consumedCapacity (the whole device), a MIG instance, one not
// allocated, one of another driver, and one that does not read.
struct Cluster {
  std::vector<json> nodes;
  std::vector<json> pods;
  DraObjects dra;
};

Cluster MakeCluster() {
  Cluster c;
  c.nodes = {
      Node("node-1"), Node("node-2"), Node("cpu-1"),
      Node("gpu-1", {{"hami.io/node-nvidia-register",
                      R"([{"id":"GPU-dp","count":10,"devmem":15360,"devcore":100,)"
                      R"("type":"NVIDIA-Tesla T4","numa":0,"mode":"hami-core","health":true}])"}})};
  c.dra.slices = {
      Slice("node-1", 1, {Gpu(9, "GPU-stale", "Tesla T4", "15Gi")}),
      Slice("node-1", 2,
            {Gpu(0, "GPU-a", "NVIDIA A100-SXM4-80GB", "80Gi"),
             Gpu(1, "GPU-b", "Tesla T4", "15Gi", /*healthy=*/false)}),
      Slice("node-2", 1,
            {Mig("hami-gpu-0-mig-1g-10gb-0", "GPU-m", "10Gi", "14"),
             Mig("hami-gpu-0-mig-7g-80gb-0", "GPU-m", "80Gi", "100")}),
      Slice("gpu-1", 1, {Gpu(0, "GPU-x", "Tesla T4", "15Gi")}),
      Slice("node-1", 5, {Gpu(0, "GPU-other", "Other", "1Gi")}, "gpu.example.com"),
  };
  json train = Claim("default", "train-gpu-x7k2q",
                     {AllocResult("node-1", "hami-gpu-0", "3f1c6a9e-0000-4000-8000-000000000001",
                                  {{"memory", "3000Mi"}, {"cores", "30"}})},
                     {"train"});
  train["metadata"]["ownerReferences"] = {
      {{"kind", "Pod"}, {"name", "train"}, {"uid", "u-train"}, {"controller", true}}};
  train["metadata"]["annotations"] = {{"resource.kubernetes.io/pod-claim-name", "gpu"}};
  json other = Claim(
      "other", "nv",
      {{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node-1"}, {"device", "gpu-0"}}},
      {"nvpod"});
  other["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu.nvidia.com";
  c.dra.claims = {
      train,
      Claim("default", "shared",
            {AllocResult("node-1", "hami-gpu-0", "3f1c6a9e-0000-4000-8000-000000000003",
                         {{"memory", "2000Mi"}, {"cores", "5"}}),
             AllocResult("node-1", "hami-gpu-0", "3f1c6a9e-0000-4000-8000-000000000002",
                         {{"memory", "1Gi"}, {"cores", "10"}})},
            {"a", "b"}),
      Claim("team", "whole", {AllocResult("node-1", "hami-gpu-1", "", nullptr)}, {"w"}),
      Claim("ml", "mig-claim", {AllocResult("node-2", "hami-gpu-0-mig-1g-10gb-0", "", nullptr)},
            {"m"}),
      Claim("default", "big-gpu-q9r8s", nullptr),
      other,
      Claim("default", "bad", {AllocResult("node-1", "hami-gpu-7", "", {{"memory", "lots"}})}),
  };
  json big = Pod("default", "big", "", FromTemplate("gpu"), {{"main", true}}, "Pending");
  big["status"]["resourceClaimStatuses"] = {
      {{"name", "gpu"}, {"resourceClaimName", "big-gpu-q9r8s"}}};
  big["status"]["conditions"] = {
      {{"type", "PodScheduled"},
       {"status", "False"},
       {"reason", "Unschedulable"},
       {"message", "0/3 nodes are available: 3 cannot allocate all claims."}}};
  json fresh = Pod("default", "new", "", FromTemplate("gpu"), {{"main", true}}, "Pending");
  fresh["metadata"]["labels"] = {{"hami.io/dra", "true"}};
  json m = Pod("ml", "m", "node-2", FromTemplate("g"), {{"main", true}});
  m["status"]["resourceClaimStatuses"] = {{{"name", "g"}, {"resourceClaimName", "mig-claim"}}};
  c.pods = {
      Pod("default", "train", "node-1", FromTemplate("gpu"), {{"main", true}, {"side", false}}),
      Pod("default", "a", "node-1", Named("shared", "shared"), {{"c1", true}}),
      Pod("default", "b", "node-1", Named("shared", "shared"), {{"c2", true}, {"c3", true}}),
      Pod("team", "w", "node-1", Named("g", "whole"), {{"main", true}}),
      m,
      big,
      fresh,
      Pod("other", "nvpod", "node-1", Named("g", "nv"), {{"main", true}}),
      Pod("default", "web", "node-1", FromTemplate("x"), {{"main", false}}),
  };
  return c;
}

TEST(KubectlHamiDra, ReadsThePoolsNewestGenerationAndPlacesEachShareOnItsGpu) {
  Cluster c = MakeCluster();
  DraView view = ReadDra(c.dra);
  ASSERT_EQ(view.gpus.size(), 3u);  // node-1, node-2, gpu-1 (inspect ignores gpu-1's)
  const auto& n1 = view.gpus["node-1"];
  ASSERT_EQ(n1.size(), 2u);  // hami-gpu-9 is of generation 1; gpu.example.com is not ours
  EXPECT_EQ(n1[0].uuid, "GPU-a");
  EXPECT_EQ(n1[0].type, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(n1[0].memory, 81920);
  EXPECT_EQ(n1[0].cores, 100);
  ASSERT_EQ(n1[0].shares.size(), 3u);
  EXPECT_EQ(n1[0].shares[0].claim, "default/shared");
  EXPECT_EQ(n1[0].shares[0].share_id, "3f1c6a9e-0000-4000-8000-000000000002");
  EXPECT_EQ(n1[0].shares[0].memory, 1024);
  EXPECT_EQ(n1[0].shares[0].pods, (std::vector<std::string>{"default/a", "default/b"}));
  EXPECT_EQ(n1[0].shares[2].claim, "default/train-gpu-x7k2q");
  EXPECT_EQ(n1[1].type, "NVIDIA-Tesla T4");
  EXPECT_FALSE(n1[1].health);
  // No consumedCapacity: the whole device.
  EXPECT_EQ(n1[1].shares[0].memory, 15360);
  EXPECT_EQ(n1[1].shares[0].cores, 100);
  const auto& n2 = view.gpus["node-2"];
  ASSERT_EQ(n2.size(), 1u);  // two MIG placements, one GPU
  EXPECT_EQ(n2[0].mode, "mig");
  EXPECT_EQ(n2[0].memory, 81920);
  EXPECT_EQ(n2[0].shares[0].memory, 10240);
  EXPECT_EQ(n2[0].shares[0].cores, 14);
  EXPECT_FALSE(view.claims["other/nv"].ours);
  EXPECT_TRUE(view.claims["default/big-gpu-q9r8s"].ours);  // by its request's class
  EXPECT_FALSE(view.claims["default/big-gpu-q9r8s"].allocated);
  EXPECT_EQ(view.warnings,
            (std::vector<std::string>{
                "resourceclaim default/bad: status.allocation.devices.results[0]"
                ".consumedCapacity.memory: not a quantity: \"lots\"",
                "resourceclaim default/bad: status.allocation.devices.results[0]: device "
                "\"hami-gpu-7\" of pool \"node-1\" is in no ResourceSlice"}));
}

TEST(KubectlHamiDra, PodClaimsResolveByNameStatusOrOwner) {
  Cluster c = MakeCluster();
  DraView view = ReadDra(c.dra);
  auto train = PodClaims(c.pods[0], view);  // no status: the claim it owns, by annotation
  ASSERT_EQ(train.size(), 1u);
  EXPECT_EQ(train[0].claim, "train-gpu-x7k2q");
  ASSERT_NE(train[0].found, nullptr);
  EXPECT_EQ(train[0].containers, std::vector<std::string>{"main"});
  auto b = PodClaims(c.pods[2], view);
  EXPECT_EQ(b[0].claim, "shared");
  EXPECT_EQ(b[0].containers, (std::vector<std::string>{"c2", "c3"}));
  auto m = PodClaims(c.pods[4], view);
  EXPECT_EQ(m[0].claim, "mig-claim");
  auto fresh = PodClaims(c.pods[6], view);
  EXPECT_FALSE(fresh[0].claim.has_value());
  EXPECT_TRUE(IsDraPod(c.pods[6], fresh));                        // the webhook's label
  EXPECT_FALSE(IsDraPod(c.pods[7], PodClaims(c.pods[7], view)));  // another driver's claim
  EXPECT_FALSE(IsDraPod(c.pods[8], PodClaims(c.pods[8], view)));  // no claim made, no label
}

TEST(KubectlHamiDra, QuantitiesRoundUp) {
  EXPECT_EQ(QuantityCeil("3000Mi", 20), 3000);
  EXPECT_EQ(QuantityCeil("80Gi", 20), 81920);
  EXPECT_EQ(QuantityCeil("3G", 20), 2862);  // 2861.02 MiB
  EXPECT_EQ(QuantityCeil("30", 0), 30);
  EXPECT_EQ(QuantityCeil("500m", 0), 1);
  EXPECT_EQ(QuantityCeil("-1", 0), std::nullopt);
  EXPECT_EQ(QuantityCeil(json(30), 0), std::nullopt);
  EXPECT_EQ(QuantityCeil("x", 0), std::nullopt);
}

TEST(KubectlHamiDra, InspectShowsSlicesGpusWithTheirShares) {
  Cluster c = MakeCluster();
  auto view = BuildInspect(c.nodes, c.pods, {}, kNow, c.dra);
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().warnings.size(), 2u);  // default/bad's
  EXPECT_EQ(InspectTable(view.value(), {}),
            "NODE     INDEX   UUID        TYPE                    VENDOR   HEALTH   MEMORY(MiB)   "
            "CORES(%)   SLICES   PODS\n"
            "gpu-1    0       GPU-dp      NVIDIA-Tesla T4         NVIDIA   true     0/15360       "
            "0/100      0/10     <none>\n"
            "gpu-1    total   1 devices                                             0/15360       "
            "0/100      0/10\n"
            "node-1   0       GPU-a       NVIDIA A100-SXM4-80GB   NVIDIA   true     6024/81920    "
            "45/100     3/-      default/a,default/b,default/train\n"
            "node-1   1       GPU-b       NVIDIA-Tesla T4         NVIDIA   false    15360/15360   "
            "100/100    1/-      team/w\n"
            "node-1   total   2 devices                                             21384/97280   "
            "145/200    4/-\n"
            "node-2   0       GPU-m       NVIDIA A100-SXM4-80GB   NVIDIA   true     10240/81920   "
            "14/100     1/-      ml/m\n"
            "node-2   total   1 devices                                             10240/81920   "
            "14/100     1/-\n"
            "\n"
            "NODE     INDEX   CLAIM                     REQUEST   DEVICE                     "
            "MEMORY(MiB)   CORES(%)   PODS\n"
            "node-1   0       default/shared            gpu       hami-gpu-0                 "
            "1024          10         default/a,default/b\n"
            "node-1   0       default/shared            gpu       hami-gpu-0                 "
            "2000          5          default/a,default/b\n"
            "node-1   0       default/train-gpu-x7k2q   gpu       hami-gpu-0                 "
            "3000          30         default/train\n"
            "node-1   1       team/whole                gpu       hami-gpu-1                 "
            "15360         100        team/w\n"
            "node-2   0       ml/mig-claim              gpu       hami-gpu-0-mig-1g-10gb-0   "
            "10240         14         ml/m\n"
            "\n"
            "NODE     HANDSHAKE   LOCK-HOLDER   LOCK-AGE\n"
            "gpu-1    <none>      <none>        <none>\n"
            "node-1   <none>      <none>        <none>\n"
            "node-2   <none>      <none>        <none>\n");
  std::string wide = InspectTable(view.value(), {.wide = true, .no_headers = true});
  EXPECT_NE(wide.find("node-1   0       GPU-a       NVIDIA A100-SXM4-80GB   NVIDIA   true    "
                      "6024/81920    45/100    3/-    hami-core   0   default/a,"),
            std::string::npos)
      << wide;
  EXPECT_NE(wide.find("1/-    mig         0   ml/m\n"), std::string::npos) << wide;
  EXPECT_NE(wide.find("node-1   0   default/train-gpu-x7k2q   gpu   hami-gpu-0                 "
                      "3000    30    3f1c6a9e-0000-4000-8000-000000000001   default/train\n"),
            std::string::npos)
      << wide;
  EXPECT_NE(wide.find("node-1   1   team/whole                gpu   hami-gpu-1                 "
                      "15360   100   <none>                                 team/w\n"),
            std::string::npos)
      << wide;
}

TEST(KubectlHamiDra, InspectJsonAddsDriverDeviceModeAndShares) {
  Cluster c = MakeCluster();
  auto view = BuildInspect(c.nodes, c.pods, {"node-2"}, kNow, c.dra);
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(
      InspectJson(view.value()),
      R"({"nodes":[{"name":"node-2","devices":[{"index":0,"uuid":"GPU-m","type":"NVIDIA A100-SXM4-80GB","vendor":"NVIDIA","health":true,)"
      R"("memory":{"allocated":10240,"total":81920},"cores":{"allocated":14,"total":100},"slices":{"used":1,"total":0},"pods":["ml/m"],)"
      R"("driver":"hami-core-gpu.project-hami.io","device":"hami-gpu-0","mode":"mig",)"
      R"("shares":[{"claim":"ml/mig-claim","request":"gpu","device":"hami-gpu-0-mig-1g-10gb-0","shareID":null,"memory":10240,"cores":14,"pods":["ml/m"]}]}],)"
      R"("handshake":"","lock":null}]})"
      "\n");
  // Without DRA objects a node without a register annotation has no device, as before.
  auto plain = BuildInspect(c.nodes, c.pods, {}, kNow);
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain.value().nodes.size(), 1u);
  EXPECT_EQ(plain.value().nodes[0].name, "gpu-1");
}

TEST(KubectlHamiDra, PodsListsDraPodsWithTheirClaims) {
  Cluster c = MakeCluster();
  PodsView view = BuildPods(c.nodes, c.pods, kNow, c.dra);
  EXPECT_EQ(PodsTable(view, {}),
            "NAMESPACE   POD     NODE     BIND-PHASE   DEVICES                CLAIMS               "
            "    AGE\n"
            "default     a       node-1   <none>       GPU-a(3024MiB,15%)     shared               "
            "    1m\n"
            "default     b       node-1   <none>       GPU-a(3024MiB,15%)     shared               "
            "    1m\n"
            "default     big     <none>   <none>       <none>                 "
            "big-gpu-q9r8s(pending)   1m\n"
            "default     new     <none>   <none>       <none>                 gpu(not created)     "
            "    1m\n"
            "default     train   node-1   <none>       GPU-a(3000MiB,30%)     train-gpu-x7k2q      "
            "    1m\n"
            "ml          m       node-2   <none>       GPU-m(10240MiB,14%)    mig-claim            "
            "    1m\n"
            "team        w       node-1   <none>       GPU-b(15360MiB,100%)   whole                "
            "    1m\n"
            "default/big pending: 0/3 nodes are available: 3 cannot allocate all claims.\n");
  std::string json_text = PodsJson(view);
  EXPECT_NE(
      json_text.find(
          R"({"namespace":"default","name":"train","node":"node-1","bindPhase":null,"devices":[{"uuid":"GPU-a","vendor":"NVIDIA","memory":3000,"cores":30}],"reason":null,)"
          R"("claims":[{"name":"gpu","claim":"train-gpu-x7k2q","allocated":true,"shares":[{"request":"gpu","node":"node-1","uuid":"GPU-a","device":"hami-gpu-0","shareID":"3f1c6a9e-0000-4000-8000-000000000001","memory":3000,"cores":30}]}]})"),
      std::string::npos)
      << json_text;
  EXPECT_NE(
      json_text.find(
          R"({"namespace":"default","name":"new","node":null,"bindPhase":null,"devices":[],"reason":null,"claims":[{"name":"gpu","claim":null,"allocated":false,"shares":[]}]})"),
      std::string::npos)
      << json_text;
  // Without DRA objects only the webhook's label tells a DRA pod.
  PodsView plain = BuildPods(c.nodes, c.pods, kNow);
  ASSERT_EQ(plain.pods.size(), 1u);
  EXPECT_EQ(plain.pods[0].name, "new");
}

TEST(KubectlHamiDra, ContainerAllocationsGiveEachPodItsClaimsShares) {
  Cluster c = MakeCluster();
  std::vector<std::string> warnings;
  auto allocations = ContainerAllocations(c.nodes, c.pods, &warnings, c.dra);
  ASSERT_EQ(allocations.size(), 7u);  // train, a (2 shares), b (2 shares), w, m
  EXPECT_EQ(allocations[0].pod, "train");
  EXPECT_EQ(allocations[0].container, "");
  EXPECT_EQ(allocations[0].claim, "train-gpu-x7k2q");
  EXPECT_EQ(allocations[0].containers, std::vector<std::string>{"main"});
  EXPECT_EQ(allocations[0].node, "node-1");
  EXPECT_EQ(allocations[0].uuid, "GPU-a");
  EXPECT_EQ(allocations[0].memory, 3000);
  EXPECT_EQ(allocations[3].pod, "b");
  EXPECT_EQ(allocations[3].containers, (std::vector<std::string>{"c2", "c3"}));
}

}  // namespace
}  // namespace hami::cli
