// hami-device-plugin's whole code path in-process (NodePlugin, as main.cc runs it) on the fake
// libnvidia-ml.so.1 with one A100 in MIG mode, the sim API server and a fake kubelet, on a fake
// clock: the register JSON carries migProfiles, the start-up pass adopts what a live pod holds
// and destroys the rest, Allocate creates the reserved instance and hands its MIG UUID, the 5 s
// reconciler destroys an instance no live pod references, and it waits for the apply lock.
// MPS mode: the control daemons are started (a fake control binary) and told to quit at Stop.
#include "deviceplugin/node_plugin.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "common/json.h"
#include "deviceplugin/mig_apply_lock.h"
#include "deviceplugin/mig_manager.h"
#include "fake_kubelet.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "support/allocate_env.h"
#include "support/sim_node_test.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
namespace res = k8s::resources;
using test_support::kGpu0;
using test_support::kNode;
using testing::WaitFor;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Reservation(uint32_t start, const std::string& runtime = "") {
  return R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" + std::string(kGpu0) +
         R"(","profile":"1g.5gb","placement":{"start":)" + std::to_string(start) + R"(,"size":1})" +
         runtime + "}]";
}

class NodePluginTest : public test_support::SimNodeTest {
 protected:
  void SetUp() override {
    SimNodeTest::SetUp();
    dir_ = fs::temp_directory_path() /
           ("hami-node-plugin-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "plugins");
    fs::create_directories(dir_ / "hook/vgpu");
    state_ = (dir_ / "mig.state").string();
    lock_ = (dir_ / "lock/hami-mig-apply.lock").string();
    setenv("HAMI_FAKE_NVML_DEVICES",
           (std::string(kGpu0) + "|NVIDIA A100-SXM4-40GB|40960|0:0:0.0").c_str(), 1);
    setenv("HAMI_FAKE_NVML_MIG", "all", 1);
    setenv("HAMI_FAKE_NVML_MIG_STATE", state_.c_str(), 1);
    kubelet_ = std::make_unique<testing::FakeKubelet>((dir_ / "plugins").string());
    ASSERT_TRUE(kubelet_->Start());
  }
  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    for (const char* v :
         {"HAMI_FAKE_NVML_DEVICES", "HAMI_FAKE_NVML_MIG", "HAMI_FAKE_NVML_MIG_STATE"}) {
      unsetenv(v);
    }
    fs::remove_all(dir_);
  }

  NodePluginOptions Options(const std::string& mode) {
    NodePluginOptions o;
    o.node_name = kNode;
    o.kubelet_socket = kubelet_->socket();
    o.hook_path = (dir_ / "hook").string();
    o.nvml = NvmlOptions{HAMI_FAKE_NVML_PATH, "/nonexistent"};
    o.config.operating_mode = mode;
    o.mig_lock_path = lock_;
    o.mps.root = (dir_ / "mps").string();
    o.poll_interval = std::chrono::milliseconds(10);
    return o;
  }

  // The fake's instance lines ("gpu gi profile start size ci uuid").
  std::vector<std::string> Instances() const {
    std::istringstream in(ReadAll(state_));
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("serial", 0) != 0) out.push_back(line);
    }
    return out;
  }
  bool HasInstanceAt(uint32_t start) const {
    for (const std::string& line : Instances()) {
      std::istringstream f(line);
      unsigned gpu, gi, profile, at;
      if (f >> gpu >> gi >> profile >> at && at == start) return true;
    }
    return false;
  }
  std::string PodAnnotation(const std::string& pod, const std::string& key) {
    auto p = client_->Get(res::kPods, "default", pod);
    return p ? k8s::Annotation(*p, key).value_or("") : "";
  }
  std::string NodeRegister() {
    auto n = client_->Get(res::kNodes, "", kNode);
    return n ? k8s::Annotation(*n, "hami.io/node-nvidia-register").value_or("") : "";
  }
  grpc::Status Allocate(const std::string& id, v1beta1::AllocateResponse* out) {
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(id);
    grpc::ClientContext ctx;
    return kubelet_->PluginClient(kPluginEndpoint)->Allocate(&ctx, req, out);
  }

  fs::path dir_;
  std::string state_, lock_;
  FakeClock clock_;
  std::unique_ptr<testing::FakeKubelet> kubelet_;
  std::unique_ptr<NodePlugin> plugin_;
};

