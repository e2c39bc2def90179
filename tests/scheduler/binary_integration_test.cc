// The real hami-scheduler binary against the sim API server (the code of `hami-sim apiserver`,
// started in-process on loopback): handshake on a node with the seed's register annotation; a
// 1 GPU / 3000 MiB pod filtered and bound with exactly the seed's annotations and the node lock;
// two racing binds served in turn; stale and orphaned locks taken over; a SIGKILL restart in the
// middle of a stream of pods that loses no allocation and over-commits no GPU.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "binary_fixture.h"
#include "common/time_format.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "protocol/pod_devices.h"
#include "scheduler_process.h"
#include "sim/apiserver/apiserver.h"
#include "support/thread_nice.h"
#include "support/wait_for.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using testing::GpuPod;
using testing::Node;
using testing::SchedulerProcess;

constexpr const char* kSeedAllocated = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,0:;";

class BinaryIntegrationTest : public testing::SchedulerBinaryTest {
 protected:
  // Starts the binary and connects `http_` to it.
  std::unique_ptr<SchedulerProcess> Start(std::vector<std::string> extra = {}) {
    auto p = std::make_unique<SchedulerProcess>(HAMI_SCHEDULER_BIN, SchedulerArgs(extra));
    EXPECT_TRUE(p->started());
    int port = p->WaitForPort();
    EXPECT_GT(port, 0) << p->log();
    port_ = port;
    http_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    http_->set_read_timeout(std::chrono::seconds(40));
    return p;
  }

  json Post(const std::string& path, const json& body) {
    auto res = http_->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << path;
    return json::parse(res->body, nullptr, false);
  }
  json Filter(const std::string& pod_name, const std::vector<std::string>& nodes) {
    return Post("/filter", json{{"Pod", GetPod(pod_name)}, {"NodeNames", nodes}});
  }
  json Bind(const std::string& pod, const std::string& node) {
    return Post(
        "/bind",
        json{{"PodName", pod}, {"PodNamespace", "default"}, {"PodUID", ""}, {"Node", node}});
  }

  void CreatePod(const json& pod) {
    ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", pod).ok());
  }
  void CreateNode(const json& node) {
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", node).ok());
  }
  json GetPod(const std::string& name) {
    auto r = client_->Get(k8s::resources::kPods, "default", name);
    return r ? *r : json();
  }
  json GetNode(const std::string& name) {
    auto r = client_->Get(k8s::resources::kNodes, "", name);
    return r ? *r : json();
  }
  void SetLock(const std::string& node, const json& value) {
    json patch = {{"metadata", {{"annotations", {{"hami.io/mutex.lock", value}}}}}};
    ASSERT_TRUE(
        client_->Patch(k8s::resources::kNodes, "", node, k8s::PatchType::kMerge, patch).ok());
  }
  // What the device plugin does once a bound pod's containers are allocated.
  void ReleaseAsPlugin(const std::string& node, const std::string& pod) {
    json patch = {
        {"metadata",
         {{"annotations",
           {{"hami.io/bind-phase", "success"}, {"hami.io/vgpu-devices-to-allocate", ";"}}}}}};
    ASSERT_TRUE(
        client_->Patch(k8s::resources::kPods, "default", pod, k8s::PatchType::kMerge, patch).ok());
    SetLock(node, nullptr);
  }

  int port_ = 0;
};

