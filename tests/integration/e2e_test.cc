// End to end over the real binaries: the sim API server (in-process), the real hami-scheduler
// and the real hami-device-plugin (inventory discovery: the two V100s of docs/protocol.md), with a
// fake kubelet (tests/deviceplugin/fake_kubelet.h) serving Registration in a temp device-plugins
// dir. The test plays kube-scheduler (POST /filter, POST /bind) and kubelet (ListAndWatch, node
// allocatable, Allocate over gRPC), and checks the wire contract of docs/ARCHITECTURE.md (one pod's
// path) and docs/protocol.md#device-plugin-api-and-allocate: exact env and mounts,
// `hami.io/bind-phase: success`, `hami.io/vgpu-devices-to-allocate` consumed to `;`-only segments,
// the node lock gone; on an Allocate failure `bind-phase: failed` and the lock released.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "deviceplugin/fake_kubelet.h"
#include "integration/harness.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "scheduler/test_env.h"
#include "sim/apiserver/apiserver.h"
#include "support/allocate_env.h"

namespace hami::integration {
namespace {

namespace fs = std::filesystem;
namespace res = k8s::resources;
using deviceplugin::testing::FakeKubelet;
using deviceplugin::testing::WaitFor;
using nlohmann::json;

using test_support::kNode;
constexpr const char* kRegisterKey = "hami.io/node-nvidia-register";
constexpr const char* kToAllocateKey = "hami.io/vgpu-devices-to-allocate";
constexpr const char* kAllocatedKey = "hami.io/vgpu-devices-allocated";
constexpr const char* kBindPhaseKey = "hami.io/bind-phase";
// The register annotation the two-V100 inventory must produce, byte for byte.
using scheduler::testing::kSeedRegister;

// ctest runs from the source root; a direct run from elsewhere finds it next to this file.
std::string InventoryPath() {
  const std::string rel = "examples/inventory/two-v100.yaml";
  if (fs::exists(rel)) return fs::absolute(rel).string();
  return (fs::path(__FILE__).parent_path().parent_path().parent_path() / rel).string();
}

struct GpuLimits {
  int gpus = 0;
  int mem = 0;    // MiB, 0: not set
  int cores = 0;  // 0: not set
};

json Container(const std::string& name, GpuLimits limits, bool disable_control = false) {
  json c = {{"name", name}, {"image", "busybox"}};
  if (limits.gpus > 0) {
    c["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(limits.gpus);
    if (limits.mem > 0) c["resources"]["limits"]["nvidia.com/gpumem"] = std::to_string(limits.mem);
    if (limits.cores > 0) {
      c["resources"]["limits"]["nvidia.com/gpucores"] = std::to_string(limits.cores);
    }
  }
  if (disable_control) {
    c["env"] = json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "true"}}});
  }
  return c;
}

// UUIDs of one container's entry of a pod-devices value ("uuid,NVIDIA,mem,cores:...;...").
std::vector<std::string> EntryUuids(const std::string& value, size_t container) {
  std::vector<std::string> segments;
  size_t start = 0;
  for (size_t semi; (semi = value.find(';', start)) != std::string::npos; start = semi + 1) {
    segments.push_back(value.substr(start, semi - start));
  }
  std::vector<std::string> out;
  if (container >= segments.size()) return out;
  std::smatch m;
  std::string entry = segments[container];
  std::regex device("(GPU-[0-9a-f-]+),NVIDIA,\\d+,\\d+:");
  while (std::regex_search(entry, m, device)) {
    out.push_back(m[1].str());
    entry = m.suffix().str();
  }
  return out;
}

