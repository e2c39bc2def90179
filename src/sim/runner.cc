#include "sim/runner.h"

#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/log.h"
#include "common/strings.h"
#include "device/device.h"
#include "device/policy.h"
#include "device/vendors/nvidia/nvidia_config.h"
#include "k8s/base64.h"
#include "k8s/client.h"
#include "k8s/leader_election.h"
#include "k8s/object.h"
#include "protocol/keys.h"
#include "protocol/vendor.h"
#include "scheduler/server.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/patch.h"
#include "sim/apiserver/rbac.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/store.h"
#include "sim/claim_controller.h"
#include "sim/dra_scheduler.h"
#include "sim/kube_scheduler.h"
#include "sim/kubelet.h"
#include "sim/monitors.h"
#include "sim/scheduler_set.h"
#include "sim/usage.h"
#include "sim/vendor_plugin.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kSchedulerName = "hami-scheduler";
// DRA mode: the stock kube-scheduler schedules (the webhook leaves schedulerName alone).
constexpr const char* kDefaultScheduler = "default-scheduler";
// The chart's DeviceClass of hami-dra-plugin's GPUs (charts/hami/templates/dra/deviceclass.yaml).
constexpr const char* kDraDeviceClass = "hami-core-gpu.project-hami.io";
constexpr int kApiAttempts = 20;
// A pod failed by kubelets this many times in a row stays Failed (the ReplicaSet gives up in the
// sim, so a plugin that never comes back cannot keep the run going: with the waits between
// replacements, about 45 s).
constexpr int kMaxRecreations = 50;

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

json BuildPod(const Scenario& scenario, const PlannedPod& planned) {
  const Workload& w = scenario.workloads[planned.workload_index];
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", planned.name},
                     {"namespace", planned.ns},
                     {"labels", {{"app", w.name}}},
                     {"annotations", json::object()}};
  for (const auto& [k, v] : w.annotations) pod["metadata"]["annotations"][k] = v;
  if (w.duration_seconds > 0) {
    pod["metadata"]["annotations"][std::string(kDurationAnnotation)] =
        FormatSeconds(w.duration_seconds);
  }
  if (std::string usage = UsageAnnotation(w.containers); !usage.empty()) {
    pod["metadata"]["annotations"][std::string(kUsageAnnotation)] = usage;
  }
  json containers = json::array();
  for (const ContainerSpec& c : w.containers) {
    json limits = json::object();
    for (const auto& [k, v] : c.resources) limits[k] = v;
    containers.push_back(
        {{"name", c.name}, {"image", "hami-sim/workload"}, {"resources", {{"limits", limits}}}});
  }
  pod["spec"] = {{"containers", containers}, {"restartPolicy", "Never"}};
  if (scenario.dra) {
    // What kube-apiserver defaults: the sim's DRA scheduler schedules default-scheduler's pods.
    pod["spec"]["schedulerName"] = kDefaultScheduler;
    for (size_t i = 0; i < w.containers.size(); ++i) {
      for (const std::string& claim : w.containers[i].claims) {
        pod["spec"]["containers"][i]["resources"]["claims"].push_back({{"name", claim}});
      }
    }
    for (const PodClaim& c : w.claims) {
      json entry = {{"name", c.name}};
      if (c.claim.empty()) {
        entry["resourceClaimTemplateName"] = c.claim_template;
      } else {
        entry["resourceClaimName"] = c.claim;
      }
      pod["spec"]["resourceClaims"].push_back(std::move(entry));
    }
  }
  return pod;
}

struct Admission {
  bool denied = false;
  std::string message;
  json pod;
};

// What the API server does with a mutating webhook: AdmissionReview v1 out, the JSON patch of
// the answer applied.
Result<Admission> Admit(httplib::Client& http, const json& pod, const std::string& uid) {
  json review = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}};
  review["request"] = {{"uid", uid},
                       {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                       {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                       {"namespace", pod["metadata"]["namespace"]},
                       {"operation", "CREATE"},
                       {"object", pod}};
  const std::string body = review.dump();
  httplib::Result res = http.Post("/webhook", body, "application/json");
  for (int i = 1; i < 5 && !res; ++i) res = http.Post("/webhook", body, "application/json");
  if (!res) return Error{"webhook: " + httplib::to_string(res.error())};
  if (res->status != 200) {
    return Error{"webhook: HTTP " + std::to_string(res->status) + ": " + res->body};
  }
  json answer = ParseJsonOrNull(res->body);
  const json* response =
      answer.is_object() && answer.contains("response") ? &answer["response"] : nullptr;
  if (!response || !response->is_object()) return Error{"webhook: no response in " + res->body};
  Admission out;
  if (!response->value("allowed", false)) {
    out.denied = true;
    if (response->contains("status") && (*response)["status"].is_object()) {
      out.message = (*response)["status"].value("message", "");
    }
    return out;
  }
  out.pod = pod;
  if (response->contains("patch") && (*response)["patch"].is_string()) {
    auto text = k8s::Base64Decode((*response)["patch"].get<std::string>());
    if (!text) return Error{"webhook: patch is not base64"};
    auto patched = ApplyPatch(pod, PatchType::kJsonPatch, *text);
    if (!patched) return Error{"webhook: patch: " + patched.error().ToString()};
    out.pod = std::move(*patched);
  }
  return out;
}

// Creates the pod, retrying transient errors (an injected 5xx, or no answer at all while the API
// server restarts) for about 5 s; AlreadyExists after a retry means the lost answer was a
// success.
k8s::ApiStatus CreatePod(k8s::Client& client, const json& pod) {
  for (int i = 1;; ++i) {
    auto r = client.Create(k8s::resources::kPods, k8s::Namespace(pod), pod);
    if (r) return k8s::ApiStatus(std::monostate{});
    if (i > 1 && k8s::IsAlreadyExists(r.error())) return k8s::ApiStatus(std::monostate{});
    if (!k8s::IsTransient(r.error()) || i >= 3 * kApiAttempts) return r.error();
    std::this_thread::sleep_for(Ms(std::min(5 * i, 100)));
  }
}

template <typename F>
auto Retry(F f) -> decltype(f()) {
  for (int i = 1;; ++i) {
    auto r = f();
    if (r || i >= kApiAttempts) return r;
    std::this_thread::sleep_for(Ms(5 * i));
  }
}

std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

template <typename Record>
std::map<std::string, Record> ByKey(std::vector<Record> records) {
  std::map<std::string, Record> out;
  for (Record& r : records) {
    std::string key = Key(r.ns, r.name);
    out.emplace(std::move(key), std::move(r));
  }
  return out;
}

}  // namespace

class Runner::Impl {
 public:
  Impl(Scenario scenario, RunOptions options)
      : scenario_(std::move(scenario)), options_(std::move(options)) {}
  ~Impl() { Stop(); }

  Result<Report> Run();
  void Stop();
  ApiServer* api() { return api_.get(); }
  std::vector<MonitorAddress> MonitorAddresses() const;
  int SchedulerMetricsPort() const { return schedulers_ ? schedulers_->MetricsPort() : 0; }
  int WebhookPort() const { return schedulers_ ? schedulers_->WebhookPort() : 0; }

