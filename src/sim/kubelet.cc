#include "sim/kubelet.h"

#include <algorithm>
#include <cstdlib>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/object.h"
#include "sim/kubelet_impl.h"

namespace hami::sim {

namespace res = k8s::resources;
using nlohmann::json;

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

// Only what the kubelet reads is cached.
json TrimPod(json pod) {
  json out;
  if (pod.contains("metadata")) out["metadata"] = std::move(pod["metadata"]);
  if (out.contains("metadata")) out["metadata"].erase("managedFields");
  if (pod.contains("spec")) {
    json& spec = pod["spec"];
    out["spec"]["nodeName"] = spec.value("nodeName", "");
    if (spec.contains("resourceClaims")) out["spec"]["resourceClaims"] = spec["resourceClaims"];
    for (const char* list : {"initContainers", "containers"}) {
      if (!spec.contains(list) || !spec[list].is_array()) continue;
      for (json& c : spec[list]) {
        out["spec"][list].push_back(
            {{"name", c.value("name", "")}, {"resources", c.value("resources", json::object())}});
      }
    }
  }
  if (pod.contains("status")) {
    out["status"]["phase"] = pod["status"].value("phase", "");
    if (pod["status"].contains("resourceClaimStatuses"))
      out["status"]["resourceClaimStatuses"] = pod["status"]["resourceClaimStatuses"];
  }
  return out;
}

bool PodTerminal(const json& pod) {
  const std::string phase = k8s::FieldString(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

}  // namespace

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
  {
    std::lock_guard<std::mutex> lock(mu_);
    registered_cv_.notify_all();
  }
  for (auto& node : nodes_) {
    std::lock_guard<std::mutex> process(node->process_mu);
    if (node->plugin) node->plugin->Stop();
    if (node->vendor) node->vendor->Stop();
    if (node->dra) node->dra->Stop();
    if (node->registration) node->registration->Shutdown(std::chrono::system_clock::now());
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
  ReleaseIds(it->first, it->second);
  // A pod ended by someone else (deleted, or failed by another writer) takes no more steps; our
  // own terminal patches come back here too and find `done` already set.
  it->second.done = true;
}

void KubeletFleet::Impl::ReleaseIds(const std::string& key, PodRun& run) {
  Node& node = *nodes_[run.node];
  for (const std::string& id : run.ids) node.in_use.erase(id);
  run.ids.clear();
  for (const DraClaimRef& c : run.claims) {
    auto users = node.claim_users.find(c.uid);
    if (users == node.claim_users.end()) continue;
    users->second.erase(key);
    if (!users->second.empty()) continue;  // another pod of the node still uses it
    node.claim_users.erase(users);
    run.unprepare.push_back(c);
  }
  run.claims.clear();
  if (!run.unprepare.empty() && !stopping_) {
    timers_.emplace(std::chrono::steady_clock::now(), timer_seq_++, key, Step::kUnprepare);
    cv_.notify_one();
  }
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
    if (it == runs_.end() || (it->second.done && step != Step::kUnprepare)) return;
  }
  if (step == Step::kUnprepare) {
    Unprepare(key);
  } else if (step == Step::kAdmit) {
    Admit(key);
  } else {
    PatchStatus(key, step);
  }
}

void KubeletFleet::Impl::Admit(const std::string& key) {
  k8s::ObjectRef pod = pods_->Get(key);
  size_t index = 0;
  std::shared_ptr<VendorPlugin> vendor;  // null while a vendor node's plugin is away
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = runs_[key].node;
    // A restarting kubelet admits the pod once it is back.
    if (pod && nodes_[index]->kubelet_down) {
      timers_.emplace(std::chrono::steady_clock::now() + std::chrono::milliseconds(20),
                      timer_seq_++, key, Step::kAdmit);
      cv_.notify_one();
      return;
    }
    if (nodes_[index]->registered) vendor = nodes_[index]->vendor;
  }
  if (!pod) {
    std::lock_guard<std::mutex> lock(mu_);
    runs_[key].done = true;
    return;
  }
  std::vector<std::map<std::string, std::string>> envs;
  std::string error;
  const auto usage = PodUsage(*pod);
  const bool vendor_node = !nodes_[index]->spec.vendor.empty();
  const bool dra_node = DraNode(index);
  DraAdmission dra;
  if (dra_node && (*pod)["spec"].contains("resourceClaims")) {
    dra = AdmitDra(key, *pod, index);
    if (dra.kind == DraAdmission::kWait) return;  // admitted again later
    if (dra.kind == DraAdmission::kFail) error = dra.message;
  }
  const std::string& resource =
      vendor_node ? nodes_[index]->vendor_resource : options_.plugin_config.resource_name;
  for (const char* list : {"initContainers", "containers"}) {
    if (!error.empty() || !(*pod)["spec"].contains(list)) continue;
    for (const json& c : (*pod)["spec"][list]) {
      const int64_t n = ContainerDeviceCount(c, resource);
      if (dra_node) {
        if (n > 0) {
          error = "node " + nodes_[index]->spec.name + " is in DRA mode: no device plugin serves " +
                  resource;
          break;
        }
        std::map<std::string, std::string> env, mounts;
        bool named = false;
        const json claims = c.value("resources", json::object()).value("claims", json::array());
        for (const json& ref : claims) {
          auto e = dra.edits.find(ref.is_object() ? ref.value("name", "") : "");
          if (e == dra.edits.end()) continue;
          named = true;
          for (const auto& [k, v] : e->second.env) env[k] = v;
          for (const auto& [k, v] : e->second.mounts) mounts[k] = v;
        }
        if (!named) continue;
        WriteUsage(*pod, c.value("name", ""), usage, env, mounts);
        envs.push_back(std::move(env));
        continue;
      }
      if (n <= 0) continue;
      auto r =
          vendor_node ? VendorAllocate(vendor.get(), resource) : AllocateContainer(index, key, n);
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
      ReleaseIds(key, run);
    }
  }
  PatchStatus(key, error.empty() ? Step::kRunning : Step::kFailed);
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
      ReleaseIds(key, run);
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
  ReleaseIds(key, run);
}

