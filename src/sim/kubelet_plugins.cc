// The device plugin side of the simulated kubelets: each node's Node object, its plugin (the real
// NVIDIA one, or hami-sim's generic vendor plugin), and the kubelet's gRPC client of it: the
// device IDs from ListAndWatch, one Allocate per container.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include "common/strings.h"
#include "common/time_format.h"
#include "k8s/object.h"
#include "sim/kubelet_impl.h"

namespace hami::sim {

namespace res = k8s::resources;
using nlohmann::json;

std::shared_ptr<VendorPlugin> KubeletFleet::Impl::NewVendorPlugin(const device::Device& dev,
                                                                  const Node& node) {
  k8s::Client* api = options_.plugin_client ? options_.plugin_client : &client_;
  return std::make_shared<VendorPlugin>(
      dev, *api, node.spec.name,
      VendorDeviceInfos(node.spec.gpus, options_.plugin_config.device_split_count),
      options_.plugin_clock ? *options_.plugin_clock : clock_);
}

Status KubeletFleet::Impl::CreateNode(Node& node) {
  const std::string gpus = std::to_string(static_cast<int64_t>(node.spec.gpus.size()) *
                                          options_.plugin_config.device_split_count);
  const std::string& rname = options_.plugin_config.resource_name;
  json resources = {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}, {rname, gpus}};
  // DRA mode: the node's GPUs are its ResourceSlices, not an extended resource.
  if (options_.dra && node.spec.vendor.empty()) resources.erase(rname);
  if (!node.spec.vendor.empty()) {
    const device::Device* dev =
        options_.registry ? options_.registry->Find(node.spec.vendor) : nullptr;
    if (!dev)
      return Error{"node " + Quote(node.spec.name) + ": no backend for vendor " +
                   Quote(node.spec.vendor)};
    std::shared_ptr<VendorPlugin> plugin = NewVendorPlugin(*dev, node);
    node.vendor_resource = plugin->count_resource();
    resources.erase(rname);
    for (const auto& [k, v] : plugin->registration().capacity) resources[k] = v;
    std::lock_guard<std::mutex> lock(mu_);  // Admit reads it
    node.vendor = std::move(plugin);
  }
  json obj = {{"apiVersion", "v1"}, {"kind", "Node"}};
  obj["metadata"]["name"] = node.spec.name;
  obj["metadata"]["labels"] = json(node.spec.labels);
  obj["metadata"]["labels"]["kubernetes.io/hostname"] = node.spec.name;
  json status = {{"capacity", resources}, {"allocatable", resources}};
  status["conditions"] =
      json::array({{{"type", "Ready"},
                    {"status", "True"},
                    {"reason", "KubeletReady"},
                    {"lastTransitionTime", FormatRfc3339(clock_.Now(), Zone::Utc())}}});
  status["nodeInfo"] = {{"kubeletVersion", "v1.30.0-hami-sim"}, {"operatingSystem", "linux"}};
  obj["status"] = status;
  std::string last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
    auto created = client_.Create(res::kNodes, "", obj);
    if (!created && !k8s::IsAlreadyExists(created.error())) {
      last = created.error().ToString();
      continue;
    }
    // Status is the kubelet's to write; a create may drop it.
    auto patched = client_.Patch(res::kNodes, "", node.spec.name, k8s::PatchType::kMerge,
                                 json{{"status", status}}, "status");
    if (patched) return OkStatus();
    last = patched.error().ToString();
  }
  return Error{"create node " + Quote(node.spec.name) + ": " + last};
}

// Starts the node's plugin process. An NVIDIA plugin serves, publishes and registers with the
// kubelet (when the kubelet is up; it registers by itself once it comes back); this waits for the
// registration. A vendor node's in-process plugin counts as registered once it runs.
Status KubeletFleet::Impl::StartPlugin(size_t index) {
  Node& node = *nodes_[index];
  if (!node.spec.vendor.empty()) {
    std::shared_ptr<VendorPlugin> plugin = node.vendor;  // CreateNode's, or a new process
    if (!plugin) plugin = NewVendorPlugin(*options_.registry->Find(node.spec.vendor), node);
    if (Status s = plugin->Start(); !s) return s;
    std::lock_guard<std::mutex> lock(mu_);
    node.vendor = std::move(plugin);
    node.registered = !node.kubelet_down;
    node.registrations += node.registered ? 1 : 0;
    return OkStatus();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    node.unhealthy.resize(node.spec.gpus.size(), false);
  }
  node.discovery = std::make_unique<StaticDiscovery>(node.spec.gpus, &node.unhealthy, &mu_);
  const std::string name = node.spec.name;
  k8s::Client* plugin_api = options_.plugin_client ? options_.plugin_client : &client_;
  // GPUs with MIG profiles (a scenario's `mode: mig`) put the node's plugin in MIG mode, as
  // config.json's nodeconfig would.
  dp::PluginConfig config = options_.plugin_config;
  for (const auto& gpu : node.spec.gpus) {
    if (!gpu.mig_profiles.empty()) config.operating_mode = dp::kMigOperatingMode;
  }
  node.publisher = std::make_unique<dp::RegisterPublisher>(
      node.discovery.get(), config,
      [plugin_api, name](std::string_view key, std::string_view value) -> Status {
        json patch;
        patch["metadata"]["annotations"][std::string(key)] = value;
        auto r = plugin_api->Patch(res::kNodes, "", name, k8s::PatchType::kMerge, patch);
        if (!r) return r.error().ToError();
        return OkStatus();
      },
      options_.plugin_clock ? *options_.plugin_clock : clock_);
  dp::AllocateEnv env;
  env.hook_path = HookPath();
  env.config = config;
  node.allocator = std::make_unique<dp::Allocator>(plugin_api, name, env);
  dp::PluginOptions popts;
  popts.kubelet_socket = node.dir + "/kubelet.sock";  // ServeRegistration's
  popts.resource_name = options_.plugin_config.resource_name;
  popts.split_count = options_.plugin_config.device_split_count;
  popts.numa_topology = options_.plugin_config.enable_numa_topology;
  popts.preferred_allocation = options_.plugin_config.enable_preferred_allocation;
  node.plugin = std::make_unique<dp::Plugin>(popts, node.publisher.get(), node.allocator.get());
  if (Status s = node.plugin->Start(); !s) return s;
  // Plugin::Start publishes once; under injected API errors make sure it got through.
  for (int attempt = 0; node.publisher->last_value().empty() && attempt < 20; ++attempt) {
    if (auto r = node.publisher->PublishIfChanged(); !r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
    }
  }
  // Plugin::Start registers at once when kubelet.sock is there; its loop retries every second.
  std::unique_lock<std::mutex> lock(mu_);
  if (node.kubelet_down) return OkStatus();
  if (!registered_cv_.wait_for(lock, std::chrono::seconds(30),
                               [&] { return node.registered || stopping_; })) {
    return Error{"node " + Quote(node.spec.name) + ": the device plugin did not register with " +
                 Quote(node.dir + "/kubelet.sock") + " within 30 s"};
  }
  return OkStatus();
}