 private:
  void Progress(const std::string& line) {
    if (options_.progress) options_.progress(line);
  }
  // A client of the embedded API server; `token` is its identity under RBAC.
  // Thread-safe: a restarted process gets a new one while others run.
  k8s::Client& NewClient(const std::string& token) {
    k8s::RestConfig cfg;
    cfg.server = api_->url();
    cfg.token = token;
    cfg.qps = 0;
    std::lock_guard<std::mutex> lock(clients_mu_);
    clients_.push_back(std::make_unique<k8s::Client>(cfg));
    return *clients_.back();
  }
  Status StartCluster();
  Status CreateRbacObjects();
  Status StartLeaderElection(k8s::Client& client, scheduler::ServerOptions* server);
  Status StartSchedulers(const std::string& token, scheduler::ServerOptions server);
  Status StartExtenderScheduling(const std::string& scheduler_token);
  Status CheckFaultsSupported() const;
  // DRA mode: the DeviceClass, the scenario's templates and claims; the scheduling loop.
  Status CreateDraObjects();
  Status StartDraScheduling(const std::string& scheduler_token);
  Status WaitForSlices(size_t want);
  // The scheduling loop's records and idleness, whichever loop runs.
  std::vector<PodScheduleRecord> LoopRecords() const {
    return dra_loop_ ? dra_loop_->Records() : loop_->Records();
  }
  bool LoopIdle() const { return dra_loop_ ? dra_loop_->Idle() : loop_->Idle(); }
  const char* SchedulerName() const { return scenario_.dra ? kDefaultScheduler : kSchedulerName; }
  // deleteAfter: deletes each pod that long after it runs, until the run settles.
  void DeletePodsAfter();
  void ObserveDra(const std::map<std::string, json>& pods, ReportInput* in);
  // Strikes the scenario's process faults on schedule until the run settles (docs/RELIABILITY.md).
  // A strike queues its component's restart `down` later; restarts still queued when the run
  // settles are done then.
  struct FaultEvent {
    std::string fault;  // a scenario key, or "restartScheduler", "restartPlugin", "startKubelet",
                        // "startApiServer", "healthyGpu"
    size_t node = 0;    // the node of a plugin or kubelet restart, or of a GPU
    size_t gpu = 0;     // healthyGpu: the GPU's index on the node
  };
  void InjectFaults(SteadyClock::time_point start);
  void Strike(const std::string& fault, std::mt19937_64& rng, Ms at,
              std::multimap<Ms, FaultEvent>* queue);
  void Restart(const FaultEvent& event);
  // deleteNode: deletes the pods bound to `node` (grace period 0) and has the ReplicaSet replace
  // the ones the report follows.
  void DeletePodsOn(const std::string& node);
  // A node picked with the scenario's seed among those `ok` accepts; nullopt when none does.
  std::optional<size_t> PickNode(std::mt19937_64& rng, const std::function<bool(size_t)>& ok);
  // The ReplicaSet's part (docs/RELIABILITY.md): a pod the kubelet failed (its plugin away) is
  // created again with a new name and the same spec, through the webhook. Runs while the run does
  // when process faults are scheduled.
  bool RecreatesPods() const;
  void RecreateFailedPods();
  void Recreate(k8s::Client& client, size_t i);
  // After the run: every killed replica back and one serving, so the live index can be asked.
  void RecoverSchedulers(ReportInput* in);
  // How long setup waits for `usual`; under --manifests at most the scenario's timeout, since a
  // missing rule can keep nodes or the scheduler from ever coming up.
  std::chrono::seconds SetupWait(std::chrono::seconds usual) const;
  Report SetupFailedReport(const std::string& error);
  Status WaitForNodes(size_t want);
  Status CreateNamespaces(k8s::Client& client);
  void CreatePods(SteadyClock::time_point start);
  void CreateOne(k8s::Client& client, size_t i);
  // The webhook, then the create, of `pod`; fills *o (created, denied, message, ...).
  void AdmitAndCreate(k8s::Client& client, const json& pod, const std::string& uid,
                      PodObservation* o);
  bool Settled(SystemTime* last_time);
  void Observe(SystemTime settled_at, bool timed_out, ReportInput* in);
  void MeasureMemory(ReportInput* in);
  void SetReportNodes(ReportInput* in) const;

  const Scenario scenario_;
  const RunOptions options_;
  // The backends of the scenario's device config: vendor nodes' plugins and the report read them.
  const device::Registry registry_ = device::MakeRegistry(scenario_.device_config);
  // The nvidia section (split count, scalings) the simulated NVIDIA plugins register with.
  const device::nvidia::NvidiaConfig nvidia_ =
      device::nvidia::NvidiaSectionOrDefaults(scenario_.device_config);
  std::vector<ExpandedNode> nodes_;
  std::vector<PlannedPod> planned_;
  std::vector<PodObservation> observed_;  // by planned_ index; each written by one creator
  // The ReplicaSet: each created pod's current incarnation "ns/name" -> planned_ index; an entry
  // leaves when its pod is re-created. observed_mu_ also guards observed_ once created (the
  // re-creator replaces entries while Settled reads them).
  std::mutex observed_mu_;
  std::map<std::string, size_t> incarnations_;
  // Replicas whose pod was deleted (deleteNode): replaced at once, and the run is not settled
  // while any is still being replaced.
  std::vector<size_t> replace_now_;
  std::set<size_t> replacing_;
  std::thread recreator_;
  std::atomic<bool> recreator_stop_{false};
  std::atomic<size_t> next_pod_{0};
  std::atomic<size_t> pods_done_{0};
  std::atomic<bool> abort_{false};

  std::string dir_;
  std::unique_ptr<ApiServer> api_;
  std::mutex clients_mu_;
  std::vector<std::unique_ptr<k8s::Client>> clients_;
  k8s::Client* admin_ = nullptr;  // the runner's own requests
  std::unique_ptr<KubeletFleet> fleet_;
  std::unique_ptr<MonitorFleet> monitors_;    // hami-vgpu-monitor per node (sim/monitors.h)
  std::unique_ptr<SchedulerSet> schedulers_;  // hami-scheduler's replicas
  std::unique_ptr<SkewedClock> scheduler_clock_;
  std::unique_ptr<SkewedClock> plugin_clock_;  // clockSkew.plugins: the device plugins' clock
  // Fault injection: stops with the run.
  std::mutex faults_mu_;
  std::condition_variable faults_cv_;
  bool faults_stop_ = false;
  std::thread faults_thread_;
  std::map<std::string, int> faults_injected_;
  std::set<std::pair<size_t, size_t>> unhealthy_;  // (node, GPU) the unhealthyGpu fault struck
  std::set<size_t> deleted_nodes_;                 // deleteNode's, until they come back
  std::unique_ptr<KubeSchedulerLoop> loop_;
  // DRA mode: kube-scheduler's DynamicResources in place of loop_, kube-controller-manager's
  // resourceclaim controller, and the deleteAfter deleter.
  std::unique_ptr<DraSchedulerLoop> dra_loop_;
  std::unique_ptr<ClaimController> claim_controller_;
  std::thread deleter_;
  std::atomic<bool> deleter_stop_{false};
  // --manifests with --leader-elect: kube-scheduler's leader election, which hami-scheduler
  // follows.
  std::unique_ptr<k8s::LeaderElector> elector_;
  std::thread elector_thread_;
  bool stopped_ = false;
};