TEST_F(NodePluginTest, MigModeFromRegisterToReconcile) {
  // Left by an earlier plugin: a 1g at slice 5 a running pod holds, a 1g at slice 0 none does.
  std::ofstream(state_) << "serial 2\n"
                           "0 1 0 0 1 0 MIG-00000001-0000-4000-8000-000000000001\n"
                           "0 2 0 5 1 0 MIG-00000001-0000-4000-8000-000000000002\n";
  k8s::Json old =
      test_support::BoundPod("old", std::string(kGpu0) + ",NVIDIA,4864,15:;", "success");
  old["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] = Reservation(
      5,
      R"(,"migUUID":"MIG-00000001-0000-4000-8000-000000000002","gpuInstanceID":2,"computeInstanceID":0)");
  old["status"] = {{"phase", "Running"}};
  ASSERT_TRUE(client_->Create(res::kPods, "default", old));

  // The MIG passes' waits for the apply lock are counted (and sleep for real).
  auto lock_waits = std::make_shared<std::atomic<int>>(0);
  NodePluginOptions options = Options("mig");
  options.mig_lock_wait.sleep = [lock_waits](std::chrono::milliseconds d) {
    ++*lock_waits;
    std::this_thread::sleep_for(d);
  };
  plugin_ = std::make_unique<NodePlugin>(options, client_.get(), clock_);
  ASSERT_TRUE(plugin_->Start());
  EXPECT_EQ(plugin_->discovery_name(), std::string("nvml:") + HAMI_FAKE_NVML_PATH + " (MIG)");
  // The start-up pass ran before serving: the running pod's instance is adopted, the other gone.
  EXPECT_EQ(Instances(),
            (std::vector<std::string>{"0 2 0 5 1 0 MIG-00000001-0000-4000-8000-000000000002"}));
  EXPECT_TRUE(fs::exists(lock_));

  // The register JSON: the GPU in MIG mode with its allowlisted profiles, as NVML gives them.
  ASSERT_TRUE(WaitFor([&] { return !NodeRegister().empty(); }));
  EXPECT_EQ(
      NodeRegister(),
      R"([{"id":")" + std::string(kGpu0) +
          R"(","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA A100-SXM4-40GB",)"
          R"("mode":"mig","migProfiles":[)"
          R"({"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,"placements":[)"
          R"({"start":0,"size":1},{"start":1,"size":1},{"start":2,"size":1},{"start":3,"size":1},)"
          R"({"start":4,"size":1},{"start":5,"size":1},{"start":6,"size":1}]},)"
          R"({"name":"2g.10gb","memoryMB":9728,"core":29,"sliceCount":2,"placements":[)"
          R"({"start":0,"size":2},{"start":2,"size":2},{"start":4,"size":2}]},)"
          R"({"name":"3g.20gb","memoryMB":19456,"core":43,"sliceCount":3,"placements":[)"
          R"({"start":0,"size":4},{"start":4,"size":4}]},)"
          R"({"name":"7g.40gb","memoryMB":38912,"core":100,"sliceCount":7,"placements":[)"
          R"({"start":0,"size":8}]}],"health":true}])");

  // Allocate over kubelet's gRPC: the reservation at slice 6 is created, its MIG UUID handed.
  ASSERT_TRUE(test_support::CreateBoundPod(*client_, "demo",
                                           std::string(kGpu0) + ",NVIDIA,4864,15:;", true,
                                           "allocating", clock_.Now()));
  ASSERT_TRUE(client_->Patch(
      res::kPods, "default", "demo", k8s::PatchType::kMerge,
      {{"metadata", {{"annotations", {{"hami.io/vgpu-mig-allocations", Reservation(6)}}}}}}));
  v1beta1::AllocateResponse resp;
  grpc::Status s = Allocate(std::string(kGpu0) + "-0", &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(HasInstanceAt(6));
  const std::string created = Instances().back();
  const std::string mig_uuid = created.substr(created.rfind(' ') + 1);
  ASSERT_EQ(resp.container_responses_size(), 1);
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), mig_uuid);
  EXPECT_NE(PodAnnotation("demo", "hami.io/vgpu-mig-allocations").find(mig_uuid),
            std::string::npos);
  EXPECT_EQ(PodAnnotation("demo", "hami.io/bind-phase"), "success");

  // The pod holding slice 5 goes. While another holder has the apply lock the due pass waits
  // for it (polling, up to MigLockWait's 10 s) and has destroyed nothing; once released it
  // destroys the unreferenced instance and keeps demo's.
  ASSERT_TRUE(client_->Delete(res::kPods, "default", "old"));
  MigApplyLock other(lock_);
  ASSERT_TRUE(other.Acquire());
  const int waits_before = lock_waits->load();
  clock_.Advance(kMigReconcileInterval);
  ASSERT_TRUE(WaitFor([&] { return lock_waits->load() > waits_before; }));
  EXPECT_TRUE(HasInstanceAt(5));
  other.Release();
  ASSERT_TRUE(WaitFor([&] { return !HasInstanceAt(5); }));
  EXPECT_EQ(Instances(), (std::vector<std::string>{created}));
}

TEST_F(NodePluginTest, MigModeRefusesAnInventory) {
  NodePluginOptions o = Options("mig");
  o.device_inventory = "examples/inventory/two-v100.yaml";
  NodePlugin plugin(o, client_.get(), clock_);
  Status s = plugin.Start();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(),
            "operatingmode \"mig\" needs NVML: --device-inventory "
            "\"examples/inventory/two-v100.yaml\" cannot create MIG instances");
}

}  // namespace
}  // namespace hami::deviceplugin
