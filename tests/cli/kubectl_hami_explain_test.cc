// kubectl-hami explain's view model, from pod, node, event and quota JSON (no server): the
// requests after the webhook, the filter per node in words with its figures, the node lock, the
// history and the summary; the text (colour) and the -o json shape.
#include "cli/kubectl_hami_explain.h"

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
const std::string kRegister =
    R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}])";

SystemTime At(const char* rfc3339) { return ParseRfc3339(rfc3339).value().instant; }
const SystemTime kNow = At("2024-01-23T04:31:04Z");

json GpuNode(json extra = json::object()) {
  json a = {{"hami.io/node-nvidia-register", kRegister},
            {"hami.io/node-handshake", "Reported_2024-01-23 04:30:04"}};
  a.update(extra);
  return {{"metadata", {{"name", "gpu-1"}, {"annotations", a}}}};
}

json Pod(const std::string& ns, const std::string& name, json limits,
         json annotations = json::object(), const std::string& node = "",
         const std::string& phase = "Pending") {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", ns},
                {"uid", "uid-" + name},
                {"annotations", annotations},
                {"creationTimestamp", "2024-01-23T04:30:00Z"}}},
              {"spec",
               {{"schedulerName", "hami-scheduler"},  // what the webhook writes
                {"containers", {{{"name", "main"}, {"resources", {{"limits", limits}}}}}}}},
              {"status", {{"phase", phase}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

// A pod holding 10000 MiB / 10% of kU1 on gpu-1.
json Holder() {
  return Pod("default", "holder", {{"nvidia.com/gpu", "1"}},
             {{"hami.io/vgpu-node", "gpu-1"},
              {"hami.io/vgpu-devices-allocated", std::string(kU1) + ",NVIDIA,10000,10:;"}},
             "gpu-1", "Running");
}

ExplainInput Input(json pod, std::vector<json> nodes = {GpuNode()}) {
  ExplainInput in;
  in.pods = {Holder(), pod};
  in.pod = std::move(pod);
  in.nodes = std::move(nodes);
  in.now = kNow;
  return in;
}

json Wants(int mib) {
  return {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(mib)}};
}

TEST(KubectlHamiExplain, SpellsOutEachReasonWithItsFigures) {
  // kU0 cordoned, kU1 has 22768 MiB free: the issue's example.
  auto in = Input(Pod("team", "big", Wants(30000)),
                  {GpuNode({{"hami.io/device-cordon", kU0}}), {{"metadata", {{"name", "cpu-1"}}}}});
  auto view = BuildExplain(in);
  ASSERT_TRUE(view.ok()) << view.error();
  const ExplainView& v = view.value();
  ASSERT_EQ(v.requests.size(), 1u);
  EXPECT_EQ(v.requests[0].container, "main");
  EXPECT_EQ(v.requests[0].vendor, "NVIDIA");
  EXPECT_EQ(v.requests[0].count, 1);
  EXPECT_EQ(v.requests[0].memory_mib, 30000);
  EXPECT_FALSE(v.requests[0].memory_percent);
  ASSERT_EQ(v.nodes.size(), 1u);
  EXPECT_EQ(v.other_nodes, 1);
  EXPECT_FALSE(v.nodes[0].fit);
  EXPECT_EQ(v.nodes[0].reason, "1/2 CardCordoned, 1/2 CardInsufficientMemory");
  EXPECT_EQ(v.nodes[0].words, std::string("1 of 2 GPUs are cordoned: ") + kU0 +
                                  "; 1 of 2 GPUs lack memory: wants 30000 MiB, free 22768");
  EXPECT_EQ(v.summary, "Pending: no node fits the request now (the reasons per node are above).");
}

TEST(KubectlHamiExplain, NoGpuHasEnoughMemory) {
  auto in = Input(Pod("team", "big", Wants(40000)));
  // What kube-scheduler recorded, and hami-scheduler's events, are shown in words.
  in.pod["status"]["conditions"] = {{{"type", "PodScheduled"},
                                     {"status", "False"},
                                     {"reason", "Unschedulable"},
                                     {"message",
                                      "0/1 nodes are available: 1 2/2 "
                                      "CardInsufficientMemory."}}};
  in.events = {
      {{"involvedObject", {{"kind", "Pod"}, {"name", "big"}, {"namespace", "team"}}},
       {"type", "Warning"},
       {"reason", "FilteringFailed"},
       {"message", "1 nodes CardInsufficientMemory(gpu-1)"},
       {"source", {{"component", "hami-scheduler"}}},
       {"count", 3},
       {"lastTimestamp", "2024-01-23T04:30:10Z"}},
      {{"involvedObject", {{"kind", "Pod"}, {"name", "big"}, {"namespace", "team"}}},
       {"type", "Warning"},
       {"reason", "FailedScheduling"},
       {"message", "0/1 nodes are available: 1 2/2 CardInsufficientMemory."},
       {"source", {{"component", "default-scheduler"}}},
       {"lastTimestamp", "2024-01-23T04:30:05Z"}},
      // Another pod's event, and one of an older pod of the same name: not shown.
      {{"involvedObject", {{"kind", "Pod"}, {"name", "other"}, {"namespace", "team"}}},
       {"type", "Normal"},
       {"reason", "X"}},
      {{"involvedObject",
        {{"kind", "Pod"}, {"name", "big"}, {"namespace", "team"}, {"uid", "old"}}},
       {"type", "Normal"},
       {"reason", "Y"}},
  };
  auto view = BuildExplain(in);
  ASSERT_TRUE(view.ok()) << view.error();
  const ExplainView& v = view.value();
  ASSERT_EQ(v.nodes.size(), 1u);
  EXPECT_EQ(v.nodes[0].reason, "2/2 CardInsufficientMemory");
  EXPECT_EQ(v.nodes[0].words, "2 of 2 GPUs lack memory: wants 40000 MiB, free 32768, 22768");
  EXPECT_EQ(v.summary, "Pending: no GPU has enough memory for the request.");
  EXPECT_EQ(v.scheduling,
            "0/1 nodes are available: 1 node(s) where 2 of 2 GPUs lack memory. No GPU has enough "
            "memory for the request.");
  ASSERT_EQ(v.history.size(), 2u);
  EXPECT_EQ(v.history[0].reason, "FailedScheduling");  // by time
  EXPECT_EQ(v.history[0].message,
            "0/1 nodes are available: 1 node(s) where 2 of 2 GPUs lack memory.");
  EXPECT_EQ(v.history[1].reason, "FilteringFailed");
  EXPECT_EQ(v.history[1].count, 3);
  EXPECT_EQ(v.history[1].source, "hami-scheduler");

  std::string text = ExplainText(v, {});
  EXPECT_NE(text.find("gpu-1   no    2 of 2 GPUs lack memory: wants 40000 MiB, free 32768, 22768"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Pending: no GPU has enough memory for the request."), std::string::npos);
  EXPECT_EQ(text.find("\033["), std::string::npos) << "colour without options.colour";
  std::string coloured = ExplainText(v, {.colour = true});
  EXPECT_NE(coloured.find("\033[31mno\033[0m"), std::string::npos) << coloured;
  EXPECT_NE(coloured.find("\033[33mWarning\033[0m"), std::string::npos) << coloured;
  // Without headers: no header rows.
  EXPECT_EQ(ExplainText(v, {.no_headers = true}).find("CONTAINER"), std::string::npos);
}

TEST(KubectlHamiExplain, ANodeThatFitsNowSaysWhatThePodWouldGet) {
  auto view = BuildExplain(Input(Pod("team", "small", Wants(1000))));
  ASSERT_TRUE(view.ok()) << view.error();
  const ExplainView& v = view.value();
  ASSERT_EQ(v.nodes.size(), 1u);
  EXPECT_TRUE(v.nodes[0].fit);
  EXPECT_EQ(v.nodes[0].reason, "");
  // Spread (the default GPU policy): the least used GPU.
  EXPECT_EQ(v.nodes[0].words, std::string("fits: would get ") + kU0 + " (1000 MiB, 0% cores)");
  ASSERT_EQ(v.nodes[0].devices.size(), 1u);
  EXPECT_EQ(v.nodes[0].devices[0].memory, 1000);
  EXPECT_EQ(v.summary,
            "Pending, but node gpu-1 fits now: hami-scheduler should place it at its next "
            "attempt.");
}

// A pod asking for HAMi devices with neither hami-scheduler as its schedulerName nor a hami.io/
// annotation: the webhook never saw it, and the summary says so instead of "should place it".
TEST(KubectlHamiExplain, ThePodTheWebhookNeverSaw) {
  json pod = Pod("team", "unseen", Wants(1000));
  pod["spec"].erase("schedulerName");
  auto view = BuildExplain(Input(pod));
  ASSERT_TRUE(view.ok()) << view.error();
  const std::string& s = view.value().summary;
  EXPECT_TRUE(
      s.starts_with("Pending: HAMi's webhook was not called for this pod. It asks for HAMi "
                    "devices (NVIDIA) but its schedulerName is \"default-scheduler\", not "
                    "\"hami-scheduler\", and it has no hami.io/ annotations"))
      << s;
  for (const char* cause : {"namespaceSelector", "failurePolicy is Ignore",
                            "resource name is not the one the webhook is configured with"}) {
    EXPECT_NE(s.find(cause), std::string::npos) << cause << " in " << s;
  }
  EXPECT_EQ(s.find("should place it"), std::string::npos) << s;
  // The label that makes the webhook skip the pod is named when the pod has it.
  pod["metadata"]["labels"] = {{"hami.io/webhook", "ignore"}};
  pod["spec"]["schedulerName"] = "default-scheduler";
  view = BuildExplain(Input(pod));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_NE(view.value().summary.find("The pod has the label hami.io/webhook=ignore"),
            std::string::npos)
      << view.value().summary;
  // Bound by kube-scheduler without HAMi's webhook.
  json bound = Pod("team", "unseen", Wants(1000), json::object(), "gpu-1", "Running");
  bound["spec"]["schedulerName"] = "default-scheduler";
  view = BuildExplain(Input(bound));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_TRUE(view.value().summary.starts_with(
      "Scheduled on gpu-1 by another scheduler: HAMi's webhook was not called"))
      << view.value().summary;
  // A configured scheduler name other than the default.
  ExplainInput custom = Input(Pod("team", "seen", Wants(1000)));
  custom.pod["spec"]["schedulerName"] = "my-hami";
  custom.scheduler_name = "my-hami";
  view = BuildExplain(custom);
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().summary.find("webhook"), std::string::npos) << view.value().summary;
  // The webhook's annotations alone (e.g. a scheduler name the webhook left alone) count as seen.
  json annotated = Pod("team", "a", Wants(1000), {{"hami.io/vgpu-time", "1706000000"}});
  annotated["spec"]["schedulerName"] = "volcano";
  view = BuildExplain(Input(annotated));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().summary.find("webhook was not called"), std::string::npos);
}

TEST(KubectlHamiExplain, MoreDevicesThanTheNodeHas) {
  json limits = {{"nvidia.com/gpu", "3"}, {"nvidia.com/gpumem", "100"}};
  auto view = BuildExplain(Input(Pod("team", "wide", limits)));
  ASSERT_TRUE(view.ok()) << view.error();
  ASSERT_EQ(view.value().nodes.size(), 1u);
  EXPECT_EQ(view.value().nodes[0].reason, "NodeInsufficientDevice");
  EXPECT_EQ(view.value().nodes[0].words,
            "the node has too few devices: wants 3 NVIDIA device(s), has 2");
}

TEST(KubectlHamiExplain, TypeSelectionSlicesCoresAndQuota) {
  // Type: the pod asks for an A100.
  auto view =
      BuildExplain(Input(Pod("team", "a100", Wants(100), {{"nvidia.com/use-gputype", "A100"}})));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().nodes[0].words,
            "2 of 2 GPUs are not of the requested type: their type NVIDIA-Tesla V100-PCIE-32GB "
            "(hami-core); the pod asks nvidia.com/use-gputype=A100");
  EXPECT_EQ(view.value().annotations.at("nvidia.com/use-gputype"), "A100");

  // Cores: 95% wanted, kU1 has 90% free and kU0 is selected away by UUID.
  // Without gpumem the request is the whole memory (100%): kU1 lacks memory first.
  json cores = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "95"}};
  view = BuildExplain(Input(Pod("team", "c", cores, {{"nvidia.com/nouse-gpuuuid", kU0}})));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().nodes[0].reason, "1/2 CardInsufficientMemory, 1/2 CardUuidMismatch");
  EXPECT_TRUE(view.value().nodes[0].words.starts_with(
      "1 of 2 GPUs lack memory: wants 100% of the memory (32768 MiB), free 22768; "))
      << view.value().nodes[0].words;
  ASSERT_EQ(view.value().requests.size(), 1u);
  EXPECT_EQ(view.value().requests[0].memory_percent, 100);
  cores["nvidia.com/gpumem"] = "100";
  view = BuildExplain(Input(Pod("team", "c", cores, {{"nvidia.com/nouse-gpuuuid", kU0}})));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().nodes[0].reason, "1/2 CardInsufficientCore, 1/2 CardUuidMismatch");
  EXPECT_EQ(view.value().nodes[0].words,
            std::string("1 of 2 GPUs lack cores: wants 95% of the cores, free 90%; 1 of 2 GPUs "
                        "are excluded by the pod's UUID selection: ") +
                kU0 + "; the pod asks nvidia.com/nouse-gpuuuid=" + kU0);

  // Quota: 11000 MiB in the namespace, 10000 already held there.
  auto in = Input(Pod("default", "q", Wants(2000)));
  in.quotas = {{{"metadata", {{"name", "gpu"}, {"namespace", "default"}}},
                {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "11000"}}}}}}};
  view = BuildExplain(in);
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().nodes[0].reason, "2/2 ResourceQuotaNotFit");
  EXPECT_EQ(view.value().nodes[0].words,
            "2 of 2 GPUs would exceed the namespace's quota: wants 2000 MiB, 0% cores; namespace "
            "quota: nvidia.com/gpumem used 10000 of 11000");
}

