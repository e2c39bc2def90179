// The kubelet's side of device-plugin registration, and the process faults of a node
// (docs/RELIABILITY.md): its device plugin killed and restarted, its kubelet restarted.
//
// Each NVIDIA node's kubelet serves the Registration service on <dir>/kubelet.sock, as kubelet's
// device manager does on /var/lib/kubelet/device-plugins/kubelet.sock. A Register names the
// plugin's endpoint in that directory; the kubelet dials it and reads the devices from the first
// ListAndWatch response. Until a plugin has registered, Allocate for its resource fails as
// kubelet fails it ("cannot allocate unregistered device ..."). A vendor node's plugin is
// in-process (sim/vendor_plugin.h): it counts as registered while it runs and the kubelet is up.
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "common/log.h"
#include "common/strings.h"
#include "sim/kubelet_impl.h"

namespace hami::sim {

namespace {

Status DraFaultError(const std::string& node, const std::string& fault) {
  return Error{"node " + Quote(node) + " is in DRA mode: " + fault + " is not simulated there"};
}

class RegistrationService final : public v1beta1::Registration::Service {
 public:
  using Handler = std::function<grpc::Status(const v1beta1::RegisterRequest&)>;
  explicit RegistrationService(Handler handler) : handler_(std::move(handler)) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    return handler_(*req);
  }

 private:
  Handler handler_;
};

}  // namespace

Status KubeletFleet::Impl::ServeRegistration(size_t index) {
  Node& node = *nodes_[index];
  node.dir = options_.socket_dir + "/" + std::to_string(index);
  std::error_code ec;
  std::filesystem::create_directories(node.dir, ec);
  if (ec) return Error{"create " + Quote(node.dir) + ": " + ec.message()};
  const std::string socket = node.dir + "/kubelet.sock";
  ::unlink(socket.c_str());
  auto service = std::make_unique<RegistrationService>(
      [this, index](const v1beta1::RegisterRequest& req) { return OnRegister(index, req); });
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(service.get());
  // One Register at a time is all a node sees; keep the per-node thread cost down.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Error{"kubelet of " + Quote(node.spec.name) + ": cannot serve on " + socket};
  node.registration = std::move(server);
  node.registration_service = std::move(service);
  return OkStatus();
}

grpc::Status KubeletFleet::Impl::OnRegister(size_t index, const v1beta1::RegisterRequest& req) {
  Node& node = *nodes_[index];
  if (req.version() != dp::kApiVersion) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "unsupported API version " + Quote(req.version()));
  }
  if (req.resource_name() != options_.plugin_config.resource_name) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "unexpected resource name " + Quote(req.resource_name()));
  }
  const std::string socket = node.dir + "/" + req.endpoint();
  std::shared_ptr<v1beta1::DevicePlugin::Stub> stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials()));
  auto ids = ReadDevices(*stub, socket);
  if (!ids) return grpc::Status(grpc::StatusCode::UNAVAILABLE, ids.error());
  {
    std::lock_guard<std::mutex> lock(mu_);
    node.stub = std::move(stub);
    node.device_ids = std::move(*ids);
    node.registered = true;
    ++node.registrations;
  }
  registered_cv_.notify_all();
  return grpc::Status::OK;
}

bool KubeletFleet::Impl::KillPlugin(size_t index) {
  if (index >= nodes_.size() || DraNode(index)) return false;
  Node& node = *nodes_[index];
  std::lock_guard<std::mutex> process(node.process_mu);
  if (node.plugin_down) return false;
  node.plugin_down = true;
  // The process is gone: its server, its loop, its publisher. (In-flight calls end first: one
  // process cannot stop another's threads mid-call.)
  if (node.vendor) {
    node.vendor->Stop();
  } else if (node.plugin) {
    node.plugin->Stop();
  }
  std::shared_ptr<VendorPlugin> vendor;
  {
    // The kubelet sees the plugin's ListAndWatch stream end and drops the endpoint.
    std::lock_guard<std::mutex> lock(mu_);
    node.registered = false;
    node.stub.reset();
    vendor = std::move(node.vendor);  // an Admit still holding it finishes with it
  }
  node.plugin.reset();
  node.allocator.reset();
  node.publisher.reset();
  node.discovery.reset();
  HAMI_INFO("hami-sim: killed the device plugin of node {}", node.spec.name);
  return true;
}

Status KubeletFleet::Impl::RestartPlugin(size_t index, bool count) {
  if (index >= nodes_.size()) return Error{"no node " + std::to_string(index)};
  if (DraNode(index)) return DraFaultError(nodes_[index]->spec.name, "restartPlugin");
  Node& node = *nodes_[index];
  std::lock_guard<std::mutex> process(node.process_mu);
  if (!node.plugin_down) return OkStatus();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return OkStatus();
  }
  Status s = StartPlugin(index);
  node.plugin_down = false;  // started, even when its first registration failed
  {
    std::lock_guard<std::mutex> lock(mu_);
    plugin_restarts_ += count ? 1 : 0;
  }
  if (!s) return Error{"node " + Quote(node.spec.name) + ": restarted plugin: " + s.error()};
  HAMI_INFO("hami-sim: restarted the device plugin of node {}", node.spec.name);
  return OkStatus();
}

