// A test kubelet for DRA kubelet plugins: plays kubelet's side of every gRPC surface a DRA driver
// serves (docs/DRA.md#kubelet-grpc) over real unix sockets, the way kubelet 1.34+ does:
//   1. Register: pluginregistration.Registration.GetInfo on the registration socket
//      (/var/lib/kubelet/plugins_registry/<driver>-reg.sock in production), validation of the
//      answer as kubelet's pluginwatcher and DRA plugin manager validate it, then
//      NotifyRegistrationStatus with the verdict (true, or false and the reason).
//   2. Prepare / Unprepare: NodePrepareResources / NodeUnprepareResources on the endpoint the
//      plugin reported, through the DRA service kubelet would choose (v1, else v1beta1).
//   3. WatchHealth: DRAResourceHealth.NodeWatchResources (v1 if listed, else v1alpha1).
// The plugin's own tests drive it; tests/draplugin/dra_test_kubelet_test.cc proves it against a
// trivial fake plugin. Not thread-safe: one test thread drives one DraTestKubelet.
#ifndef HAMI_TESTS_DRAPLUGIN_DRA_TEST_KUBELET_H_
#define HAMI_TESTS_DRAPLUGIN_DRA_TEST_KUBELET_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "drahealth/v1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace hami::draplugin::testing {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra;

// PluginInfo.type of a DRA driver (kubelet's pluginregistration/v1 constant DRAPlugin).
inline constexpr std::string_view kPluginTypeDra = "DRAPlugin";
// The entries of PluginInfo.supported_versions kubelet understands ("<proto package>.<service>",
// except the DRA services, named by their last package component).
inline constexpr std::string_view kDraPluginV1 = "v1.DRAPlugin";
inline constexpr std::string_view kDraPluginV1beta1 = "v1beta1.DRAPlugin";
inline constexpr std::string_view kHealthV1 = "v1.DRAResourceHealth";
inline constexpr std::string_view kHealthV1alpha1 = "v1alpha1.DRAResourceHealth";

// Kubelet 1.34+'s choice of DRA service: the first entry of the plugin's list that kubelet
// supports (v1 or v1beta1), in the plugin's order. Empty when none is.
std::string ChooseDraService(const std::vector<std::string>& supported_versions);

// Kubelet 1.38's choice of health service: v1 if listed, else v1alpha1 if listed, else none.
// (1.34-1.37 always try v1alpha1; RegisterOptions::legacy_health picks that behaviour.)
std::string ChooseHealthService(const std::vector<std::string>& supported_versions);

// What registration learned.
struct Registration {
  ::pluginregistration::PluginInfo info;
  std::string endpoint;        // info.endpoint, or the registration socket when that is empty
  std::string dra_service;     // kDraPluginV1 or kDraPluginV1beta1
  std::string health_service;  // kHealthV1, kHealthV1alpha1, or empty (no health stream)
};

struct RegisterOptions {
  // The driver name the plugin must report; empty accepts any.
  std::string want_driver;
  // Behave like kubelet 1.34-1.37: use v1alpha1 health whatever the plugin lists.
  bool legacy_health = false;
};

// The stream of NodeWatchResources. v1alpha1 answers are returned as v1 messages (the two are
// field-for-field identical on the wire), as kubelet converts them.
class HealthStream {
 public:
  HealthStream(const HealthStream&) = delete;
  HealthStream& operator=(const HealthStream&) = delete;
  ~HealthStream();

  // Blocks for the next message. False when the stream ended (plugin closed it, error, deadline
  // or Cancel); Finish() then says why.
  bool Next(::v1::NodeWatchResourcesResponse* out);
  // Ends the stream from kubelet's side (plugin restart or deregistration).
  void Cancel();
  // Precondition: Next returned false.
  grpc::Status Finish();

 private:
  friend class DraTestKubelet;
  HealthStream() = default;

  std::shared_ptr<grpc::Channel> channel_;  // keeps the connection alive beyond the kubelet
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReader<::v1::NodeWatchResourcesResponse>> v1_;
  std::unique_ptr<grpc::ClientReader<::v1alpha1::NodeWatchResourcesResponse>> v1alpha1_;
  bool finished_ = false;
};

class DraTestKubelet {
 public:
  // call_timeout bounds each unary call; stream_timeout bounds a health stream as a whole (kubelet
  // sets none; a test must not hang on a silent plugin).
  explicit DraTestKubelet(std::chrono::milliseconds call_timeout = std::chrono::seconds(10),
                          std::chrono::milliseconds stream_timeout = std::chrono::seconds(30));

  // Registers the plugin whose registration socket is `registration_socket` (a path). The error
  // names what kubelet would reject; in that case the plugin has been told
  // NotifyRegistrationStatus{plugin_registered: false, error} as kubelet tells it. On success
  // the plugin got {plugin_registered: true} and the kubelet talks to its endpoint from now on.
  Result<Registration> Register(const std::string& registration_socket,
                                const RegisterOptions& options = {});

  // Precondition for the calls below: a successful Register. The request is sent through the
  // chosen service (a v1beta1 plugin gets it converted; share_id is then absent in the answer).
  Result<drapb::v1::NodePrepareResourcesResponse> Prepare(
      const std::vector<drapb::v1::Claim>& claims);
  Result<drapb::v1::NodeUnprepareResourcesResponse> Unprepare(
      const std::vector<drapb::v1::Claim>& claims);
  // Opens NodeWatchResources on the chosen health service. Error if the plugin offered none.
  Result<std::unique_ptr<HealthStream>> WatchHealth();

  const Registration& registration() const { return registration_; }

  // A claim as kubelet sends it.
  static drapb::v1::Claim MakeClaim(std::string ns, std::string uid, std::string name);

 private:
  std::unique_ptr<grpc::ClientContext> CallContext() const;

  std::chrono::milliseconds call_timeout_;
  std::chrono::milliseconds stream_timeout_;
  Registration registration_;
  std::shared_ptr<grpc::Channel> plugin_channel_;
};

}  // namespace hami::draplugin::testing

#endif  // HAMI_TESTS_DRAPLUGIN_DRA_TEST_KUBELET_H_
