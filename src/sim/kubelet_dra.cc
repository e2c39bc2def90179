// DRA mode of the simulated kubelets (sim/kubelet.h; docs/DRA.md "hami-sim in DRA mode"): each
// NVIDIA node's hami-dra-plugin (the real draplugin::DraAgent, in-process) and the kubelet's side
// of it, as kubelet's DRA manager does it: the plugin registered through pluginregistration, a
// pod's claims waited for until allocated and reserved for it, NodePrepareResources, the CDI
// devices of the answer resolved into the containers' env, NodeUnprepareResources after the pod.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/log.h"
#include "common/strings.h"
#include "dra/v1/api.grpc.pb.h"
#include "draplugin/slices.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "sim/kubelet_impl.h"

namespace hami::sim {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
using nlohmann::json;

namespace {

constexpr std::chrono::milliseconds kFirstBackoff{20};

std::chrono::milliseconds Backoff(int attempt, std::chrono::milliseconds max) {
  const int n = std::min(attempt, 16);
  return std::min(max, kFirstBackoff * (1 << n));
}

// "K=V" entries and mounts of one containerEdits object.
void AddEdits(const json& edits, CdiEdits* out) {
  if (!edits.is_object()) return;
  for (const json& e : edits.value("env", json::array())) {
    if (!e.is_string()) continue;
    const std::string kv = e.get<std::string>();
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) out->env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const json& m : edits.value("mounts", json::array())) {
    if (m.is_object() && m.contains("containerPath") && m.contains("hostPath"))
      out->mounts[m.value("containerPath", "")] = m.value("hostPath", "");
  }
}

std::string CallError(const grpc::Status& s) {
  return "gRPC code " + std::to_string(static_cast<int>(s.error_code())) + ": " + s.error_message();
}

// One call of the plugin's DRAPlugin service for `claims` as kubelet's DRA manager makes it:
// every claim in one request, with a 30 s deadline.
template <typename Request, typename Response>
grpc::Status CallForClaims(
    const std::shared_ptr<grpc::Channel>& channel, const std::vector<DraClaimRef>& claims,
    grpc::Status (drapb::DRAPlugin::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    Response* resp) {
  Request req;
  for (const DraClaimRef& c : claims) {
    drapb::Claim* rc = req.add_claims();
    rc->set_namespace_(c.ns);
    rc->set_uid(c.uid);
    rc->set_name(c.name);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stub = drapb::DRAPlugin::NewStub(channel);
  return (stub.get()->*method)(&ctx, req, resp);
}

}  // namespace

Result<CdiEdits> ResolveCdiDevices(const std::string& cdi_dir,
                                   const std::vector<std::string>& ids) {
  std::vector<json> specs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(cdi_dir, ec)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    json spec = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (spec.is_object()) specs.push_back(std::move(spec));
  }
  CdiEdits out;
  std::set<const json*> applied;  // each spec's own edits once, whatever number of its devices
  for (const std::string& id : ids) {
    const size_t eq = id.find('=');
    const std::string kind = id.substr(0, eq),
                      name = eq == std::string::npos ? "" : id.substr(eq + 1);
    bool found = false;
    for (const json& spec : specs) {
      if (spec.value("kind", "") != kind) continue;
      for (const json& device : spec.value("devices", json::array())) {
        if (!device.is_object() || device.value("name", "") != name) continue;
        if (applied.insert(&spec).second) AddEdits(spec.value("containerEdits", json()), &out);
        AddEdits(device.value("containerEdits", json()), &out);
        found = true;
        break;
      }
      if (found) break;
    }
    if (!found) {
      return Error{"unresolvable CDI device " + Quote(id) + " (no spec in " + Quote(cdi_dir) +
                   " defines it)"};
    }
  }
  return out;
}

// Starts the node's hami-dra-plugin (it publishes the pool and serves) and registers it.
Status KubeletFleet::Impl::StartDraPlugin(size_t index) {
  Node& node = *nodes_[index];
  node.dir = options_.socket_dir + "/" + std::to_string(index);
  std::error_code ec;
  std::filesystem::create_directories(node.dir, ec);
  if (ec) return Error{"create " + Quote(node.dir) + ": " + ec.message()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    node.unhealthy.resize(node.spec.gpus.size(), false);
  }
  // The scenario's GPUs (MIG profiles included, which an inventory file cannot say) with the
  // health the unhealthyGpu fault sets.
  node.discovery = std::make_unique<StaticDiscovery>(node.spec.gpus, &node.unhealthy, &mu_);
  std::map<uint32_t, dp::SimulatedMigDriver::Gpu> mig_gpus;
  bool any_mig = false;
  for (const dp::GpuDevice& g : node.spec.gpus) {
    mig_gpus[g.index] = {g.model, g.memory_mib, !g.mig_profiles.empty(), g.uuid};
    any_mig = any_mig || !g.mig_profiles.empty();
  }
  if (any_mig && !node.mig_driver) {
    node.mig_driver = std::make_unique<dp::SimulatedMigDriver>(std::move(mig_gpus));
  }
  draplugin::AgentOptions o;
  o.discovery.node_name = node.spec.name;
  o.discovery_source = node.discovery.get();
  // MIG claims are prepared through the simulated driver, under a lock file of the node's own.
  o.mig_driver = node.mig_driver.get();
  o.mig_lock_path = node.dir + "/mig.lock";
  o.discovery.config = options_.plugin_config;
  o.server.registrar_dir = node.dir + "/reg";
  o.server.plugin_dir = node.dir + "/dra";
  o.prepare.hook_path = HookPath();
  o.prepare.cdi_dir = node.dir + "/cdi";
  o.prepare.nvidia_cdi_kind = "";  // no Container Toolkit spec here
  o.device_plugin_socket = "";     // the fleet never runs both on a node
  k8s::Client* api = options_.plugin_client ? options_.plugin_client : &client_;
  const Clock& clock = options_.plugin_clock ? *options_.plugin_clock : clock_;
  std::string last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
    // Start publishes the pool; an injected API error fails it, and a new process tries again.
    auto agent = std::make_unique<draplugin::DraAgent>(o, api, clock);
    Status s = agent->Start();
    if (s) {
      node.dra = std::move(agent);
      return RegisterDraPlugin(index);
    }
    last = s.error();
  }
  return Error{"node " + Quote(node.spec.name) + ": hami-dra-plugin: " + last};
}

