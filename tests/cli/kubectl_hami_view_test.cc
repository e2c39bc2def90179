// kubectl-hami's view model and printing, driven by node and pod JSON (no server).
#include "cli/kubectl_hami_view.h"

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/time_format.h"

namespace hami::cli {
namespace {

using nlohmann::json;

constexpr const char* kU0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
constexpr const char* kU1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
// The seed's register annotation.
const std::string kRegister =
    R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}])";

SystemTime At(const char* rfc3339) { return ParseRfc3339(rfc3339).value().instant; }
const SystemTime kNow = At("2024-01-23T04:31:04Z");

json Node(const std::string& name, json annotations = json::object()) {
  return {{"metadata", {{"name", name}, {"annotations", annotations}}}};
}

json Pod(const std::string& ns, const std::string& name, const std::string& node, json annotations,
         const std::string& phase = "Running", json limits = {{"nvidia.com/gpu", "1"}}) {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", ns},
                {"annotations", annotations},
                {"creationTimestamp", "2024-01-23T04:30:00Z"}}},
              {"spec", {{"containers", {{{"name", "c"}, {"resources", {{"limits", limits}}}}}}}},
              {"status", {{"phase", phase}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

json GpuNode() {
  return Node("gpu-1", {{"hami.io/node-nvidia-register", kRegister},
                        {"hami.io/node-handshake", "Reported_2024-01-23 04:30:04"},
                        {"hami.io/mutex.lock", "2024-01-23T04:30:34Z,default,p1"}});
}

TEST(KubectlHamiInspect, SumsHoldingPodsPerDeviceAndSkipsFinishedOnes) {
  std::vector<json> pods = {
      Pod("default", "p1", "gpu-1",
          {{"hami.io/vgpu-devices-allocated", std::string(kU1) + ",NVIDIA,3000,30:;"},
           {"hami.io/bind-phase", "allocating"}},
          "Pending"),
      Pod("team", "p2", "gpu-1",
          {{"hami.io/vgpu-devices-allocated", std::string(kU1) + ",NVIDIA,2000,10:;"}}),
      Pod("team", "ok", "gpu-1",
          {{"hami.io/vgpu-devices-allocated", std::string(kU0) + ",NVIDIA,5000,50:;"}},
          "Succeeded"),
      Pod("team", "bad", "gpu-1",
          {{"hami.io/vgpu-devices-allocated", std::string(kU0) + ",NVIDIA,5000,50:;"}}, "Failed"),
      Pod("team", "elsewhere", "gpu-2",
          {{"hami.io/vgpu-devices-allocated", std::string(kU0) + ",NVIDIA,7,7:;"}}),
  };
  auto view = BuildInspect({GpuNode(), Node("cpu-1")}, pods, {}, kNow);
  ASSERT_TRUE(view.ok()) << view.error();
  ASSERT_EQ(view.value().nodes.size(), 1u);  // cpu-1 has no HAMi device
  const NodeRow& n = view.value().nodes[0];
  EXPECT_EQ(n.handshake, "Reported_2024-01-23 04:30:04");
  EXPECT_EQ(n.lock_holder, "default/p1");
  EXPECT_EQ(n.lock_age_seconds, 30);
  ASSERT_EQ(n.devices.size(), 2u);
  EXPECT_EQ(n.devices[0].uuid, kU0);
  EXPECT_EQ(n.devices[0].memory_allocated, 0);
  EXPECT_TRUE(n.devices[0].pods.empty());
  EXPECT_EQ(n.devices[1].index, 1u);
  EXPECT_EQ(n.devices[1].memory_allocated, 5000);
  EXPECT_EQ(n.devices[1].cores_allocated, 40);
  EXPECT_EQ(n.devices[1].slices_used, 2);
  EXPECT_EQ(n.devices[1].slices_total, 10);
  EXPECT_EQ(n.devices[1].pods, (std::vector<std::string>{"default/p1", "team/p2"}));
  EXPECT_TRUE(view.value().warnings.empty());
}

TEST(KubectlHamiInspect, CollapsesContainersAsTheSchedulerDoesAndReadsVgpuNode) {
  // Two regular containers on one device: summed, two slices. No nodeName yet: the
  // hami.io/vgpu-node annotation places it. A MIG "[t-s]" suffix names the GPU.
  std::vector<json> pods = {Pod(
      "default", "p", "",
      {{"hami.io/vgpu-node", "gpu-1"},
       {"hami.io/vgpu-devices-allocated", std::string(kU0) + ",NVIDIA,1000,10:;" + kU0 +
                                              ",NVIDIA,1000,10:;" + kU1 + "[1-0],NVIDIA,500,0:;"}},
      "Pending")};
  pods[0]["spec"]["containers"] = json::array({{{"name", "a"}}, {{"name", "b"}}, {{"name", "c"}}});
  auto view = BuildInspect({GpuNode()}, pods, {}, kNow);
  ASSERT_TRUE(view.ok()) << view.error();
  const auto& d = view.value().nodes[0].devices;
  EXPECT_EQ(d[0].memory_allocated, 2000);
  EXPECT_EQ(d[0].cores_allocated, 20);
  EXPECT_EQ(d[0].slices_used, 2);
  EXPECT_EQ(d[1].memory_allocated, 500);
  EXPECT_EQ(d[1].pods, std::vector<std::string>{"default/p"});
}

TEST(KubectlHamiInspect, NamedNodesOnlyAndAMissingOneIsAnError) {
  auto view = BuildInspect({GpuNode(), Node("cpu-1")}, {}, {"cpu-1"}, kNow);
  ASSERT_TRUE(view.ok()) << view.error();
  ASSERT_EQ(view.value().nodes.size(), 1u);
  EXPECT_EQ(view.value().nodes[0].name, "cpu-1");
  EXPECT_TRUE(view.value().nodes[0].devices.empty());
  auto missing = BuildInspect({GpuNode()}, {}, {"gpu-1", "nope"}, kNow);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), "node \"nope\": not found");
}

