// The plugin end to end over real sockets: the sim apiserver in-process, a fake kubelet on
// kubelet.sock, the plugin serving nvidia-gpu.sock. Pods carry the annotations the scheduler's
// Filter and Bind write (seed "Task Dispatch"); Allocate must turn them into the exact env and
// mounts, end with bind-phase success, the entries consumed and the node lock gone.
#include "deviceplugin/plugin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/register.h"
#include "fake_kubelet.h"
#include "k8s/client.h"
#include "sim/apiserver/apiserver.h"
#include "support/allocate_env.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
using k8s::Json;
using testing::FakeKubelet;
using testing::WaitFor;

using test_support::kGpu0;
using test_support::kGpu1;
using test_support::kNode;

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    dir_ = "/tmp/hami-dp-" + std::to_string(getpid()) + "-" + std::to_string(n++);
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/plugins");
    fs::create_directories(dir_ + "/hook/vgpu");
    fs::copy_file("examples/inventory/two-v100.yaml", dir_ + "/inventory.yaml");

    server_ = std::make_unique<sim::ApiServer>(sim::ApiServerOptions{});
    ASSERT_TRUE(server_->Start());
    client_ = test_support::NewClient(server_->url());
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", test_support::BareNode()));

    kubelet_ = std::make_unique<FakeKubelet>(dir_ + "/plugins");
    ASSERT_TRUE(kubelet_->Start());

    discovery_ = std::make_unique<InventoryDiscovery>(dir_ + "/inventory.yaml");
    publisher_ = std::make_unique<RegisterPublisher>(
        discovery_.get(), PluginConfig{},
        [this](std::string_view key, std::string_view value) -> Status {
          Json patch;
          patch["metadata"]["annotations"][std::string(key)] = value;
          auto r = client_->Patch(k8s::resources::kNodes, "", kNode, k8s::PatchType::kMerge, patch);
          if (!r) return r.error().ToError();
          return OkStatus();
        },
        clock_);
    AllocateEnv env;
    env.hook_path = dir_ + "/hook";
    allocator_ = std::make_unique<Allocator>(client_.get(), kNode, env, [] { return "cache-1"; });
    PluginOptions options;
    options.kubelet_socket = kubelet_->socket();
    options.split_count = 10;
    options.numa_topology = true;
    options.poll_interval = std::chrono::milliseconds(50);
    plugin_ = std::make_unique<Plugin>(options, publisher_.get(), allocator_.get());
    ASSERT_TRUE(plugin_->Start());
  }

  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    server_->Stop();
    fs::remove_all(dir_);
  }

  // A pod as the scheduler leaves it after Filter and Bind, and the node lock it holds.
  void CreateBoundPod(const std::string& name, const std::string& to_allocate, bool lock = true,
                      const std::string& phase = "allocating") {
    auto created =
        test_support::CreateBoundPod(*client_, name, to_allocate, lock, phase, clock_.Now());
    ASSERT_TRUE(created) << created.error().ToString();
    uid_ = k8s::Uid(*created);
  }

  k8s::StringMap PodAnnotations(const std::string& name) {
    auto pod = client_->Get(k8s::resources::kPods, "default", name);
    return pod ? k8s::Annotations(*pod) : k8s::StringMap{};
  }
  std::optional<std::string> NodeAnnotation(const std::string& key) {
    auto node = client_->Get(k8s::resources::kNodes, "", kNode);
    return node ? k8s::Annotation(*node, key) : std::nullopt;
  }

  grpc::Status Allocate(std::vector<std::vector<std::string>> ids, v1beta1::AllocateResponse* out) {
    v1beta1::AllocateRequest req;
    for (const auto& c : ids) {
      auto* r = req.add_container_requests();
      for (const auto& id : c) r->add_devices_ids(id);
    }
    grpc::ClientContext ctx;
    return kubelet_->PluginClient(kPluginEndpoint)->Allocate(&ctx, req, out);
  }

  std::string dir_;
  std::string uid_;
  FakeClock clock_;
  std::unique_ptr<sim::ApiServer> server_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<InventoryDiscovery> discovery_;
  std::unique_ptr<RegisterPublisher> publisher_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Plugin> plugin_;
};

TEST_F(PluginTest, RegistersAndPublishesTheSeedAnnotation) {
  ASSERT_TRUE(WaitFor([&] { return !kubelet_->requests().empty(); }));
  const auto req = kubelet_->requests()[0];
  EXPECT_EQ(req.version(), "v1beta1");
  EXPECT_EQ(req.endpoint(), "nvidia-gpu.sock");
  EXPECT_EQ(req.resource_name(), "nvidia.com/gpu");
  EXPECT_FALSE(req.options().get_preferred_allocation_available());
  EXPECT_EQ(plugin_->socket_path(), dir_ + "/plugins/nvidia-gpu.sock");
  auto value = NodeAnnotation("hami.io/node-nvidia-register");
  ASSERT_TRUE(value);
  EXPECT_EQ(*value, publisher_->last_value());
  EXPECT_NE(value->find(R"("index":1,"count":10,"devmem":32768)"), std::string::npos);
  EXPECT_FALSE(NodeAnnotation("hami.io/node-handshake"));  // never written by the plugin

  grpc::ClientContext ctx;
  v1beta1::DevicePluginOptions options;
  ASSERT_TRUE(kubelet_->PluginClient(kPluginEndpoint)
                  ->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &options)
                  .ok());
  EXPECT_TRUE(options.get_preferred_allocation_available());
}

