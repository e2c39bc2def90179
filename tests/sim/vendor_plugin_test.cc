// hami-sim's generic vendor plugin (sim/vendor_plugin.h) against the sim API server, through a
// real vendor backend (Hygon: legacy colon register annotation, a handshake, the seed's
// to-allocate key), and the scenario's `vendor:` key.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "device/device.h"
#include "k8s/object.h"
#include "protocol/keys.h"
#include "protocol/node_lock.h"
#include "scheduler/test_env.h"
#include "sim/scenario.h"
#include "sim/vendor_plugin.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using scheduler::testing::SimTest;
namespace res = k8s::resources;

constexpr const char* kToAllocate = "hami.io/hcu-devices-to-allocate";
constexpr const char* kAllocated = "hami.io/dcu-devices-allocated";

class VendorPluginTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    auto config = device::LoadDeviceConfig("nvidia: {}\nhygon: {}\n");
    ASSERT_TRUE(config) << config.error();
    registry_ = device::MakeRegistry(*config);
    hygon_ = registry_.Find("DCU");
    ASSERT_NE(hygon_, nullptr);
    json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}};
    ASSERT_TRUE(client_->Create(res::kNodes, "", node).ok());
    deviceplugin::GpuDevice a, b;
    a.uuid = "DCU-a";
    b.uuid = "DCU-b";
    b.index = 1;
    a.model = b.model = "DCU-Z100";
    a.memory_mib = b.memory_mib = 32768;
    plugin_ = std::make_unique<VendorPlugin>(*hygon_, *client_, "n1", VendorDeviceInfos({a, b}, 4),
                                             clock_);
  }

  // A pod the scheduler bound to n1: to-allocate/allocated = `devices`, bind-phase allocating,
  // and the node locked by it.
  void CreateBoundPod(const std::string& name, const std::string& devices) {
    json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    pod["metadata"] = {{"name", name}, {"namespace", "default"}};
    pod["metadata"]["annotations"] = {{std::string(protocol::kVgpuNodeKey), "n1"},
                                      {std::string(protocol::kBindTimeKey), "1787306400"},
                                      {std::string(protocol::kBindPhaseKey), "allocating"},
                                      {kToAllocate, devices},
                                      {kAllocated, devices}};
    pod["spec"] = {{"nodeName", "n1"},
                   {"containers", json::array({{{"name", "a"}}, {{"name", "b"}}})}};
    ASSERT_TRUE(client_->Create(res::kPods, "default", pod).ok());
    json status = {{"status", {{"phase", "Pending"}}}};
    ASSERT_TRUE(
        client_->Patch(res::kPods, "default", name, k8s::PatchType::kMerge, status, "status").ok());
    json lock;
    lock["metadata"]["annotations"][std::string(protocol::kNodeLockKey)] =
        protocol::NodeLockValue(clock_.Now(), Zone::Utc(), "default", name);
    ASSERT_TRUE(client_->Patch(res::kNodes, "", "n1", k8s::PatchType::kMerge, lock).ok());
  }
  k8s::StringMap PodAnnotations(const std::string& name) {
    return k8s::Annotations(*client_->Get(res::kPods, "default", name));
  }
  std::optional<std::string> NodeAnnotation(const std::string& key) {
    return k8s::Annotation(*client_->Get(res::kNodes, "", "n1"), key);
  }

  FakeClock clock_{SystemTime(std::chrono::seconds(1787306400))};
  device::Registry registry_;
  const device::Device* hygon_ = nullptr;
  std::unique_ptr<VendorPlugin> plugin_;
};