class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("hami-e2e");
    ASSERT_FALSE(dir_.empty());
    hook_ = dir_ + "/hook";
    fs::create_directories(dir_ + "/device-plugins");
    ASSERT_TRUE(api_.Start());
    ASSERT_TRUE(api_.WriteKubeconfig(dir_ + "/kubeconfig"));
    client_ = test_support::NewClient(api_.url());
    ASSERT_TRUE(client_->Create(res::kNodes, "", test_support::BareNode()));
    kubelet_ = std::make_unique<FakeKubelet>(dir_ + "/device-plugins");
    ASSERT_TRUE(kubelet_->Start());
    StartPlugin();
    if (HasFatalFailure()) return;
    ReportAllocatable();
    if (HasFatalFailure()) return;
    StartScheduler();
  }

  void TearDown() override {
    if (scheduler_) {
      EXPECT_EQ(scheduler_->Stop(), 0) << "hami-scheduler did not exit 0";
    }
    if (plugin_) {
      EXPECT_EQ(plugin_->Stop(), 0) << "hami-device-plugin did not exit 0";
    }
    scheduler_.reset();  // prints the logs when the test failed
    plugin_.reset();
    if (kubelet_) kubelet_->Stop();
    http_.reset();
    client_.reset();  // closes its pooled connections, so the server's workers end at once
    api_.Stop();
    if (!HasFailure()) fs::remove_all(dir_);  // kept with the logs for a failed test
  }

  void StartPlugin() {
    plugin_ = std::make_unique<Process>("hami-device-plugin", dir_);
    ASSERT_TRUE(plugin_->Start({HAMI_DEVICE_PLUGIN_BIN, "--kubeconfig=" + dir_ + "/kubeconfig",
                                std::string("--node-name=") + kNode,
                                "--node-config-file=" + dir_ + "/no-config.json",
                                "--kubelet-socket=" + kubelet_->socket(), "--hook-path=" + hook_,
                                "--device-inventory=" + InventoryPath(), "-v", "2"}));
    // The plugin registers with kubelet and publishes the two-V100 register annotation.
    ASSERT_TRUE(WaitFor([&] { return !kubelet_->requests().empty() || !plugin_->Alive(); }));
    ASSERT_EQ(kubelet_->requests().size(), 1u);
    const auto reg = kubelet_->requests()[0];
    EXPECT_EQ(reg.version(), "v1beta1");
    EXPECT_EQ(reg.endpoint(), "nvidia-gpu.sock");
    EXPECT_EQ(reg.resource_name(), "nvidia.com/gpu");
    std::optional<std::string> annotation;
    ASSERT_TRUE(WaitFor([&] {
      auto n = client_->Get(res::kNodes, "", kNode);
      annotation = n ? k8s::Annotation(*n, kRegisterKey) : std::nullopt;
      return annotation.has_value();
    }));
    EXPECT_EQ(*annotation, kSeedRegister);
  }

  // Kubelet's part after registration: read the advertised replicas and report them as the
  // node's capacity/allocatable nvidia.com/gpu (the scheduler's NVIDIA health check reads it).
  void ReportAllocatable() {
    auto stub = kubelet_->PluginClient("nvidia-gpu.sock");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ::v1beta1::Empty empty;
    auto reader = stub->ListAndWatch(&ctx, empty);
    ::v1beta1::ListAndWatchResponse list;
    ASSERT_TRUE(reader->Read(&list));
    ctx.TryCancel();
    reader->Finish();
    ASSERT_EQ(list.devices_size(), 20);
    EXPECT_EQ(list.devices(0).id(), "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec-0");
    EXPECT_EQ(list.devices(19).id(), "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448-9");
    for (const auto& d : list.devices()) {
      advertised_.push_back(d.id());
      EXPECT_EQ(d.health(), "Healthy");
    }
    auto node = client_->Get(res::kNodes, "", kNode);
    ASSERT_TRUE(node);
    (*node)["status"]["capacity"]["nvidia.com/gpu"] = "20";
    (*node)["status"]["allocatable"]["nvidia.com/gpu"] = "20";
    ASSERT_TRUE(client_->UpdateStatus(res::kNodes, *node));
  }

  void StartScheduler() {
    const int port = FreeLoopbackPort();
    ASSERT_GT(port, 0);
    scheduler_ = std::make_unique<Process>("hami-scheduler", dir_);
    ASSERT_TRUE(scheduler_->Start({HAMI_SCHEDULER_BIN, "--kubeconfig=" + dir_ + "/kubeconfig",
                                   "--http_bind=127.0.0.1:" + std::to_string(port),
                                   "--metrics-bind-address=127.0.0.1:0",
                                   "--scheduler-name=hami-scheduler", "-v", "2"}));
    ASSERT_TRUE(WaitForHttp(port, "/healthz", scheduler_.get()));
    http_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    http_->set_read_timeout(std::chrono::seconds(30));
  }

  json CreatePod(const std::string& name, const json& containers) {
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", "default"}}},
                {"spec", {{"schedulerName", "hami-scheduler"}, {"containers", containers}}}};
    auto created = client_->Create(res::kPods, "default", pod);
    EXPECT_TRUE(created);
    return created ? *created : pod;
  }

  json GetPod(const std::string& name) {
    auto pod = client_->Get(res::kPods, "default", name);
    EXPECT_TRUE(pod);
    return pod ? *pod : json::object();
  }

  std::optional<std::string> NodeLock() {
    auto lock = test_support::NodeLock(*client_);
    EXPECT_TRUE(lock) << lock.error().ToString();
    return lock ? *lock : std::nullopt;
  }

  // kube-scheduler's two extender calls; returns the pod afterwards.
  json FilterAndBind(const json& pod) {
    const std::string name = k8s::Name(pod);
    auto fr = http_->Post("/filter", json{{"Pod", pod}, {"NodeNames", {kNode}}}.dump(),
                          "application/json");
    EXPECT_TRUE(fr);
    if (!fr) return pod;
    json filtered = json::parse(fr->body, nullptr, false);
    EXPECT_EQ(filtered["NodeNames"], json::array({kNode})) << fr->body;
    json args = {
        {"PodName", name}, {"PodNamespace", "default"}, {"PodUID", k8s::Uid(pod)}, {"Node", kNode}};
    auto br = http_->Post("/bind", args.dump(), "application/json");
    EXPECT_TRUE(br);
    if (br) {
      EXPECT_EQ(br->body, R"({"Error":""})");
    }
    json bound = GetPod(name);
    EXPECT_EQ(bound["spec"]["nodeName"], kNode);
    auto ann = k8s::Annotations(bound);
    EXPECT_EQ(ann[kBindPhaseKey], "allocating");
    EXPECT_EQ(ann["hami.io/vgpu-node"], kNode);
    EXPECT_EQ(ann[kToAllocateKey], ann[kAllocatedKey]);
    auto lock = NodeLock();
    const std::regex lock_value(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d),default,)" +
                                name);
    EXPECT_TRUE(lock && std::regex_match(*lock, lock_value)) << lock.value_or("<none>");
    return bound;
  }

  // kubelet's Allocate for one pod admission; each inner list is one container request.
  grpc::Status Allocate(const std::vector<std::vector<std::string>>& requests,
                        ::v1beta1::AllocateResponse* out) {
    auto stub = kubelet_->PluginClient("nvidia-gpu.sock");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ::v1beta1::AllocateRequest req;
    for (const auto& ids : requests) {
      auto* c = req.add_container_requests();
      for (const std::string& id : ids) c->add_devices_ids(id);
    }
    return stub->Allocate(&ctx, req, out);
  }

  // A kubelet-chosen replica of `uuid` (kubelet picks any free ID; without preferred allocation
  // the plugin serves the annotated UUIDs whatever it picked).
  std::string ReplicaOf(const std::string& uuid, int i) { return uuid + "-" + std::to_string(i); }

  std::map<std::string, std::string> Envs(const ::v1beta1::ContainerAllocateResponse& c,
                                          std::string* cache) {
    std::map<std::string, std::string> envs(c.envs().begin(), c.envs().end());
    auto it = envs.find("CUDA_DEVICE_MEMORY_SHARED_CACHE");
    EXPECT_NE(it, envs.end());
    if (it != envs.end()) {
      *cache = it->second;
      envs.erase(it);
    }
    return envs;
  }

  using Mount = std::tuple<std::string, std::string, bool>;  // container, host, read-only
  std::vector<Mount> Mounts(const ::v1beta1::ContainerAllocateResponse& c) {
    std::vector<Mount> out;
    for (const auto& m : c.mounts())
      out.emplace_back(m.container_path(), m.host_path(), m.read_only());
    return out;
  }

  // `cache` is the container's CUDA_DEVICE_MEMORY_SHARED_CACHE (<hook>/vgpu/<id>.cache).
  std::vector<Mount> ExpectedMounts(const std::string& pod_uid, const std::string& container,
                                    bool preload, const std::string& cache) {
    const std::string vgpu = hook_ + "/vgpu";
    const std::string dir = vgpu + "/containers/" + pod_uid + "_" + container;
    std::vector<Mount> m = {{vgpu + "/libvgpu.so", vgpu + "/libvgpu.so", true},
                            {vgpu, dir, false},
                            {"/tmp/vgpulock", "/tmp/vgpulock", false}};
    if (preload) m.emplace_back("/etc/ld.so.preload", vgpu + "/ld.so.preload", true);
    // libvgpu's read-only limits file, and the region file as its own mount (docs/vgpu.md).
    m.emplace_back(vgpu + "/vgpu.limits", vgpu + "/limits/" + pod_uid + "_" + container + ".limits",
                   true);
    const std::string name = cache.substr(cache.rfind('/') + 1);
    m.emplace_back(cache, dir + "/" + name, false);
    m.emplace_back(cache + ".limiter", dir + "/" + name + ".limiter", false);  // compute limiter
    return m;
  }

  void ExpectCacheFile(const std::string& cache) {
    EXPECT_TRUE(std::regex_match(
        cache, std::regex(hook_ + "/vgpu/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                                  "[0-9a-f]{12}\\.cache")))
        << cache;
  }

  void ExpectHostCacheDir(const std::string& pod_uid, const std::string& container) {
    const std::string dir = hook_ + "/vgpu/containers/" + pod_uid + "_" + container;
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0777u);
  }

  std::string dir_;
  std::string hook_;
  sim::ApiServer api_{sim::ApiServerOptions{}};
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Process> plugin_;
  std::unique_ptr<Process> scheduler_;
  std::unique_ptr<httplib::Client> http_;
  std::vector<std::string> advertised_;
};

TEST_F(E2eTest, OneGpu3000MiBIsFilteredBoundAndAllocated) {
  json pod = CreatePod("demo", json::array({Container("main", {1, 3000, 0})}));
  json bound = FilterAndBind(pod);
  const std::string allocated = k8s::Annotation(bound, kAllocatedKey).value_or("");
  ASSERT_TRUE(std::regex_match(allocated, std::regex("GPU-[0-9a-f-]+,NVIDIA,3000,0:;")))
      << allocated;
  const std::string uuid = EntryUuids(allocated, 0).at(0);

  ::v1beta1::AllocateResponse resp;
  grpc::Status s = Allocate({{ReplicaOf(uuid, 3)}}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& c = resp.container_responses(0);
  std::string cache;
  EXPECT_EQ(Envs(c, &cache), (std::map<std::string, std::string>{
                                 {"NVIDIA_VISIBLE_DEVICES", uuid},
                                 {"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"},
                                 {"CUDA_DEVICE_SM_LIMIT", "0"},
                                 {"LIBCUDA_LOG_LEVEL", "1"},
                             }));
  ExpectCacheFile(cache);
  const std::string uid = k8s::Uid(bound);
  ASSERT_FALSE(uid.empty());
  EXPECT_EQ(Mounts(c), ExpectedMounts(uid, "main", /*preload=*/true, cache));
  EXPECT_TRUE(c.annotations().empty());
  ExpectHostCacheDir(uid, "main");

  json after = GetPod("demo");
  auto ann = k8s::Annotations(after);
  EXPECT_EQ(ann[kBindPhaseKey], "success");
  EXPECT_EQ(ann[kToAllocateKey], ";");
  EXPECT_EQ(ann[kAllocatedKey], allocated);
  EXPECT_EQ(NodeLock(), std::nullopt);
}

// Three containers, the middle one without a GPU: kubelet calls Allocate once per GPU container,
// in spec order; each call takes the first non-empty entry. The lock stays until the last one.
TEST_F(E2eTest, TwoGpuContainersAreServedInOrder) {
  json pod =
      CreatePod("two", json::array({Container("a", {1, 2000, 0}), Container("sidecar", {}),
                                    Container("b", {1, 1000, 30}, /*disable_control=*/true)}));
  json bound = FilterAndBind(pod);
  const std::string allocated = k8s::Annotation(bound, kAllocatedKey).value_or("");
  ASSERT_TRUE(std::regex_match(
      allocated, std::regex("GPU-[0-9a-f-]+,NVIDIA,2000,0:;;GPU-[0-9a-f-]+,NVIDIA,1000,30:;")))
      << allocated;
  const std::string uuid_a = EntryUuids(allocated, 0).at(0);
  const std::string uuid_b = EntryUuids(allocated, 2).at(0);
  const std::string uid = k8s::Uid(bound);

  ::v1beta1::AllocateResponse first;
  grpc::Status s = Allocate({{ReplicaOf(uuid_a, 0)}}, &first);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(first.container_responses_size(), 1);
  std::string cache_a;
  EXPECT_EQ(Envs(first.container_responses(0), &cache_a),
            (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", uuid_a},
                                                {"CUDA_DEVICE_MEMORY_LIMIT_0", "2000m"},
                                                {"CUDA_DEVICE_SM_LIMIT", "0"},
                                                {"LIBCUDA_LOG_LEVEL", "1"}}));
  EXPECT_EQ(Mounts(first.container_responses(0)), ExpectedMounts(uid, "a", true, cache_a));
  auto mid = k8s::Annotations(GetPod("two"));
  EXPECT_EQ(mid[kBindPhaseKey], "allocating");
  EXPECT_EQ(mid[kToAllocateKey], ";;" + allocated.substr(allocated.find(";;") + 2));
  EXPECT_TRUE(NodeLock().has_value()) << "the lock is held until the pod's last container";

  ::v1beta1::AllocateResponse second;
  s = Allocate({{ReplicaOf(uuid_b, 5)}}, &second);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(second.container_responses_size(), 1);
  std::string cache_b;
  EXPECT_EQ(Envs(second.container_responses(0), &cache_b),
            (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", uuid_b},
                                                {"CUDA_DEVICE_MEMORY_LIMIT_0", "1000m"},
                                                {"CUDA_DEVICE_SM_LIMIT", "30"},
                                                {"LIBCUDA_LOG_LEVEL", "1"}}));
  // CUDA_DISABLE_CONTROL=true: no /etc/ld.so.preload.
  EXPECT_EQ(Mounts(second.container_responses(0)), ExpectedMounts(uid, "b", false, cache_b));
  EXPECT_NE(cache_a, cache_b);
  ExpectHostCacheDir(uid, "a");
  ExpectHostCacheDir(uid, "b");

  auto ann = k8s::Annotations(GetPod("two"));
  EXPECT_EQ(ann[kBindPhaseKey], "success");
  EXPECT_EQ(ann[kToAllocateKey], ";;;");
  EXPECT_EQ(NodeLock(), std::nullopt);
}

