// hami-dra-plugin's gRPC surface driven by the test kubelet over real unix sockets: registration,
// prepare twice, a restart between prepare and unprepare, a claim replaced under its name, a MIG
// claim, and the health stream.
#include "draplugin/server.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>

#include "dra/v1beta1/api.grpc.pb.h"
#include "draplugin/dra_test_kubelet.h"
#include "draplugin/fake_mig_driver.h"

namespace hami::draplugin {
namespace {

namespace fs = std::filesystem;
using testing::DraTestKubelet;

class DraServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-dra-srv-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_.hook_path = dir_ + "/hook";
    env_.cdi_dir = dir_ + "/cdi";
    options_.node_name = "node-a";
    options_.registrar_dir = dir_ + "/plugins_registry";
    options_.plugin_dir = dir_ + "/plugins/hami-core-gpu.project-hami.io";
    GpuFacts g;
    g.gpu.uuid = "GPU-0";
    g.gpu.memory_mib = 16384;
    gpus_ = {g};
    g.gpu.uuid = "GPU-1";
    g.gpu.index = 1;
    gpus_.push_back(g);
    // The API server's claims, by namespace/name.
    api_["ml/c"] = Claim("uid-1", "s1");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static Json Claim(const std::string& uid, const std::string& share) {
    return {{"metadata", {{"name", "c"}, {"namespace", "ml"}, {"uid", uid}}},
            {"status",
             {{"allocation",
               {{"devices",
                 {{"results",
                   {{{"request", "gpu"},
                     {"driver", "hami-core-gpu.project-hami.io"},
                     {"pool", "node-a"},
                     {"device", "hami-gpu-1"},
                     {"shareID", share},
                     {"consumedCapacity", {{"memory", "3000Mi"}, {"cores", "30"}}}}}}}}}}}}};
  }

  std::unique_ptr<DraServer> Serve(PreparedClaims* claims) {
    auto server = std::make_unique<DraServer>(
        options_, claims,
        [this](const std::string& ns, const std::string& name) -> Result<Json> {
          ++gets_;
          auto it = api_.find(ns + "/" + name);
          if (it == api_.end()) return Error{"404 NotFound"};
          return it->second;
        },
        [this] { return gpus_; });
    auto started = server->Start();
    EXPECT_TRUE(started) << started.error();
    return server;
  }

  std::string dir_;
  PrepareEnv env_;
  ServerOptions options_;
  std::vector<GpuFacts> gpus_;
  std::map<std::string, Json> api_;
  int gets_ = 0;
};

TEST_F(DraServerTest, RegistersPreparesTwiceSurvivesARestartAndUnprepares) {
  const std::string checkpoint = dir_ + "/checkpoint.json";
  PreparedClaims claims(checkpoint, env_);
  ASSERT_TRUE(claims.Load());
  auto server = Serve(&claims);
  DraTestKubelet kubelet;
  auto reg = kubelet.Register(server->registration_socket(),
                              {.want_driver = "hami-core-gpu.project-hami.io"});
  ASSERT_TRUE(reg) << reg.error();
  EXPECT_EQ(reg->dra_service, "v1.DRAPlugin");
  EXPECT_EQ(reg->endpoint, options_.plugin_dir + "/dra.sock");
  EXPECT_TRUE(server->registered());

  auto first = kubelet.Prepare({DraTestKubelet::MakeClaim("ml", "uid-1", "c")});
  ASSERT_TRUE(first) << first.error();
  const auto& answer = first->claims().at("uid-1");
  EXPECT_EQ(answer.error(), "");
  ASSERT_EQ(answer.devices_size(), 1);
  EXPECT_EQ(answer.devices(0).pool_name(), "node-a");
  EXPECT_EQ(answer.devices(0).device_name(), "hami-gpu-1");
  EXPECT_EQ(answer.devices(0).share_id(), "s1");
  EXPECT_EQ(answer.devices(0).request_names(0), "gpu");
  ASSERT_EQ(answer.devices(0).cdi_device_ids_size(), 2);
  EXPECT_EQ(answer.devices(0).cdi_device_ids(0), "hami-core-gpu.project-hami.io/claim=uid-1-s1");
  EXPECT_TRUE(fs::exists(env_.cdi_dir + "/hami-core-gpu.project-hami.io-claim_uid-1.json"));
  auto again = kubelet.Prepare({DraTestKubelet::MakeClaim("ml", "uid-1", "c")});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->claims().at("uid-1").SerializeAsString(), answer.SerializeAsString());
  EXPECT_EQ(gets_, 1);  // the second answer came from the checkpoint