TEST(KubectlHamiExplain, FilteredButNotBoundWaitsForTheNodeLock) {
  json pod = Pod("team", "w", Wants(1000),
                 {{"hami.io/vgpu-node", "gpu-1"},
                  {"hami.io/vgpu-time", "1706027440"},
                  {"hami.io/vgpu-devices-allocated", std::string(kU0) + ",NVIDIA,1000,0:;"}});
  auto in = Input(pod, {GpuNode({{"hami.io/mutex.lock", "2024-01-23T04:29:04Z,default,holder"}})});
  auto view = BuildExplain(in);
  ASSERT_TRUE(view.ok()) << view.error();
  const ExplainView& v = view.value();
  EXPECT_EQ(v.node, "gpu-1");
  ASSERT_TRUE(v.lock);
  EXPECT_EQ(v.lock->holder, "default/holder");
  EXPECT_EQ(v.lock->age_seconds, 120);
  EXPECT_FALSE(v.lock->held_by_pod);
  EXPECT_EQ(v.summary,
            "hami-scheduler chose node gpu-1 but the pod is not bound yet. It waits for the node "
            "lock, held by default/holder for 2m.");
  ASSERT_EQ(v.devices.size(), 1u);  // what it holds
  EXPECT_EQ(v.devices[0].uuid, kU0);
  // Not counted against itself: kU0 is still free for it.
  EXPECT_TRUE(v.nodes[0].fit);
  ASSERT_EQ(v.history.size(), 1u);
  EXPECT_EQ(v.history[0].time, "2024-01-23T16:30:40Z");
  EXPECT_EQ(v.history[0].type, "Annotation");
  EXPECT_EQ(v.history[0].reason, "Filtered");
}