Status Runner::Impl::StartCluster() {
  std::string tmpl = options_.temp_root + "/hami-sim-XXXXXX";
  if (!mkdtemp(tmpl.data())) return Error{"cannot create a directory under " + options_.temp_root};
  dir_ = tmpl;
  ApiServerOptions api_options;
  api_options.port = options_.api_port;
  api_options.fail_rate = scenario_.fault_error_rate;
  api_options.latency = scenario_.fault_latency;
  api_options.drop_watch_every = scenario_.fault_drop_watch_every;
  api_options.rbac = options_.manifests.has_value();
  api_ = std::make_unique<ApiServer>(api_options);
  if (auto st = api_->Start(); !st) return Error{"API server: " + st.error()};
  admin_ = &NewClient(api_->token());
  // Without --manifests the server ignores the tokens: everyone is the admin.
  std::string scheduler_token, plugin_token, kubelet_token;
  if (options_.manifests) {
    if (auto st = CreateRbacObjects(); !st) return st;
    const ManifestRbac& m = *options_.manifests;
    scheduler_token = api_->IssueToken(rbac::ServiceAccountUser(m.scheduler.ns, m.scheduler.name));
    plugin_token =
        api_->IssueToken(rbac::ServiceAccountUser(m.device_plugin.ns, m.device_plugin.name));
    kubelet_token = api_->IssueToken(
        rbac::UserInfo{"system:node:hami-sim", {"system:nodes", "system:authenticated"}});
    if (m.dra_plugin != scenario_.dra) {
      return Error{std::string("--manifests: the chart's node plugin is ") +
                   (m.dra_plugin ? "hami-dra-plugin (dra.enabled)" : "hami-device-plugin") +
                   " but the scenario " + (scenario_.dra ? "has" : "does not have") + " dra: true"};
    }
  }

  auto plugin_config = PluginConfigFor(scenario_);
  if (!plugin_config) return Error{"deviceConfig: " + plugin_config.error()};
  KubeletOptions kubelet;
  kubelet.admission_latency = options_.kubelet_latency.value_or(scenario_.kubelet_latency);
  kubelet.socket_dir = dir_;
  kubelet.hook_path = dir_ + "/hook";  // the device plugins' HOOK_PATH; the monitors read it
  kubelet.plugin_config = *plugin_config;
  kubelet.plugin_client = &NewClient(plugin_token);
  kubelet.registry = &registry_;
  kubelet.dra = scenario_.dra;
  if (scenario_.process_faults.plugin_clock_skew.count() != 0) {
    plugin_clock_ =
        std::make_unique<SkewedClock>(RealClock(), scenario_.process_faults.plugin_clock_skew);
    kubelet.plugin_clock = plugin_clock_.get();
  }
  std::vector<SimNode> sim_nodes;
  for (const ExpandedNode& n : nodes_) {
    sim_nodes.push_back(SimNode{n.name, n.labels, n.gpus, n.vendor});
  }
  Progress("starting " + std::to_string(nodes_.size()) + " simulated kubelets, each with " +
           (scenario_.dra ? "hami-dra-plugin (DRA, gRPC)" : "the HAMi device plugin (gRPC)"));
  fleet_ = std::make_unique<KubeletFleet>(NewClient(kubelet_token), std::move(sim_nodes), kubelet);
  if (auto st = fleet_->Start(); !st) return Error{"kubelets: " + st.error()};
  // Vendor nodes published synchronously in Start(); the NVIDIA plugins publish on their own.
  size_t nvidia_nodes = 0;
  for (const ExpandedNode& n : nodes_) nvidia_nodes += n.vendor.empty() ? 1 : 0;
  if (auto st = scenario_.dra ? WaitForSlices(nvidia_nodes) : WaitForNodes(nvidia_nodes); !st) {
    return st;
  }

  scheduler::ServerOptions server;
  server.http_bind = "127.0.0.1:0";
  server.metrics_bind = "127.0.0.1:0";  // the dashboard's scheduler series (docs/MONITOR.md)
  server.webhook.scheduler_name = kSchedulerName;
  server.dra = scenario_.dra;  // --dra: HAMi's resources become claims
  server.extender.node_policy = *device::ParseNodePolicy(scenario_.node_scheduler_policy);
  auto gpu_policy = device::ParseGpuPolicy(scenario_.gpu_scheduler_policy, /*strict=*/true);
  if (!gpu_policy) return Error{"policies.gpuSchedulerPolicy: " + gpu_policy.error()};
  server.extender.gpu_policy = *gpu_policy;
  server.extender.async_decision_write = true;  // hami-scheduler's default
  // Every component shares this process: a nicer scheduler informer would yield to simulated
  // kubelets and plugins that in a cluster run on other machines. --background-nice orders a
  // real hami-scheduler's own threads only (loadgen runs the real binary).
  server.extender.background_nice = 0;
  // Under injected API errors a registration pass can fail; pass often so nodes come back soon.
  if (scenario_.fault_error_rate > 0) server.register_period = std::chrono::seconds(1);
  if (options_.manifests) {
    if (auto st = StartLeaderElection(NewClient(scheduler_token), &server); !st) return st;
  }
  if (auto st = StartSchedulers(scheduler_token, server); !st) return st;
  if (scenario_.dra) {
    // DRA mode: the cluster's own kube-scheduler allocates, as the user system:kube-scheduler.
    const std::string kube_scheduler_token =
        options_.manifests
            ? api_->IssueToken(rbac::UserInfo{"system:kube-scheduler", {"system:authenticated"}})
            : std::string();
    if (auto st = StartDraScheduling(kube_scheduler_token); !st) return st;
  } else if (auto st = StartExtenderScheduling(scheduler_token); !st) {
    return st;
  }
  if (auto st = CreateNamespaces(*admin_); !st) return st;
  if (scenario_.dra) {
    if (auto st = CreateDraObjects(); !st) return st;
  }
  if (!RunsMonitors(scenario_, options_.serving)) return OkStatus();
  Progress("starting hami-vgpu-monitor on every node");
  std::vector<SimNode> monitored;
  // hami-vgpu-monitor reads HAMi-core's regions: NVIDIA nodes only (a vendor node's generic
  // plugin runs no libvgpu).
  for (const ExpandedNode& n : nodes_) {
    if (n.vendor.empty()) monitored.push_back(SimNode{n.name, n.labels, n.gpus});
  }
  // The monitor runs in the device plugin's pod, under its ServiceAccount.
  monitors_ = std::make_unique<MonitorFleet>(NewClient(plugin_token), *admin_, std::move(monitored),
                                             kubelet.hook_path, scenario_.dra);
  return monitors_->Start();
}

Status Runner::Impl::StartExtenderScheduling(const std::string& scheduler_token) {
  KubeSchedulerOptions loop;
  loop.scheduler_name = kSchedulerName;
  loop.extender_url = schedulers_->ExtenderUrl();
  if (scenario_.scheduler_replicas > 1) {
    SchedulerSet* set = schedulers_.get();
    loop.extender_url_source = [set] { return set->ExtenderUrl(); };
  }
  // Binds to one node are serialised by its lock; across nodes 16 run at once (kube-scheduler's
  // binding goroutines), well inside hami-scheduler's 64 request threads.
  loop.bind_parallelism = 16;
  loop.initial_backoff = scenario_.pod_initial_backoff;
  loop.max_backoff = scenario_.pod_max_backoff;
  Progress("starting the kube-scheduler loop (filter + bind through the extender)");
  // kube-scheduler runs in the scheduler's pod, under its ServiceAccount (docs/RBAC.md).
  loop_ = std::make_unique<KubeSchedulerLoop>(NewClient(scheduler_token), loop);
  if (auto st = loop_->Start(); !st) return Error{"kube-scheduler loop: " + st.error()};
  return OkStatus();
}

Status Runner::Impl::StartDraScheduling(const std::string& scheduler_token) {
  Progress(
      "starting kube-controller-manager's resourceclaim controller and the kube-scheduler "
      "loop with DynamicResources (no extender in DRA mode)");
  // kube-controller-manager runs as the admin here (its own identity is not modelled).
  claim_controller_ = std::make_unique<ClaimController>(NewClient(api_->token()));
  if (auto st = claim_controller_->Start(); !st) return Error{"claim controller: " + st.error()};
  DraSchedulerOptions loop;
  loop.scheduler_name = kDefaultScheduler;
  loop.initial_backoff = scenario_.pod_initial_backoff;
  loop.max_backoff = scenario_.pod_max_backoff;
  dra_loop_ = std::make_unique<DraSchedulerLoop>(NewClient(scheduler_token), loop);
  if (auto st = dra_loop_->Start(); !st) return Error{"kube-scheduler loop: " + st.error()};
  return OkStatus();
}

// What `helm install --set dra.enabled=true` creates (the DeviceClass), then the scenario's
// templates and claims, before any pod.
Status Runner::Impl::CreateDraObjects() {
  const json device_class = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "DeviceClass"},
      {"metadata", {{"name", kDraDeviceClass}}},
      {"spec",
       {{"selectors", json::array({{{"cel",
                                     {{"expression", std::string("device.driver == \"") +
                                                         kDraDeviceClass + "\""}}}}})}}}};
  auto create = [&](const k8s::Resource& r, const std::string& ns, const json& obj,
                    const std::string& what) -> Status {
    std::string last = "cannot create";
    auto ok = Retry([&] {
      auto c = admin_->Create(r, ns, obj);
      if (!c && !k8s::IsAlreadyExists(c.error())) last = c.error().ToString();
      return c || k8s::IsAlreadyExists(c.error());
    });
    if (!ok) return Error{what + ": " + last};
    return OkStatus();
  };
  if (auto st = create(k8s::resources::kDeviceClasses, "", device_class,
                       "DeviceClass " + std::string(kDraDeviceClass));
      !st) {
    return st;
  }
  for (const ClaimObject& t : scenario_.claim_templates) {
    json obj = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaimTemplate"},
                {"metadata", {{"name", t.name}, {"namespace", t.ns}}},
                {"spec", {{"spec", json::parse(t.spec_json)}}}};
    if (auto st = create(k8s::resources::kResourceClaimTemplates, t.ns, obj,
                         "resourceClaimTemplates " + t.ns + "/" + t.name);
        !st) {
      return st;
    }
  }
  for (const ClaimObject& c : scenario_.claims) {
    json obj = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", c.name}, {"namespace", c.ns}}},
                {"spec", json::parse(c.spec_json)}};
    if (auto st = create(k8s::resources::kResourceClaims, c.ns, obj,
                         "resourceClaims " + c.ns + "/" + c.name);
        !st) {
      return st;
    }
  }
  return OkStatus();
}