TEST(KubectlHamiInspect, LegacyRegisterAndChipNamedVendors) {
  json node = Node(
      "mixed", {{"hami.io/node-dcu-register", "DCU-1,4,16384,100,DCU-Z100,0,true:"},
                {"hami.io/node-BI-V100-register", "ilu-0,2,32768,100,BI-V100,0,false,0,hami-core:"},
                {"hami.io/node-handshake-dcu", "Requesting_2024-01-23 04:30:04"}});
  std::vector<json> pods = {
      Pod("default", "d", "mixed", {{"hami.io/dcu-devices-allocated", "DCU-1,DCU,4000,25:;"}}),
      Pod("default", "i", "mixed",
          {{"hami.io/BI-V100-devices-allocated", "ilu-0,BI-V100,100,5:;"}})};
  auto view = BuildInspect({node}, pods, {}, kNow);
  ASSERT_TRUE(view.ok()) << view.error();
  const NodeRow& n = view.value().nodes[0];
  EXPECT_EQ(n.handshake, "Requesting_2024-01-23 04:30:04");
  EXPECT_FALSE(n.lock.has_value());
  ASSERT_EQ(n.devices.size(), 2u);
  EXPECT_EQ(n.devices[0].vendor, "DCU");
  EXPECT_EQ(n.devices[0].type, "DCU-Z100");
  EXPECT_EQ(n.devices[0].memory_allocated, 4000);
  EXPECT_EQ(n.devices[0].cores_allocated, 25);
  EXPECT_EQ(n.devices[1].vendor, "BI-V100");
  EXPECT_FALSE(n.devices[1].health);
  EXPECT_EQ(n.devices[1].memory_allocated, 100);
}

