#include "sim/kubelet.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "common/log.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/plugin.h"
#include "deviceplugin/register.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "sim/usage.h"
#include "sim/vendor_plugin.h"

namespace hami::sim {

namespace res = k8s::resources;
namespace dp = deviceplugin;
using nlohmann::json;
using SteadyTime = std::chrono::steady_clock::time_point;

std::chrono::milliseconds PodDuration(const k8s::Json& pod) {
  std::optional<std::string> v = k8s::Annotation(pod, kDurationAnnotation);
  if (!v) return std::chrono::milliseconds(0);
  char* end = nullptr;
  const std::string text(Trim(*v));
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(seconds > 0) || seconds > 1e9) {
    return std::chrono::milliseconds(0);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000 + 0.5));
}

namespace {

// The node's GPUs as given by the scenario.
class StaticDiscovery : public dp::Discovery {
 public:
  explicit StaticDiscovery(std::vector<dp::GpuDevice> gpus) : gpus_(std::move(gpus)) {}
  Result<std::vector<dp::GpuDevice>> Discover() override { return gpus_; }
  std::string Name() const override { return "sim"; }

 private:
  std::vector<dp::GpuDevice> gpus_;
};

// The device count a container asks for: limits win (requests default to them for extended
// resources), then requests.
int64_t ContainerDeviceCount(const json& container, const std::string& resource) {
  for (const char* kind : {"limits", "requests"}) {
    const json* r = container.contains("resources") ? &container["resources"] : nullptr;
    if (r == nullptr || !r->contains(kind) || !(*r)[kind].contains(resource)) continue;
    const json& v = (*r)[kind][resource];
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_string()) {
      auto n = ParseInt64(v.get<std::string>());
      if (n) return *n;
    }
  }
  return 0;
}

// Only what the kubelet reads is cached.
json TrimPod(json pod) {
  json out;
  if (pod.contains("metadata")) out["metadata"] = std::move(pod["metadata"]);
  if (out.contains("metadata")) out["metadata"].erase("managedFields");
  if (pod.contains("spec")) {
    json& spec = pod["spec"];
    out["spec"]["nodeName"] = spec.value("nodeName", "");
    for (const char* list : {"initContainers", "containers"}) {
      if (!spec.contains(list) || !spec[list].is_array()) continue;
      for (json& c : spec[list]) {
        out["spec"][list].push_back(
            {{"name", c.value("name", "")}, {"resources", c.value("resources", json::object())}});
      }
    }
  }
  if (pod.contains("status")) out["status"]["phase"] = pod["status"].value("phase", "");
  return out;
}

std::string Rfc3339(SystemTime t) { return FormatRfc3339(t, Zone::Utc()); }

json RunningStatus(const json& pod, SystemTime now) {
  const std::string ts = Rfc3339(now);
  json status = {{"phase", "Running"}, {"startTime", ts}, {"hostIP", "10.0.0.1"}};
  status["conditions"] = json::array();
  for (const char* type : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    status["conditions"].push_back(
        {{"type", type}, {"status", "True"}, {"lastTransitionTime", ts}});
  }
  status["containerStatuses"] = json::array();
  if (pod.contains("spec") && pod["spec"].contains("containers")) {
    for (const json& c : pod["spec"]["containers"]) {
      status["containerStatuses"].push_back({{"name", c.value("name", "")},
                                             {"ready", true},
                                             {"started", true},
                                             {"restartCount", 0},
                                             {"image", "sim"},
                                             {"imageID", ""},
                                             {"state", {{"running", {{"startedAt", ts}}}}}});
    }
  }
  return status;
}

json EndStatus(const json& pod, SystemTime now, bool ok, const std::string& message) {
  const std::string ts = Rfc3339(now);
  json status = {{"phase", ok ? "Succeeded" : "Failed"}};
  if (!ok) {
    status["reason"] = "UnexpectedAdmissionError";
    status["message"] = message;
    return status;
  }
  status["conditions"] = json::array();
  for (const char* type : {"Ready", "ContainersReady"}) {
    status["conditions"].push_back({{"type", type},
                                    {"status", "False"},
                                    {"reason", "PodCompleted"},
                                    {"lastTransitionTime", ts}});
  }
  status["containerStatuses"] = json::array();
  if (pod.contains("spec") && pod["spec"].contains("containers")) {
    for (const json& c : pod["spec"]["containers"]) {
      status["containerStatuses"].push_back(
          {{"name", c.value("name", "")},
           {"ready", false},
           {"restartCount", 0},
           {"image", "sim"},
           {"imageID", ""},
           {"state",
            {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}, {"finishedAt", ts}}}}}});
    }
  }
  return status;
}