// DRA mode: a node is ready for claims once hami-dra-plugin published its pool.
Status Runner::Impl::WaitForSlices(size_t want) {
  const std::chrono::seconds wait = SetupWait(std::chrono::seconds(120));
  auto deadline = SteadyClock::now() + wait;
  std::set<std::string> nodes;
  while (want > 0 && SteadyClock::now() < deadline) {
    auto slices = admin_->ListAll(k8s::resources::kResourceSlices, "", k8s::ListOptions{});
    if (slices) {
      nodes.clear();
      for (const json& sl : slices->items) nodes.insert(k8s::FieldString(sl, "spec.nodeName"));
      if (nodes.size() >= want) return OkStatus();
    }
    std::this_thread::sleep_for(Ms(20));
  }
  if (want == 0) return OkStatus();
  return Error{"kubelets: " + std::to_string(nodes.size()) + " of " + std::to_string(want) +
               " nodes published their ResourceSlices within " + std::to_string(wait.count()) +
               " s"};
}

void Runner::Impl::DeletePodsAfter() {
  std::set<size_t> deleted;
  while (!deleter_stop_.load()) {
    auto runs = ByKey(fleet_->Records());
    const SystemTime now = std::chrono::system_clock::now();
    for (size_t i = 0; i < planned_.size(); ++i) {
      const Workload& w = scenario_.workloads[planned_[i].workload_index];
      if (w.delete_after.count() <= 0 || deleted.count(i)) continue;
      auto run = runs.find(Key(planned_[i].ns, planned_[i].name));
      if (run == runs.end() || !run->second.running) continue;
      if (now < run->second.running_at + w.delete_after) continue;
      auto st = admin_->Delete(k8s::resources::kPods, planned_[i].ns, planned_[i].name);
      if (!st && !k8s::IsNotFound(st.error())) continue;  // retried on the next pass
      deleted.insert(i);
      std::lock_guard<std::mutex> lock(observed_mu_);
      observed_[i].deleted = true;
    }
    std::this_thread::sleep_for(Ms(20));
  }
}

std::chrono::seconds Runner::Impl::SetupWait(std::chrono::seconds usual) const {
  if (!options_.manifests) return usual;
  return std::max(
      std::chrono::seconds(1),
      std::min(usual, std::chrono::duration_cast<std::chrono::seconds>(scenario_.timeout)));
}

// A cluster that did not come up under --manifests: every pod uncreated, the setup error, and
// the requests RBAC refused (the likely cause).
Report Runner::Impl::SetupFailedReport(const std::string& error) {
  ReportInput in;
  in.scenario_name = scenario_.name;
  SetReportNodes(&in);
  in.split_count = nvidia_.device_split_count;
  in.memory_scaling = nvidia_.device_memory_scaling;
  in.core_scaling = nvidia_.device_core_scaling;
  for (PodObservation o : observed_) {
    o.message = "the cluster did not come up: " + error;
    in.pods.push_back(std::move(o));
  }
  in.first_created = in.settled_at = std::chrono::system_clock::now();
  in.timed_out = true;
  in.setup_error = error;
  in.rbac_enforced = true;
  in.forbidden_requests = api_->forbidden_count();
  in.forbidden = api_->ForbiddenRequests();
  return BuildReport(in);
}

// What the chart's scheduler pod does besides the extender, so that its rules are exercised too:
// with --leader-elect its kube-scheduler holds the lease named by
// --leader-elect-resource-name (get, create, update), and hami-scheduler follows it (get, and a
// list + watch by metadata.name) and, as the leader, labels its own pod (POD_NAME/POD_NAMESPACE).
Status Runner::Impl::StartLeaderElection(k8s::Client& client, scheduler::ServerOptions* server) {
  const ManifestRbac& m = *options_.manifests;
  const std::string pod = "hami-scheduler-sim-0";
  server->pod_name = pod;
  server->pod_namespace = m.scheduler.ns;
  if (FlagValue(m.scheduler_command, "leader-elect") != "true") return OkStatus();
  k8s::LeaderElectionConfig config;
  config.lease_name = FlagValue(m.scheduler_command, "leader-elect-resource-name");
  config.lease_namespace = FlagValue(m.scheduler_command, "leader-elect-resource-namespace");
  if (config.lease_name.empty()) config.lease_name = kSchedulerName;
  if (config.lease_namespace.empty()) config.lease_namespace = m.scheduler.ns;
  config.identity = pod + "_kube-scheduler";  // kube-scheduler's <hostname>_<id>
  elector_ = std::make_unique<k8s::LeaderElector>(client, config);
  auto won = elector_->TryAcquireOrRenew();
  if (!won || !*won) {
    return Error{"kube-scheduler leader election on lease " +
                 Quote(config.lease_namespace + "/" + config.lease_name) + ": " +
                 (won ? std::string("not acquired") : won.error().ToString())};
  }
  elector_thread_ = std::thread([this] { elector_->Run({}, {}); });
  server->leader_elect = true;
  server->lease_name = config.lease_name;
  server->lease_namespace = config.lease_namespace;
  server->identity = pod;
  Progress("kube-scheduler holds lease " + config.lease_namespace + "/" + config.lease_name +
           "; hami-scheduler follows it and labels its pod " + m.scheduler.ns + "/" + pod);
  return OkStatus();
}

// The ServiceAccounts, roles and bindings of --manifests, as `helm install` would create them
// (their namespaces first).
Status Runner::Impl::CreateRbacObjects() {
  const ManifestRbac& m = *options_.manifests;
  std::set<std::string> namespaces = {m.scheduler.ns, m.device_plugin.ns};
  for (const json& obj : m.objects) {
    if (!k8s::Namespace(obj).empty()) namespaces.insert(k8s::Namespace(obj));
  }
  Store& store = api_->store();
  for (const std::string& ns : namespaces) {
    auto created = store.Create(NamespaceType(), "", json{{"metadata", {{"name", ns}}}});
    if (!created && !k8s::IsAlreadyExists(created.error())) {
      return Error{"--manifests: namespace " + Quote(ns) + ": " + created.error().ToString()};
    }
  }
  for (const json& obj : m.objects) {
    const std::string kind = obj.value("kind", "");
    const std::string api_version = obj.value("apiVersion", "");
    const ResourceType* type = nullptr;
    for (const ResourceType& t : ResourceTypes()) {
      if (t.kind == kind && t.ApiVersion() == api_version) type = &t;
    }
    const std::string what = kind + " " + Quote(k8s::Name(obj));
    if (type == nullptr) return Error{"--manifests: " + what + ": " + api_version + " not served"};
    auto created = store.Create(*type, type->namespaced ? k8s::Namespace(obj) : "", obj);
    if (!created) return Error{"--manifests: " + what + ": " + created.error().ToString()};
  }
  Progress("RBAC enforced: " + std::to_string(m.objects.size()) +
           " objects from --manifests; hami-scheduler runs as " +
           rbac::ServiceAccountUser(m.scheduler.ns, m.scheduler.name).name +
           ", the device plugins as " +
           rbac::ServiceAccountUser(m.device_plugin.ns, m.device_plugin.name).name);
  return OkStatus();
}

// The report's nodes: a vendor node's devices as the scheduler's backend reads them from what
// its plugin publishes (a vendor that registers through capacity names its devices itself), with
// their slots; NVIDIA nodes as the scenario gives them.
void Runner::Impl::SetReportNodes(ReportInput* in) const {
  in->nodes = nodes_;
  for (ExpandedNode& n : in->nodes) {
    const device::Device* dev = n.vendor.empty() ? nullptr : registry_.Find(n.vendor);
    if (!dev) continue;
    const device::NodeRegistration reg =
        dev->EncodeNodeRegistration(VendorDeviceInfos(n.gpus, nvidia_.device_split_count));
    device::NodeView view;
    view.name = n.name;
    view.annotations = reg.annotations;
    view.capacity = view.allocatable = reg.capacity;
    auto rows = dev->NodeDevices(view);
    if (!rows) continue;
    n.gpus.clear();
    for (const device::DeviceUsage& d : *rows) {
      deviceplugin::GpuDevice g;
      g.index = d.index;
      g.uuid = d.id;
      g.model = d.type;
      g.memory_mib = d.totalmem;
      g.numa = d.numa;
      n.gpus.push_back(std::move(g));
      in->slots_by_uuid[d.id] = d.count;
    }
  }
}

