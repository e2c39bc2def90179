// A fake kubelet for device plugin tests: serves v1beta1.Registration on a unix socket (like
// /var/lib/kubelet/device-plugins/kubelet.sock), records every RegisterRequest, and gives a
// client stub for the plugin's socket. Restart() removes and re-creates the socket as a kubelet
// restart does, removing the plugin sockets in the directory too.
#ifndef HAMI_TESTS_DEVICEPLUGIN_FAKE_KUBELET_H_
#define HAMI_TESTS_DEVICEPLUGIN_FAKE_KUBELET_H_

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "support/wait_for.h"

namespace hami::deviceplugin::testing {

class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(std::string dir) : dir_(std::move(dir)) {}
  ~FakeKubelet() override { Stop(); }

  std::string socket() const { return dir_ + "/kubelet.sock"; }

  bool Start() {
    ::unlink(socket().c_str());
    grpc::ServerBuilder b;
    b.AddListeningPort("unix://" + socket(), grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
    return server_ != nullptr;
  }

  void Stop() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_.reset();
    }
  }

  // Kubelet restart: its socket and every plugin socket in the directory are removed, then a
  // new kubelet.sock appears.
  bool Restart() {
    Stop();
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      if (e.path().extension() == ".sock") std::filesystem::remove(e.path());
    }
    return Start();
  }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(*req);
    return grpc::Status::OK;
  }

  std::vector<v1beta1::RegisterRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  // A client of the plugin on <dir>/<endpoint>.
  std::unique_ptr<v1beta1::DevicePlugin::Stub> PluginClient(const std::string& endpoint) const {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix://" + dir_ + "/" + endpoint, grpc::InsecureChannelCredentials()));
  }

 private:
  std::string dir_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::vector<v1beta1::RegisterRequest> requests_;
};

// The tests' one poll-until-true (support/wait_for.h).
using hami::test_support::WaitFor;

}  // namespace hami::deviceplugin::testing

#endif  // HAMI_TESTS_DEVICEPLUGIN_FAKE_KUBELET_H_