bool PodTerminal(const json& pod) {
  const std::string phase = k8s::FieldString(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

}  // namespace

class KubeletFleet::Impl {
 public:
  // One simulated node: its plugin and kubelet's view of the plugin's devices.
  struct Node {
    SimNode spec;
    std::string dir;
    std::unique_ptr<StaticDiscovery> discovery;
    std::unique_ptr<dp::RegisterPublisher> publisher;
    std::unique_ptr<dp::Allocator> allocator;
    std::unique_ptr<dp::Plugin> plugin;
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    std::unique_ptr<VendorPlugin> vendor;  // a vendor node's plugin instead of the above
    std::vector<std::string> device_ids;   // from ListAndWatch, healthy only
    std::set<std::string> in_use;          // mu_
  };
  enum class Step { kAdmit, kRunning, kFinish, kFailed };
  struct PodRun {
    PodRunRecord rec;
    size_t node = 0;
    std::vector<std::string> ids;  // device IDs held
    bool done = false;             // terminal, deleted or abandoned: no more steps
    int status_attempts = 0;
  };

  Impl(k8s::Client& client, std::vector<SimNode> nodes, KubeletOptions options, const Clock& clock)
      : client_(client), options_(std::move(options)), clock_(clock) {
    for (SimNode& n : nodes) {
      auto node = std::make_unique<Node>();
      node->spec = std::move(n);
      nodes_.push_back(std::move(node));
    }
  }

  Status Start();
  void Stop();
  Status CreateNode(Node& node);
  Status StartPlugin(size_t index);
  Status StartNodes();
  Status ReadDevices(Node& node);

  void OnPod(const json& pod);
  void OnPodGone(const json& pod);
  void Schedule(std::chrono::milliseconds delay, const std::string& key, Step step);
  void Worker();
  void Run(const std::string& key, Step step);
  void Admit(const std::string& key);
  Result<std::map<std::string, std::string>> VendorAllocate(VendorPlugin& plugin);
  Result<std::map<std::string, std::string>> AllocateContainer(size_t node, const std::string& key,
                                                               int64_t count);
  void PatchStatus(const std::string& key, Step step);
  void ReleaseIds(PodRun& run);
  std::string HookPath() const {
    return options_.hook_path.empty() ? options_.socket_dir + "/hook" : options_.hook_path;
  }
  std::map<std::string, SimUsage> PodUsage(const json& pod);
  void WriteUsage(const json& pod, const std::string& container,
                  const std::map<std::string, SimUsage>& usage,
                  const std::map<std::string, std::string>& envs);

  k8s::Client& client_;
  const KubeletOptions options_;
  const Clock& clock_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::string, size_t> node_index_;
  std::unique_ptr<k8s::Informer> pods_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, PodRun> runs_;
  std::set<std::tuple<SteadyTime, uint64_t, std::string, Step>> timers_;
  uint64_t timer_seq_ = 0;
  size_t started_ = 0;  // runs_ records running, finished or failed
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

Status KubeletFleet::Impl::CreateNode(Node& node) {
  const std::string gpus = std::to_string(static_cast<int64_t>(node.spec.gpus.size()) *
                                          options_.plugin_config.device_split_count);
  const std::string& rname = options_.plugin_config.resource_name;
  json resources = {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}, {rname, gpus}};
  if (!node.spec.vendor.empty()) {
    const device::Device* dev =
        options_.registry ? options_.registry->Find(node.spec.vendor) : nullptr;
    if (!dev)
      return Error{"node " + Quote(node.spec.name) + ": no backend for vendor " +
                   Quote(node.spec.vendor)};
    k8s::Client* api = options_.plugin_client ? options_.plugin_client : &client_;
    node.vendor = std::make_unique<VendorPlugin>(
        *dev, *api, node.spec.name,
        VendorDeviceInfos(node.spec.gpus, options_.plugin_config.device_split_count), clock_);
    resources.erase(rname);
    for (const auto& [k, v] : node.vendor->registration().capacity) resources[k] = v;
  }
  json obj = {{"apiVersion", "v1"}, {"kind", "Node"}};
  obj["metadata"]["name"] = node.spec.name;
  obj["metadata"]["labels"] = json(node.spec.labels);
  obj["metadata"]["labels"]["kubernetes.io/hostname"] = node.spec.name;
  json status = {{"capacity", resources}, {"allocatable", resources}};
  status["conditions"] = json::array({{{"type", "Ready"},
                                       {"status", "True"},
                                       {"reason", "KubeletReady"},
                                       {"lastTransitionTime", Rfc3339(clock_.Now())}}});
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

Status KubeletFleet::Impl::StartPlugin(size_t index) {
  Node& node = *nodes_[index];
  if (node.vendor) return node.vendor->Start();
  node.dir = options_.socket_dir + "/" + std::to_string(index);
  std::error_code ec;
  std::filesystem::create_directories(node.dir, ec);
  if (ec) return Error{"create " + Quote(node.dir) + ": " + ec.message()};
  node.discovery = std::make_unique<StaticDiscovery>(node.spec.gpus);
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
      clock_);
  dp::AllocateEnv env;
  env.hook_path = HookPath();
  env.config = config;
  node.allocator = std::make_unique<dp::Allocator>(plugin_api, name, env);
  dp::PluginOptions popts;
  popts.kubelet_socket = node.dir + "/kubelet.sock";  // absent: the plugin serves unregistered
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
  node.stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
      "unix://" + node.plugin->socket_path(), grpc::InsecureChannelCredentials()));
  return ReadDevices(node);
}