// The scheduler registers a node once its device plugin has published the GPUs.
Status Runner::Impl::WaitForNodes(size_t want) {
  k8s::Client& client = *admin_;
  const std::chrono::seconds wait = SetupWait(std::chrono::seconds(120));
  auto deadline = SteadyClock::now() + wait;
  size_t have = 0;
  const device::Device* nvidia = registry_.Find("NVIDIA");
  const std::string register_key = nvidia ? nvidia->Info().register_key : "";
  while (want > 0 && SteadyClock::now() < deadline) {
    auto nodes = client.ListAll(k8s::resources::kNodes, "", k8s::ListOptions{});
    if (nodes) {
      have = 0;
      for (const json& n : nodes->items) have += k8s::Annotation(n, register_key) ? 1 : 0;
      if (have >= want) return OkStatus();
    }
    std::this_thread::sleep_for(Ms(20));
  }
  if (want == 0) return OkStatus();
  return Error{"kubelets: " + std::to_string(have) + " of " + std::to_string(want) +
               " nodes published their GPUs within " + std::to_string(wait.count()) + " s"};
}

Status Runner::Impl::CreateNamespaces(k8s::Client& client) {
  std::set<std::string> names;
  for (const Workload& w : scenario_.workloads) names.insert(w.ns);
  for (const std::string& ns : names) {
    json obj = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}};
    auto r = Retry([&] {
      auto c = client.Create(k8s::resources::kNamespaces, "", obj);
      return c || k8s::IsAlreadyExists(c.error());
    });
    if (!r) return Error{"namespace " + Quote(ns) + ": cannot create"};
  }
  return OkStatus();
}

void Runner::Impl::CreateOne(k8s::Client& client, size_t i) {
  PodObservation& o = observed_[i];
  AdmitAndCreate(client, BuildPod(scenario_, planned_[i]), std::to_string(i), &o);
  if (o.created) {
    std::lock_guard<std::mutex> lock(observed_mu_);
    incarnations_[Key(o.ns, o.name)] = i;
  }
}

void Runner::Impl::AdmitAndCreate(k8s::Client& client, const json& pod, const std::string& uid,
                                  PodObservation* out) {
  PodObservation& o = *out;
  // The webhook Service reaches any live replica; while all are down (a kill), the creator
  // retries as a ReplicaSet controller would.
  Result<Admission> admitted = Error{"webhook: no hami-scheduler replica is alive"};
  for (int attempt = 0; attempt < 600 && !abort_.load(); ++attempt) {
    if (const int port = schedulers_->WebhookPort(); port > 0) {
      httplib::Client http("127.0.0.1", port);
      http.set_read_timeout(std::chrono::seconds(30));
      http.set_tcp_nodelay(true);  // else each AdmissionReview waits ~40 ms on Nagle
      admitted = Admit(http, pod, uid);
      if (admitted || admitted.error().rfind("webhook: HTTP", 0) == 0) break;
    }
    std::this_thread::sleep_for(Ms(50));
  }
  if (!admitted) {
    o.message = admitted.error();
    return;
  }
  if (admitted->denied) {
    o.denied = true;
    o.message = admitted->message;
    return;
  }
  o.scheduler_name = admitted->pod["spec"].value("schedulerName", "default-scheduler");
  o.created_at = std::chrono::system_clock::now();
  auto st = CreatePod(client, admitted->pod);
  if (!st) {
    o.message = "create: " + st.error().ToString();
    return;
  }
  o.created = true;
}

bool Runner::Impl::RecreatesPods() const { return scenario_.process_faults.any(); }

void Runner::Impl::RecreateFailedPods() {
  k8s::Client& client = *admin_;
  // Failed pods whose replacement is due at a time: the k-th replacement of a replica waits
  // 20 ms x 2^k, at most 1 s. Without the wait, a node whose plugin is away for 2 s, which
  // kube-scheduler keeps choosing (its devices look free), used up a replica's replacements
  // before the plugin was back.
  std::multimap<SteadyClock::time_point, size_t> due;
  while (!recreator_stop_.load()) {
    {
      const std::vector<PodRunRecord> runs = fleet_->Records();
      const auto now = SteadyClock::now();
      std::lock_guard<std::mutex> lock(observed_mu_);
      for (const PodRunRecord& r : runs) {
        if (!r.failed) continue;
        auto it = incarnations_.find(Key(r.ns, r.name));
        if (it == incarnations_.end()) continue;
        const int k = observed_[it->second].recreated;
        if (k < kMaxRecreations) {
          due.emplace(now + std::min<Ms>(Ms(1000), Ms(20 << std::min(k, 6))), it->second);
        }
        incarnations_.erase(it);
      }
      for (size_t i : replace_now_) due.emplace(now, i);
      replace_now_.clear();
    }
    while (!due.empty() && due.begin()->first <= SteadyClock::now() && !recreator_stop_.load()) {
      const size_t i = due.begin()->second;
      due.erase(due.begin());
      Recreate(client, i);
    }
    std::this_thread::sleep_for(Ms(20));
  }
}

// A new pod for planned_[i]: the same spec under the next name (<planned>-r<k>), as a ReplicaSet
// replaces a failed pod. It becomes the pod the report follows.
void Runner::Impl::Recreate(k8s::Client& client, size_t i) {
  PodObservation next;
  {
    std::lock_guard<std::mutex> lock(observed_mu_);
    const PodObservation& failed = observed_[i];
    next.ns = failed.ns;
    next.workload = failed.workload;
    next.recreated = failed.recreated + 1;
  }
  next.name = planned_[i].name + "-r" + std::to_string(next.recreated);
  json pod = BuildPod(scenario_, planned_[i]);
  pod["metadata"]["name"] = next.name;
  AdmitAndCreate(client, pod, std::to_string(i) + "-r" + std::to_string(next.recreated), &next);
  std::lock_guard<std::mutex> lock(observed_mu_);
  if (next.created) incarnations_[Key(next.ns, next.name)] = i;
  observed_[i] = std::move(next);
  replacing_.erase(i);
}

void Runner::Impl::CreatePods(SteadyClock::time_point start) {
  std::vector<std::thread> creators;
  const int n =
      std::max(1, std::min<int>(scenario_.pod_creators, static_cast<int>(planned_.size())));
  for (int t = 0; t < n; ++t) {
    creators.emplace_back([this, start] {
      k8s::Client& client = *admin_;
      for (size_t i; (i = next_pod_.fetch_add(1)) < planned_.size();) {
        const auto at = start + planned_[i].arrival;
        while (!abort_.load() && SteadyClock::now() < at) {
          std::this_thread::sleep_for(
              std::min<SteadyClock::duration>(at - SteadyClock::now(), Ms(50)));
        }
        if (abort_.load()) {
          observed_[i].message = "the run timed out before its arrival";
        } else {
          CreateOne(client, i);
        }
        pods_done_.fetch_add(1);
      }
    });
  }
  for (std::thread& t : creators) t.join();
}

// Every pod has an outcome: running/finished/failed, or unschedulable with the loop idle and no
// finite-duration pod left whose end could make room. *last_time: the latest start or end.
bool Runner::Impl::Settled(SystemTime* last_time) {
  if (pods_done_.load() < planned_.size()) return false;
  // Cheap test first (this runs every poll): enough pods started or ended?
  size_t expected = 0;
  for (const PodObservation& o : observed_) {
    expected += o.created && o.scheduler_name == SchedulerName() ? 1 : 0;
  }
  // A count, not Records(): copying 10,000 records (with their env maps) every poll was a
  // measurable share of the scale run's CPU.
  if (fleet_->Started() < expected && !LoopIdle()) return false;
  auto runs = ByKey(fleet_->Records());
  auto scheds = ByKey(LoopRecords());
  const bool idle = LoopIdle();
  const bool recreates = RecreatesPods();
  bool waiting_unschedulable = false, finite_running = false;
  std::lock_guard<std::mutex> lock(observed_mu_);
  if (!replacing_.empty()) return false;
  for (size_t i = 0; i < planned_.size(); ++i) {
    const PodObservation& o = observed_[i];
    if (!o.created || o.scheduler_name != SchedulerName()) continue;
    const Workload& w = scenario_.workloads[planned_[i].workload_index];
    if (o.deleted) continue;
    auto run = runs.find(Key(o.ns, o.name));
    if (run != runs.end() && (run->second.running || run->second.finished || run->second.failed)) {
      const PodRunRecord& r = run->second;
      // The ReplicaSet replaces a failed pod; its replacement has no outcome yet.
      if (recreates && r.failed && o.recreated < kMaxRecreations) return false;
      if (r.running && !r.finished && !r.failed &&
          (w.duration_seconds > 0 || w.delete_after.count() > 0)) {
        finite_running = true;
        if (w.delete_after.count() > 0) return false;  // its deletion is still to come
      }
      SystemTime t = r.finished ? r.finished_at : r.running_at;
      if (t > *last_time) *last_time = t;
      continue;
    }
    auto s = scheds.find(Key(o.ns, o.name));
    if (s == scheds.end() || s->second.bound || s->second.attempts == 0 || !idle) return false;
    waiting_unschedulable = true;
  }
  return !(waiting_unschedulable && finite_running);
}