TEST_F(PluginTest, ListAndWatchAdvertisesReplicasAndPushesHealthChanges) {
  grpc::ClientContext ctx;
  auto stream = kubelet_->PluginClient(kPluginEndpoint)->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_EQ(resp.devices_size(), 20);
  EXPECT_EQ(resp.devices(0).id(), std::string(kGpu0) + "-0");
  EXPECT_EQ(resp.devices(19).id(), std::string(kGpu1) + "-9");
  EXPECT_EQ(resp.devices(3).health(), "Healthy");
  ASSERT_EQ(resp.devices(3).topology().nodes_size(), 1);
  EXPECT_EQ(resp.devices(3).topology().nodes(0).id(), 1);

  std::string text = *ReadFile(dir_ + "/inventory.yaml");
  text.replace(text.rfind("health: true"), 12, "health: false");
  std::ofstream(dir_ + "/inventory.yaml") << text;
  clock_.Advance(kPublishInterval);  // next tick re-discovers
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_EQ(resp.devices_size(), 20);  // the full list again
  EXPECT_EQ(resp.devices(9).health(), "Healthy");
  EXPECT_EQ(resp.devices(10).health(), "Unhealthy");
  EXPECT_EQ(resp.devices(19).health(), "Unhealthy");
  ctx.TryCancel();
}

TEST_F(PluginTest, AllocateSeedDispatchEndsInSuccess) {
  CreateBoundPod("gpu-pod", std::string(kGpu1) + ",NVIDIA,3000,0:;");
  v1beta1::AllocateResponse resp;
  grpc::Status s = Allocate({{std::string(kGpu1) + "-0"}}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& c = resp.container_responses(0);
  const std::string vgpu = dir_ + "/hook/vgpu";
  std::map<std::string, std::string> envs(c.envs().begin(), c.envs().end());
  EXPECT_EQ(envs, (std::map<std::string, std::string>{
                      {"NVIDIA_VISIBLE_DEVICES", kGpu1},
                      {"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"},
                      {"CUDA_DEVICE_SM_LIMIT", "0"},
                      {"CUDA_DEVICE_MEMORY_SHARED_CACHE", vgpu + "/cache-1.cache"},
                      {"CUDA_TASK_PRIORITY", "0"},
                      {"LIBCUDA_LOG_LEVEL", "1"}}));
  ASSERT_EQ(c.mounts_size(), 7);
  EXPECT_EQ(c.mounts(0).container_path(), vgpu + "/libvgpu.so");
  EXPECT_TRUE(c.mounts(0).read_only());
  EXPECT_EQ(c.mounts(1).container_path(), vgpu);
  EXPECT_EQ(c.mounts(1).host_path(), vgpu + "/containers/" + uid_ + "_main");
  EXPECT_TRUE(fs::is_directory(c.mounts(1).host_path()));
  EXPECT_EQ(c.mounts(2).host_path(), "/tmp/vgpulock");
  EXPECT_EQ(c.mounts(3).container_path(), "/etc/ld.so.preload");
  // libvgpu's limits: read-only, beside the library, outside the writable cache dir.
  EXPECT_EQ(c.mounts(4).container_path(), vgpu + "/vgpu.limits");
  EXPECT_EQ(c.mounts(4).host_path(), vgpu + "/limits/" + uid_ + "_main.limits");
  EXPECT_TRUE(c.mounts(4).read_only());
  // The region file as its own (writable) file mount, created before kubelet is answered.
  EXPECT_EQ(c.mounts(5).container_path(), vgpu + "/cache-1.cache");
  EXPECT_EQ(c.mounts(5).host_path(), vgpu + "/containers/" + uid_ + "_main/cache-1.cache");
  EXPECT_FALSE(c.mounts(5).read_only());
  EXPECT_TRUE(fs::exists(c.mounts(5).host_path()));
  EXPECT_EQ(c.mounts(6).container_path(), vgpu + "/cache-1.cache.limiter");
  EXPECT_FALSE(c.mounts(6).read_only());
  EXPECT_TRUE(fs::is_regular_file(c.mounts(6).host_path()));
  std::ifstream limits(c.mounts(4).host_path());
  std::stringstream limits_text;
  limits_text << limits.rdbuf();
  EXPECT_EQ(limits_text.str(),
            "# libvgpu limits, written by hami-device-plugin (docs/vgpu.md)\n"
            "CUDA_DEVICE_MEMORY_LIMIT_0=3000m\n"
            "CUDA_DEVICE_MEMORY_SHARED_CACHE=" +
                vgpu +
                "/cache-1.cache\n"
                "CUDA_DEVICE_SM_LIMIT=0\n"
                "CUDA_TASK_PRIORITY=0\n"
                "GPU_CORE_UTILIZATION_POLICY=default\n");

  auto ann = PodAnnotations("gpu-pod");
  EXPECT_EQ(ann["hami.io/bind-phase"], "success");
  EXPECT_EQ(ann["hami.io/vgpu-devices-to-allocate"], ";");
  EXPECT_EQ(ann["hami.io/vgpu-devices-allocated"], std::string(kGpu1) + ",NVIDIA,3000,0:;");
  EXPECT_FALSE(NodeAnnotation("hami.io/mutex.lock"));
}

TEST_F(PluginTest, WrongDeviceCountFailsReleasesLockAndNamesThePod) {
  CreateBoundPod("bad-pod", std::string(kGpu1) + ",NVIDIA,3000,0:;");
  v1beta1::AllocateResponse resp;
  grpc::Status s = Allocate({{std::string(kGpu1) + "-0", std::string(kGpu1) + "-1"}}, &resp);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find("pod default/bad-pod"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("device number not matched"), std::string::npos);
  EXPECT_EQ(PodAnnotations("bad-pod")["hami.io/bind-phase"], "failed");
  EXPECT_FALSE(NodeAnnotation("hami.io/mutex.lock"));
}

TEST_F(PluginTest, WithoutLockFindsThePendingPodByAnnotations) {
  CreateBoundPod("other-node-pod", std::string(kGpu0) + ",NVIDIA,1000,0:;", false, "failed");
  CreateBoundPod("p2", ";" + std::string(kGpu0) + ",NVIDIA,1000,25:;", false);
  v1beta1::AllocateResponse resp;
  grpc::Status s = Allocate({{std::string(kGpu0) + "-4"}}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.container_responses(0).envs().at("CUDA_DEVICE_SM_LIMIT"), "25");
  auto ann = PodAnnotations("p2");
  EXPECT_EQ(ann["hami.io/bind-phase"], "success");
  EXPECT_EQ(ann["hami.io/vgpu-devices-to-allocate"], ";;");
  EXPECT_EQ(PodAnnotations("other-node-pod")["hami.io/bind-phase"], "failed");
}

TEST_F(PluginTest, NoPendingPodIsAnError) {
  v1beta1::AllocateResponse resp;
  grpc::Status s = Allocate({{std::string(kGpu0) + "-0"}}, &resp);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find("no pending pod found on node \"node-1\""), std::string::npos)
      << s.error_message();
}