TEST(KubectlHamiInspect, UndecodableValuesAreWarningsNamingTheKey) {
  json node = Node("n", {{"hami.io/node-nvidia-register", "[{\"devmem\":\"x\"}]"},
                         {"hami.io/node-amd-register", "[]"}});
  json good = GpuNode();
  std::vector<json> pods = {
      Pod("default", "p", "gpu-1", {{"hami.io/vgpu-devices-allocated", "u,NVIDIA,x,0:;"}})};
  auto view = BuildInspect({node, good}, pods, {}, kNow);
  ASSERT_TRUE(view.ok()) << view.error();
  ASSERT_EQ(view.value().warnings.size(), 2u);
  EXPECT_NE(view.value().warnings[0].find("node n: hami.io/node-nvidia-register: "),
            std::string::npos)
      << view.value().warnings[0];
  EXPECT_NE(view.value().warnings[1].find("pod default/p: hami.io/vgpu-devices-allocated: "),
            std::string::npos)
      << view.value().warnings[1];
  EXPECT_EQ(view.value().nodes.size(), 1u);  // n has no decodable device
}

TEST(KubectlHamiInspect, LegacyLockHasNoHolder) {
  json node = GpuNode();
  node["metadata"]["annotations"]["hami.io/mutex.lock"] = "2024-01-23T04:30:04Z";
  auto view = BuildInspect({node}, {}, {}, kNow);
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().nodes[0].lock, "2024-01-23T04:30:04Z");
  EXPECT_EQ(view.value().nodes[0].lock_holder, "");
  EXPECT_EQ(view.value().nodes[0].lock_age_seconds, 60);
  std::string table = InspectTable(view.value(), {});
  EXPECT_NE(table.find("gpu-1   Reported_2024-01-23 04:30:04   2024-01-23T04:30:04Z   1m"),
            std::string::npos)
      << table;
}

TEST(KubectlHamiInspect, JsonIsTheDocumentedShape) {
  std::vector<json> pods = {
      Pod("default", "p1", "gpu-1",
          {{"hami.io/vgpu-devices-allocated", std::string(kU1) + ",NVIDIA,3000,30:;"}})};
  auto view = BuildInspect({GpuNode()}, pods, {}, kNow);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(
      InspectJson(view.value()),
      std::string(R"({"nodes":[{"name":"gpu-1","devices":[{"index":0,"uuid":")") + kU0 +
          R"(","type":"NVIDIA-Tesla V100-PCIE-32GB","vendor":"NVIDIA","health":true,"memory":{"allocated":0,"total":32768},"cores":{"allocated":0,"total":100},"slices":{"used":0,"total":10},"pods":[]},{"index":1,"uuid":")" +
          kU1 +
          R"(","type":"NVIDIA-Tesla V100-PCIE-32GB","vendor":"NVIDIA","health":true,"memory":{"allocated":3000,"total":32768},"cores":{"allocated":30,"total":100},"slices":{"used":1,"total":10},"pods":["default/p1"]}],"handshake":"Reported_2024-01-23 04:30:04","lock":"2024-01-23T04:30:34Z,default,p1"}]})"
          "\n");
  EXPECT_EQ(InspectJson({}), "{\"nodes\":[]}\n");
}