TEST_F(VendorPluginTest, PublishesTheVendorsRegistrationAndAnswersTheHandshake) {
  const device::NodeRegistration& reg = plugin_->registration();
  EXPECT_EQ(reg.capacity, (device::StringMap{{"hygon.com/dcunum", "8"}}));
  ASSERT_TRUE(plugin_->Publish().ok());
  auto value = NodeAnnotation("hami.io/node-dcu-register");
  ASSERT_TRUE(value);
  EXPECT_EQ(*value, reg.annotations.at("hami.io/node-dcu-register"));
  // The scheduler's backend reads back what the plugin wrote.
  auto devices =
      hygon_->NodeDevices(device::NodeViewFromNode(*client_->Get(res::kNodes, "", "n1")));
  ASSERT_TRUE(devices) << devices.error();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1].id, "DCU-b");
  EXPECT_EQ((*devices)[1].totalmem, 32768);
  auto handshake = NodeAnnotation("hami.io/node-handshake-dcu");
  ASSERT_TRUE(handshake);
  EXPECT_EQ(handshake->rfind("Reported_", 0), 0u) << *handshake;
  EXPECT_EQ(plugin_->count_resource(), "hygon.com/dcunum");
}

TEST_F(VendorPluginTest, AllocateConsumesContainersThenSucceedsAndReleasesTheLock) {
  CreateBoundPod("p", "DCU-a,DCU,1000,10:;DCU-b,DCU,2000,20:;");
  ASSERT_TRUE(plugin_->Allocate().ok());
  auto mid = PodAnnotations("p");
  EXPECT_EQ(mid[kToAllocate], ";DCU-b,DCU,2000,20:;");
  EXPECT_EQ(mid[std::string(protocol::kBindPhaseKey)], "allocating");
  EXPECT_TRUE(NodeAnnotation(std::string(protocol::kNodeLockKey)).has_value());
  ASSERT_TRUE(plugin_->Allocate().ok());
  auto done = PodAnnotations("p");
  EXPECT_EQ(done[kToAllocate], ";;");
  EXPECT_EQ(done[kAllocated], "DCU-a,DCU,1000,10:;DCU-b,DCU,2000,20:;");  // untouched
  EXPECT_EQ(done[std::string(protocol::kBindPhaseKey)], "success");
  EXPECT_FALSE(NodeAnnotation(std::string(protocol::kNodeLockKey)).has_value());
}

TEST_F(VendorPluginTest, AnUndecodableAllocationFailsThePodAndReleasesTheLock) {
  CreateBoundPod("bad", "DCU-a,DCU,lots,10:;");
  Status s = plugin_->Allocate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("allocate on node \"n1\" for pod default/bad: annotation " +
                           std::string(kToAllocate) + ": "),
            std::string::npos)
      << s.error();
  EXPECT_EQ(PodAnnotations("bad")[std::string(protocol::kBindPhaseKey)], "failed");
  EXPECT_FALSE(NodeAnnotation(std::string(protocol::kNodeLockKey)).has_value());
}

TEST_F(VendorPluginTest, NoPendingPodIsAnErrorNamingTheNode) {
  Status s = plugin_->Allocate();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().rfind("allocate on node \"n1\": ", 0), 0u) << s.error();
}

// Cambricon's plugin removes the vendor's own node lock (cambricon.com/dsmlu.lock, which the
// scheduler's bind takes instead of hami.io/mutex.lock) once the pod is allocated.
TEST_F(VendorPluginTest, CambriconsPluginRemovesTheDsmluLock) {
  auto config = device::LoadDeviceConfig("nvidia: {}\ncambricon: {}\n");
  ASSERT_TRUE(config) << config.error();
  device::Registry registry = device::MakeRegistry(*config);
  const device::Device* mlu = registry.Find("MLU");
  ASSERT_NE(mlu, nullptr);
  ASSERT_EQ(mlu->BindLockKind(), device::BindLock::kVendor);
  deviceplugin::GpuDevice card;
  card.uuid = "MLU-a";
  card.model = "MLU370";
  card.memory_mib = 16384;
  VendorPlugin plugin(*mlu, *client_, "n1", VendorDeviceInfos({card}, 4), clock_);
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", "m"}, {"namespace", "default"}};
  pod["metadata"]["annotations"] = {
      {std::string(protocol::kVgpuNodeKey), "n1"},
      {std::string(protocol::kBindTimeKey), "1787306400"},
      {std::string(protocol::kBindPhaseKey), "allocating"},
      {"hami.io/cambricon-mlu-devices-to-allocate", "MLU-a,MLU,4096,50:;"},
      {"hami.io/cambricon-mlu-devices-allocated", "MLU-a,MLU,4096,50:;"}};
  pod["spec"] = {{"nodeName", "n1"}, {"containers", json::array({{{"name", "a"}}})}};
  ASSERT_TRUE(client_->Create(res::kPods, "default", pod).ok());
  json status = {{"status", {{"phase", "Pending"}}}};
  ASSERT_TRUE(
      client_->Patch(res::kPods, "default", "m", k8s::PatchType::kMerge, status, "status").ok());
  json lock;
  lock["metadata"]["annotations"]["cambricon.com/dsmlu.lock"] = "2026-08-21T10:00:00Z";
  ASSERT_TRUE(client_->Patch(res::kNodes, "", "n1", k8s::PatchType::kMerge, lock).ok());

  ASSERT_TRUE(plugin.Allocate().ok());
  EXPECT_EQ(PodAnnotations("m")[std::string(protocol::kBindPhaseKey)], "success");
  EXPECT_FALSE(NodeAnnotation("cambricon.com/dsmlu.lock").has_value());
}