void Runner::Impl::Observe(SystemTime settled_at, bool timed_out, ReportInput* in) {
  std::map<std::string, json> objects;
  auto pods = Retry([&] { return admin_->ListAll(k8s::resources::kPods, "", {}); });
  if (pods) {
    for (json& p : pods->items) {
      std::string key = k8s::ObjectKey(p);  // before the move: `a[k] = move(v)` evaluates v first
      objects[key] = std::move(p);
    }
  } else {
    HAMI_WARN("hami-sim: listing pods for the report: {}", pods.error().ToString().c_str());
  }
  auto runs = ByKey(fleet_->Records());
  auto scheds = ByKey(LoopRecords());
  in->filter_latencies_ms = dra_loop_ ? dra_loop_->FilterLatenciesMs() : loop_->FilterLatenciesMs();
  SystemTime first = settled_at;
  for (PodObservation o : observed_) {
    const std::string key = Key(o.ns, o.name);
    if (auto it = objects.find(key); it != objects.end()) {
      const json& obj = it->second;
      o.phase = k8s::FieldString(obj, "status.phase");
      o.node = k8s::FieldString(obj, "spec.nodeName");
      // The allocation of whichever backend placed the pod (a sim pod asks for one vendor).
      for (const device::Device* d : registry_.All()) {
        const std::string& key = d->Info().allocated_key;
        if (key.empty()) continue;
        if (auto v = k8s::Annotation(obj, key)) {
          o.allocated = *v;
          break;
        }
      }
      o.mig_allocations = k8s::Annotation(obj, protocol::kVgpuMigAllocationsKey).value_or("");
      o.bind_phase = k8s::Annotation(obj, protocol::kBindPhaseKey).value_or("");
    }
    if (auto it = scheds.find(key); it != scheds.end()) {
      o.bound = it->second.bound;
      o.bound_at = it->second.bound_at;
      o.attempts = it->second.attempts;
      o.last_failure = it->second.last_failure;
    }
    if (auto it = runs.find(key); it != runs.end()) {
      o.running = it->second.running || it->second.finished;
      o.running_at = it->second.running_at;
      if (!it->second.message.empty()) o.message = it->second.message;
      o.container_envs = it->second.container_envs;
    }
    if (o.created && o.created_at < first) first = o.created_at;
    in->pods.push_back(std::move(o));
  }
  in->first_created = first;
  in->settled_at = settled_at;
  in->timed_out = timed_out;
  if (scenario_.dra) ObserveDra(objects, in);
}

// DRA mode: the claims at the end (shares, orphans) and which claims each container uses.
void Runner::Impl::ObserveDra(const std::map<std::string, json>& pods, ReportInput* in) {
  in->dra = true;
  std::set<std::string> live_uids;
  for (const auto& [key, pod] : pods) live_uids.insert(k8s::Uid(pod));
  std::vector<json> claims;
  auto listed = Retry([&] { return admin_->ListAll(k8s::resources::kResourceClaims, "", {}); });
  if (listed) {
    claims = std::move(listed->items);
  } else {
    HAMI_WARN("hami-sim: listing claims for the report: {}", listed.error().ToString().c_str());
  }
  in->dra_claims = ObserveDraClaims(claims, live_uids);
  for (PodObservation& o : in->pods) {
    auto it = pods.find(Key(o.ns, o.name));
    if (it == pods.end()) continue;
    const json& pod = it->second;
    std::map<std::string, std::string> claim_of;  // pod's claim entry -> claim object
    for (const json& e : pod["spec"].value("resourceClaims", json::array())) {
      if (e.contains("resourceClaimName"))
        claim_of[e.value("name", "")] = e.value("resourceClaimName", "");
    }
    if (pod.contains("status")) {
      for (const json& e : pod["status"].value("resourceClaimStatuses", json::array())) {
        claim_of[e.value("name", "")] = e.value("resourceClaimName", "");
      }
    }
    for (const char* list : {"initContainers", "containers"}) {
      for (const json& c : pod["spec"].value(list, json::array())) {
        std::vector<std::string> names;
        if (c.contains("resources") && c["resources"].contains("claims")) {
          for (const json& r : c["resources"]["claims"]) {
            auto found = claim_of.find(r.value("name", ""));
            if (found != claim_of.end()) names.push_back(o.ns + "/" + found->second);
          }
        }
        o.container_claims.push_back(std::move(names));
      }
    }
  }
}

Result<Report> Runner::Impl::Run() {
  nodes_ = ExpandNodes(scenario_);
  planned_ = ExpandPods(scenario_);
  observed_.resize(planned_.size());
  for (size_t i = 0; i < planned_.size(); ++i) {
    observed_[i].ns = planned_[i].ns;
    observed_[i].name = planned_[i].name;
    observed_[i].workload = planned_[i].workload;
  }
  if (auto st = CheckFaultsSupported(); !st) return Error{st.error()};
  const auto setup_start = SteadyClock::now();
  if (auto st = StartCluster(); !st) {
    if (!options_.manifests || !api_) return Error{st.error()};
    HAMI_WARN("hami-sim: setup failed under RBAC: {}", st.error());
    return SetupFailedReport(st.error());
  }
  ReportInput in;
  in.setup_seconds = std::chrono::duration<double>(SteadyClock::now() - setup_start).count();

  Progress("creating " + std::to_string(planned_.size()) +
           " pods (each through the admission webhook first)");
  const auto start = SteadyClock::now();
  const auto deadline = start + scenario_.timeout;
  std::thread creator([this, start] { CreatePods(start); });
  if (scenario_.dra) deleter_ = std::thread([this] { DeletePodsAfter(); });
  if (RecreatesPods()) recreator_ = std::thread([this] { RecreateFailedPods(); });
  if (scenario_.process_faults.any()) {
    faults_thread_ = std::thread([this, start] { InjectFaults(start); });
  }
  bool timed_out = true;
  SystemTime settled_at{};
  // Wall time comes from the pods' own start times, so the poll period only delays the end.
  const Ms poll(planned_.size() > 100 ? 50 : 10);
  while (SteadyClock::now() < deadline) {
    SystemTime last{};
    if (Settled(&last)) {
      // Throughput counts until the last pod started, not until the leftovers were given up on.
      settled_at = last != SystemTime{} ? last : std::chrono::system_clock::now();
      timed_out = false;
      break;
    }
    std::this_thread::sleep_for(poll);
  }
  if (timed_out) {
    // Let the creators finish before reading what they wrote; nothing new is created.
    abort_.store(true);
    settled_at = std::chrono::system_clock::now();
  }
  creator.join();
  deleter_stop_.store(true);
  if (deleter_.joinable()) deleter_.join();
  recreator_stop_.store(true);
  if (recreator_.joinable()) recreator_.join();
  {
    std::lock_guard<std::mutex> lock(faults_mu_);
    faults_stop_ = true;
    faults_cv_.notify_all();
  }
  if (faults_thread_.joinable()) faults_thread_.join();
  RecoverSchedulers(&in);
  in.plugin_restarts = fleet_->PluginRestarts();
  for (const PodObservation& o : observed_) in.pods_recreated += o.recreated;

  in.scenario_name = scenario_.name;
  SetReportNodes(&in);
  in.split_count = nvidia_.device_split_count;
  in.memory_scaling = nvidia_.device_memory_scaling;
  in.core_scaling = nvidia_.device_core_scaling;
  Observe(settled_at, timed_out, &in);
  MeasureMemory(&in);
  if (options_.manifests) {
    in.rbac_enforced = true;
    in.forbidden_requests = api_->forbidden_count();
    in.forbidden = api_->ForbiddenRequests();
  }
  return BuildReport(in);
}