bool KubeletFleet::Impl::StopKubelet(size_t index) {
  if (index >= nodes_.size() || DraNode(index)) return false;
  Node& node = *nodes_[index];
  std::lock_guard<std::mutex> process(node.process_mu);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (node.kubelet_down) return false;
  }
  // A Register in flight finishes first; then the socket is gone.
  if (node.registration) {
    node.registration->Shutdown(std::chrono::system_clock::now());
    node.registration.reset();
    node.registration_service.reset();
  }
  std::lock_guard<std::mutex> lock(mu_);
  node.kubelet_down = true;
  node.registered = false;
  node.stub.reset();
  HAMI_INFO("hami-sim: stopped the kubelet of node {}", node.spec.name);
  return true;
}

Status KubeletFleet::Impl::StartKubelet(size_t index) {
  if (index >= nodes_.size()) return Error{"no node " + std::to_string(index)};
  if (DraNode(index)) return DraFaultError(nodes_[index]->spec.name, "restartKubelet");
  Node& node = *nodes_[index];
  std::lock_guard<std::mutex> process(node.process_mu);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!node.kubelet_down) return OkStatus();
  }
  Status s = OkStatus();
  if (node.spec.vendor.empty()) {
    // kubelet's device manager starts by removing every socket in its directory, the plugins'
    // too; a plugin that sees its socket or kubelet.sock replaced serves afresh and registers.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(node.dir, ec)) {
      if (entry.is_socket(ec)) std::filesystem::remove(entry.path(), ec);
    }
    s = ServeRegistration(index);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    node.kubelet_down = false;
    if (!node.spec.vendor.empty() && node.vendor) {
      node.registered = true;
      ++node.registrations;
    }
  }
  cv_.notify_all();
  if (!s) return Error{"node " + Quote(node.spec.name) + ": restarted kubelet: " + s.error()};
  HAMI_INFO("hami-sim: restarted the kubelet of node {}", node.spec.name);
  return OkStatus();
}

Status KubeletFleet::Impl::SetGpuHealth(size_t index, size_t gpu, bool healthy) {
  if (index >= nodes_.size()) return Error{"no node " + std::to_string(index)};
  Node& node = *nodes_[index];
  std::lock_guard<std::mutex> process(node.process_mu);
  if (!node.spec.vendor.empty()) {
    return Error{"node " + Quote(node.spec.name) + ": unhealthyGpu needs an NVIDIA node"};
  }
  if (gpu >= node.spec.gpus.size()) {
    return Error{"node " + Quote(node.spec.name) + " has no GPU " + std::to_string(gpu)};
  }
  if (DraNode(index)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      node.unhealthy.resize(node.spec.gpus.size(), false);
      node.unhealthy[gpu] = !healthy;
    }
    return SetDraGpuHealth(index);
  }
  std::shared_ptr<v1beta1::DevicePlugin::Stub> stub;
  {
    std::lock_guard<std::mutex> lock(mu_);
    node.unhealthy.resize(node.spec.gpus.size(), false);
    node.unhealthy[gpu] = !healthy;
    if (node.registered) stub = node.stub;
  }
  HAMI_INFO("hami-sim: node {} GPU {} turned {}", node.spec.name, gpu,
            healthy ? "healthy" : "unhealthy");
  if (node.plugin_down || !node.publisher) return OkStatus();  // seen when it starts again
  // The plugin's health watch: publish now (retrying injected API errors), not at the next
  // 30 s tick.
  Status published = Error{"not published"};
  for (int attempt = 0; attempt < 20 && !published; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
    auto r = node.publisher->PublishIfChanged();
    published = r ? OkStatus() : Status(Error{r.error()});
  }
  if (!published) {
    return Error{"node " + Quote(node.spec.name) + ": publish GPU health: " + published.error()};
  }
  if (!stub) return OkStatus();
  // The kubelet's ListAndWatch stream brings the new list: the healthy IDs only.
  auto ids = ReadDevices(*stub, node.dir + "/" + dp::kPluginEndpoint);
  if (!ids) return Error{"node " + Quote(node.spec.name) + ": " + ids.error()};
  std::lock_guard<std::mutex> lock(mu_);
  node.device_ids = std::move(*ids);
  return OkStatus();
}

Status KubeletFleet::Impl::RecreateNode(size_t index) {
  if (index >= nodes_.size()) return Error{"no node " + std::to_string(index)};
  if (DraNode(index)) return DraFaultError(nodes_[index]->spec.name, "deleteNode");
  Node& node = *nodes_[index];
  {
    std::lock_guard<std::mutex> process(node.process_mu);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return OkStatus();
    }
    // A vendor node's plugin process was killed; CreateNode makes the next one.
    if (Status s = CreateNode(node); !s) return s;
  }
  if (Status s = StartKubelet(index); !s) return s;
  return RestartPlugin(index, /*count=*/false);
}

}  // namespace hami::sim