// kubelet's plugin watcher and DRA manager: GetInfo on the registration socket, the answer
// checked (type DRAPlugin, our driver, v1.DRAPlugin offered), NotifyRegistrationStatus.
Status KubeletFleet::Impl::RegisterDraPlugin(size_t index) {
  Node& node = *nodes_[index];
  const std::string socket = node.dra->server()->registration_socket();
  auto reg = ::pluginregistration::Registration::NewStub(
      grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials()));
  ::pluginregistration::PluginInfo info;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.set_wait_for_ready(true);
    grpc::Status s = reg->GetInfo(&ctx, ::pluginregistration::InfoRequest(), &info);
    if (!s.ok()) return Error{"GetInfo on " + Quote(socket) + ": " + CallError(s)};
  }
  std::string problem;
  const auto& versions = info.supported_versions();
  if (info.type() != "DRAPlugin") {
    problem = "type " + Quote(info.type()) + " is not \"DRAPlugin\"";
  } else if (info.name() != draplugin::kDriverName) {
    problem = "name " + Quote(info.name()) + " is not " + Quote(draplugin::kDriverName);
  } else if (std::find(versions.begin(), versions.end(), "v1.DRAPlugin") == versions.end()) {
    problem = "supported_versions lacks \"v1.DRAPlugin\"";
  }
  ::pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(problem.empty());
  status.set_error(problem);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ::pluginregistration::RegistrationStatusResponse ignored;
  grpc::Status s = reg->NotifyRegistrationStatus(&ctx, status, &ignored);
  if (!problem.empty()) return Error{"node " + Quote(node.spec.name) + ": plugin " + problem};
  if (!s.ok()) return Error{"NotifyRegistrationStatus on " + Quote(socket) + ": " + CallError(s)};
  const std::string endpoint = info.endpoint().empty() ? socket : info.endpoint();
  std::lock_guard<std::mutex> lock(mu_);
  node.dra_channel = grpc::CreateChannel("unix://" + endpoint, grpc::InsecureChannelCredentials());
  node.registered = true;
  ++node.registrations;
  return OkStatus();
}