// hami-scheduler's replicas (sim/scheduler_set.h): one, or several electing a leader on a Lease.
Status Runner::Impl::StartSchedulers(const std::string& token, scheduler::ServerOptions server) {
  Progress("starting hami-scheduler" +
           (scenario_.scheduler_replicas > 1
                ? " x" + std::to_string(scenario_.scheduler_replicas) + " (leader election)"
                : std::string()) +
           (scenario_.dra ? " (the admission webhook with --dra, over loopback HTTP)"
                          : " (extender + admission webhook over loopback HTTP)"));
  SchedulerSetOptions set;
  set.replicas = scenario_.scheduler_replicas;
  set.server = std::move(server);
  set.device_config = scenario_.device_config;
  set.election = scenario_.leader_election;
  set.new_client = [this, token]() -> k8s::Client& { return NewClient(token); };
  if (scenario_.process_faults.scheduler_clock_skew.count() != 0) {
    scheduler_clock_ =
        std::make_unique<SkewedClock>(RealClock(), scenario_.process_faults.scheduler_clock_skew);
    set.clock = scheduler_clock_.get();
  }
  schedulers_ = std::make_unique<SchedulerSet>(std::move(set));
  const std::chrono::seconds sync_wait = SetupWait(std::chrono::seconds(60));
  return schedulers_->Start(sync_wait);
}

// Faults hami-sim cannot inject yet are refused rather than silently skipped.
Status Runner::Impl::CheckFaultsSupported() const {
  const ProcessFaults& f = scenario_.process_faults;
  if (options_.manifests && (f.any() || scenario_.scheduler_replicas > 1)) {
    return Error{"faults: process faults and schedulerReplicas > 1 do not run with --manifests"};
  }
  return OkStatus();
}

void Runner::Impl::InjectFaults(SteadyClock::time_point start) {
  const ProcessFaults& f = scenario_.process_faults;
  // (offset, event) in time order; a restart is queued `down` after its strike.
  std::multimap<Ms, FaultEvent> queue;
  for (auto [key, schedule] :
       {std::pair{"killScheduler", &f.kill_scheduler}, std::pair{"killPlugin", &f.kill_plugin},
        std::pair{"restartKubelet", &f.restart_kubelet},
        std::pair{"restartApiServer", &f.restart_api_server},
        std::pair{"unhealthyGpu", &f.unhealthy_gpu}, std::pair{"deleteNode", &f.delete_node}}) {
    for (Ms t : schedule->Times(scenario_.timeout)) queue.emplace(t, FaultEvent{key});
  }
  std::mt19937_64 rng(f.seed);
  std::unique_lock<std::mutex> lock(faults_mu_);
  while (!faults_stop_ && !queue.empty()) {
    auto next = queue.begin();
    if (faults_cv_.wait_until(lock, start + next->first, [&] { return faults_stop_; })) break;
    const FaultEvent event = next->second;
    const Ms at = next->first;
    queue.erase(next);
    lock.unlock();
    if (event.fault == "restartScheduler" || event.fault == "restartPlugin" ||
        event.fault == "startKubelet" || event.fault == "startApiServer" ||
        event.fault == "healthyGpu" || event.fault == "podGC" || event.fault == "restoreNode") {
      Restart(event);
    } else {
      Strike(event.fault, rng, at, &queue);
    }
    lock.lock();
  }
  lock.unlock();
  // What was struck comes back even when the run ended first (the scheduler replicas:
  // RecoverSchedulers).
  for (const auto& [at, event] : queue) {
    if (event.fault == "restartPlugin" || event.fault == "startKubelet" ||
        event.fault == "startApiServer" || event.fault == "healthyGpu" ||
        event.fault == "restoreNode") {
      Restart(event);
    }
  }
}

void Runner::Impl::Restart(const FaultEvent& event) {
  Status st = OkStatus();
  if (event.fault == "restartScheduler") {
    for (int i = 0; i < schedulers_->replicas(); ++i) {
      if (schedulers_->Alive(i)) continue;
      if (auto s = schedulers_->Restart(i); !s) HAMI_WARN("hami-sim: {}", s.error());
    }
  } else if (event.fault == "restartPlugin") {
    st = fleet_->RestartPlugin(event.node);
  } else if (event.fault == "startKubelet") {
    st = fleet_->StartKubelet(event.node);
  } else if (event.fault == "startApiServer") {
    st = api_->ResumeServing();
  } else if (event.fault == "podGC") {
    {
      std::lock_guard<std::mutex> lock(faults_mu_);
      if (deleted_nodes_.count(event.node) == 0) return;  // back already
    }
    DeletePodsOn(nodes_[event.node].name);
  } else if (event.fault == "restoreNode") {
    st = fleet_->RecreateNode(event.node);
    std::lock_guard<std::mutex> lock(faults_mu_);
    deleted_nodes_.erase(event.node);
  } else if (event.fault == "healthyGpu") {
    st = fleet_->SetGpuHealth(event.node, event.gpu, true);
    std::lock_guard<std::mutex> lock(faults_mu_);
    unhealthy_.erase({event.node, event.gpu});
  }
  if (!st) HAMI_WARN("hami-sim: {}", st.error());
}

void Runner::Impl::DeletePodsOn(const std::string& node) {
  k8s::ListOptions on_node;
  on_node.field_selector = "spec.nodeName=" + node;
  auto pods = Retry([&] { return admin_->ListAll(k8s::resources::kPods, "", on_node); });
  if (!pods) {
    HAMI_WARN("hami-sim: deleteNode: listing the pods on {}: {}", node, pods.error().ToString());
    return;
  }
  for (const json& pod : pods->items) {
    const std::string ns = k8s::Namespace(pod), name = k8s::Name(pod);
    auto gone = Retry([&] {
      auto d = admin_->Delete(k8s::resources::kPods, ns, name);
      return d || k8s::IsNotFound(d.error());
    });
    if (!gone) {
      HAMI_WARN("hami-sim: deleteNode: cannot delete pod {}/{}", ns, name);
      continue;
    }
    std::lock_guard<std::mutex> lock(observed_mu_);
    auto it = incarnations_.find(Key(ns, name));
    if (it == incarnations_.end()) continue;
    replace_now_.push_back(it->second);
    replacing_.insert(it->second);
    incarnations_.erase(it);
  }
}

std::optional<size_t> Runner::Impl::PickNode(std::mt19937_64& rng,
                                             const std::function<bool(size_t)>& ok) {
  std::vector<size_t> candidates;
  for (size_t i = 0; i < fleet_->size(); ++i) {
    if (ok(i)) candidates.push_back(i);
  }
  if (candidates.empty()) return std::nullopt;
  return candidates[rng() % candidates.size()];
}