TEST_F(BinaryIntegrationTest, HandshakeFilterAndBindWriteTheSeedAnnotations) {
  CreateNode(Node("node-1"));
  auto sched = Start();
  CreatePod(GpuPod("demo", 3000));

  // /filter answers once the first registration pass has the rows; its handshake writes follow.
  json res = Filter("demo", {"node-1"});
  EXPECT_EQ(res["Error"], "") << res;
  EXPECT_EQ(res["NodeNames"], json::array({"node-1"})) << res;
  auto hs = AwaitNodeAnnotation("node-1", "hami.io/node-handshake");
  ASSERT_TRUE(hs.has_value());
  EXPECT_TRUE(std::regex_match(*hs, std::regex(R"(Requesting_\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")))
      << *hs;

  // The decision is written in the background (--async-decision-write, the default): it lands
  // shortly after the answer.
  EXPECT_TRUE(AwaitPodAnnotation("demo", "hami.io/vgpu-time").has_value());
  json pod = GetPod("demo");
  auto annos = k8s::Annotations(pod);
  EXPECT_EQ(annos["hami.io/vgpu-devices-allocated"], kSeedAllocated);
  EXPECT_EQ(annos["hami.io/vgpu-devices-to-allocate"], kSeedAllocated);
  EXPECT_EQ(annos["hami.io/vgpu-node"], "node-1");
  EXPECT_EQ(k8s::Labels(pod)["hami.io/vgpu-node"], "node-1");
  EXPECT_TRUE(std::regex_match(annos["hami.io/vgpu-time"], std::regex("[0-9]+")));
  EXPECT_FALSE(annos.count("hami.io/bind-phase"));

  EXPECT_EQ(Bind("demo", "node-1"), json::parse(R"({"Error":""})"));
  pod = GetPod("demo");
  annos = k8s::Annotations(pod);
  EXPECT_EQ(annos["hami.io/bind-phase"], "allocating");
  EXPECT_TRUE(std::regex_match(annos["hami.io/bind-time"], std::regex("[0-9]{10}")))
      << annos["hami.io/bind-time"];
  EXPECT_EQ(annos["hami.io/vgpu-devices-allocated"], kSeedAllocated);
  EXPECT_EQ(pod["spec"]["nodeName"], "node-1");  // the Binding was created
  auto lock = k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock");
  ASSERT_TRUE(lock.has_value());
  EXPECT_TRUE(
      std::regex_match(*lock, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ,default,demo)")))
      << *lock;
  EXPECT_EQ(WEXITSTATUS(sched->Kill(SIGTERM)), 0);
}

// On a busy node the informers, the decision writers and the Event sender wait while a /filter
// runs (kube-scheduler's one-at-a-time cycle bounds the rate): by default they run 5 nicer, the
// Event sender 10; --background-nice=0 leaves every thread at the process's priority.
TEST_F(BinaryIntegrationTest, BackgroundThreadsRunNicerThanTheFilterLoop) {
  CreateNode(Node("node-1"));
  struct Case {
    std::vector<std::string> flags;
    int nice, events_nice;
  };
  for (const Case& c : {Case{{}, 5, 10}, Case{{"--background-nice=0"}, 0, 0}}) {
    SCOPED_TRACE(c.nice);
    auto sched = Start(c.flags);
    const std::map<std::string, std::vector<int>> want = {
        {"informer-pods", {c.nice}},
        {"informer-nodes", {c.nice}},
        {"informer-resour", {c.nice}},  // resourcequotas, in the 15 bytes Linux keeps
        {"hami-writer", std::vector<int>(4, c.nice)},
        {"hami-events", {c.events_nice}}};
    std::map<std::string, std::vector<int>> got;
    std::vector<int> others;  // the main thread, the HTTP loop and workers: never lowered
    EXPECT_TRUE(test_support::WaitFor(
        [&] {
          got.clear();
          for (auto& [name, nices] : hami::testing::ThreadNices(sched->pid())) {
            if (want.count(name)) got[name] = nices;
            if (name == "hami-scheduler") others = nices;
          }
          return got == want;
        },
        std::chrono::seconds(10)));
    for (const auto& [name, nices] : want) EXPECT_EQ(got[name], nices) << name;
    EXPECT_GE(others.size(), 2u);
    EXPECT_EQ(others, std::vector<int>(others.size(), 0));
    EXPECT_EQ(WEXITSTATUS(sched->Kill(SIGTERM)), 0);
  }
}

TEST_F(BinaryIntegrationTest, RacingBindsForOneNodeBothSucceedInTurn) {
  CreateNode(Node("node-1"));
  auto sched = Start({"--node-lock-retry-timeout", "20s"});
  for (const char* name : {"a", "b"}) {
    CreatePod(GpuPod(name, 1000));
    ASSERT_EQ(Filter(name, {"node-1"})["NodeNames"], json::array({"node-1"}));
  }
  // Plays the device plugin: once the lock owner is bound, it "allocates" and releases.
  std::atomic<bool> done{false};
  std::vector<std::string> released;
  std::thread plugin([&] {
    while (!done) {
      auto lock = k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock");
      if (lock) {
        std::string owner = lock->substr(lock->rfind(',') + 1);
        if (!k8s::FieldString(GetPod(owner), "spec.nodeName").empty()) {
          ReleaseAsPlugin("node-1", owner);
          released.push_back(owner);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval only
    }
  });
  json ra, rb;
  httplib::Client second("127.0.0.1", port_);
  second.set_read_timeout(std::chrono::seconds(40));
  std::thread ta([&] { ra = Bind("a", "node-1"); });
  std::thread tb([&] {
    auto r = second.Post("/bind", R"({"PodName":"b","PodNamespace":"default","Node":"node-1"})",
                         "application/json");
    if (r) rb = json::parse(r->body, nullptr, false);
  });
  ta.join();
  tb.join();
  // Both binds are in; wait for the plugin to release the second lock too.
  while (k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock").has_value()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  done = true;
  plugin.join();
  EXPECT_EQ(ra["Error"], "") << ra;
  EXPECT_EQ(rb["Error"], "") << rb;
  EXPECT_EQ(GetPod("a")["spec"]["nodeName"], "node-1");
  EXPECT_EQ(GetPod("b")["spec"]["nodeName"], "node-1");
  // One lock at a time: each pod held it and had it released once.
  ASSERT_EQ(released.size(), 2u);
  EXPECT_NE(released[0], released[1]);
}

TEST_F(BinaryIntegrationTest, StaleAndOrphanedLocksAreTakenOver) {
  CreateNode(Node("node-1"));
  auto sched = Start({"--node-lock-timeout", "30s", "--node-lock-retry-timeout", "0s"});
  CreatePod(GpuPod("holder", 1000));
  for (const char* name : {"p1", "p2", "p3"}) {
    CreatePod(GpuPod(name, 1000));
    ASSERT_EQ(Filter(name, {"node-1"})["NodeNames"], json::array({"node-1"}));
  }
  auto now = std::chrono::system_clock::now();
  // Older than --node-lock-timeout (30 s) although its owner lives: taken over.
  SetLock("node-1", FormatRfc3339(now - std::chrono::seconds(45), Zone::Utc()) + ",default,holder");
  EXPECT_EQ(Bind("p1", "node-1")["Error"], "");
  EXPECT_TRUE(std::regex_search(*k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock"),
                                std::regex(",default,p1$")));
  // Fresh, but its owner pod is gone: taken over.
  SetLock("node-1", FormatRfc3339(now, Zone::Utc()) + ",default,ghost");
  EXPECT_EQ(Bind("p2", "node-1")["Error"], "");
  EXPECT_TRUE(std::regex_search(*k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock"),
                                std::regex(",default,p2$")));
  // Fresh and its owner lives: with no retry window the bind fails and the lock stays.
  const std::string live = FormatRfc3339(now, Zone::Utc()) + ",default,holder";
  SetLock("node-1", live);
  json res = Bind("p3", "node-1");
  EXPECT_NE(res["Error"].get<std::string>().find("locked"), std::string::npos) << res;
  EXPECT_EQ(k8s::Annotation(GetNode("node-1"), "hami.io/mutex.lock"), live);
  EXPECT_FALSE(GetPod("p3")["spec"].contains("nodeName"));
}

// Per "node/GPU UUID": (slots, MiB, cores) summed over every pod's allocated annotation.
struct GpuSum {
  int count = 0;
  int mem = 0;
  int cores = 0;
};

std::map<std::string, GpuSum> SumAllocations(k8s::Client& client, int* pods_with_devices) {
  std::map<std::string, GpuSum> sums;
  *pods_with_devices = 0;
  auto pods = client.List(k8s::resources::kPods, "default", {});
  EXPECT_TRUE(pods.ok());
  if (!pods.ok()) return sums;
  for (const json& p : pods->items) {
    auto value = k8s::Annotation(p, "hami.io/vgpu-devices-allocated");
    if (!value) continue;
    auto decoded = protocol::DecodePodDevices(*value);
    EXPECT_TRUE(decoded.ok()) << *value;
    if (!decoded.ok()) continue;
    ++*pods_with_devices;
    for (const auto& ctr : *decoded) {
      for (const auto& d : ctr) {
        GpuSum& s = sums[k8s::Annotations(p)["hami.io/vgpu-node"] + "/" + d.uuid];
        ++s.count;
        s.mem += d.usedmem;
        s.cores += d.usedcores;
      }
    }
  }
  return sums;
}

TEST_F(BinaryIntegrationTest, RestartMidStreamLosesNoAllocationAndNeverOvercommits) {
  CreateNode(Node("node-1"));
  CreateNode(Node("node-2"));
  // 4 GPUs of 32768 MiB and 100 cores: 8000 MiB / 30 cores pods fit 3 per GPU by cores,
  // 12 in all; the stream asks for 16.
  auto sched = Start({"--node-lock-retry-timeout", "5s"});
  std::map<std::string, std::string> placed;  // pod -> node
  for (int i = 0; i < 16; ++i) {
    const std::string name = "s" + std::to_string(i);
    if (i == 6) {
      sched->Kill(SIGKILL);  // mid-stream, no graceful shutdown
      sched = Start({"--node-lock-retry-timeout", "5s"});
    }
    CreatePod(GpuPod(name, 8000, 30));
    json res = Filter(name, {"node-1", "node-2"});
    ASSERT_EQ(res["Error"], "") << res;
    if (!res["NodeNames"].is_array()) continue;
    ASSERT_EQ(res["NodeNames"].size(), 1u);
    const std::string node = res["NodeNames"][0];
    ASSERT_EQ(Bind(name, node)["Error"], "") << name;
    ReleaseAsPlugin(node, name);
    placed[name] = node;
  }
  EXPECT_EQ(placed.size(), 12u);
  int with_devices = 0;
  std::map<std::string, GpuSum> sums = SumAllocations(*client_, &with_devices);
  // Every placed pod kept its allocation across the restart; no unplaced pod has one.
  EXPECT_EQ(with_devices, 12);
  for (const auto& [name, node] : placed) {
    json pod = GetPod(name);
    EXPECT_EQ(pod["spec"]["nodeName"], node) << name;
    EXPECT_EQ(k8s::Annotations(pod)["hami.io/vgpu-node"], node) << name;
  }
  ASSERT_EQ(sums.size(), 4u);
  for (const auto& [uuid, s] : sums) {
    EXPECT_LE(s.count, 10) << uuid;
    EXPECT_LE(s.mem, 32768) << uuid;
    EXPECT_LE(s.cores, 100) << uuid;
  }
}

// hami-scheduler --dra: the webhook creates the pod's ResourceClaimTemplate in the API server
// (once: a second pod of the same shape reuses it) and answers with the patch to claims.
TEST_F(BinaryIntegrationTest, DraModeWebhookCreatesTheTemplateOnce) {
  auto sched = Start({"--dra"});
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "w"}, {"namespace", "default"}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "main"},
                       {"resources",
                        {{"limits",
                          {{"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}}}}}}})}}}};
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request", {{"uid", "u1"}, {"namespace", "default"}, {"object", pod}}}};
  for (int i = 0; i < 2; ++i) {
    json answer = Post("/webhook", review);
    EXPECT_EQ(answer["response"]["allowed"], true) << answer.dump() << sched->log();
    EXPECT_EQ(answer["response"]["patchType"], "JSONPatch");
  }
  auto got =
      client_->Get(k8s::resources::kResourceClaimTemplates, "default", "hami-gpu-1x3000mi-30c");
  ASSERT_TRUE(got) << got.error().ToString();
  EXPECT_EQ((*got)["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"],
            json::parse(R"({"memory": "3000Mi", "cores": "30"})"));
}

}  // namespace
}  // namespace hami::scheduler
