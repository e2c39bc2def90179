// Proves the test kubelet (dra_test_kubelet.h) against a trivial fake DRA plugin over real unix
// sockets laid out as on a node (docs/DRA.md#kubelet-grpc): registration, the verdict sent back,
// prepare, unprepare and the health stream, through each service version kubelet may choose.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "draplugin/dra_test_kubelet.h"

namespace hami::draplugin::testing {
namespace {

constexpr char kDriver[] = "hami-core-gpu.project-hami.io";

// Waits for the server to cancel a streaming call (shutdown or client cancel); an event, not a
// timing.
void WaitUntilCancelled(grpc::ServerContext* ctx) {
  while (!ctx->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// The plugin's side, as small as can be: a registration server on <registry>/<driver>-reg.sock
// and the DRA services on <plugins>/<driver>/dra.sock. It records what kubelet sent.
class FakePlugin final : public ::pluginregistration::Registration::Service,
                         public drapb::v1::DRAPlugin::Service,
                         public drapb::v1beta1::DRAPlugin::Service,
                         public ::v1alpha1::DRAResourceHealth::Service,
                         public ::v1::DRAResourceHealth::Service {
 public:
  struct Options {
    std::string type = "DRAPlugin";
    std::string name = kDriver;
    bool empty_endpoint = false;  // report no endpoint: kubelet then uses the registration socket
    std::vector<std::string> versions = {"v1.DRAPlugin", "v1beta1.DRAPlugin",
                                         "v1alpha1.DRAResourceHealth"};
    bool serve_v1 = true;  // register the v1 DRAPlugin service on the socket
  };

  FakePlugin(const std::string& root, Options options) : options_(std::move(options)) {
    registry_dir_ = root + "/plugins_registry";
    plugin_dir_ = root + "/plugins/" + kDriver;
    std::filesystem::create_directories(registry_dir_);
    std::filesystem::create_directories(plugin_dir_);
  }
  ~FakePlugin() override { Stop(); }

  std::string registration_socket() const { return registry_dir_ + "/" + kDriver + "-reg.sock"; }
  std::string dra_socket() const {
    return options_.empty_endpoint ? registration_socket() : plugin_dir_ + "/dra.sock";
  }

  bool Start() {
    grpc::ServerBuilder dra;
    if (!options_.empty_endpoint) {
      dra.AddListeningPort("unix://" + dra_socket(), grpc::InsecureServerCredentials());
      RegisterDraServices(dra);
      dra_server_ = dra.BuildAndStart();
      if (!dra_server_) return false;
    }
    grpc::ServerBuilder reg;
    reg.AddListeningPort("unix://" + registration_socket(), grpc::InsecureServerCredentials());
    reg.RegisterService(static_cast<::pluginregistration::Registration::Service*>(this));
    if (options_.empty_endpoint) RegisterDraServices(reg);
    reg_server_ = reg.BuildAndStart();
    return reg_server_ != nullptr;
  }

  void Stop() {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(100);
    if (reg_server_) reg_server_->Shutdown(deadline);
    if (dra_server_) dra_server_->Shutdown(deadline);
    reg_server_.reset();
    dra_server_.reset();
  }

  // pluginregistration.Registration
  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* info) override {
    info->set_type(options_.type);
    info->set_name(options_.name);
    if (!options_.empty_endpoint) info->set_endpoint(dra_socket());
    for (const auto& v : options_.versions) info->add_supported_versions(v);
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(
      grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* status,
      ::pluginregistration::RegistrationStatusResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    statuses_.push_back(*status);
    return grpc::Status::OK;
  }

  // v1.DRAPlugin: one device per claim, shared, with one CDI id.
  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drapb::v1::NodePrepareResourcesRequest* req,
                                    drapb::v1::NodePrepareResourcesResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& claim : req->claims()) {
      prepared_.push_back(claim);
      auto& entry = (*resp->mutable_claims())[claim.uid()];
      auto* dev = entry.add_devices();
      dev->add_request_names("gpu");
      dev->set_pool_name("node-a");
      dev->set_device_name("hami-gpu-0");
      dev->add_cdi_device_ids(std::string(kDriver) + "/claim=" + claim.uid());
      dev->set_share_id("share-" + claim.uid());
    }
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const drapb::v1::NodeUnprepareResourcesRequest* req,
                                      drapb::v1::NodeUnprepareResourcesResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& claim : req->claims()) {
      unprepared_.push_back(claim);
      (*resp->mutable_claims())[claim.uid()];
    }
    return grpc::Status::OK;
  }

