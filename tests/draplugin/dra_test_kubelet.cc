#include "draplugin/dra_test_kubelet.h"

#include <algorithm>
#include <utility>

#include "common/strings.h"

namespace hami::draplugin::testing {
namespace {

// Kubelet's pluginwatcher gives GetInfo one second.
constexpr std::chrono::seconds kGetInfoTimeout(1);

bool Contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

std::string StatusText(const grpc::Status& s) {
  return "gRPC code " + std::to_string(static_cast<int>(s.error_code())) + " " +
         Quote(s.error_message());
}

// v1 and v1beta1 (and the two health versions) share every field number and type, so a message
// of one parses as the other; kubelet's conversion wrappers copy the same fields by hand.
template <typename To, typename From>
Result<To> Convert(const From& from) {
  To to;
  if (!to.ParseFromString(from.SerializeAsString())) {
    return Error{"cannot convert " + from.GetTypeName() + " to " + to.GetTypeName()};
  }
  return to;
}

}  // namespace

std::string ChooseDraService(const std::vector<std::string>& supported_versions) {
  for (const std::string& s : supported_versions) {
    if (s == kDraPluginV1 || s == kDraPluginV1beta1) return s;
  }
  return "";
}

std::string ChooseHealthService(const std::vector<std::string>& supported_versions) {
  if (Contains(supported_versions, kHealthV1)) return std::string(kHealthV1);
  if (Contains(supported_versions, kHealthV1alpha1)) return std::string(kHealthV1alpha1);
  return "";
}

HealthStream::~HealthStream() {
  if (!finished_) {
    Cancel();
    ::v1::NodeWatchResourcesResponse drain;
    while (Next(&drain)) {
    }
    (void)Finish();
  }
}

bool HealthStream::Next(::v1::NodeWatchResourcesResponse* out) {
  if (v1_) return v1_->Read(out);
  ::v1alpha1::NodeWatchResourcesResponse alpha;
  if (!v1alpha1_->Read(&alpha)) return false;
  return out->ParseFromString(alpha.SerializeAsString());
}

void HealthStream::Cancel() { context_->TryCancel(); }

grpc::Status HealthStream::Finish() {
  finished_ = true;
  return v1_ ? v1_->Finish() : v1alpha1_->Finish();
}

DraTestKubelet::DraTestKubelet(std::chrono::milliseconds call_timeout,
                               std::chrono::milliseconds stream_timeout)
    : call_timeout_(call_timeout), stream_timeout_(stream_timeout) {}

std::unique_ptr<grpc::ClientContext> DraTestKubelet::CallContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + call_timeout_);
  return ctx;
}

drapb::v1::Claim DraTestKubelet::MakeClaim(std::string ns, std::string uid, std::string name) {
  drapb::v1::Claim c;
  c.set_namespace_(std::move(ns));
  c.set_uid(std::move(uid));
  c.set_name(std::move(name));
  return c;
}

Result<Registration> DraTestKubelet::Register(const std::string& registration_socket,
                                              const RegisterOptions& options) {
  auto channel =
      grpc::CreateChannel("unix://" + registration_socket, grpc::InsecureChannelCredentials());
  auto reg = ::pluginregistration::Registration::NewStub(channel);

  Registration r;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kGetInfoTimeout);
    ctx.set_wait_for_ready(true);  // the socket file exists; the server may still be starting
    grpc::Status s = reg->GetInfo(&ctx, ::pluginregistration::InfoRequest(), &r.info);
    if (!s.ok()) {
      return Error{"GetInfo on " + Quote(registration_socket) + ": " + StatusText(s)};
    }
  }
  r.endpoint = r.info.endpoint().empty() ? registration_socket : r.info.endpoint();
  const std::vector<std::string> versions(r.info.supported_versions().begin(),
                                          r.info.supported_versions().end());
  r.dra_service = ChooseDraService(versions);
  r.health_service =
      options.legacy_health ? std::string(kHealthV1alpha1) : ChooseHealthService(versions);

  // The checks of kubelet's pluginwatcher (type) and DRA plugin manager (name, versions).
  std::string problem;
  if (r.info.type() != kPluginTypeDra) {
    problem = "field \"type\": " + Quote(r.info.type()) + " is not \"DRAPlugin\"";
  } else if (r.info.name().empty()) {
    problem = "field \"name\": empty";
  } else if (!options.want_driver.empty() && r.info.name() != options.want_driver) {
    problem = "field \"name\": " + Quote(r.info.name()) + ", want " + Quote(options.want_driver);
  } else if (versions.empty()) {
    problem = "field \"supported_versions\": empty";
  } else if (r.dra_service.empty()) {
    std::string list;
    for (const std::string& v : versions) list += (list.empty() ? "" : ", ") + Quote(v);
    problem = "field \"supported_versions\": none of [" + list +
              "] is \"v1.DRAPlugin\" or \"v1beta1.DRAPlugin\"";
  }

  ::pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(problem.empty());
  status.set_error(problem);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + call_timeout_);
  ::pluginregistration::RegistrationStatusResponse ignored;
  grpc::Status s = reg->NotifyRegistrationStatus(&ctx, status, &ignored);
  if (!problem.empty()) return Error{"registration rejected: " + problem};
  if (!s.ok()) {
    return Error{"NotifyRegistrationStatus on " + Quote(registration_socket) + ": " +
                 StatusText(s)};
  }

  registration_ = r;
  plugin_channel_ = grpc::CreateChannel("unix://" + r.endpoint, grpc::InsecureChannelCredentials());
  return r;
}

