// The pure Allocate answer (docs/protocol.md#device-plugin-api-and-allocate,
// #environment-of-a-container): table tests over the
// annotation, kubelet's requests and the plugin's configuration.
#include "deviceplugin/allocate.h"
#include "deviceplugin/allocator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::deviceplugin {
namespace {

constexpr const char* kGpu = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";

std::function<std::string()> Ids() {
  auto n = std::make_shared<int>(0);
  return [n] { return "id" + std::to_string(++*n); };
}

PodView Pod(std::string to_allocate, std::vector<ContainerInfo> containers = {{"main", false}}) {
  return PodView{"default", "p", "uid-1", std::move(containers), std::move(to_allocate)};
}

std::vector<MountSpec> StandardMounts(const std::string& container, bool preload = true,
                                      const std::string& cache_id = "id1") {
  std::vector<MountSpec> m = {
      {"/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", true},
      {"/usr/local/vgpu", "/usr/local/vgpu/containers/uid-1_" + container, false},
      {"/tmp/vgpulock", "/tmp/vgpulock", false}};
  if (preload) m.push_back({"/etc/ld.so.preload", "/usr/local/vgpu/ld.so.preload", true});
  m.push_back({"/usr/local/vgpu/vgpu.limits",
               "/usr/local/vgpu/limits/uid-1_" + container + ".limits", true});
  m.push_back({"/usr/local/vgpu/" + cache_id + ".cache",
               "/usr/local/vgpu/containers/uid-1_" + container + "/" + cache_id + ".cache", false});
  m.push_back({"/usr/local/vgpu/" + cache_id + ".cache.limiter",
               "/usr/local/vgpu/containers/uid-1_" + container + "/" + cache_id + ".cache.limiter",
               false});
  return m;
}

TEST(Allocate, SeedDispatchExample) {
  auto plan = PlanAllocate(Pod(std::string(kGpu) + ",NVIDIA,3000,0:;"),
                           {{std::string(kGpu) + "-3"}}, AllocateEnv{}, Ids());
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->containers.size(), 1u);
  const ContainerAllocation& a = plan->containers[0];
  EXPECT_EQ(a.envs, (std::map<std::string, std::string>{
                        {"NVIDIA_VISIBLE_DEVICES", kGpu},
                        {"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"},
                        {"CUDA_DEVICE_SM_LIMIT", "0"},
                        {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/id1.cache"},
                        {"LIBCUDA_LOG_LEVEL", "1"},
                    }));
  EXPECT_EQ(a.mounts, StandardMounts("main"));
  EXPECT_EQ(plan->remaining, ";");  // docs/protocol.md#device-lists-on-pods
  EXPECT_EQ(plan->consumed, std::vector<size_t>{0});
}

TEST(Allocate, EnvTable) {
  struct Case {
    const char* name;
    std::string to_allocate;
    std::function<void(AllocateEnv*)> tweak;
    std::map<std::string, std::string> want_subset;
    std::vector<std::string> want_absent;
  };
  const std::vector<Case> cases = {
      {"two GPUs: per-index memory, first device's cores",
       "GPU-a,NVIDIA,1000,30:GPU-b,NVIDIA,2000,60:;",
       [](AllocateEnv*) {},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b"},
        {"CUDA_DEVICE_MEMORY_LIMIT_0", "1000m"},
        {"CUDA_DEVICE_MEMORY_LIMIT_1", "2000m"},
        {"CUDA_DEVICE_SM_LIMIT", "30"}},
       {"CUDA_OVERSUBSCRIBE", "GPU_CORE_UTILIZATION_POLICY"}},
      {"oversubscription",
       "GPU-a,NVIDIA,1000,0:;",
       [](AllocateEnv* e) { e->config.device_memory_scaling = 1.5; },
       {{"CUDA_OVERSUBSCRIBE", "true"}},
       {}},
      {"scaling 1 is not oversubscription",
       "GPU-a,NVIDIA,1000,0:;",
       [](AllocateEnv* e) { e->config.device_memory_scaling = 1; },
       {},
       {"CUDA_OVERSUBSCRIBE"}},
      {"disable core limit",
       "GPU-a,NVIDIA,1000,0:;",
       [](AllocateEnv* e) { e->config.disable_core_limit = true; },
       {{"GPU_CORE_UTILIZATION_POLICY", "disable"}},
       {}},
      {"empty log level is not set",
       "GPU-a,NVIDIA,1000,0:;",
       [](AllocateEnv* e) { e->config.lib_cuda_log_level = ""; },
       {},
       {"LIBCUDA_LOG_LEVEL"}},
      {"log level 4",
       "GPU-a,NVIDIA,1000,0:;",
       [](AllocateEnv* e) { e->config.lib_cuda_log_level = "4"; },
       {{"LIBCUDA_LOG_LEVEL", "4"}},
       {}},
      {"hook path",
       "GPU-a,NVIDIA,1000,0:;",
       [](AllocateEnv* e) { e->hook_path = "/opt/hami"; },
       {{"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/opt/hami/vgpu/id1.cache"}},
       {}},
      {"volume-mounts strategy",
       "GPU-a,NVIDIA,1000,0:;",
       [](AllocateEnv* e) { e->strategy = DeviceListStrategy::kVolumeMounts; },
       {{"NVIDIA_VISIBLE_DEVICES", "/var/run/nvidia-container-devices"}},
       {}},
  };
  for (const Case& c : cases) {
    AllocateEnv env;
    c.tweak(&env);
    auto plan = PlanAllocate(
        Pod(c.to_allocate),
        {std::vector<std::string>(c.to_allocate.find("GPU-b") != std::string::npos ? 2 : 1, "x")},
        env, Ids());
    ASSERT_TRUE(plan) << c.name << ": " << plan.error();
    const auto& envs = plan->containers[0].envs;
    for (const auto& [k, v] : c.want_subset) {
      auto it = envs.find(k);
      ASSERT_NE(it, envs.end()) << c.name << ": " << k;
      EXPECT_EQ(it->second, v) << c.name << ": " << k;
    }
    for (const std::string& k : c.want_absent) EXPECT_EQ(envs.count(k), 0u) << c.name << ": " << k;
  }
}