Status KubeletFleet::Impl::SetDraGpuHealth(size_t index) {
  Node& node = *nodes_[index];
  if (!node.dra) return OkStatus();  // seen when it starts
  Status refreshed = Error{"not refreshed"};
  for (int attempt = 0; attempt < 20 && !refreshed; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
    refreshed = node.dra->Refresh();  // the plugin's health check: a taint on the device
  }
  if (!refreshed) {
    return Error{"node " + Quote(node.spec.name) + ": publish GPU health: " + refreshed.error()};
  }
  return OkStatus();
}

// The pod's claims: ready (allocated, reserved for the pod) and prepared, or a wait or failure.
KubeletFleet::Impl::DraAdmission KubeletFleet::Impl::AdmitDra(const std::string& key,
                                                              const json& pod, size_t index) {
  Node& node = *nodes_[index];
  DraAdmission out;
  const std::string ns = k8s::Namespace(pod), uid = k8s::Uid(pod);
  std::map<std::string, std::string> generated;  // entry -> claim, from the claim controller
  const json status = pod.value("status", json::object());
  for (const json& s : status.value("resourceClaimStatuses", json::array())) {
    if (s.is_object()) generated[s.value("name", "")] = s.value("resourceClaimName", "");
  }
  auto wait = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    PodRun& run = runs_[key];
    if (++run.wait_attempts % 50 == 0) HAMI_INFO("pod {}: still waiting: {}", key, why);
    timers_.emplace(
        std::chrono::steady_clock::now() + Backoff(run.wait_attempts, options_.dra_max_backoff),
        timer_seq_++, key, Step::kAdmit);
    cv_.notify_one();
    out.kind = DraAdmission::kWait;
    return out;
  };
  std::vector<DraClaimRef> claims;
  std::map<std::string, std::string> entry_uid;  // pod claim entry -> claim uid
  for (const json& entry : pod["spec"]["resourceClaims"]) {
    if (!entry.is_object()) continue;
    const std::string name = entry.value("name", "");
    std::string claim = entry.value("resourceClaimName", "");
    if (claim.empty() && !entry.value("resourceClaimTemplateName", "").empty()) {
      claim = generated.count(name) > 0 ? generated[name] : "";
      if (claim.empty()) return wait("claim " + Quote(name) + " not generated yet");
    }
    if (claim.empty()) continue;
    auto got = client_.Get(k8s::resources::kResourceClaims, ns, claim);
    if (!got) return wait("ResourceClaim " + ns + "/" + claim + ": " + got.error().ToString());
    bool reserved = false;
    const json cs = got->value("status", json::object());
    for (const json& r : cs.value("reservedFor", json::array())) {
      reserved = reserved || (r.is_object() && r.value("uid", "") == uid);
    }
    if (!cs.contains("allocation") || !reserved) {
      return wait("ResourceClaim " + ns + "/" + claim + " not allocated and reserved for the pod");
    }
    entry_uid[name] = k8s::Uid(*got);
    claims.push_back({ns, k8s::Uid(*got), claim});
  }
  std::shared_ptr<grpc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    channel = node.dra_channel;
    PodRun& run = runs_[key];
    if (run.done) {  // deleted meanwhile: nothing to prepare
      out.kind = DraAdmission::kWait;
      return out;
    }
    // Recorded before the call: Unprepare of a claim the plugin never prepared is a no-op.
    run.claims = claims;
    for (const DraClaimRef& c : claims) node.claim_users[c.uid].insert(key);
  }
  if (claims.empty()) return out;
  std::string error;
  drapb::NodePrepareResourcesResponse resp;
  if (!channel) {
    error = "DRA driver " + std::string(draplugin::kDriverName) + " is not registered";
  } else {
    grpc::Status s =
        CallForClaims(channel, claims, &drapb::DRAPlugin::Stub::NodePrepareResources, &resp);
    if (!s.ok()) error = "NodePrepareResources: " + CallError(s);
  }
  for (const DraClaimRef& c : claims) {
    if (!error.empty()) break;
    auto it = resp.claims().find(c.uid);
    if (it == resp.claims().end()) {
      error = "NodePrepareResources: no answer for claim " + c.ns + "/" + c.name;
    } else if (!it->second.error().empty()) {
      error = "prepare claim " + c.ns + "/" + c.name + ": " + it->second.error();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    PodRun& run = runs_[key];
    if (run.done) {  // deleted during the call (maybe unprepared before it): undo it again
      run.claims = claims;
      for (const DraClaimRef& c : claims) node.claim_users[c.uid].insert(key);
      ReleaseIds(key, run);
      out.kind = DraAdmission::kWait;
      return out;
    }
  }
  std::map<std::string, CdiEdits> by_uid;
  for (const DraClaimRef& c : claims) {
    if (!error.empty()) break;
    std::vector<std::string> ids;
    for (const auto& d : resp.claims().at(c.uid).devices())
      ids.insert(ids.end(), d.cdi_device_ids().begin(), d.cdi_device_ids().end());
    auto edits = ResolveCdiDevices(node.dir + "/cdi", ids);
    if (!edits) {
      error = "claim " + c.ns + "/" + c.name + ": " + edits.error();
    } else {
      by_uid[c.uid] = std::move(*edits);
    }
  }
  if (error.empty()) {
    for (const auto& [entry, claim_uid] : entry_uid) out.edits[entry] = by_uid[claim_uid];
    return out;
  }
  // kubelet retries a failed prepare; the sim gives up after dra_prepare_attempts.
  (void)client_.RecordEvent(pod, "Warning", "FailedPrepareDynamicResources", error, "kubelet");
  std::lock_guard<std::mutex> lock(mu_);
  PodRun& run = runs_[key];
  if (++run.prepare_attempts < std::max(1, options_.dra_prepare_attempts) && !stopping_) {
    timers_.emplace(
        std::chrono::steady_clock::now() + Backoff(run.prepare_attempts, options_.dra_max_backoff),
        timer_seq_++, key, Step::kAdmit);
    cv_.notify_one();
    out.kind = DraAdmission::kWait;
    return out;
  }
  out.kind = DraAdmission::kFail;
  out.message = error;
  return out;
}