TEST(KubectlHamiExplain, ScheduledPodAndItsJson) {
  json pod = Pod("team", "done", Wants(1000),
                 {{"hami.io/vgpu-node", "gpu-1"},
                  {"hami.io/bind-phase", "success"},
                  {"hami.io/bind-time", "1706027441"},
                  {"hami.io/vgpu-time", "1706027440"},
                  {"hami.io/vgpu-devices-allocated", std::string(kU0) + ",NVIDIA,1000,0:;"}},
                 "gpu-1", "Running");
  auto in = Input(pod);
  in.events = {{{"involvedObject", {{"kind", "Pod"}, {"name", "done"}, {"namespace", "team"}}},
                {"type", "Normal"},
                {"reason", "BindingSucceed"},
                {"message", "Successfully binding node [gpu-1] to team/done"},
                {"source", {{"component", "hami-scheduler"}}},
                {"count", 1},
                {"lastTimestamp", "2024-01-23T16:30:41Z"}}};
  auto view = BuildExplain(in);
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ(view.value().summary,
            "Scheduled on gpu-1. The device plugin allocated its devices (bind phase success).");
  const std::string want =
      std::string(
          R"x({"pod":{"namespace":"team","name":"done","phase":"Running","node":"gpu-1","bindPhase":"success"},)x"
          R"x("requests":[{"container":"main","init":false,"vendor":"NVIDIA","count":1,"memory":1000,"memoryPercent":null,"cores":0}],)x"
          R"x("annotations":{"hami.io/bind-phase":"success","hami.io/bind-time":"1706027441","hami.io/vgpu-devices-allocated":")x") +
      kU0 +
      R"x(,NVIDIA,1000,0:;","hami.io/vgpu-node":"gpu-1","hami.io/vgpu-time":"1706027440"},)x"
      R"x("devices":[{"uuid":")x" +
      kU0 +
      R"x(","vendor":"NVIDIA","memory":1000,"cores":0}],"scheduling":null,)x"
      R"x("nodes":[{"name":"gpu-1","fit":true,"reason":null,"words":"fits: would get )x" +
      kU0 + R"x( (1000 MiB, 0% cores)","devices":[{"uuid":")x" + kU0 +
      R"x(","vendor":"NVIDIA","memory":1000,"cores":0}]}],"otherNodes":0,"lock":null,)x"
      R"x("history":[{"time":"2024-01-23T16:30:40Z","type":"Annotation","reason":"Filtered","message":"hami-scheduler chose node gpu-1 and wrote the devices","source":"hami.io/vgpu-time","count":1},)x"
      R"x({"time":"2024-01-23T16:30:41Z","type":"Annotation","reason":"Binding","message":"hami-scheduler took the node lock and set bind phase allocating","source":"hami.io/bind-time","count":1},)x"
      R"x({"time":"2024-01-23T16:30:41Z","type":"Normal","reason":"BindingSucceed","message":"Successfully binding node [gpu-1] to team/done","source":"hami-scheduler","count":1}],)x"
      R"x("summary":"Scheduled on gpu-1. The device plugin allocated its devices (bind phase success)."})x"
      "\n";
  EXPECT_EQ(ExplainJson(view.value()), want);
}