TEST(KubectlHamiInspect, TableAlignsColumnsWithTotalsAndNodeState) {
  InspectView view;
  NodeRow n;
  n.name = "n1";
  n.handshake = "Reported_x";
  n.lock = "t,default,p";
  n.lock_holder = "default/p";
  n.lock_age_seconds = 125;
  DeviceRow d;
  d.uuid = "GPU-a";
  d.type = "T4";
  d.vendor = "NVIDIA";
  d.health = true;
  d.mode = "hami-core";
  d.memory_allocated = 100;
  d.memory_total = 15360;
  d.cores_allocated = 10;
  d.cores_total = 100;
  d.slices_used = 2;
  d.slices_total = 10;
  d.pods = {"a/x", "b/y"};
  n.devices = {d};
  view.nodes = {n};
  EXPECT_EQ(InspectTable(view, {}),
            "NODE   INDEX   UUID        TYPE   VENDOR   HEALTH   MEMORY(MiB)   CORES(%)   SLICES   "
            "PODS\n"
            "n1     0       GPU-a       T4     NVIDIA   true     100/15360     10/100     2/10     "
            "a/x,b/y\n"
            "n1     total   1 devices                            100/15360     10/100     2/10\n"
            "\n"
            "NODE   HANDSHAKE    LOCK-HOLDER   LOCK-AGE\n"
            "n1     Reported_x   default/p     2m\n");
  EXPECT_EQ(InspectTable(view, {.wide = false, .no_headers = true}),
            "n1   0       GPU-a       T4   NVIDIA   true   100/15360   10/100   2/10   a/x,b/y\n"
            "n1   total   1 devices                        100/15360   10/100   2/10\n"
            "\n"
            "n1   Reported_x   default/p   2m\n");
  std::string wide = InspectTable(view, {.wide = true});
  EXPECT_EQ(wide.substr(0, wide.find('\n')),
            "NODE   INDEX   UUID        TYPE   VENDOR   HEALTH   MEMORY(MiB)   CORES(%)   SLICES   "
            "MODE        NUMA   PODS");
  EXPECT_NE(wide.find("2/10     hami-core   0      a/x,b/y\n"), std::string::npos) << wide;
}

TEST(KubectlHamiPods, ListsHamiPodsWithDevicesReasonAndAge) {
  json pending =
      Pod("team", "big", "", json::object(), "Pending", {{"nvidia.com/gpumem", "40000"}});
  pending["status"]["conditions"] = {{{"type", "PodScheduled"},
                                      {"status", "False"},
                                      {"reason", "Unschedulable"},
                                      {"message", "0/1 nodes are available: no GPU memory"}}};
  json requests_only = Pod("team", "req", "", json::object(), "Pending", json::object());
  requests_only["spec"]["containers"][0]["resources"]["requests"] = {{"nvidia.com/gpu", "1"}};
  requests_only["status"]["conditions"] = {
      {{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}}};
  json cpu = Pod("default", "web", "n", json::object(), "Running", json::object());
  json annotated =
      Pod("default", "a", "", {{"hami.io/vgpu-node", "gpu-1"}}, "Pending", json::object());
  json bound = Pod("default", "b", "gpu-1",
                   {{"hami.io/vgpu-node", "gpu-1"},
                    {"hami.io/bind-phase", "success"},
                    {"hami.io/vgpu-devices-allocated",
                     std::string(kU1) + ",NVIDIA,3000,30:;" + kU0 + ",NVIDIA,1000,0:;"}});
  bound["status"]["conditions"] = {{{"type", "PodScheduled"}, {"status", "True"}}};
  PodsView view = BuildPods({GpuNode()}, {pending, requests_only, cpu, annotated, bound}, kNow);
  EXPECT_TRUE(view.warnings.empty());
  EXPECT_EQ(
      PodsJson(view),
      std::string(R"({"pods":[)") +
          R"({"namespace":"default","name":"a","node":"gpu-1","bindPhase":null,"devices":[],"reason":null},)" +
          R"({"namespace":"default","name":"b","node":"gpu-1","bindPhase":"success","devices":[{"uuid":")" +
          kU0 + R"(","vendor":"NVIDIA","memory":1000,"cores":0},{"uuid":")" + kU1 +
          R"(","vendor":"NVIDIA","memory":3000,"cores":30}],"reason":null},)" +
          R"({"namespace":"team","name":"big","node":null,"bindPhase":null,"devices":[],"reason":"0/1 nodes are available: no GPU memory"},)" +
          R"({"namespace":"team","name":"req","node":null,"bindPhase":null,"devices":[],"reason":"Unschedulable"}]})"
          "\n");
  EXPECT_EQ(view.pods[1].age_seconds, 64);
  EXPECT_EQ(PodsJson({}), "{\"pods\":[]}\n");
}