TEST(Allocate, MountsTable) {
  AllocateEnv env;
  auto plain =
      BuildContainerAllocation({{"GPU-a", "NVIDIA", 1, 0}}, {"c", true}, "uid-1", "id", env);
  EXPECT_EQ(plain.mounts, StandardMounts("c", /*preload=*/false, "id"));  // CUDA_DISABLE_CONTROL
  env.libvgpu_host_path = "/usr/local/vgpu/libvgpu.so.v2.10";
  env.license_present = true;
  auto full =
      BuildContainerAllocation({{"GPU-a", "NVIDIA", 1, 0}}, {"c", false}, "uid-1", "id", env);
  ASSERT_EQ(full.mounts.size(), 9u);
  EXPECT_EQ(full.mounts[0].host_path, "/usr/local/vgpu/libvgpu.so.v2.10");
  EXPECT_EQ(full.mounts[4], (MountSpec{"/tmp/license", "/usr/local/vgpu/license", true}));
  EXPECT_EQ(full.mounts[5].container_path, "/usr/bin/vgpuvalidator");
  env.strategy = DeviceListStrategy::kVolumeMounts;
  auto vm = BuildContainerAllocation({{"GPU-a", "NVIDIA", 1, 0}}, {"c", false}, "uid-1", "id", env);
  EXPECT_EQ(vm.mounts[0],
            (MountSpec{"/var/run/nvidia-container-devices/GPU-a", "/dev/null", true}));
  env.strategy = DeviceListStrategy::kCdiAnnotations;
  auto cdi = BuildContainerAllocation({{"GPU-a", "NVIDIA", 1, 0}, {"GPU-b", "NVIDIA", 1, 0}},
                                      {"c", false}, "uid-1", "id9", env);
  EXPECT_EQ(cdi.annotations,
            (std::map<std::string, std::string>{{"cdi.k8s.io/hami-device-plugin_id9",
                                                 "nvidia.com/gpu=GPU-a,nvidia.com/gpu=GPU-b"}}));
  EXPECT_EQ(cdi.envs.count("NVIDIA_VISIBLE_DEVICES"), 0u);
}

