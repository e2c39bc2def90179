#include "draplugin/server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "common/strings.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "drahealth/v1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace hami::draplugin {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;

// The two health APIs, as template arguments of DraServer::Health.
struct DraServer::HealthV1alpha1 {
  using DRAResourceHealth = ::v1alpha1::DRAResourceHealth;
  using NodeWatchResourcesRequest = ::v1alpha1::NodeWatchResourcesRequest;
  using NodeWatchResourcesResponse = ::v1alpha1::NodeWatchResourcesResponse;
  static constexpr auto HEALTHY = ::v1alpha1::HEALTHY;
  static constexpr auto UNHEALTHY = ::v1alpha1::UNHEALTHY;
};
struct DraServer::HealthV1 {
  using DRAResourceHealth = ::v1::DRAResourceHealth;
  using NodeWatchResourcesRequest = ::v1::NodeWatchResourcesRequest;
  using NodeWatchResourcesResponse = ::v1::NodeWatchResourcesResponse;
  static constexpr auto HEALTHY = ::v1::HEALTHY;
  static constexpr auto UNHEALTHY = ::v1::UNHEALTHY;
};

Result<std::vector<PreparedDevice>> PrepareOne(const std::string& ns, const std::string& uid,
                                               const std::string& name, const ClaimGetter& get,
                                               PreparedClaims* claims,
                                               const std::vector<GpuFacts>& gpus) {
  const std::string what = "ResourceClaim " + ns + "/" + name;
  if (claims->Has(uid)) {
    // Prepared before (kubelet retries, or a second pod of a shared claim): the recorded
    // answer, without asking the API server again.
    return claims->Prepare(ClaimAllocation{uid, ns, name, {}}, gpus);
  }
  auto claim = get(ns, name);
  if (!claim) return Error{what + ": " + claim.error()};
  auto allocation = ReadClaimAllocation(*claim);
  if (!allocation) return std::move(allocation).take_error();
  if (allocation->uid != uid) {
    return Error{what + ": uid " + Quote(allocation->uid) + ", kubelet asked for " + Quote(uid) +
                 " (the claim was replaced)"};
  }
  return claims->Prepare(*allocation, gpus);
}

class DraServer::Registration final : public ::pluginregistration::Registration::Service {
 public:
  explicit Registration(DraServer* server) : server_(server) {}
  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* info) override {
    info->set_type("DRAPlugin");
    info->set_name(std::string(kDriverName));
    info->set_endpoint(server_->plugin_socket());
    // kubelet takes the first DRA service it knows, in this order (1.34+: v1; 1.32-1.33: v1beta1).
    info->add_supported_versions("v1.DRAPlugin");
    info->add_supported_versions("v1beta1.DRAPlugin");
    info->add_supported_versions("v1alpha1.DRAResourceHealth");
    info->add_supported_versions("v1.DRAResourceHealth");
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(
      grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* status,
      ::pluginregistration::RegistrationStatusResponse*) override {
    std::lock_guard<std::mutex> lock(server_->mu_);
    server_->registered_ = status->plugin_registered();
    server_->registration_error_ = status->error();
    return grpc::Status::OK;
  }

 private:
  DraServer* server_;
};