TEST(KubectlHamiPods, TablePrintsPendingReasonsBelowOrInWideColumns) {
  PodsView view;
  PodRow p;
  p.ns = "team";
  p.name = "big";
  p.phase = "Pending";
  p.reason = "no GPU memory";
  p.age_seconds = 5;
  PodRow q;
  q.ns = "default";
  q.name = "b";
  q.node = "gpu-1";
  q.bind_phase = "success";
  q.phase = "Running";
  q.devices = {{"GPU-a", "NVIDIA", 3000, 30}, {"GPU-b", "NVIDIA", 1000, 0}};
  q.age_seconds = 7200;
  view.pods = {q, p};
  EXPECT_EQ(PodsTable(view, {}),
            "NAMESPACE   POD   NODE     BIND-PHASE   DEVICES                                AGE\n"
            "default     b     gpu-1    success      GPU-a(3000MiB,30%),GPU-b(1000MiB,0%)   2h\n"
            "team        big   <none>   <none>       <none>                                 5s\n"
            "team/big pending: no GPU memory\n");
  EXPECT_EQ(PodsTable(view, {.wide = true, .no_headers = true}),
            "default   b     gpu-1    success   GPU-a(3000MiB,30%),GPU-b(1000MiB,0%)   2h   "
            "Running\n"
            "team      big   <none>   <none>    <none>                                 5s   "
            "Pending   no GPU memory\n");
}

TEST(KubectlHamiAge, KubectlShortUnits) {
  EXPECT_EQ(ShortAge(std::nullopt), "<unknown>");
  EXPECT_EQ(ShortAge(-5), "0s");
  EXPECT_EQ(ShortAge(59), "59s");
  EXPECT_EQ(ShortAge(60), "1m");
  EXPECT_EQ(ShortAge(3599), "59m");
  EXPECT_EQ(ShortAge(3600), "1h");
  EXPECT_EQ(ShortAge(48 * 3600 - 1), "47h");
  EXPECT_EQ(ShortAge(48 * 3600), "2d");
  EXPECT_EQ(ShortAge(2 * 365 * 86400), "2y");
}

}  // namespace
}  // namespace hami::cli