Result<drapb::v1::NodePrepareResourcesResponse> DraTestKubelet::Prepare(
    const std::vector<drapb::v1::Claim>& claims) {
  if (!plugin_channel_) return Error{"Prepare before a successful Register"};
  drapb::v1::NodePrepareResourcesRequest req;
  for (const auto& c : claims) *req.add_claims() = c;
  auto ctx = CallContext();
  grpc::Status s;
  drapb::v1::NodePrepareResourcesResponse resp;
  if (registration_.dra_service == kDraPluginV1) {
    s = drapb::v1::DRAPlugin::NewStub(plugin_channel_)->NodePrepareResources(ctx.get(), req, &resp);
  } else {
    auto beta_req = Convert<drapb::v1beta1::NodePrepareResourcesRequest>(req);
    if (!beta_req) return std::move(beta_req).take_error();
    drapb::v1beta1::NodePrepareResourcesResponse beta_resp;
    s = drapb::v1beta1::DRAPlugin::NewStub(plugin_channel_)
            ->NodePrepareResources(ctx.get(), *beta_req, &beta_resp);
    if (s.ok()) {
      auto converted = Convert<drapb::v1::NodePrepareResourcesResponse>(beta_resp);
      if (!converted) return std::move(converted).take_error();
      resp = std::move(*converted);
    }
  }
  if (!s.ok())
    return Error{"NodePrepareResources (" + registration_.dra_service + "): " + StatusText(s)};
  return resp;
}

Result<drapb::v1::NodeUnprepareResourcesResponse> DraTestKubelet::Unprepare(
    const std::vector<drapb::v1::Claim>& claims) {
  if (!plugin_channel_) return Error{"Unprepare before a successful Register"};
  drapb::v1::NodeUnprepareResourcesRequest req;
  for (const auto& c : claims) *req.add_claims() = c;
  auto ctx = CallContext();
  grpc::Status s;
  drapb::v1::NodeUnprepareResourcesResponse resp;
  if (registration_.dra_service == kDraPluginV1) {
    s = drapb::v1::DRAPlugin::NewStub(plugin_channel_)
            ->NodeUnprepareResources(ctx.get(), req, &resp);
  } else {
    auto beta_req = Convert<drapb::v1beta1::NodeUnprepareResourcesRequest>(req);
    if (!beta_req) return std::move(beta_req).take_error();
    drapb::v1beta1::NodeUnprepareResourcesResponse beta_resp;
    s = drapb::v1beta1::DRAPlugin::NewStub(plugin_channel_)
            ->NodeUnprepareResources(ctx.get(), *beta_req, &beta_resp);
    if (s.ok()) {
      auto converted = Convert<drapb::v1::NodeUnprepareResourcesResponse>(beta_resp);
      if (!converted) return std::move(converted).take_error();
      resp = std::move(*converted);
    }
  }
  if (!s.ok())
    return Error{"NodeUnprepareResources (" + registration_.dra_service + "): " + StatusText(s)};
  return resp;
}

Result<std::unique_ptr<HealthStream>> DraTestKubelet::WatchHealth() {
  if (!plugin_channel_) return Error{"WatchHealth before a successful Register"};
  if (registration_.health_service.empty()) {
    return Error{
        "the plugin lists no health service (\"v1.DRAResourceHealth\" or "
        "\"v1alpha1.DRAResourceHealth\") in supported_versions"};
  }
  std::unique_ptr<HealthStream> stream(new HealthStream());
  stream->channel_ = plugin_channel_;
  stream->context_ = std::make_unique<grpc::ClientContext>();
  stream->context_->set_deadline(std::chrono::system_clock::now() + stream_timeout_);
  if (registration_.health_service == kHealthV1) {
    stream->v1_ =
        ::v1::DRAResourceHealth::NewStub(plugin_channel_)
            ->NodeWatchResources(stream->context_.get(), ::v1::NodeWatchResourcesRequest());
  } else {
    stream->v1alpha1_ =
        ::v1alpha1::DRAResourceHealth::NewStub(plugin_channel_)
            ->NodeWatchResources(stream->context_.get(), ::v1alpha1::NodeWatchResourcesRequest());
  }
  return stream;
}

}  // namespace hami::draplugin::testing