TEST(KubectlHamiExplain, InitContainersComeFirstAndAreMarked) {
  json pod = Pod("team", "init", Wants(2000));
  pod["spec"]["initContainers"] = {
      {{"name", "prep"},
       {"resources",
        {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "25"}}}}}}};
  auto view = BuildExplain(Input(pod));
  ASSERT_TRUE(view.ok()) << view.error();
  const auto& r = view.value().requests;
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].container, "prep");
  EXPECT_TRUE(r[0].init);
  EXPECT_EQ(r[0].memory_percent, 25);
  EXPECT_FALSE(r[0].memory_mib);
  EXPECT_EQ(r[1].container, "main");
  EXPECT_FALSE(r[1].init);
  EXPECT_EQ(r[1].memory_mib, 2000);
  std::string text = ExplainText(view.value(), {});
  EXPECT_NE(text.find("  prep (init)   NVIDIA   1       25%"), std::string::npos) << text;
  // The init container's peak and the app's sum collapse per device as the scheduler counts.
  ASSERT_EQ(view.value().nodes.size(), 1u);
  EXPECT_TRUE(view.value().nodes[0].fit) << view.value().nodes[0].words;
}

TEST(KubectlHamiExplain, APodWithoutDevicesAndABadPod) {
  auto view = BuildExplain(Input(Pod("team", "web", json::object())));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_TRUE(view.value().requests.empty());
  EXPECT_TRUE(view.value().nodes.empty());
  EXPECT_EQ(view.value().summary,
            "The pod asks for no HAMi device; hami-scheduler passes it through.");
  // A quantity the scheduler cannot read: the summary says so, naming it.
  view = BuildExplain(
      Input(Pod("team", "q", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "lots"}})));
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_TRUE(
      view.value().summary.starts_with("Pending: hami-scheduler cannot read the pod's requests: "))
      << view.value().summary;
  EXPECT_NE(view.value().summary.find("\"lots\""), std::string::npos) << view.value().summary;
  EXPECT_TRUE(view.value().nodes.empty());
  ExplainInput bad = Input(Pod("team", "web", json::object()));
  bad.pod["spec"]["containers"] = "nope";
  auto r = BuildExplain(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("spec.containers"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace hami::cli