  // v1beta1.DRAPlugin: the same, without share_id (the field does not exist there).
  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drapb::v1beta1::NodePrepareResourcesRequest* req,
                                    drapb::v1beta1::NodePrepareResourcesResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    beta_calls_++;
    for (const auto& claim : req->claims()) {
      auto* dev = (*resp->mutable_claims())[claim.uid()].add_devices();
      dev->set_pool_name("node-a");
      dev->set_device_name("hami-gpu-1");
    }
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(
      grpc::ServerContext*, const drapb::v1beta1::NodeUnprepareResourcesRequest* req,
      drapb::v1beta1::NodeUnprepareResourcesResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    beta_calls_++;
    for (const auto& claim : req->claims()) {
      (*resp->mutable_claims())[claim.uid()].set_error("busy");
    }
    return grpc::Status::OK;
  }

  // Health: one complete list, then the stream stays open until kubelet or shutdown ends it.
  grpc::Status NodeWatchResources(
      grpc::ServerContext* ctx, const ::v1alpha1::NodeWatchResourcesRequest*,
      grpc::ServerWriter<::v1alpha1::NodeWatchResourcesResponse>* writer) override {
    health_opened_v1alpha1_++;
    ::v1alpha1::NodeWatchResourcesResponse msg;
    auto* d = msg.add_devices();
    d->mutable_device()->set_pool_name("node-a");
    d->mutable_device()->set_device_name("hami-gpu-0");
    d->set_health(::v1alpha1::UNHEALTHY);
    d->set_last_updated_time(1764900000);
    d->set_message("XID 79");
    writer->Write(msg);
    WaitUntilCancelled(ctx);
    return grpc::Status::OK;
  }
  grpc::Status NodeWatchResources(
      grpc::ServerContext* ctx, const ::v1::NodeWatchResourcesRequest*,
      grpc::ServerWriter<::v1::NodeWatchResourcesResponse>* writer) override {
    health_opened_v1_++;
    ::v1::NodeWatchResourcesResponse msg;
    auto* d = msg.add_devices();
    d->mutable_device()->set_pool_name("node-a");
    d->mutable_device()->set_device_name("hami-gpu-0");
    d->set_health(::v1::HEALTHY);
    d->set_health_check_timeout_seconds(30);
    writer->Write(msg);
    WaitUntilCancelled(ctx);
    return grpc::Status::OK;
  }

  std::vector<::pluginregistration::RegistrationStatus> statuses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return statuses_;
  }
  std::vector<drapb::v1::Claim> prepared() const {
    std::lock_guard<std::mutex> lock(mu_);
    return prepared_;
  }
  std::vector<drapb::v1::Claim> unprepared() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unprepared_;
  }
  int beta_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return beta_calls_;
  }
  int health_opened_v1alpha1() const { return health_opened_v1alpha1_; }
  int health_opened_v1() const { return health_opened_v1_; }

 private:
  void RegisterDraServices(grpc::ServerBuilder& b) {
    if (options_.serve_v1) b.RegisterService(static_cast<drapb::v1::DRAPlugin::Service*>(this));
    b.RegisterService(static_cast<drapb::v1beta1::DRAPlugin::Service*>(this));
    b.RegisterService(static_cast<::v1alpha1::DRAResourceHealth::Service*>(this));
    b.RegisterService(static_cast<::v1::DRAResourceHealth::Service*>(this));
  }

  Options options_;
  std::string registry_dir_;
  std::string plugin_dir_;
  std::unique_ptr<grpc::Server> reg_server_;
  std::unique_ptr<grpc::Server> dra_server_;
  mutable std::mutex mu_;
  std::vector<::pluginregistration::RegistrationStatus> statuses_;
  std::vector<drapb::v1::Claim> prepared_;
  std::vector<drapb::v1::Claim> unprepared_;
  int beta_calls_ = 0;
  std::atomic<int> health_opened_v1alpha1_{0};
  std::atomic<int> health_opened_v1_{0};
};