// What kubelet learns from the first ListAndWatch response: the healthy device IDs.
Status KubeletFleet::Impl::ReadDevices(Node& node) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1beta1::Empty empty;
  auto reader = node.stub->ListAndWatch(&ctx, empty);
  v1beta1::ListAndWatchResponse resp;
  const bool got = reader->Read(&resp);
  ctx.TryCancel();
  reader->Finish().ok();  // cancelled on purpose
  if (!got) return Error{"ListAndWatch on " + Quote(node.plugin->socket_path()) + ": no response"};
  for (const auto& d : resp.devices()) {
    if (d.health() == "Healthy") node.device_ids.push_back(d.id());
  }
  return OkStatus();
}

// Node objects and plugins, a few at a time: 1,000 of them one by one take tens of seconds.
Status KubeletFleet::Impl::StartNodes() {
  std::mutex mu;
  Status first = OkStatus();
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next++; i < nodes_.size(); i = next++) {
      Status s = CreateNode(*nodes_[i]);
      if (s) s = StartPlugin(i);
      std::lock_guard<std::mutex> lock(mu);
      if (!s && first) first = s;
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min<size_t>(8, nodes_.size()); ++t) threads.emplace_back(run);
  for (std::thread& t : threads) t.join();
  return first;
}

Status KubeletFleet::Impl::Start() {
  if (options_.socket_dir.empty()) return Error{"kubelet fleet: socket_dir is empty"};
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!node_index_.emplace(nodes_[i]->spec.name, i).second) {
      return Error{"kubelet fleet: duplicate node name " + Quote(nodes_[i]->spec.name)};
    }
  }
  if (Status s = StartNodes(); !s) return s;
  k8s::InformerOptions opts;
  opts.transform = TrimPod;
  k8s::InformerHandlers h;
  h.on_add = [this](const k8s::ObjectRef& o) { OnPod(*o); };
  h.on_update = [this](const k8s::ObjectRef&, const k8s::ObjectRef& o) { OnPod(*o); };
  h.on_delete = [this](const k8s::ObjectRef& o) { OnPodGone(*o); };
  pods_ = std::make_unique<k8s::Informer>(client_, res::kPods, opts, h);
  for (int i = 0; i < std::max(1, options_.workers); ++i)
    workers_.emplace_back([this] { Worker(); });
  pods_->Start();
  if (!pods_->WaitForSync(std::chrono::seconds(30))) {
    return Error{"kubelet fleet: pod informer did not sync within 30 s"};
  }
  return OkStatus();
}

void KubeletFleet::Impl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  // The informer takes up to a second to notice; stop the plugins meanwhile.
  std::thread stop_informer([this] {
    if (pods_) pods_->Stop();
  });
  for (auto& node : nodes_) {
    if (node->plugin) node->plugin->Stop();
    if (node->vendor) node->vendor->Stop();
  }
  stop_informer.join();
}