// NodeUnprepareResources for the claims the pod's end left unused on the node; retried.
void KubeletFleet::Impl::Unprepare(const std::string& key) {
  std::vector<DraClaimRef> claims;
  std::shared_ptr<grpc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PodRun& run = runs_[key];
    claims = run.unprepare;
    channel = nodes_[run.node]->dra_channel;
  }
  if (claims.empty() || !channel) return;
  drapb::NodeUnprepareResourcesResponse resp;
  grpc::Status s =
      CallForClaims(channel, claims, &drapb::DRAPlugin::Stub::NodeUnprepareResources, &resp);
  std::vector<DraClaimRef> left;
  std::string error = s.ok() ? "" : CallError(s);
  for (const DraClaimRef& c : claims) {
    auto it = resp.claims().find(c.uid);
    if (!s.ok() || it == resp.claims().end() || !it->second.error().empty()) {
      left.push_back(c);
      if (error.empty() && it != resp.claims().end()) error = it->second.error();
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  PodRun& run = runs_[key];
  run.unprepare = left;
  if (left.empty() || stopping_) return;
  if (++run.unprepare_attempts >= 10) {
    HAMI_WARN("pod {}: NodeUnprepareResources: {} (giving up)", key, error);
    return;
  }
  timers_.emplace(
      std::chrono::steady_clock::now() + Backoff(run.unprepare_attempts, options_.dra_max_backoff),
      timer_seq_++, key, Step::kUnprepare);
  cv_.notify_one();
}

}  // namespace hami::sim