  // The plugin restarts (a rollout) before the pod ends.
  server->Stop();
  server.reset();
  PreparedClaims restarted(checkpoint, env_);
  ASSERT_TRUE(restarted.Load());
  server = Serve(&restarted);
  DraTestKubelet kubelet2;
  ASSERT_TRUE(kubelet2.Register(server->registration_socket()));
  auto undone = kubelet2.Unprepare({DraTestKubelet::MakeClaim("ml", "uid-1", "c")});
  ASSERT_TRUE(undone) << undone.error();
  EXPECT_EQ(undone->claims().at("uid-1").error(), "");
  EXPECT_FALSE(fs::exists(env_.cdi_dir + "/hami-core-gpu.project-hami.io-claim_uid-1.json"));
  EXPECT_FALSE(fs::exists(env_.hook_path + "/vgpu/claims/uid-1"));
  server->Stop();
  EXPECT_FALSE(fs::exists(options_.plugin_dir + "/dra.sock"));
}

// kubelet 1.32-1.33 speak v1beta1 only: the same answer without share_id.
TEST_F(DraServerTest, Kubelet132GetsTheSameAnswerThroughV1beta1) {
  PreparedClaims claims(dir_ + "/checkpoint.json", env_);
  ASSERT_TRUE(claims.Load());
  auto server = Serve(&claims);
  DraTestKubelet kubelet;
  auto reg = kubelet.Register(server->registration_socket());
  ASSERT_TRUE(reg) << reg.error();
  const auto& versions = reg->info.supported_versions();
  EXPECT_EQ(std::vector<std::string>(versions.begin(), versions.end()),
            (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin",
                                      "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"}));
  namespace beta = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
  auto stub = beta::DRAPlugin::NewStub(
      grpc::CreateChannel("unix://" + server->plugin_socket(), grpc::InsecureChannelCredentials()));
  beta::NodePrepareResourcesRequest request;
  auto* c = request.add_claims();
  c->set_namespace_("ml");
  c->set_uid("uid-1");
  c->set_name("c");
  beta::NodePrepareResourcesResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(stub->NodePrepareResources(&context, request, &response).ok());
  const auto& answer = response.claims().at("uid-1");
  EXPECT_EQ(answer.error(), "");
  ASSERT_EQ(answer.devices_size(), 1);
  EXPECT_EQ(answer.devices(0).device_name(), "hami-gpu-1");
  EXPECT_EQ(answer.devices(0).cdi_device_ids(0), "hami-core-gpu.project-hami.io/claim=uid-1-s1");
  // No v1 share_id left behind in the v1beta1 bytes.
  ::k8s::io::kubelet::pkg::apis::dra::v1::Device as_v1;
  ASSERT_TRUE(as_v1.ParseFromString(answer.devices(0).SerializeAsString()));
  EXPECT_FALSE(as_v1.has_share_id());
  beta::NodeUnprepareResourcesRequest undo;
  *undo.add_claims() = *c;
  beta::NodeUnprepareResourcesResponse undone;
  grpc::ClientContext context2;
  ASSERT_TRUE(stub->NodeUnprepareResources(&context2, undo, &undone).ok());
  EXPECT_EQ(undone.claims().at("uid-1").error(), "");
  EXPECT_EQ(claims.size(), 0u);
}