void KubeletFleet::Impl::OnPod(const json& pod) {
  const std::string node = k8s::FieldString(pod, "spec.nodeName");
  if (node.empty()) return;
  auto idx = node_index_.find(node);
  if (idx == node_index_.end()) return;
  if (PodTerminal(pod) || pod["metadata"].contains("deletionTimestamp")) {
    OnPodGone(pod);
    return;
  }
  const std::string key = k8s::ObjectKey(pod);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (runs_.count(key) > 0) return;
    const std::string phase = k8s::FieldString(pod, "status.phase");
    if (!phase.empty() && phase != "Pending") return;
    PodRun& run = runs_[key];
    run.rec.ns = k8s::Namespace(pod);
    run.rec.name = k8s::Name(pod);
    run.rec.node = node;
    run.node = idx->second;
  }
  Schedule(options_.admission_latency, key, Step::kAdmit);
}

void KubeletFleet::Impl::OnPodGone(const json& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(k8s::ObjectKey(pod));
  if (it == runs_.end()) return;
  ReleaseIds(it->second);
  // A pod ended by someone else (deleted, or failed by another writer) takes no more steps; our
  // own terminal patches come back here too and find `done` already set.
  it->second.done = true;
}

void KubeletFleet::Impl::ReleaseIds(PodRun& run) {
  Node& node = *nodes_[run.node];
  for (const std::string& id : run.ids) node.in_use.erase(id);
  run.ids.clear();
}

void KubeletFleet::Impl::Schedule(std::chrono::milliseconds delay, const std::string& key,
                                  Step step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    timers_.emplace(std::chrono::steady_clock::now() + delay, timer_seq_++, key, step);
  }
  cv_.notify_one();
}

void KubeletFleet::Impl::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (timers_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const SteadyTime due = std::get<0>(*timers_.begin());
    if (due > std::chrono::steady_clock::now()) {
      cv_.wait_until(lock, due);
      continue;
    }
    auto [t, seq, key, step] = *timers_.begin();
    timers_.erase(timers_.begin());
    if (!timers_.empty()) cv_.notify_one();  // another worker may take the next one
    lock.unlock();
    Run(key, step);
    lock.lock();
  }
}

void KubeletFleet::Impl::Run(const std::string& key, Step step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_.find(key);
    if (it == runs_.end() || it->second.done) return;
  }
  if (step == Step::kAdmit) {
    Admit(key);
  } else {
    PatchStatus(key, step);
  }
}

// One container's Allocate over gRPC with `count` free device IDs of the node.
Result<std::map<std::string, std::string>> KubeletFleet::Impl::AllocateContainer(
    size_t index, const std::string& key, int64_t count) {
  Node& node = *nodes_[index];
  v1beta1::AllocateRequest req;
  auto* creq = req.add_container_requests();
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  grpc::Status s = node.stub->Allocate(&ctx, req, &resp);
  if (!s.ok()) return Error{s.error_message()};
  std::map<std::string, std::string> envs;
  if (resp.container_responses_size() > 0) {
    for (const auto& [k, v] : resp.container_responses(0).envs()) envs[k] = v;
  }
  return envs;
}

// A vendor node's Allocate for one container (its plugin sets no env here).
Result<std::map<std::string, std::string>> KubeletFleet::Impl::VendorAllocate(
    VendorPlugin& plugin) {
  if (Status s = plugin.Allocate(); !s) return std::move(s).take_error();
  return std::map<std::string, std::string>{};
}

void KubeletFleet::Impl::Admit(const std::string& key) {
  k8s::ObjectRef pod = pods_->Get(key);
  size_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = runs_[key].node;
  }
  if (!pod) {
    std::lock_guard<std::mutex> lock(mu_);
    runs_[key].done = true;
    return;
  }
  std::vector<std::map<std::string, std::string>> envs;
  std::string error;
  const auto usage = PodUsage(*pod);
  VendorPlugin* vendor = nodes_[index]->vendor.get();
  const std::string& resource =
      vendor ? vendor->count_resource() : options_.plugin_config.resource_name;
  for (const char* list : {"initContainers", "containers"}) {
    if (!error.empty() || !(*pod)["spec"].contains(list)) continue;
    for (const json& c : (*pod)["spec"][list]) {
      const int64_t n = ContainerDeviceCount(c, resource);
      if (n <= 0) continue;
      auto r = vendor ? VendorAllocate(*vendor) : AllocateContainer(index, key, n);
      if (!r) {
        error = r.error();
        break;
      }
      WriteUsage(*pod, c.value("name", ""), usage, *r);
      envs.push_back(std::move(*r));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    PodRun& run = runs_[key];
    run.rec.container_envs = std::move(envs);
    if (!error.empty()) {
      run.rec.message = error;
      ReleaseIds(run);
    }
  }
  PatchStatus(key, error.empty() ? Step::kRunning : Step::kFailed);
}