// kubelet asks for two devices where the annotation has one: the pod is marked failed, the lock
// released, and the gRPC error names the pod and the reason.
TEST_F(E2eTest, AllocateMismatchFailsThePodAndReleasesTheLock) {
  json pod = CreatePod("bad", json::array({Container("main", {1, 3000, 0})}));
  json bound = FilterAndBind(pod);
  const std::string allocated = k8s::Annotation(bound, kAllocatedKey).value_or("");
  const std::string uuid = EntryUuids(allocated, 0).at(0);

  ::v1beta1::AllocateResponse resp;
  grpc::Status s = Allocate({{ReplicaOf(uuid, 0), ReplicaOf(uuid, 1)}}, &resp);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find("pod default/bad"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("device number not matched"), std::string::npos)
      << s.error_message();

  auto ann = k8s::Annotations(GetPod("bad"));
  EXPECT_EQ(ann[kBindPhaseKey], "failed");
  EXPECT_EQ(ann[kToAllocateKey], allocated) << "nothing was consumed";
  EXPECT_EQ(NodeLock(), std::nullopt);

  // The node is free again: the next pod goes through.
  json next = CreatePod("next", json::array({Container("main", {1, 1000, 0})}));
  json next_bound = FilterAndBind(next);
  const std::string next_uuid =
      EntryUuids(k8s::Annotation(next_bound, kAllocatedKey).value_or(""), 0).at(0);
  ASSERT_TRUE(Allocate({{ReplicaOf(next_uuid, 2)}}, &resp).ok());
  EXPECT_EQ(k8s::Annotations(GetPod("next"))[kBindPhaseKey], "success");
}

// Kubelet restarts (its socket and the plugin sockets are removed): the plugin serves afresh and
// registers again within 5 s (issue 5), and Allocate works on the new socket.
TEST_F(E2eTest, KubeletRestartReRegisters) {
  ASSERT_TRUE(kubelet_->Restart());
  EXPECT_TRUE(WaitFor([&] { return kubelet_->requests().size() >= 2; }, std::chrono::seconds(5)));
  EXPECT_TRUE(WaitFor([&] { return fs::exists(dir_ + "/device-plugins/nvidia-gpu.sock"); }));
  json pod = CreatePod("after", json::array({Container("main", {1, 3000, 0})}));
  json bound = FilterAndBind(pod);
  const std::string uuid = EntryUuids(k8s::Annotation(bound, kAllocatedKey).value_or(""), 0).at(0);
  ::v1beta1::AllocateResponse resp;
  grpc::Status s = Allocate({{ReplicaOf(uuid, 0)}}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(k8s::Annotations(GetPod("after"))[kBindPhaseKey], "success");
}

}  // namespace
}  // namespace hami::integration