TEST(Allocate, LimitsFileOutOfTheContainersReach) {
  AllocateEnv env;
  env.config.disable_core_limit = true;
  auto a = BuildContainerAllocation({{"GPU-a", "NVIDIA", 1000, 30}, {"GPU-b", "NVIDIA", 2000, 30}},
                                    {"main", false, "0"}, "uid-1", "id7", env);
  // Host side outside the container's writable cache dir; read-only beside the library inside.
  ASSERT_EQ(a.files.size(), 3u);
  EXPECT_EQ(a.files[0].host_path, "/usr/local/vgpu/limits/uid-1_main.limits");
  EXPECT_EQ(a.files[0].mode, 0644u);
  ASSERT_GE(a.mounts.size(), 2u);
  EXPECT_EQ(
      a.mounts[a.mounts.size() - 3],
      (MountSpec{"/usr/local/vgpu/vgpu.limits", "/usr/local/vgpu/limits/uid-1_main.limits", true}));
  // The region file is a file mount of its own: it cannot be deleted from inside.
  EXPECT_EQ(a.mounts[a.mounts.size() - 2],
            (MountSpec{"/usr/local/vgpu/id7.cache",
                       "/usr/local/vgpu/containers/uid-1_main/id7.cache", false}));
  EXPECT_EQ(a.files[1], (FileSpec{"/usr/local/vgpu/containers/uid-1_main/id7.cache", "", 0666}));
  // So is the compute limiter's side file: it cannot be replaced by a directory from inside.
  EXPECT_EQ(a.mounts.back(),
            (MountSpec{"/usr/local/vgpu/id7.cache.limiter",
                       "/usr/local/vgpu/containers/uid-1_main/id7.cache.limiter", false}));
  EXPECT_EQ(a.files[2],
            (FileSpec{"/usr/local/vgpu/containers/uid-1_main/id7.cache.limiter", "", 0666}));
  EXPECT_EQ(a.files[0].content,
            "# libvgpu limits, written by hami-device-plugin (docs/vgpu.md)\n"
            "CUDA_DEVICE_MEMORY_LIMIT_0=1000m\n"
            "CUDA_DEVICE_MEMORY_LIMIT_1=2000m\n"
            "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/id7.cache\n"
            "CUDA_DEVICE_SM_LIMIT=30\n"
            "CUDA_TASK_PRIORITY=0\n"
            "GPU_CORE_UTILIZATION_POLICY=disable\n");
  // The env keeps every variable for HAMi-core.
  EXPECT_EQ(a.envs.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "2000m");
  EXPECT_EQ(a.envs.at("CUDA_TASK_PRIORITY"), "0");
  auto plain = BuildContainerAllocation({{"GPU-a", "NVIDIA", 1, 0}}, {"c"}, "uid-1", "id", env);
  EXPECT_EQ(plain.envs.count("CUDA_TASK_PRIORITY"), 0u);
}

TEST(Allocate, PositionalFirstNonEmptyEntries) {
  // init container without GPU, two app containers with one GPU each.
  PodView pod = Pod(";GPU-a,NVIDIA,1000,0:;GPU-b,NVIDIA,2000,0:;",
                    {{"init", false}, {"app1", false}, {"app2", true}});
  auto first = PlanAllocate(pod, {{"GPU-a-0"}}, AllocateEnv{}, Ids());
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(first->consumed, std::vector<size_t>{1});
  EXPECT_EQ(first->remaining, ";;GPU-b,NVIDIA,2000,0:;");
  EXPECT_EQ(first->containers[0].mounts[1].host_path, "/usr/local/vgpu/containers/uid-1_app1");

  pod.to_allocate = first->remaining;
  auto second = PlanAllocate(pod, {{"GPU-b-1"}}, AllocateEnv{}, Ids());
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(second->consumed, std::vector<size_t>{2});
  EXPECT_EQ(second->remaining, ";;;");
  EXPECT_EQ(second->containers[0].envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "2000m");
  EXPECT_EQ(second->containers[0].mounts.size(), 6u);  // app2 disables control

  // Both in one call.
  pod.to_allocate = ";GPU-a,NVIDIA,1000,0:;GPU-b,NVIDIA,2000,0:;";
  auto both = PlanAllocate(pod, {{"x"}, {"y"}}, AllocateEnv{}, Ids());
  ASSERT_TRUE(both) << both.error();
  EXPECT_EQ(both->consumed, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(both->remaining, ";;;");
  EXPECT_EQ(both->containers[1].envs.at("CUDA_DEVICE_MEMORY_SHARED_CACHE"),
            "/usr/local/vgpu/id2.cache");
}

TEST(Allocate, ErrorsTable) {
  struct Case {
    std::string to_allocate;
    std::vector<std::vector<std::string>> requests;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{
           {"GPU-a,NVIDIA,1000,0:;", {{"a", "b"}}, "device number not matched"},
           {"GPU-a,NVIDIA,1000,0:;", {{"a"}, {"b"}}, "container request 1: no pending devices"},
           {";", {{"a"}}, "no pending devices"},
           {"GPU-a,NVIDIA,x,0:;", {{"a"}}, "hami.io/vgpu-devices-to-allocate"},
       }) {
    auto plan = PlanAllocate(Pod(c.to_allocate), c.requests, AllocateEnv{}, Ids());
    ASSERT_FALSE(plan) << c.to_allocate;
    EXPECT_NE(plan.error().find(c.want), std::string::npos) << plan.error();
  }
}

// HAMi #3075: the annotation is only as trustworthy as whoever wrote the pod; an entry giving
// the container more memory or cores than its own resources ask for is refused.
TEST(Allocate, RefusesMoreThanTheContainerRequests) {
  PodView pod = Pod("GPU-a,NVIDIA,8000,30:;");
  pod.containers[0].limit = {.memory_mib = 3000, .cores = 30};
  auto plan = PlanAllocate(pod, {{"a"}}, AllocateEnv{}, Ids());
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error(),
            "container request 0: container \"main\" is allocated 8000 MB on device \"GPU-a\" "
            "but requests 3000 MB");
  pod.to_allocate = "GPU-a,NVIDIA,3000,80:;";
  plan = PlanAllocate(pod, {{"a"}}, AllocateEnv{}, Ids());
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error(),
            "container request 0: container \"main\" is allocated 80% of the cores on device "
            "\"GPU-a\" but requests 30%");
  // Within the request, or nothing to compare against (a percentage, no cores): served.
  pod.to_allocate = "GPU-a,NVIDIA,3000,30:;";
  EXPECT_TRUE(PlanAllocate(pod, {{"a"}}, AllocateEnv{}, Ids()));
  pod.containers[0].limit = {};
  pod.to_allocate = "GPU-a,NVIDIA,8000,80:;";
  EXPECT_TRUE(PlanAllocate(pod, {{"a"}}, AllocateEnv{}, Ids()));
}