class DraServer::Plugin final : public drapb::DRAPlugin::Service {
 public:
  explicit Plugin(DraServer* server) : server_(server) {}
  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drapb::NodePrepareResourcesRequest* request,
                                    drapb::NodePrepareResourcesResponse* response) override {
    const std::vector<GpuFacts> gpus = server_->gpus_();
    for (const drapb::Claim& c : request->claims()) {
      drapb::NodePrepareResourceResponse& out = (*response->mutable_claims())[c.uid()];
      auto devices = PrepareOne(c.namespace_(), c.uid(), c.name(), server_->get_claim_,
                                server_->claims_, gpus);
      if (!devices) {
        out.set_error(devices.error());
        continue;
      }
      for (const PreparedDevice& d : *devices) {
        drapb::Device* device = out.add_devices();
        for (const std::string& r : d.requests) device->add_request_names(r);
        device->set_pool_name(d.pool);
        device->set_device_name(d.device);
        for (const std::string& id : d.cdi_device_ids) device->add_cdi_device_ids(id);
        if (!d.share_id.empty()) device->set_share_id(d.share_id);
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const drapb::NodeUnprepareResourcesRequest* request,
                                      drapb::NodeUnprepareResourcesResponse* response) override {
    for (const drapb::Claim& c : request->claims()) {
      drapb::NodeUnprepareResourceResponse& out = (*response->mutable_claims())[c.uid()];
      if (auto done = server_->claims_->Unprepare(c.uid()); !done) {
        out.set_error("ResourceClaim " + c.namespace_() + "/" + c.name() + ": " + done.error());
      }
    }
    return grpc::Status::OK;
  }

 private:
  DraServer* server_;
};

// v1beta1 (kubelet 1.32-1.33): the same messages on the wire as v1 without share_id, so each
// call is the v1 call on the re-read request, and the answer re-read as v1beta1.
class DraServer::PluginV1beta1 final
    : public ::k8s::io::kubelet::pkg::apis::dra::v1beta1::DRAPlugin::Service {
 public:
  explicit PluginV1beta1(Plugin* v1) : v1_(v1) {}
  grpc::Status NodePrepareResources(
      grpc::ServerContext* context,
      const ::k8s::io::kubelet::pkg::apis::dra::v1beta1::NodePrepareResourcesRequest* request,
      ::k8s::io::kubelet::pkg::apis::dra::v1beta1::NodePrepareResourcesResponse* response)
      override {
    drapb::NodePrepareResourcesRequest in;
    drapb::NodePrepareResourcesResponse out;
    in.ParseFromString(request->SerializeAsString());
    grpc::Status status = v1_->NodePrepareResources(context, &in, &out);
    for (auto& [uid, claim] : *out.mutable_claims()) {
      for (auto& device : *claim.mutable_devices()) device.clear_share_id();
    }
    response->ParseFromString(out.SerializeAsString());
    return status;
  }
  grpc::Status NodeUnprepareResources(
      grpc::ServerContext* context,
      const ::k8s::io::kubelet::pkg::apis::dra::v1beta1::NodeUnprepareResourcesRequest* request,
      ::k8s::io::kubelet::pkg::apis::dra::v1beta1::NodeUnprepareResourcesResponse* response)
      override {
    drapb::NodeUnprepareResourcesRequest in;
    drapb::NodeUnprepareResourcesResponse out;
    in.ParseFromString(request->SerializeAsString());
    grpc::Status status = v1_->NodeUnprepareResources(context, &in, &out);
    response->ParseFromString(out.SerializeAsString());
    return status;
  }

 private:
  Plugin* v1_;
};

bool DraServer::NextHealth(grpc::ServerContext* context, uint64_t* sent, HealthState* state,
                           int64_t* time) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Woken by UpdateHealth and Stop; the timeout only notices a kubelet that went away.
    cv_.wait_for(lock, std::chrono::seconds(1),
                 [&] { return stopping_ || health_version_ != *sent; });
    if (stopping_ || context->IsCancelled()) return false;
    if (health_version_ == *sent) continue;
    *sent = health_version_;
    *state = health_state_;
    *time = health_time_;
    return true;
  }
}