TEST_F(DraServerTest, ErrorsComeBackPerClaim) {
  PreparedClaims claims(dir_ + "/checkpoint.json", env_);
  ASSERT_TRUE(claims.Load());
  auto server = Serve(&claims);
  DraTestKubelet kubelet;
  ASSERT_TRUE(kubelet.Register(server->registration_socket()));
  api_["ml/other"] = Claim("uid-9", "s9");
  auto r = kubelet.Prepare({DraTestKubelet::MakeClaim("ml", "uid-1", "c"),
                            DraTestKubelet::MakeClaim("ml", "uid-2", "gone"),
                            DraTestKubelet::MakeClaim("ml", "uid-3", "other")});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->claims().at("uid-1").error(), "");
  EXPECT_EQ(r->claims().at("uid-2").error(), "ResourceClaim ml/gone: 404 NotFound");
  EXPECT_EQ(
      r->claims().at("uid-3").error(),
      R"(ResourceClaim ml/other: uid "uid-9", kubelet asked for "uid-3" (the claim was replaced))");
  EXPECT_EQ(claims.size(), 1u);
}

// A claim for a MIG device through kubelet: the instance is created at the placement and its
// MIG UUID answered; a retry creates nothing; a claim whose placement overlaps it fails with the
// reason (kubelet's FailedPrepareDynamicResources); a restarted plugin's Unprepare destroys it.
TEST_F(DraServerTest, AMigClaimIsPreparedAndUnpreparedAcrossARestart) {
  testing::FakeMigDriver driver;
  driver.AddGpu(0, true);
  deviceplugin::MigProfileCapacity one{{"1g.10gb", 9856, 15, 1, {}}, 7};
  for (uint32_t s = 0; s < 7; ++s) one.profile.placements.push_back({s, 1});
  gpus_[0].gpu.mig_profiles = {one, {{"3g.40gb", 40192, 43, 3, {{0, 4}, {4, 4}}}, 2}};
  auto mig_claim = [](const std::string& uid, const std::string& name, const std::string& device) {
    return Json{{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", uid}}},
                {"status",
                 {{"allocation",
                   {{"devices",
                     {{"results",
                       {{{"request", "mig"},
                         {"driver", "hami-core-gpu.project-hami.io"},
                         {"pool", "node-a"},
                         {"device", device}}}}}}}}}}};
  };
  api_["ml/m"] = mig_claim("uid-m", "m", "hami-gpu-0-mig-1g-10gb-3");
  api_["ml/n"] = mig_claim("uid-n", "n", "hami-gpu-0-mig-3g-40gb-0");
  const std::string checkpoint = dir_ + "/checkpoint.json";
  const std::string lock = dir_ + "/hami-mig-apply.lock";
  PreparedClaims claims(checkpoint, env_, &driver, lock);
  ASSERT_TRUE(claims.Load());
  auto server = Serve(&claims);
  DraTestKubelet kubelet;
  ASSERT_TRUE(kubelet.Register(server->registration_socket()));
  auto first = kubelet.Prepare({DraTestKubelet::MakeClaim("ml", "uid-m", "m")});
  ASSERT_TRUE(first) << first.error();
  const auto& answer = first->claims().at("uid-m");
  ASSERT_EQ(answer.error(), "");
  ASSERT_EQ(driver.instances(0).size(), 1u);
  const std::string mig_uuid = driver.instances(0)[0].mig_uuid;
  EXPECT_EQ(driver.instances(0)[0].placement, (protocol::MigPlacement{3, 1}));
  ASSERT_EQ(answer.devices_size(), 1);
  EXPECT_EQ(answer.devices(0).device_name(), "hami-gpu-0-mig-1g-10gb-3");
  EXPECT_FALSE(answer.devices(0).has_share_id());
  ASSERT_EQ(answer.devices(0).cdi_device_ids_size(), 2);
  EXPECT_EQ(answer.devices(0).cdi_device_ids(0),
            "hami-core-gpu.project-hami.io/claim=uid-m-hami-gpu-0-mig-1g-10gb-3");
  EXPECT_EQ(answer.devices(0).cdi_device_ids(1), "nvidia.com/gpu=" + mig_uuid);
  auto again = kubelet.Prepare({DraTestKubelet::MakeClaim("ml", "uid-m", "m"),
                                DraTestKubelet::MakeClaim("ml", "uid-n", "n")});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->claims().at("uid-m").SerializeAsString(), answer.SerializeAsString());
  EXPECT_EQ(driver.creates, 2);
  EXPECT_EQ(again->claims().at("uid-n").error(),
            R"(ResourceClaim ml/n: MIG device "hami-gpu-0-mig-3g-40gb-0" (3g.40gb at {start 0, )"
            R"(size 4} on GPU "GPU-0"): the placement is taken by GPU instance 1 (profile id 0 )"
            R"(at {start 3, size 1}, )" +
                mig_uuid + ")");

  server->Stop();
  server.reset();
  PreparedClaims restarted(checkpoint, env_, &driver, lock);
  ASSERT_TRUE(restarted.Load());
  server = Serve(&restarted);
  DraTestKubelet kubelet2;
  ASSERT_TRUE(kubelet2.Register(server->registration_socket()));
  auto undone = kubelet2.Unprepare({DraTestKubelet::MakeClaim("ml", "uid-m", "m")});
  ASSERT_TRUE(undone) << undone.error();
  EXPECT_EQ(undone->claims().at("uid-m").error(), "");
  EXPECT_TRUE(driver.instances(0).empty());
  EXPECT_EQ(driver.destroys, 1);
  EXPECT_FALSE(fs::exists(env_.cdi_dir + "/hami-core-gpu.project-hami.io-claim_uid-m.json"));
}