TEST(VendorDeviceInfos, OnePerGpuWithTheSplitCount) {
  deviceplugin::GpuDevice g;
  g.uuid = "X-1";
  g.index = 3;
  g.model = "MI210";
  g.memory_mib = 65536;
  g.numa = 1;
  auto infos = VendorDeviceInfos({g}, 7);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0], (protocol::DeviceInfo{.id = "X-1",
                                            .index = 3,
                                            .count = 7,
                                            .devmem = 65536,
                                            .devcore = 100,
                                            .type = "MI210",
                                            .numa = 1,
                                            .mode = "hami-core",
                                            .health = true}));
}

const char* kWorkloads = R"(
workloads:
  - name: w
    containers:
      - name: main
        resources: {hygon.com/dcunum: 1}
)";

TEST(ScenarioVendor, ANodesGpusNameTheirVendor) {
  auto s = ParseScenario(std::string(R"(
deviceConfig: {nvidia: {}, hygon: {}}
nodes:
  - name: n-{i}
    count: 2
    gpus:
      - {model: DCU-Z100, memory: 32768, count: 2, vendor: DCU}
  - name: v100
    gpus:
      - {model: Tesla V100, memory: 32768, vendor: NVIDIA}
)") + kWorkloads);
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->nodes[0].gpus[0].vendor, "DCU");
  EXPECT_EQ(s->nodes[1].gpus[0].vendor, "");  // NVIDIA is the default
  auto nodes = ExpandNodes(*s);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].vendor, "DCU");
  EXPECT_EQ(nodes[1].vendor, "DCU");
  EXPECT_EQ(nodes[1].gpus.size(), 2u);
  EXPECT_EQ(nodes[2].vendor, "");
}

TEST(ScenarioVendor, RejectsAnInactiveOrMixedVendor) {
  struct Case {
    const char* yaml;
    const char* error;
  };
  const Case cases[] = {
      {"deviceConfig: {nvidia: {}}\nnodes:\n  - name: a\n    gpus:\n"
       "      - {model: Z, memory: 1, vendor: DCU}\n",
       "nodes[0].gpus[0].vendor: want the vendor key of a backend whose section is in "
       "deviceConfig (active: NVIDIA), got \"DCU\""},
      {"deviceConfig: {nvidia: {}, hygon: {}}\nnodes:\n  - name: a\n    gpus:\n"
       "      - {model: Z, memory: 1, vendor: DCU}\n      - {model: V, memory: 1}\n",
       "nodes[0].gpus[1].vendor: want the vendor of gpus[0] (a node has one vendor), got "
       "\"NVIDIA\""},
      {"nodes:\n  - name: a\n    gpus:\n      - {model: Z, memory: 1, vendor: [1]}\n",
       "nodes[0].gpus[0].vendor: want a non-empty string, got \"<sequence>\""},
  };
  for (const auto& c : cases) {
    auto s = ParseScenario(std::string(c.yaml) + kWorkloads);
    ASSERT_FALSE(s) << c.yaml;
    EXPECT_NE(s.error().find(c.error), std::string::npos) << s.error();
  }
}

}  // namespace
}  // namespace hami::sim