namespace hami::cli {
namespace {

TEST(KubectlHamiTable, ColourWrapsTheTextAndWidthsCountTheTextOnly) {
  std::vector<std::vector<std::string>> rows = {{"A", "BB", ""}, {"CCC", "D", "E"}};
  EXPECT_EQ(RenderTable(rows), "A     BB\nCCC   D    E\n");
  EXPECT_EQ(RenderTable(rows, 2), "  A     BB\n  CCC   D    E\n");
  std::string coloured = RenderTable(rows, 0, [](size_t r, size_t c) -> const char* {
    return r == 1 && c == 0 ? "\033[31m" : nullptr;
  });
  EXPECT_EQ(coloured, "A     BB\n\033[31mCCC\033[0m   D    E\n");
}

TEST(KubectlHamiReason, SpellsOutHamiReasonCodes) {
  EXPECT_EQ(ReasonInWords("0/3 nodes are available: 1 1/1 CardInsufficientMemory, 1 2/2 "
                          "CardInsufficientMemory, 1 1/3 CardTypeMismatch, 2/3 NumaNotFit."),
            "0/3 nodes are available: 1 node(s) where 1 of 1 GPUs lack memory, 1 node(s) where 2 "
            "of 2 GPUs lack memory, 1 node(s) where 1 of 3 GPUs are not of the requested type, 2 "
            "of 3 GPUs do not fit the NUMA binding.");
  EXPECT_EQ(ReasonInWords("1/2 CardInsufficientCore"), "1 of 2 GPUs lack cores");
  // Every reason name a fit of HAMi v2.10 gives has words.
  for (const char* name :
       {"CardNotHealth", "CardCordoned", "CardTypeMismatch", "NumaNotFit", "CardUuidMismatch",
        "CardTimeSlicingExhausted", "ExclusiveDeviceAllocateConflict", "ResourceQuotaNotFit",
        "CardInsufficientMemory", "CardInsufficientCore", "CardComputeUnitsExhausted",
        "CardMigTopologyInfeasible", "NodeInsufficientDevice", "AllocatedCardsInsufficientRequest",
        "CardNotFoundCustomFilterRule", "ModeNotFit", "CardUnhealthy", "CardQosPolicyMismatch",
        "CardAppClassMismatch"}) {
    ASSERT_TRUE(ReasonPhrase(name)) << name;
    EXPECT_EQ(ReasonInWords(std::string("1/2 ") + name),
              "1 of 2 GPUs " + std::string(*ReasonPhrase(name)));
  }
  EXPECT_EQ(ReasonInWords("1/2 ModeNotFit"), "1 of 2 GPUs are not in the requested mode");
  EXPECT_FALSE(ReasonPhrase("Insufficient"));
  // Unknown names and other text stay as written.
  EXPECT_EQ(ReasonInWords("0/2 nodes are available: 2 Insufficient cpu, 1/2 Whatever."),
            "0/2 nodes are available: 2 Insufficient cpu, 1/2 Whatever.");
  EXPECT_EQ(ReasonInWords(""), "");
}

TEST(KubectlHamiPods, PendingReasonIsInWords) {
  json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "d"}}},
      {"spec",
       {{"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
      {"status",
       {{"phase", "Pending"},
        {"conditions",
         {{{"type", "PodScheduled"},
           {"status", "False"},
           {"message", "0/1 nodes are available: 1 2/2 CardInsufficientMemory."}}}}}}};
  PodsView view = BuildPods({}, {pod}, kNow);
  ASSERT_EQ(view.pods.size(), 1u);
  EXPECT_EQ(
      view.pods[0].reason,
      "0/1 nodes are available: 1 node(s) where 2 of 2 GPUs lack memory. No GPU has enough memory "
      "for the request.");
}

}  // namespace
}  // namespace hami::cli

namespace hami::cli {
namespace {

TEST(KubectlHamiReason, HugeAndTrickyMessagesAreSafe) {
  // A megabyte of digits (a regex would recurse per character) comes back unchanged.
  std::string digits(1 << 20, '7');
  EXPECT_EQ(ReasonInWords(digits), digits);
  // Entries must start at a word boundary and end at the name's end.
  EXPECT_EQ(ReasonInWords("x1/2 CardCordoned"), "x1/2 CardCordoned");
  EXPECT_EQ(ReasonInWords("1/2 CardCordonedX"), "1/2 CardCordonedX");
  EXPECT_EQ(ReasonInWords("1/2 CardCordoned2"), "1/2 CardCordoned2");
  EXPECT_EQ(ReasonInWords("3 1/2"), "3 1/2");
  EXPECT_EQ(ReasonInWords("1/2 CardCordoned."), "1 of 2 GPUs are cordoned.");
}

}  // namespace
}  // namespace hami::cli

namespace hami::cli {
namespace {

TEST(KubectlHamiReason, SummarySaysWhenNoGpuHasEnoughMemory) {
  EXPECT_EQ(ReasonSummary("0/3 nodes are available: 1 1/1 CardInsufficientMemory, 1 2/2 "
                          "CardInsufficientMemory, 1 4/4 CardInsufficientMemory."),
            "No GPU has enough memory for the request.");
  // One GPU rejected for another reason, or not every GPU for memory: no summary.
  EXPECT_EQ(ReasonSummary("0/2 nodes are available: 1 1/3 CardInsufficientMemory, 2/3 "
                          "CardTypeMismatch, 1 2/2 CardInsufficientMemory."),
            "");
  EXPECT_EQ(ReasonSummary("0/1 nodes are available: 1 1/2 CardInsufficientMemory."), "");
  EXPECT_EQ(ReasonSummary("0/1 nodes are available: 1 Insufficient cpu."), "");
}

}  // namespace
}  // namespace hami::cli