TEST_F(DraServerTest, HealthStreamSendsEachChange) {
  PreparedClaims claims(dir_ + "/checkpoint.json", env_);
  ASSERT_TRUE(claims.Load());
  auto server = Serve(&claims);
  DraTestKubelet kubelet;
  ASSERT_TRUE(kubelet.Register(server->registration_socket()));
  server->UpdateHealth(gpus_, 1000);
  auto stream = kubelet.WatchHealth();
  ASSERT_TRUE(stream) << stream.error();
  ::v1::NodeWatchResourcesResponse msg;
  ASSERT_TRUE((*stream)->Next(&msg));
  ASSERT_EQ(msg.devices_size(), 2);
  EXPECT_EQ(msg.devices(1).device().pool_name(), "node-a");
  EXPECT_EQ(msg.devices(1).device().device_name(), "hami-gpu-1");
  EXPECT_EQ(msg.devices(1).health(), ::v1::HEALTHY);
  EXPECT_EQ(msg.devices(1).last_updated_time(), 1000);
  server->UpdateHealth(gpus_, 1010);  // unchanged: nothing sent
  gpus_[1].gpu.healthy = false;
  server->UpdateHealth(gpus_, 1020);
  ASSERT_TRUE((*stream)->Next(&msg));
  EXPECT_EQ(msg.devices(1).health(), ::v1::UNHEALTHY);
  EXPECT_EQ(msg.devices(1).last_updated_time(), 1020);
  EXPECT_EQ(msg.devices(0).health(), ::v1::HEALTHY);
  EXPECT_EQ(kubelet.registration().health_service, "v1.DRAResourceHealth");  // kubelet 1.38
  // Kubelet 1.34-1.37 open v1alpha1: the same state.
  DraTestKubelet old_kubelet;
  auto reg = old_kubelet.Register(server->registration_socket(),
                                  {.want_driver = "", .legacy_health = true});
  ASSERT_TRUE(reg) << reg.error();
  EXPECT_EQ(reg->health_service, "v1alpha1.DRAResourceHealth");
  auto old_stream = old_kubelet.WatchHealth();
  ASSERT_TRUE(old_stream) << old_stream.error();
  ASSERT_TRUE((*old_stream)->Next(&msg));
  EXPECT_EQ(msg.devices(1).health(), ::v1::UNHEALTHY);
  server->Stop();
  EXPECT_FALSE((*stream)->Next(&msg));
  EXPECT_FALSE((*old_stream)->Next(&msg));
}

}  // namespace
}  // namespace hami::draplugin
