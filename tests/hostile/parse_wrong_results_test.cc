// Issue 19 item 4 against the real hami-scheduler: annotations anyone who creates pods (or
// patches nodes) can write must not create capacity. A pod annotated with a negative size is not
// counted as freeing memory (the 16000 MiB pod stays off the 16384 MiB GPU holding 4000 MiB); a
// register with a negative size or a UUID listed twice is refused with an Event naming it.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "binary_fixture.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "scheduler_process.h"
#include "test_env.h"

namespace hami {
namespace {

using nlohmann::json;
using scheduler::testing::GpuPod;
using scheduler::testing::Node;
using scheduler::testing::SchedulerProcess;

std::string OneGpu(const std::string& uuid, int devmem) {
  return R"({"id":")" + uuid + R"(","index":0,"count":10,"devmem":)" + std::to_string(devmem) +
         R"(,"devcore":100,"type":"NVIDIA-Tesla T4","numa":0,"mode":"hami-core","health":true})";
}

class ParseWrongResultsTest : public scheduler::testing::SchedulerBinaryTest {
 protected:
  // A pod already placed on `node` holding `allocated` (hami.io/vgpu-devices-allocated).
  void CreatePlacedPod(const std::string& name, const std::string& node,
                       const std::string& allocated) {
    json pod = GpuPod(name, 1000);
    pod["metadata"]["annotations"] = {{"hami.io/vgpu-node", node},
                                      {"hami.io/vgpu-devices-allocated", allocated},
                                      {"hami.io/bind-phase", "success"}};
    pod["spec"]["nodeName"] = node;
    ASSERT_TRUE(client_->Create(k8s::resources::kPods, "default", pod).ok());
  }

  json Filter(const json& pod, const std::vector<std::string>& nodes) {
    auto created = client_->Create(k8s::resources::kPods, "default", pod);
    EXPECT_TRUE(created.ok());
    if (!created.ok()) return json();
    json live = *client_->Get(k8s::resources::kPods, "default", k8s::Name(pod));
    auto res = http_->Post("/filter", json{{"Pod", live}, {"NodeNames", nodes}}.dump(),
                           "application/json");
    EXPECT_TRUE(res) << sched_->log();
    if (!res) return json();
    EXPECT_EQ(res->status, 200);
    return json::parse(res->body, nullptr, false);
  }

  // The message of the first InvalidRegisterAnnotation Event on `node`, or "".
  std::string RegisterEvent(const std::string& node) {
    auto events = client_->List(k8s::resources::kEvents, "default", {});
    if (!events.ok()) return "";
    for (const json& e : events->items) {
      if (e["involvedObject"]["name"] == node && e["reason"] == "InvalidRegisterAnnotation") {
        return e["message"].get<std::string>();
      }
    }
    return "";
  }
};

TEST_F(ParseWrongResultsTest, NegativeAllocatedSizeFreesNoMemory) {
  ASSERT_TRUE(
      client_->Create(k8s::resources::kNodes, "", Node("n1", "[" + OneGpu("GPU-t4", 16384) + "]"))
          .ok());
  CreatePlacedPod("holder", "n1", "GPU-t4,NVIDIA,4000,0:;");
  CreatePlacedPod("evil", "n1", "GPU-t4,NVIDIA,-99999,0:;");
  StartScheduler();
  json reply = Filter(GpuPod("big", 16000), {"n1"});
  EXPECT_TRUE(reply["NodeNames"].is_null() || reply["NodeNames"].empty()) << reply;
  EXPECT_TRUE(reply["FailedNodes"].contains("n1")) << reply;
  // What does fit (12384 MiB free) still goes there.
  json fits = Filter(GpuPod("fits", 12000), {"n1"});
  EXPECT_EQ(fits["NodeNames"], json::array({"n1"})) << fits;
}

TEST_F(ParseWrongResultsTest, DuplicateUuidInARegisterIsRefusedWithAnEvent) {
  std::string reg = "[" + OneGpu("GPU-dup", 16384) + "," + OneGpu("GPU-dup", 16384) + "]";
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("n1", reg)).ok());
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("n2")).ok());
  StartScheduler();
  json pod = GpuPod("two", 10000);
  pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2";
  json reply = Filter(pod, {"n1", "n2"});
  EXPECT_EQ(reply["NodeNames"], json::array({"n2"})) << reply;
  EXPECT_NE(RegisterEvent("n1").find("duplicate \"GPU-dup\""), std::string::npos)
      << RegisterEvent("n1");
}

TEST_F(ParseWrongResultsTest, NegativeRegisterSizesAreRefusedWithAnEvent) {
  ASSERT_TRUE(
      client_->Create(k8s::resources::kNodes, "", Node("n1", "[" + OneGpu("GPU-neg", -16384) + "]"))
          .ok());
  std::string neg_count = R"([{"id":"GPU-c","count":-10,"devmem":16384,"devcore":100,)"
                          R"("type":"NVIDIA-T4","health":true}])";
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("n2", neg_count)).ok());
  StartScheduler();
  json reply = Filter(GpuPod("p", 1000), {"n1", "n2"});
  EXPECT_TRUE(reply["NodeNames"].is_null() || reply["NodeNames"].empty()) << reply;
  EXPECT_NE(RegisterEvent("n1").find(R"(field "devmem": must not be negative)"), std::string::npos)
      << RegisterEvent("n1");
  EXPECT_NE(RegisterEvent("n2").find(R"(field "count": must not be negative)"), std::string::npos)
      << RegisterEvent("n2");
}

// kube-scheduler sends the pod's UID; a bind for a pod deleted and created again under the same
// name (a StatefulSet's sts-0) used to bind the new pod and answer {"Error":""}.
TEST_F(ParseWrongResultsTest, BindForAnOldUidFailsAndBindsNothing) {
  ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("n1")).ok());
  StartScheduler();
  auto first = client_->Create(k8s::resources::kPods, "default", GpuPod("sts-0", 1000));
  ASSERT_TRUE(first.ok());
  const std::string old_uid = k8s::Uid(*first);
  ASSERT_TRUE(client_->Delete(k8s::resources::kPods, "default", "sts-0").ok());
  json again = Filter(GpuPod("sts-0", 1000), {"n1"});
  ASSERT_EQ(again["NodeNames"], json::array({"n1"})) << again;

  auto res = http_->Post(
      "/bind",
      json{{"PodName", "sts-0"}, {"PodNamespace", "default"}, {"PodUID", old_uid}, {"Node", "n1"}}
          .dump(),
      "application/json");
  ASSERT_TRUE(res) << sched_->log();
  json reply = json::parse(res->body, nullptr, false);
  EXPECT_NE(reply["Error"].get<std::string>().find(old_uid), std::string::npos) << reply;
  json pod = *client_->Get(k8s::resources::kPods, "default", "sts-0");
  EXPECT_EQ(k8s::FieldString(pod, "spec.nodeName"), "") << pod;

  auto ok = http_->Post("/bind",
                        json{{"PodName", "sts-0"},
                             {"PodNamespace", "default"},
                             {"PodUID", k8s::Uid(pod)},
                             {"Node", "n1"}}
                            .dump(),
                        "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(json::parse(ok->body, nullptr, false)["Error"], "") << ok->body;
  EXPECT_EQ(
      k8s::FieldString(*client_->Get(k8s::resources::kPods, "default", "sts-0"), "spec.nodeName"),
      "n1");
}

}  // namespace
}  // namespace hami