KubeletFleet::KubeletFleet(k8s::Client& client, std::vector<SimNode> nodes, KubeletOptions options,
                           const Clock& clock)
    : impl_(std::make_unique<Impl>(client, std::move(nodes), std::move(options), clock)) {}

KubeletFleet::~KubeletFleet() { Stop(); }

Status KubeletFleet::Start() { return impl_->Start(); }

void KubeletFleet::Stop() { impl_->Stop(); }

size_t KubeletFleet::size() const { return impl_->nodes_.size(); }
bool KubeletFleet::KillPlugin(size_t node) { return impl_->KillPlugin(node); }
Status KubeletFleet::RestartPlugin(size_t node) { return impl_->RestartPlugin(node); }
bool KubeletFleet::StopKubelet(size_t node) { return impl_->StopKubelet(node); }
Status KubeletFleet::StartKubelet(size_t node) { return impl_->StartKubelet(node); }

Status KubeletFleet::SetGpuHealth(size_t node, size_t gpu, bool healthy) {
  return impl_->SetGpuHealth(node, gpu, healthy);
}

Status KubeletFleet::RecreateNode(size_t node) { return impl_->RecreateNode(node); }

bool KubeletFleet::PluginAlive(size_t node) const {
  if (node >= impl_->nodes_.size()) return false;
  std::lock_guard<std::mutex> lock(impl_->nodes_[node]->process_mu);
  return !impl_->nodes_[node]->plugin_down;
}

bool KubeletFleet::KubeletUp(size_t node) const {
  if (node >= impl_->nodes_.size()) return false;
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return !impl_->nodes_[node]->kubelet_down;
}

bool KubeletFleet::Registered(size_t node) const {
  if (node >= impl_->nodes_.size()) return false;
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->nodes_[node]->registered;
}

int KubeletFleet::Registrations(size_t node) const {
  if (node >= impl_->nodes_.size()) return 0;
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->nodes_[node]->registrations;
}

int KubeletFleet::PluginRestarts() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->plugin_restarts_;
}

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
