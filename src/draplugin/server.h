// hami-dra-plugin's gRPC surface (docs/DRA.md "Kubelet gRPC"): the registration socket kubelet's
// plugin watcher finds (<registrar dir>/<driver>-reg.sock), and the plugin socket
// (<plugin dir>/dra.sock) serving v1.DRAPlugin (and v1beta1.DRAPlugin for kubelet 1.32-1.33)
// over PreparedClaims and
// DRAResourceHealth.NodeWatchResources (v1alpha1, and v1 for kubelet 1.38) with each GPU's health.
#ifndef HAMI_DRAPLUGIN_SERVER_H_
#define HAMI_DRAPLUGIN_SERVER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "draplugin/slices.h"
#include "draplugin/state.h"

namespace grpc {
class Server;
class ServerContext;
class Service;
}  // namespace grpc

namespace hami::draplugin {

struct ServerOptions {
  std::string node_name{};  // the pool's name
  std::string registrar_dir = "/var/lib/kubelet/plugins_registry";
  std::string plugin_dir = "/var/lib/kubelet/plugins/hami-core-gpu.project-hami.io";
};

// Reads ResourceClaim `ns`/`name` from the API server (the claim kubelet names).
using ClaimGetter = std::function<Result<Json>(const std::string& ns, const std::string& name)>;
// The node's GPUs as last discovered.
using GpuSource = std::function<std::vector<GpuFacts>()>;

// The answer to one claim of NodePrepareResources: the claim is read, its UID checked against
// kubelet's, and prepared; errors name the claim. Exposed for tests; the service calls it.
Result<std::vector<PreparedDevice>> PrepareOne(const std::string& ns, const std::string& uid,
                                               const std::string& name, const ClaimGetter& get,
                                               PreparedClaims* claims,
                                               const std::vector<GpuFacts>& gpus);

class DraServer {
 public:
  // `claims` must outlive the server.
  DraServer(ServerOptions options, PreparedClaims* claims, ClaimGetter get_claim, GpuSource gpus);
  ~DraServer();
  DraServer(const DraServer&) = delete;
  DraServer& operator=(const DraServer&) = delete;

  // Creates the directories, replaces stale sockets and serves both. Errors name the socket.
  Status Start();
  // Ends the health streams and both servers; removes the sockets (kubelet then deregisters).
  void Stop();

  // The GPUs' health as of `now_unix` (seconds): sent to every open NodeWatchResources stream
  // when it differs from what was last sent, and to each new stream first.
  void UpdateHealth(const std::vector<GpuFacts>& gpus, int64_t now_unix);

  // What kubelet said in NotifyRegistrationStatus: registered, or the error.
  bool registered() const;
  std::string registration_error() const;

  std::string registration_socket() const;
  std::string plugin_socket() const;

 private:
  class Registration;
  class Plugin;
  class PluginV1beta1;
  struct HealthV1alpha1;
  struct HealthV1;
  template <typename Api>
  class Health;
  using HealthState = std::vector<std::pair<std::string, bool>>;  // (device, healthy)
  // Blocks until the health state's version differs from *sent (then copies it out, true) or the
  // server stops or `context` is cancelled (false).
  bool NextHealth(grpc::ServerContext* context, uint64_t* sent, HealthState* state, int64_t* time);

  ServerOptions options_;
  PreparedClaims* claims_;
  ClaimGetter get_claim_;
  GpuSource gpus_;
  std::unique_ptr<Registration> registration_;
  std::unique_ptr<Plugin> plugin_;
  std::unique_ptr<PluginV1beta1> plugin_v1beta1_;
  std::unique_ptr<grpc::Service> health_;     // v1alpha1
  std::unique_ptr<grpc::Service> health_v1_;  // v1 (kubelet 1.38)
  std::unique_ptr<grpc::Server> registration_server_;
  std::unique_ptr<grpc::Server> plugin_server_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool registered_ = false;
  std::string registration_error_;
  // (device name, healthy) of the last update, its version and time.
  HealthState health_state_{};
  uint64_t health_version_ = 0;
  int64_t health_time_ = 0;
};

}  // namespace hami::draplugin

#endif  // HAMI_DRAPLUGIN_SERVER_H_
