// kubectl hami explain for DRA mode's pods: their claims, and for a pending pod kube-scheduler's
// allocator per node (the real dra::Allocator) on crafted slices, claims and a DeviceClass.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/kubectl_hami_explain.h"
#include "common/time_format.h"
#include "draplugin/slices.h"

namespace hami::cli {
namespace {

using nlohmann::json;

constexpr const char* kDriver = "hami-core-gpu.project-hami.io";

// The pool hami-dra-plugin publishes for a node with one 24Gi GPU (minor 0).
json Slice(const std::string& node, const std::string& uuid) {
  draplugin::GpuFacts g;
  g.gpu.uuid = uuid;
  g.gpu.model = "NVIDIA A30";
  g.gpu.memory_mib = 24576;
  auto slices = draplugin::BuildSlices({g}, {node, 1.0}, 1);
  EXPECT_TRUE(slices.ok() && slices->size() == 1) << node;
  return slices.ok() && !slices->empty() ? slices->front() : json();
}

// A claim as kube-controller-manager makes it from the webhook's template.
json Claim(const std::string& name, const std::string& memory) {
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
          {"spec",
           {{"devices",
             {{"requests",
               {{{"name", "gpu"},
                 {"exactly",
                  {{"deviceClassName", kDriver},
                   {"allocationMode", "ExactCount"},
                   {"count", 1},
                   {"capacity", {{"requests", {{"memory", memory}, {"cores", "30"}}}}}}}}}}}}}}};
}

json Pod(const std::string& name, const std::string& claim, const std::string& node = "") {
  json pod = {
      {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "u-" + name}}},
      {"spec",
       {{"containers", {{{"name", "main"}, {"resources", {{"claims", {{{"name", "hami-c0"}}}}}}}}},
        {"resourceClaims",
         {{{"name", "hami-c0"}, {"resourceClaimTemplateName", "hami-gpu-1x" + name + "-30c"}}}}}},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  if (!claim.empty()) {
    pod["status"]["resourceClaimStatuses"] = {{{"name", "hami-c0"}, {"resourceClaimName", claim}}};
  }
  pod["metadata"]["labels"] = {{"hami.io/dra", "true"}};
  return pod;
}

// node-1's GPU has 20000Mi and 50 cores taken by claim busy (pod busy); node-2's is free.
ExplainInput Input(const json& pod) {
  ExplainInput in;
  in.pod = pod;
  in.nodes = {{{"metadata", {{"name", "node-1"}}}},
              {{"metadata", {{"name", "node-2"}}}},
              {{"metadata", {{"name", "cpu-1"}}}}};
  json busy = Claim("busy-claim", "20000Mi");
  busy["status"] = {
      {"allocation",
       {{"devices",
         {{"results",
           {{{"request", "gpu"},
             {"driver", kDriver},
             {"pool", "node-1"},
             {"device", "hami-gpu-0"},
             {"shareID", "3f1c6a9e-0000-4000-8000-000000000001"},
             {"consumedCapacity", {{"memory", "20000Mi"}, {"cores", "50"}}}}}}}},
        {"nodeSelector",
         {{"nodeSelectorTerms",
           {{{"matchFields",
              {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"node-1"}}}}}}}}}}}},
      {"reservedFor", {{{"resource", "pods"}, {"name", "busy"}, {"uid", "u-busy"}}}}};
  in.pods = {Pod("busy", "busy-claim", "node-1"), pod};
  in.dra.slices = {Slice("node-1", "GPU-a"), Slice("node-2", "GPU-b")};
  in.dra.claims = {busy, Claim("mid-claim", "10000Mi"), Claim("big-claim", "30000Mi")};
  in.device_classes = {
      {{"metadata", {{"name", kDriver}}},
       {"spec",
        {{"selectors",
          {{{"cel", {{"expression", std::string("device.driver == \"") + kDriver + "\""}}}}}}}}}};
  in.now = ParseRfc3339("2024-01-23T04:31:04Z").value().instant;
  return in;
}