// The scenario's `usage:` (sim/usage.h): the pod's annotation, parsed; empty when absent or bad
// (logged).
std::map<std::string, SimUsage> KubeletFleet::Impl::PodUsage(const json& pod) {
  auto value = k8s::Annotation(pod, kUsageAnnotation);
  if (!value) return {};
  auto parsed = ParseUsageAnnotation(*value);
  if (!parsed) {
    HAMI_WARN("pod {}: {}", k8s::ObjectKey(pod), parsed.error());
    return {};
  }
  return std::move(*parsed);
}

// A container with a declared usage: its region file, where the node's monitor reads it.
void KubeletFleet::Impl::WriteUsage(const json& pod, const std::string& container,
                                    const std::map<std::string, SimUsage>& usage,
                                    const std::map<std::string, std::string>& envs) {
  auto u = usage.find(container);
  if (u == usage.end()) return;
  UsageRegion region;
  region.usage = u->second;
  auto path = UsageRegionFor(envs, HookPath(), k8s::Uid(pod), container, &region);
  Status st = path ? WriteUsageRegion(*path, region) : Status(Error{path.error()});
  if (!st) HAMI_WARN("pod {} container {}: usage: {}", k8s::ObjectKey(pod), container, st.error());
}

void KubeletFleet::Impl::PatchStatus(const std::string& key, Step step) {
  k8s::ObjectRef pod = pods_->Get(key);
  std::string ns, name, message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PodRun& run = runs_[key];
    if (run.done) return;
    ns = run.rec.ns;
    name = run.rec.name;
    message = run.rec.message;
  }
  const SystemTime now = clock_.Now();
  const json empty = json::object();
  const json& spec_src = pod ? *pod : empty;
  json status = step == Step::kRunning ? RunningStatus(spec_src, now)
                                       : EndStatus(spec_src, now, step == Step::kFinish, message);
  auto r = client_.Patch(res::kPods, ns, name, k8s::PatchType::kMerge, json{{"status", status}},
                         "status");
  std::lock_guard<std::mutex> lock(mu_);
  PodRun& run = runs_[key];
  if (!r) {
    if (k8s::IsTransient(r.error()) && !stopping_) {
      const int n = std::min(++run.status_attempts, 6);
      timers_.emplace(std::chrono::steady_clock::now() + std::chrono::milliseconds(25 << n),
                      timer_seq_++, key, step);
      cv_.notify_one();
    } else {
      HAMI_WARN("pod {}: status {}", key, r.error().ToString());
      run.done = true;
      ReleaseIds(run);
    }
    return;
  }
  run.status_attempts = 0;
  if (!run.rec.running && !run.rec.finished) ++started_;
  if (step == Step::kRunning) {
    run.rec.running = true;
    run.rec.running_at = now;
    const std::chrono::milliseconds d = pod ? PodDuration(*pod) : std::chrono::milliseconds(0);
    if (d.count() > 0) {
      timers_.emplace(std::chrono::steady_clock::now() + d, timer_seq_++, key, Step::kFinish);
      cv_.notify_one();
    }
    return;
  }
  run.rec.finished = true;
  run.rec.finished_at = now;
  run.rec.failed = step == Step::kFailed;
  run.done = true;
  ReleaseIds(run);
}

KubeletFleet::KubeletFleet(k8s::Client& client, std::vector<SimNode> nodes, KubeletOptions options,
                           const Clock& clock)
    : impl_(std::make_unique<Impl>(client, std::move(nodes), std::move(options), clock)) {}

KubeletFleet::~KubeletFleet() { Stop(); }

Status KubeletFleet::Start() { return impl_->Start(); }

void KubeletFleet::Stop() { impl_->Stop(); }

size_t KubeletFleet::Started() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->started_;
}

std::vector<PodRunRecord> KubeletFleet::Records() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  std::vector<PodRunRecord> out;
  out.reserve(impl_->runs_.size());
  for (const auto& [key, run] : impl_->runs_) out.push_back(run.rec);
  return out;
}

}  // namespace hami::sim