// NodeWatchResources of health API `Api` (v1alpha1 for kubelet 1.34-1.37, v1 for 1.38): each
// GPU's health on subscribe and after every change, until kubelet cancels or the server stops.
template <typename Api>
class DraServer::Health final : public Api::DRAResourceHealth::Service {
 public:
  explicit Health(DraServer* server) : server_(server) {}
  grpc::Status NodeWatchResources(
      grpc::ServerContext* context, const typename Api::NodeWatchResourcesRequest*,
      grpc::ServerWriter<typename Api::NodeWatchResourcesResponse>* writer) override {
    uint64_t sent = 0;
    HealthState state;
    int64_t time = 0;
    while (server_->NextHealth(context, &sent, &state, &time)) {
      typename Api::NodeWatchResourcesResponse response;
      for (const auto& [device, healthy] : state) {
        auto* h = response.add_devices();
        h->mutable_device()->set_pool_name(server_->options_.node_name);
        h->mutable_device()->set_device_name(device);
        h->set_health(healthy ? Api::HEALTHY : Api::UNHEALTHY);
        h->set_last_updated_time(time);
      }
      if (!writer->Write(response)) return grpc::Status::CANCELLED;
    }
    return context->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK;
  }

 private:
  DraServer* server_;
};

DraServer::DraServer(ServerOptions options, PreparedClaims* claims, ClaimGetter get_claim,
                     GpuSource gpus)
    : options_(std::move(options)),
      claims_(claims),
      get_claim_(std::move(get_claim)),
      gpus_(std::move(gpus)) {}

DraServer::~DraServer() { Stop(); }

std::string DraServer::registration_socket() const {
  return options_.registrar_dir + "/" + std::string(kDriverName) + "-reg.sock";
}

std::string DraServer::plugin_socket() const { return options_.plugin_dir + "/dra.sock"; }

Status DraServer::Start() {
  namespace fs = std::filesystem;
  for (const std::string& dir : {options_.registrar_dir, options_.plugin_dir}) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Error{"create " + Quote(dir) + ": " + ec.message()};
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  registration_ = std::make_unique<Registration>(this);
  plugin_ = std::make_unique<Plugin>(this);
  plugin_v1beta1_ = std::make_unique<PluginV1beta1>(plugin_.get());
  health_ = std::make_unique<Health<HealthV1alpha1>>(this);
  health_v1_ = std::make_unique<Health<HealthV1>>(this);
  // The plugin socket first: kubelet connects to it as soon as the registration socket appears.
  ::unlink(plugin_socket().c_str());
  grpc::ServerBuilder plugin_builder;
  plugin_builder.AddListeningPort("unix://" + plugin_socket(), grpc::InsecureServerCredentials());
  plugin_builder.RegisterService(plugin_.get());
  plugin_builder.RegisterService(plugin_v1beta1_.get());
  plugin_builder.RegisterService(health_.get());
  plugin_builder.RegisterService(health_v1_.get());
  plugin_server_ = plugin_builder.BuildAndStart();
  if (!plugin_server_) return Error{"cannot serve on " + Quote(plugin_socket())};
  ::unlink(registration_socket().c_str());
  grpc::ServerBuilder registration_builder;
  registration_builder.AddListeningPort("unix://" + registration_socket(),
                                        grpc::InsecureServerCredentials());
  registration_builder.RegisterService(registration_.get());
  registration_server_ = registration_builder.BuildAndStart();
  if (!registration_server_) {
    Stop();
    return Error{"cannot serve on " + Quote(registration_socket())};
  }
  return OkStatus();
}

void DraServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(1);
  if (registration_server_) {
    registration_server_->Shutdown(deadline);
    registration_server_.reset();
    ::unlink(registration_socket().c_str());
  }
  if (plugin_server_) {
    plugin_server_->Shutdown(deadline);
    plugin_server_.reset();
    ::unlink(plugin_socket().c_str());
  }
}

void DraServer::UpdateHealth(const std::vector<GpuFacts>& gpus, int64_t now_unix) {
  std::vector<std::pair<std::string, bool>> state;
  for (const GpuFacts& g : gpus) state.emplace_back(GpuDeviceName(g.minor()), g.gpu.healthy);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state == health_state_ && health_version_ != 0) return;
    health_state_ = std::move(state);
    health_time_ = now_unix;
    ++health_version_;
  }
  cv_.notify_all();
}

bool DraServer::registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registered_;
}

std::string DraServer::registration_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registration_error_;
}

}  // namespace hami::draplugin