TEST(KubectlHamiExplainDra, PendingPodGetsTheAllocatorsVerdictPerNode) {
  auto view = BuildExplain(Input(Pod("mid", "mid-claim")));
  ASSERT_TRUE(view.ok()) << view.error();
  const ExplainView& v = view.value();
  ASSERT_EQ(v.claims.size(), 1u);
  EXPECT_EQ(v.claims[0].state, "pending");
  EXPECT_EQ(v.claims[0].claim, "mid-claim");
  EXPECT_EQ(v.claims[0].template_name, "hami-gpu-1xmid-30c");
  ASSERT_EQ(v.dra_nodes.size(), 2u);  // cpu-1 publishes no GPU
  EXPECT_EQ(v.other_nodes, 1);
  EXPECT_FALSE(v.dra_nodes[0].fit);
  EXPECT_EQ(v.dra_nodes[0].reason, "cannot allocate all claims");
  EXPECT_TRUE(v.dra_nodes[1].fit);
  EXPECT_EQ(v.summary,
            "Pending, but node node-2 can allocate its claims now: kube-scheduler should place it "
            "at its next attempt.");
  EXPECT_EQ(ExplainText(v, {}),
            "Pod:        default/mid\n"
            "Phase:      Pending\n"
            "Node:       <none>\n"
            "Bind phase: <none>\n"
            "\n"
            "Requests (after the webhook):\n"
            "  none\n"
            "\n"
            "Claims:\n"
            "  NAME      CLAIM       STATE     CONTAINERS   HOLDS\n"
            "  hami-c0   mid-claim   pending   main         <none>\n"
            "\n"
            "DRA allocation, computed now (kube-scheduler's allocator):\n"
            "  NODE     FIT   WHY\n"
            "  node-1   no    cannot allocate all claims\n"
            "                 claim default/mid-claim request \"gpu\": hami-gpu-0: memory: wants "
            "10000Mi (10000Mi after requestPolicy), 4576Mi of 24Gi free\n"
            "  node-2   yes   claim default/mid-claim request \"gpu\": would get node-2/hami-gpu-0 "
            "GPU-b (10000 MiB, 30% cores)\n"
            "  (1 node(s) without a HAMi device)\n"
            "\n"
            "Node lock: <none>\n"
            "\n"
            "History:\n"
            "  none\n"
            "\n"
            "Pending, but node node-2 can allocate its claims now: kube-scheduler should place it "
            "at its next attempt.\n");
  // Colour: the FIT cells only.
  std::string coloured = ExplainText(v, {.colour = true});
  EXPECT_NE(coloured.find("node-1   \033[31mno\033[0m    cannot"), std::string::npos) << coloured;
  EXPECT_NE(coloured.find("node-2   \033[32myes\033[0m   claim"), std::string::npos) << coloured;
}

TEST(KubectlHamiExplainDra, NoNodeFitsAndJsonCarriesClaimsAndNodes) {
  auto view = BuildExplain(Input(Pod("big", "big-claim")));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().summary,
            "Pending: no node can allocate the pod's claims now (the reasons per node are above).");
  const std::string why =
      R"(claim default/big-claim request \"gpu\": hami-gpu-0: memory: wants 30000Mi (30000Mi )"
      R"(after requestPolicy): above the requestPolicy's validRange.max 24Gi)";
  const std::string json_text = ExplainJson(view.value());
  EXPECT_NE(
      json_text.find(
          R"("nodes":[],"otherNodes":1,"claims":[{"name":"hami-c0","claim":"big-claim","template":"hami-gpu-1xbig-30c","state":"pending","containers":["main"],"shares":[]}],)"
          R"("draNodes":[{"name":"node-1","fit":false,"reason":"cannot allocate all claims","details":[")" +
          why +
          R"("]},{"name":"node-2","fit":false,"reason":"cannot allocate all claims","details":[")" +
          why + R"("]}],"lock":null)"),
      std::string::npos)
      << json_text;
}

TEST(KubectlHamiExplainDra, ScheduledUnmadeAndMissingClaimsAreSaidInWords) {
  auto scheduled = BuildExplain(Input(Pod("busy", "busy-claim", "node-1")));
  ASSERT_TRUE(scheduled.ok()) << scheduled.error();
  EXPECT_TRUE(scheduled.value().dra_nodes.empty());
  EXPECT_EQ(scheduled.value().summary,
            "Scheduled on node-1. Its claims hold node-1/hami-gpu-0 GPU-a (20000 MiB, 50% cores).");
  auto unmade = BuildExplain(Input(Pod("new", "")));
  ASSERT_TRUE(unmade.ok()) << unmade.error();
  EXPECT_EQ(unmade.value().claims[0].state, "not created");
  EXPECT_EQ(unmade.value().summary,
            "Pending: claim hami-c0 is not created yet; kube-controller-manager makes it from "
            "ResourceClaimTemplate hami-gpu-1xnew-30c.");
  auto missing = BuildExplain(Input(Pod("gone", "gone-claim")));
  ASSERT_TRUE(missing.ok()) << missing.error();
  EXPECT_EQ(missing.value().summary,
            "Pending: ResourceClaim default/gone-claim, which the pod names, does not exist.");
  // A pod of device-plugin mode has no claims section.
  ExplainInput plain = Input(Pod("x", ""));
  plain.pod["spec"].erase("resourceClaims");
  plain.pod["metadata"].erase("labels");
  auto p = BuildExplain(plain);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value().claims.empty());
  EXPECT_EQ(ExplainJson(p.value()).find("\"claims\""), std::string::npos);
}

}  // namespace
}  // namespace hami::cli