FakePlugin::Options Opts(const std::function<void(FakePlugin::Options&)>& edit) {
  FakePlugin::Options o;
  edit(o);
  return o;
}

RegisterOptions WantDriver() {
  RegisterOptions o;
  o.want_driver = kDriver;
  return o;
}

RegisterOptions LegacyHealth() {
  RegisterOptions o;
  o.legacy_health = true;
  return o;
}

class DraTestKubeletTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-dra-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::unique_ptr<FakePlugin> StartPlugin(FakePlugin::Options options = {}) {
    auto p = std::make_unique<FakePlugin>(root_, std::move(options));
    EXPECT_TRUE(p->Start());
    return p;
  }

  std::string root_;
};

TEST_F(DraTestKubeletTest, RegistersPreparesUnpreparesAndWatchesHealthOverUnixSockets) {
  auto plugin = StartPlugin();
  DraTestKubelet kubelet;
  auto reg = kubelet.Register(plugin->registration_socket(), WantDriver());
  ASSERT_TRUE(reg.ok()) << reg.error();
  EXPECT_EQ(reg->info.type(), "DRAPlugin");
  EXPECT_EQ(reg->info.name(), kDriver);
  EXPECT_EQ(reg->endpoint, root_ + "/plugins/hami-core-gpu.project-hami.io/dra.sock");
  EXPECT_EQ(reg->dra_service, "v1.DRAPlugin");
  EXPECT_EQ(reg->health_service, "v1alpha1.DRAResourceHealth");
  ASSERT_EQ(plugin->statuses().size(), 1u);
  EXPECT_TRUE(plugin->statuses()[0].plugin_registered());
  EXPECT_EQ(plugin->statuses()[0].error(), "");

  auto claim = DraTestKubelet::MakeClaim("team-a", "uid-1", "pod-gpu");
  auto prep = kubelet.Prepare({claim});
  ASSERT_TRUE(prep.ok()) << prep.error();
  ASSERT_EQ(prep->claims().count("uid-1"), 1u);
  const auto& entry = prep->claims().at("uid-1");
  EXPECT_EQ(entry.error(), "");
  ASSERT_EQ(entry.devices_size(), 1);
  EXPECT_EQ(entry.devices(0).pool_name(), "node-a");
  EXPECT_EQ(entry.devices(0).device_name(), "hami-gpu-0");
  ASSERT_TRUE(entry.devices(0).has_share_id());
  EXPECT_EQ(entry.devices(0).share_id(), "share-uid-1");
  ASSERT_EQ(entry.devices(0).cdi_device_ids_size(), 1);
  EXPECT_EQ(entry.devices(0).cdi_device_ids(0), "hami-core-gpu.project-hami.io/claim=uid-1");
  ASSERT_EQ(plugin->prepared().size(), 1u);
  EXPECT_EQ(plugin->prepared()[0].namespace_(), "team-a");
  EXPECT_EQ(plugin->prepared()[0].uid(), "uid-1");
  EXPECT_EQ(plugin->prepared()[0].name(), "pod-gpu");

  auto unprep = kubelet.Unprepare({claim});
  ASSERT_TRUE(unprep.ok()) << unprep.error();
  ASSERT_EQ(unprep->claims().count("uid-1"), 1u);
  EXPECT_EQ(unprep->claims().at("uid-1").error(), "");
  ASSERT_EQ(plugin->unprepared().size(), 1u);
  EXPECT_EQ(plugin->unprepared()[0].uid(), "uid-1");

  auto stream = kubelet.WatchHealth();
  ASSERT_TRUE(stream.ok()) << stream.error();
  ::v1::NodeWatchResourcesResponse msg;
  ASSERT_TRUE((*stream)->Next(&msg));
  ASSERT_EQ(msg.devices_size(), 1);
  EXPECT_EQ(msg.devices(0).device().pool_name(), "node-a");
  EXPECT_EQ(msg.devices(0).device().device_name(), "hami-gpu-0");
  EXPECT_EQ(msg.devices(0).health(), ::v1::UNHEALTHY);
  EXPECT_EQ(msg.devices(0).last_updated_time(), 1764900000);
  EXPECT_EQ(msg.devices(0).message(), "XID 79");
  EXPECT_EQ(plugin->health_opened_v1alpha1(), 1);
  EXPECT_EQ(plugin->health_opened_v1(), 0);
  (*stream)->Cancel();
  EXPECT_FALSE((*stream)->Next(&msg));
  EXPECT_EQ((*stream)->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(DraTestKubeletTest, PrefersV1HealthWhenListedUnlessActingAsAnOlderKubelet) {
  auto plugin = StartPlugin(Opts([](auto& o) {
    o.versions = {"v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"};
  }));
  DraTestKubelet kubelet;
  auto reg = kubelet.Register(plugin->registration_socket());
  ASSERT_TRUE(reg.ok()) << reg.error();
  EXPECT_EQ(reg->health_service, "v1.DRAResourceHealth");
  auto stream = kubelet.WatchHealth();
  ASSERT_TRUE(stream.ok()) << stream.error();
  ::v1::NodeWatchResourcesResponse msg;
  ASSERT_TRUE((*stream)->Next(&msg));
  ASSERT_EQ(msg.devices_size(), 1);
  EXPECT_EQ(msg.devices(0).health(), ::v1::HEALTHY);
  EXPECT_EQ(msg.devices(0).health_check_timeout_seconds(), 30);
  EXPECT_EQ(plugin->health_opened_v1(), 1);
  stream->reset();  // the destructor cancels and drains

  DraTestKubelet old_kubelet;
  auto old_reg = old_kubelet.Register(plugin->registration_socket(), LegacyHealth());
  ASSERT_TRUE(old_reg.ok()) << old_reg.error();
  EXPECT_EQ(old_reg->health_service, "v1alpha1.DRAResourceHealth");
  auto old_stream = old_kubelet.WatchHealth();
  ASSERT_TRUE(old_stream.ok()) << old_stream.error();
  ASSERT_TRUE((*old_stream)->Next(&msg));
  EXPECT_EQ(plugin->health_opened_v1alpha1(), 1);
}

TEST_F(DraTestKubeletTest, AV1beta1OnlyPluginIsCalledThroughV1beta1) {
  auto plugin = StartPlugin(Opts([](auto& o) {
    o.versions = {"v1beta1.DRAPlugin"};
    o.serve_v1 = false;
  }));
  DraTestKubelet kubelet;
  auto reg = kubelet.Register(plugin->registration_socket());
  ASSERT_TRUE(reg.ok()) << reg.error();
  EXPECT_EQ(reg->dra_service, "v1beta1.DRAPlugin");
  EXPECT_EQ(reg->health_service, "");

  auto claim = DraTestKubelet::MakeClaim("team-a", "uid-2", "c");
  auto prep = kubelet.Prepare({claim});
  ASSERT_TRUE(prep.ok()) << prep.error();
  const auto& dev = prep->claims().at("uid-2").devices(0);
  EXPECT_EQ(dev.device_name(), "hami-gpu-1");
  EXPECT_FALSE(dev.has_share_id());
  auto unprep = kubelet.Unprepare({claim});
  ASSERT_TRUE(unprep.ok()) << unprep.error();
  EXPECT_EQ(unprep->claims().at("uid-2").error(), "busy");
  EXPECT_EQ(plugin->beta_calls(), 2);

  auto stream = kubelet.WatchHealth();
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.error().find("no health service"), std::string::npos) << stream.error();
}

TEST_F(DraTestKubeletTest, AnEmptyEndpointMeansTheRegistrationSocket) {
  auto plugin = StartPlugin(Opts([](auto& o) { o.empty_endpoint = true; }));
  DraTestKubelet kubelet;
  auto reg = kubelet.Register(plugin->registration_socket());
  ASSERT_TRUE(reg.ok()) << reg.error();
  EXPECT_EQ(reg->endpoint, plugin->registration_socket());
  auto prep = kubelet.Prepare({DraTestKubelet::MakeClaim("ns", "uid-3", "n")});
  ASSERT_TRUE(prep.ok()) << prep.error();
  EXPECT_EQ(plugin->prepared().size(), 1u);
}

TEST_F(DraTestKubeletTest, AWrongTypeIsRejectedAndThePluginIsTold) {
  auto plugin = StartPlugin(Opts([](auto& o) { o.type = "CSIPlugin"; }));
  DraTestKubelet kubelet;
  auto reg = kubelet.Register(plugin->registration_socket());
  ASSERT_FALSE(reg.ok());
  EXPECT_NE(reg.error().find("field \"type\": \"CSIPlugin\""), std::string::npos) << reg.error();
  ASSERT_EQ(plugin->statuses().size(), 1u);
  EXPECT_FALSE(plugin->statuses()[0].plugin_registered());
  EXPECT_NE(plugin->statuses()[0].error().find("CSIPlugin"), std::string::npos);
  EXPECT_FALSE(kubelet.Prepare({}).ok());
}

TEST_F(DraTestKubeletTest, UnknownServiceVersionsAndAWrongNameAreRejected) {
  {
    auto plugin = StartPlugin(Opts([](auto& o) {
      o.versions = {"v2.DRAPlugin", "v1alpha1.DRAResourceHealth"};
    }));
    auto reg = DraTestKubelet().Register(plugin->registration_socket());
    ASSERT_FALSE(reg.ok());
    EXPECT_NE(reg.error().find("\"v2.DRAPlugin\""), std::string::npos) << reg.error();
    ASSERT_EQ(plugin->statuses().size(), 1u);
    EXPECT_FALSE(plugin->statuses()[0].plugin_registered());
  }
  {
    auto plugin = StartPlugin(Opts([](auto& o) { o.versions.clear(); }));
    auto reg = DraTestKubelet().Register(plugin->registration_socket());
    ASSERT_FALSE(reg.ok());
    EXPECT_NE(reg.error().find("supported_versions\": empty"), std::string::npos) << reg.error();
  }
  {
    auto plugin = StartPlugin(Opts([](auto& o) { o.name = "other.example.com"; }));
    auto reg = DraTestKubelet().Register(plugin->registration_socket(), WantDriver());
    ASSERT_FALSE(reg.ok());
    EXPECT_NE(reg.error().find("\"other.example.com\""), std::string::npos) << reg.error();
  }
}

TEST_F(DraTestKubeletTest, NoServerOnTheSocketIsAnErrorNamingIt) {
  const std::string path = root_ + "/plugins_registry/absent-reg.sock";
  auto reg = DraTestKubelet().Register(path);
  ASSERT_FALSE(reg.ok());
  EXPECT_NE(reg.error().find(path), std::string::npos) << reg.error();
}

TEST(ChooseService, DraServiceInThePluginsOrderHealthV1First) {
  EXPECT_EQ(ChooseDraService({"v1.DRAPlugin", "v1beta1.DRAPlugin"}), "v1.DRAPlugin");
  EXPECT_EQ(ChooseDraService({"v1beta1.DRAPlugin", "v1.DRAPlugin"}), "v1beta1.DRAPlugin");
  EXPECT_EQ(ChooseDraService({"v1alpha1.DRAResourceHealth", "v1.DRAPlugin"}), "v1.DRAPlugin");
  EXPECT_EQ(ChooseDraService({"v1alpha4.Node", "1.0.0"}), "");
  EXPECT_EQ(ChooseHealthService({"v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"}),
            "v1.DRAResourceHealth");
  EXPECT_EQ(ChooseHealthService({"v1.DRAPlugin", "v1alpha1.DRAResourceHealth"}),
            "v1alpha1.DRAResourceHealth");
  EXPECT_EQ(ChooseHealthService({"v1.DRAPlugin", "v1beta1.DRAPlugin"}), "");
}

}  // namespace
}  // namespace hami::draplugin::testing
