// Allocate in MIG mode (docs/MIG.md "Device plugin") against the sim API server and the fake
// libnvidia-ml.so.1: the reserved instance is created, its MIG UUID is what the container sees,
// and the runtime ids are written back into hami.io/vgpu-mig-allocations in the same patch that
// consumes the entry; a reservation the GPU cannot take fails the pod and leaves no instance.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "deviceplugin/allocator.h"
#include "deviceplugin/mig_manager.h"
#include "deviceplugin/nvml.h"
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

class MigAllocateTest : public test_support::SimNodeTest {
 protected:
  void SetUp() override {
    SimNodeTest::SetUp();
    dir_ = fs::temp_directory_path() / ("hami-mig-alloc-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    setenv("HAMI_FAKE_NVML_DEVICES",
           (std::string(kGpu0) + "|NVIDIA A100-SXM4-40GB|40960|0:0:0.0").c_str(), 1);
    setenv("HAMI_FAKE_NVML_MIG", "all", 1);
    setenv("HAMI_FAKE_NVML_MIG_STATE", (dir_ / "mig.state").c_str(), 1);
    nvml_ = std::make_unique<NvmlDiscovery>(NvmlOptions{HAMI_FAKE_NVML_PATH, "/nonexistent"});
    manager_ = std::make_unique<MigManager>(nvml_.get(), std::vector<MigGpu>{{0, kGpu0}},
                                            (dir_ / "hami-mig-apply.lock").string());
    AllocateEnv env;
    env.config.operating_mode = "mig";
    env.hook_path = (dir_ / "hook").string();
    allocator_ = std::make_unique<Allocator>(client_.get(), kNode, env, [] { return "id-1"; });
    allocator_->set_mig_manager(manager_.get());
  }
  void TearDown() override {
    for (const char* v :
         {"HAMI_FAKE_NVML_DEVICES", "HAMI_FAKE_NVML_MIG", "HAMI_FAKE_NVML_MIG_STATE"}) {
      unsetenv(v);
    }
    fs::remove_all(dir_);
  }
  void CreatePod(uint32_t start, uint32_t size) {
    k8s::Json pod = test_support::BoundPod("demo", std::string(kGpu0) + ",NVIDIA,4864,15:;");
    pod["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] =
        R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" + std::string(kGpu0) +
        R"(","profile":"1g.5gb","placement":{"start":)" + std::to_string(start) + R"(,"size":)" +
        std::to_string(size) + "}}]";
    ASSERT_TRUE(client_->Create(res::kPods, "default", pod));
  }
  std::string Annotation(const std::string& key) {
    auto pod = client_->Get(res::kPods, "default", "demo");
    return pod ? k8s::Annotation(*pod, key).value_or("") : "";
  }
  size_t Instances() {
    auto list = nvml_->MigInstances(0);
    return list ? list->size() : 99;
  }

  fs::path dir_;
  std::unique_ptr<NvmlDiscovery> nvml_;
  std::unique_ptr<MigManager> manager_;
  std::unique_ptr<Allocator> allocator_;
};

TEST_F(MigAllocateTest, CreatesTheInstanceAndWritesItsIdsBack) {
  CreatePod(6, 1);
  auto r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  auto instances = nvml_->MigInstances(0);
  ASSERT_TRUE(instances && instances->size() == 1u);
  const MigInstance& inst = (*instances)[0];
  EXPECT_EQ(inst.placement, (protocol::MigPlacement{6, 1}));
  // The MIG device alone: no HAMi-core limiter, no limits file.
  EXPECT_EQ((*r)[0].envs,
            (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", inst.mig_uuid}}));
  EXPECT_TRUE((*r)[0].mounts.empty());
  EXPECT_TRUE((*r)[0].files.empty());
  EXPECT_EQ(Annotation("hami.io/vgpu-mig-allocations"),
            R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" + std::string(kGpu0) +
                R"(","profile":"1g.5gb","placement":{"start":6,"size":1},"migUUID":")" +
                inst.mig_uuid + R"(","gpuInstanceID":)" + std::to_string(inst.gpu_instance_id) +
                R"(,"computeInstanceID":0}])");
  EXPECT_EQ(Annotation("hami.io/bind-phase"), "success");
  EXPECT_EQ(Annotation("hami.io/vgpu-devices-to-allocate"), ";");
}

TEST_F(MigAllocateTest, CdiStrategyNamesTheMigDevice) {
  AllocateEnv env;
  env.config.operating_mode = "mig";
  env.strategy = DeviceListStrategy::kCdiAnnotations;
  Allocator cdi(client_.get(), kNode, env, [] { return "id-2"; });
  cdi.set_mig_manager(manager_.get());
  CreatePod(0, 1);
  auto r = cdi.Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_TRUE(r) << r.error();
  const std::string uuid = (*nvml_->MigInstances(0))[0].mig_uuid;
  EXPECT_EQ((*r)[0].annotations.at("cdi.k8s.io/hami-device-plugin_id-2"), "nvidia.com/gpu=" + uuid);
}

TEST_F(MigAllocateTest, AReservationTheGpuCannotTakeFailsThePod) {
  CreatePod(6, 2);  // a 1g instance is one slice wide
  auto r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("the GPU offers no such placement for the profile"), std::string::npos)
      << r.error();
  EXPECT_EQ(Annotation("hami.io/bind-phase"), "failed");
  EXPECT_EQ(Instances(), 0u);
}

}  // namespace
}  // namespace hami::deviceplugin