// The limit as read from the pod: gpumem x memoryFactor, gpucores, limits before requests.
TEST(Allocate, RequestLimitFromThePod) {
  nlohmann::json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u"}}},
      {"spec",
       {{"containers",
         {{{"name", "main"},
           {"resources",
            {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}},
             {"requests", {{"nvidia.com/gpucores", "30"}}}}}},
          {{"name", "pct"},
           {"resources", {{"limits", {{"nvidia.com/gpumem-percentage", "50"}}}}}}}}}}};
  PluginConfig config;
  config.memory_factor = 2;
  PodView view = PodViewFromJson(pod, config);
  ASSERT_EQ(view.containers.size(), 2u);
  EXPECT_EQ(view.containers[0].limit, (ContainerRequestLimit{.memory_mib = 6000, .cores = 30}));
  EXPECT_EQ(view.containers[1].limit, ContainerRequestLimit{});
  view.to_allocate = "GPU-a,NVIDIA,6001,30:;";
  auto plan = PlanAllocate(view, {{"a"}}, AllocateEnv{}, Ids());
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().find("but requests 6000 MB"), std::string::npos) << plan.error();
}

TEST(Allocate, PreferredAllocationRewritesUuidsFromKubeletIds) {
  AllocateEnv env;
  env.config.enable_preferred_allocation = true;
  auto plan = PlanAllocate(Pod(std::string(kGpu) + ",NVIDIA,3000,0:;"),
                           {{"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec-2"}}, env, Ids());
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->containers[0].envs.at("NVIDIA_VISIBLE_DEVICES"),
            "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec");
}

TEST(Allocate, StripReplicaSuffix) {
  EXPECT_EQ(StripReplicaSuffix(std::string(kGpu) + "-7"), kGpu);
  EXPECT_EQ(StripReplicaSuffix(kGpu), kGpu);
  EXPECT_EQ(StripReplicaSuffix("GPU-a-1"), "GPU-a-1");  // not 6 dashes: left alone
}

TEST(Allocate, DeviceListStrategyNames) {
  EXPECT_EQ(*ParseDeviceListStrategy("envvar"), DeviceListStrategy::kEnvvar);
  EXPECT_EQ(*ParseDeviceListStrategy("volume-mounts"), DeviceListStrategy::kVolumeMounts);
  EXPECT_EQ(*ParseDeviceListStrategy("cdi-annotations"), DeviceListStrategy::kCdiAnnotations);
  auto bad = ParseDeviceListStrategy("cdi-cri");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("\"cdi-cri\""), std::string::npos);
}

TEST(Allocate, PreferReplicasOfTheNextEntry) {
  auto pod = protocol::DecodePodDevices(";GPU-b,NVIDIA,1,0:;GPU-a,NVIDIA,1,0:;");
  ASSERT_TRUE(pod);
  const std::string a = "GPU-00000000-0000-0000-0000-00000000000a";
  std::vector<std::string> avail = {"GPU-a-0", "GPU-a-1", "GPU-b-0", "GPU-b-1"};
  // Short fake UUIDs have fewer than 6 dashes, so use real-looking ones for the match.
  auto real = protocol::DecodePodDevices(a + ",NVIDIA,1,0:;");
  ASSERT_TRUE(real);
  auto chosen = PreferReplicas(*real, {{"GPU-x-0", a + "-0", a + "-1"}}, {1});
  EXPECT_EQ(chosen, (std::vector<std::vector<std::string>>{{a + "-0"}}));
  // Nothing matching: the first `size` available IDs.
  auto fallback = PreferReplicas(*pod, {avail}, {2});
  EXPECT_EQ(fallback, (std::vector<std::vector<std::string>>{{"GPU-a-0", "GPU-a-1"}}));
}

}  // namespace
}  // namespace hami::deviceplugin