TEST_F(PluginTest, PreferredAllocationPicksReplicasOfTheAnnotatedGpu) {
  CreateBoundPod("pref", std::string(kGpu1) + ",NVIDIA,1000,0:;");
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const char* g : {kGpu0, kGpu1}) {
    for (int i = 0; i < 2; ++i)
      c->add_available_deviceids(std::string(g) + "-" + std::to_string(i));
  }
  c->set_allocation_size(1);
  v1beta1::PreferredAllocationResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(
      kubelet_->PluginClient(kPluginEndpoint)->GetPreferredAllocation(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.container_responses_size(), 1);
  ASSERT_EQ(resp.container_responses(0).deviceids_size(), 1);
  EXPECT_EQ(resp.container_responses(0).deviceids(0), std::string(kGpu1) + "-0");

  grpc::ClientContext ctx2;
  v1beta1::PreStartContainerResponse pre;
  EXPECT_TRUE(kubelet_->PluginClient(kPluginEndpoint)
                  ->PreStartContainer(&ctx2, v1beta1::PreStartContainerRequest(), &pre)
                  .ok());
}

TEST_F(PluginTest, ReRegistersAfterKubeletRestart) {
  ASSERT_TRUE(WaitFor([&] { return plugin_->registrations() == 1; }));
  ASSERT_TRUE(kubelet_->Restart());
  // The contract: within 5 s.
  ASSERT_TRUE(WaitFor([&] { return plugin_->registrations() == 2; }, std::chrono::seconds(5)));
  EXPECT_EQ(kubelet_->requests().size(), 2u);
  ASSERT_TRUE(WaitFor([&] { return fs::exists(plugin_->socket_path()); }));
  // The re-created server answers.
  grpc::ClientContext ctx;
  v1beta1::DevicePluginOptions options;
  EXPECT_TRUE(kubelet_->PluginClient(kPluginEndpoint)
                  ->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &options)
                  .ok());
}

TEST_F(PluginTest, KeepsPublishingWhileKubeletIsAbsentAndStopsCleanly) {
  kubelet_->Stop();
  fs::remove(kubelet_->socket());
  std::string text = *ReadFile(dir_ + "/inventory.yaml");
  text.replace(text.find("health: true"), 12, "health: false");
  std::ofstream(dir_ + "/inventory.yaml") << text;
  clock_.Advance(kPublishInterval);
  ASSERT_TRUE(WaitFor([&] {
    auto v = NodeAnnotation("hami.io/node-nvidia-register");
    return v && v->find(R"("mode":"hami-core"},)") != std::string::npos;  // GPU 0 unhealthy
  }));
  plugin_->Stop();
  EXPECT_FALSE(fs::exists(plugin_->socket_path()));
}

}  // namespace
}  // namespace hami::deviceplugin