// What kubelet learns from the first ListAndWatch response: the healthy device IDs.
Result<std::vector<std::string>> KubeletFleet::Impl::ReadDevices(v1beta1::DevicePlugin::Stub& stub,
                                                                 const std::string& socket) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1beta1::Empty empty;
  auto reader = stub.ListAndWatch(&ctx, empty);
  v1beta1::ListAndWatchResponse resp;
  const bool got = reader->Read(&resp);
  ctx.TryCancel();
  reader->Finish().ok();  // cancelled on purpose
  if (!got) return Error{"ListAndWatch on " + Quote(socket) + ": no response"};
  std::vector<std::string> ids;
  for (const auto& d : resp.devices()) {
    if (d.health() == "Healthy") ids.push_back(d.id());
  }
  return ids;
}

// Node objects and plugins, a few at a time: 1,000 of them one by one take tens of seconds.
Status KubeletFleet::Impl::StartNodes() {
  std::mutex mu;
  Status first = OkStatus();
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next++; i < nodes_.size(); i = next++) {
      Status s = CreateNode(*nodes_[i]);
      if (s && DraNode(i)) {
        s = StartDraPlugin(i);
      } else {
        if (s && nodes_[i]->spec.vendor.empty()) s = ServeRegistration(i);
        if (s) s = StartPlugin(i);
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!s && first) first = s;
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min<size_t>(8, nodes_.size()); ++t) threads.emplace_back(run);
  for (std::thread& t : threads) t.join();
  return first;
}

// One container's Allocate over gRPC with `count` free device IDs of the node.
Result<std::map<std::string, std::string>> KubeletFleet::Impl::AllocateContainer(
    size_t index, const std::string& key, int64_t count) {
  Node& node = *nodes_[index];
  v1beta1::AllocateRequest req;
  auto* creq = req.add_container_requests();
  std::shared_ptr<v1beta1::DevicePlugin::Stub> stub;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // kubelet's device manager has no endpoint for the resource while the plugin is away.
    if (!node.registered) {
      return Error{"cannot allocate unregistered device " + options_.plugin_config.resource_name};
    }
    stub = node.stub;
    PodRun& run = runs_[key];
    for (const std::string& id : node.device_ids) {
      if (static_cast<int64_t>(creq->devices_ids_size()) == count) break;
      if (node.in_use.count(id) > 0) continue;
      creq->add_devices_ids(id);
      node.in_use.insert(id);
      run.ids.push_back(id);
    }
    if (creq->devices_ids_size() < count) {
      return Error{"Allocate failed due to requested number of devices unavailable for " +
                   options_.plugin_config.resource_name + ". Requested: " + std::to_string(count) +
                   ", Available: " + std::to_string(creq->devices_ids_size())};
    }
  }
  // One call, as kubelet makes it: a failed Allocate fails the pod (the plugin retries its own
  // API calls).
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1beta1::AllocateResponse resp;
  grpc::Status s = stub->Allocate(&ctx, req, &resp);
  if (!s.ok()) return Error{s.error_message()};
  std::map<std::string, std::string> envs;
  if (resp.container_responses_size() > 0) {
    for (const auto& [k, v] : resp.container_responses(0).envs()) envs[k] = v;
  }
  return envs;
}

// A vendor node's Allocate for one container (its plugin sets no env here).
Result<std::map<std::string, std::string>> KubeletFleet::Impl::VendorAllocate(
    VendorPlugin* plugin, const std::string& resource) {
  if (!plugin) return Error{"cannot allocate unregistered device " + resource};
  if (Status s = plugin->Allocate(); !s) return std::move(s).take_error();
  return std::map<std::string, std::string>{};
}

}  // namespace hami::sim