void Runner::Impl::Strike(const std::string& fault, std::mt19937_64& rng, Ms at,
                          std::multimap<Ms, FaultEvent>* queue) {
  const ProcessFaults& f = scenario_.process_faults;
  bool struck = false;
  if (fault == "killPlugin") {
    // A node whose plugin and kubelet both run: one fault per node at a time.
    auto node =
        PickNode(rng, [&](size_t i) { return fleet_->PluginAlive(i) && fleet_->KubeletUp(i); });
    if (node && fleet_->KillPlugin(*node)) {
      struck = true;
      queue->emplace(at + f.kill_plugin.down, FaultEvent{"restartPlugin", *node});
    }
  } else if (fault == "restartKubelet") {
    auto node =
        PickNode(rng, [&](size_t i) { return fleet_->PluginAlive(i) && fleet_->KubeletUp(i); });
    if (node && fleet_->StopKubelet(*node)) {
      struck = true;
      queue->emplace(at + f.restart_kubelet.down, FaultEvent{"startKubelet", *node});
    }
  } else if (fault == "deleteNode") {
    auto node = PickNode(rng, [&](size_t i) {
      std::lock_guard<std::mutex> lock(faults_mu_);
      return fleet_->PluginAlive(i) && fleet_->KubeletUp(i) && deleted_nodes_.count(i) == 0;
    });
    if (!node) return;
    {
      std::lock_guard<std::mutex> lock(faults_mu_);
      deleted_nodes_.insert(*node);
    }
    // The machine goes away, then its Node object; the node lifecycle controller deletes the
    // pods bound to it, and the pod GC those bound to it afterwards (a bind racing the delete).
    fleet_->StopKubelet(*node);
    fleet_->KillPlugin(*node);
    const std::string& name = nodes_[*node].name;
    auto deleted = Retry([&] {
      auto d = admin_->Delete(k8s::resources::kNodes, "", name);
      return d || k8s::IsNotFound(d.error());
    });
    if (!deleted) HAMI_WARN("hami-sim: deleteNode: cannot delete node {}", name);
    DeletePodsOn(name);
    struck = true;
    queue->emplace(at + Ms(2000), FaultEvent{"podGC", *node});
    if (f.delete_node.down.count() > 0) {
      queue->emplace(at + f.delete_node.down, FaultEvent{"restoreNode", *node});
    }
  } else if (fault == "unhealthyGpu") {
    // A GPU of an NVIDIA node not struck already; healthy again after `down` (0: never).
    std::set<std::pair<size_t, size_t>> struck_gpus;
    {
      std::lock_guard<std::mutex> lock(faults_mu_);
      struck_gpus = unhealthy_;
    }
    std::vector<std::pair<size_t, size_t>> candidates;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i].vendor.empty() || !fleet_->PluginAlive(i)) continue;
      for (size_t g = 0; g < nodes_[i].gpus.size(); ++g) {
        if (struck_gpus.count({i, g}) == 0) candidates.emplace_back(i, g);
      }
    }
    if (candidates.empty()) return;
    const auto [node, gpu] = candidates[rng() % candidates.size()];
    if (Status st = fleet_->SetGpuHealth(node, gpu, false); !st) {
      HAMI_WARN("hami-sim: {}", st.error());
      return;
    }
    struck = true;
    {
      std::lock_guard<std::mutex> lock(faults_mu_);
      unhealthy_.insert({node, gpu});
    }
    if (f.unhealthy_gpu.down.count() > 0) {
      queue->emplace(at + f.unhealthy_gpu.down, FaultEvent{"healthyGpu", node, gpu});
    }
  } else if (fault == "restartApiServer") {
    // Storage kept, watch history lost: watches resume with 410 and relist.
    api_->StopServing();
    struck = true;
    queue->emplace(at + f.restart_api_server.down, FaultEvent{"startApiServer"});
  } else if (fault == "killScheduler") {
    const int n = schedulers_->replicas();
    const int leader = schedulers_->Leader();
    std::vector<int> candidates;
    for (int i = 0; i < n; ++i) {
      if (!schedulers_->Alive(i)) continue;
      switch (f.kill_scheduler_target) {
        case KillTarget::kAny:
          candidates.push_back(i);
          break;
        case KillTarget::kLeader:
          if (i == leader) candidates.push_back(i);
          break;
        case KillTarget::kFollower:
          if (i != leader) candidates.push_back(i);
          break;
      }
    }
    // Nobody to kill now (all down, or no leader yet); and a strike while no replica serves
    // would measure two failovers as one, so it waits for the next.
    if (candidates.empty() || schedulers_->Serving() < 0) return;
    const int victim = candidates[rng() % candidates.size()];
    if (schedulers_->Kill(victim)) {
      struck = true;
      queue->emplace(at + f.kill_scheduler.down, FaultEvent{"restartScheduler"});
    }
  }
  if (struck) {
    std::lock_guard<std::mutex> lock(faults_mu_);
    ++faults_injected_[fault];
  }
}

void Runner::Impl::RecoverSchedulers(ReportInput* in) {
  if (schedulers_) {
    for (int i = 0; i < schedulers_->replicas(); ++i) {
      if (schedulers_->Alive(i)) continue;
      if (auto st = schedulers_->Restart(i); !st) HAMI_WARN("hami-sim: {}", st.error());
    }
    // The lease of a killed leader runs out first.
    const auto deadline =
        SteadyClock::now() + scenario_.leader_election.lease_duration + std::chrono::seconds(30);
    while (schedulers_->Serving() < 0 && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(Ms(20));
    }
    if (schedulers_->Serving() >= 0) {
      auto counted = ScrapeCountedAllocations(schedulers_->MetricsPort());
      if (counted) {
        in->scheduler_counted = std::move(*counted);
      } else {
        HAMI_WARN("hami-sim: asking hami-scheduler what it counts: {}", counted.error());
      }
    }
    const SchedulerSetStats stats = schedulers_->Stats();
    in->scheduler_restarts = stats.restarts;
    in->leader_changes = stats.leader_changes;
    in->failover_seconds_max = stats.failover_seconds_max;
  }
  std::lock_guard<std::mutex> lock(faults_mu_);
  in->faults_injected = faults_injected_;
}

// The monitors' view of each GPU (issue 13 item 3): what the containers with a `usage:` use,
// scraped from every node's /metrics.
void Runner::Impl::MeasureMemory(ReportInput* in) {
  if (!monitors_) return;
  size_t want = 0;  // containers whose region the kubelet wrote
  for (size_t i = 0; i < planned_.size() && i < in->pods.size(); ++i) {
    if (!in->pods[i].running) continue;
    for (const ContainerSpec& c : scenario_.workloads[planned_[i].workload_index].containers) {
      want += c.usage && c.resources.count(std::string(protocol::kNvidiaCountResource)) > 0 ? 1 : 0;
    }
  }
  auto measured = monitors_->MeasuredMemoryMiB(want, std::chrono::seconds(5));
  if (!measured) {
    HAMI_WARN("hami-sim: measured memory: {}", measured.error());
    return;
  }
  in->measured = true;
  in->measured_memory_mib = std::move(*measured);
}

std::vector<MonitorAddress> Runner::Impl::MonitorAddresses() const {
  return monitors_ ? monitors_->Addresses() : std::vector<MonitorAddress>{};
}

void Runner::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  auto timed = [](const char* what, auto&& f) {
    auto t0 = SteadyClock::now();
    f();
    HAMI_VLOG(1, "hami-sim: {} stopped in {} ms", what,
              std::chrono::duration_cast<Ms>(SteadyClock::now() - t0).count());
  };
  // Each component waits for its watches to notice the stop (up to a second per informer);
  // stopping them side by side keeps `make demo` short.
  std::vector<std::thread> stoppers;
  if (elector_) {
    elector_->Stop();
    if (elector_thread_.joinable()) elector_thread_.join();
  }
  if (loop_) stoppers.emplace_back([&] { timed("kube-scheduler loop", [&] { loop_->Stop(); }); });
  if (dra_loop_) {
    stoppers.emplace_back([&] { timed("kube-scheduler loop", [&] { dra_loop_->Stop(); }); });
  }
  if (claim_controller_) {
    stoppers.emplace_back([&] { timed("claim controller", [&] { claim_controller_->Stop(); }); });
  }
  {
    std::lock_guard<std::mutex> lock(faults_mu_);
    faults_stop_ = true;
    faults_cv_.notify_all();
  }
  if (faults_thread_.joinable()) faults_thread_.join();
  if (schedulers_) {
    stoppers.emplace_back([&] { timed("hami-scheduler", [&] { schedulers_->Stop(); }); });
  }
  if (fleet_) stoppers.emplace_back([&] { timed("kubelets", [&] { fleet_->Stop(); }); });
  if (monitors_) stoppers.emplace_back([&] { timed("monitors", [&] { monitors_->Stop(); }); });
  for (std::thread& t : stoppers) t.join();
  if (api_) timed("API server", [&] { api_->Stop(); });
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

Runner::Runner(Scenario scenario, RunOptions options)
    : impl_(std::make_unique<Impl>(std::move(scenario), std::move(options))) {}
Runner::~Runner() = default;
Result<Report> Runner::Run() { return impl_->Run(); }
void Runner::Stop() { impl_->Stop(); }
void Runner::AdmitApiPods() {
  Impl* impl = impl_.get();
  auto next_uid = std::make_shared<std::atomic<uint64_t>>(0);
  impl->api()->SetPodAdmission([impl, next_uid](const json& pod) -> k8s::ApiResult<json> {
    const int port = impl->WebhookPort();
    if (port <= 0) return pod;
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(std::chrono::seconds(30));
    http.set_tcp_nodelay(true);
    auto admitted = Admit(http, pod, "serve-" + std::to_string(next_uid->fetch_add(1)));
    if (!admitted) {
      HAMI_WARN("hami-sim: pod {}: {} (failurePolicy Ignore: stored as sent)",
                Quote(k8s::Name(pod)), admitted.error());
      return pod;
    }
    if (admitted->denied) {
      return k8s::ApiError{
          400, "BadRequest",
          "admission webhook \"vgpu.hami.io\" denied the request: " + admitted->message};
    }
    return admitted->pod;
  });
}
ApiServer* Runner::api() { return impl_->api(); }
std::vector<MonitorAddress> Runner::monitors() const { return impl_->MonitorAddresses(); }
int Runner::scheduler_metrics_port() const { return impl_->SchedulerMetricsPort(); }

}  // namespace hami::sim
