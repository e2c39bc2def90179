// hami-dra-plugin against the sim API server (its resource.k8s.io/v1 with the API's validation):
// the pool written, rewritten on a change only, withdrawn; the whole agent from an inventory file
// registered with the test kubelet, preparing a claim the API server holds (a share, and a MIG
// device through an injected MIG driver); a node in device-plugin mode refused.
#include "draplugin/agent.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "draplugin/dra_test_kubelet.h"
#include "draplugin/fake_mig_driver.h"
#include "draplugin/sim_claims.h"
#include "support/sim_node_test.h"

namespace hami::draplugin {
namespace {

namespace fs = std::filesystem;
using testing::DraTestKubelet;

class DraAgentTest : public test_support::SimNodeTest {
 protected:
  void SetUp() override {
    SimNodeTest::SetUp();
    char tmpl[] = "/tmp/hami-dra-agent-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<Json> Slices() {
    auto got = client_->ListAll(k8s::resources::kResourceSlices, "", {});
    EXPECT_TRUE(got) << (got ? "" : got.error().ToString());
    return got ? got->items : std::vector<Json>{};
  }

  static GpuFacts Gpu(int index, bool healthy = true) {
    GpuFacts g;
    g.gpu.index = static_cast<uint64_t>(index);
    g.gpu.uuid = "GPU-" + std::to_string(index);
    g.gpu.model = "NVIDIA A10";
    g.gpu.memory_mib = 24576;
    g.gpu.healthy = healthy;
    return g;
  }

  AgentOptions Options() {
    AgentOptions o;
    o.discovery.node_name = test_support::kNode;
    o.discovery.device_inventory = dir_ + "/inventory.yaml";
    std::ofstream(o.discovery.device_inventory)
        << "devices:\n- {uuid: GPU-a, model: NVIDIA A10, memory: 24576}\n"
           "- {uuid: GPU-b, model: NVIDIA A10, memory: 24576}\n";
    o.server.registrar_dir = dir_ + "/plugins_registry";
    o.server.plugin_dir = dir_ + "/plugins/hami-core-gpu.project-hami.io";
    o.prepare.hook_path = dir_ + "/hook";
    o.prepare.cdi_dir = dir_ + "/cdi";
    o.device_plugin_socket = dir_ + "/device-plugins/nvidia-gpu.sock";
    return o;
  }

  std::string dir_;
};

TEST_F(DraAgentTest, ThePoolIsWrittenOnChangeOnlyAndWithdrawn) {
  SlicePublisher publisher(client_.get(), {test_support::kNode, 1.0});
  ASSERT_TRUE(publisher.Publish({Gpu(0), Gpu(1)}));
  auto slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 1);
  EXPECT_EQ(slices[0]["spec"]["devices"].size(), 2u);
  EXPECT_EQ(publisher.writes(), 1);
  ASSERT_TRUE(publisher.Publish({Gpu(0), Gpu(1)}));  // nothing changed: nothing written
  EXPECT_EQ(publisher.writes(), 1);
  EXPECT_EQ(publisher.generation(), 1);
  ASSERT_TRUE(publisher.Publish({Gpu(0), Gpu(1, /*healthy=*/false)}));
  slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 2);
  EXPECT_TRUE(slices[0]["spec"]["devices"][1].contains("taints"));
  // A restarted plugin continues the generation the API server holds.
  SlicePublisher restarted(client_.get(), {test_support::kNode, 1.0});
  ASSERT_TRUE(restarted.Publish({Gpu(0)}));
  slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 3);
  ASSERT_TRUE(restarted.Withdraw());
  EXPECT_TRUE(Slices().empty());
}

// A GPU in MIG mode: the counter-set slice is written before the devices that consume it (the
// API server checks each consumesCounters against the pool's stored sets).
TEST_F(DraAgentTest, AMigGpusCounterSetIsAcceptedBeforeItsDevices) {
  GpuFacts mig = Gpu(1);
  mig.gpu.mig_profiles = {{{"1g.6gb", 5952, 25, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}}}, 4}};
  SlicePublisher publisher(client_.get(), {test_support::kNode, 1.0});
  auto published = publisher.Publish({Gpu(0), mig});
  ASSERT_TRUE(published) << published.error();
  auto slices = Slices();
  ASSERT_EQ(slices.size(), 2u);
  size_t devices = 0;
  for (const Json& s : slices) devices += s["spec"].value("devices", Json::array()).size();
  EXPECT_EQ(devices, 5u);  // hami-gpu-0 and four 1g.6gb placements
}

// From an inventory to a prepared claim: what kubelet and kube-scheduler would do around it.
TEST_F(DraAgentTest, TheAgentPublishesRegistersAndPreparesAClaimOfTheApiServer) {
  DraAgent agent(Options(), client_.get(), RealClock());
  ASSERT_TRUE(agent.Start());
  auto slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["devices"][1]["attributes"]["uuid"], Json({{"string", "GPU-b"}}));
  // A claim as kube-scheduler leaves it: created, then allocated through /status.
  auto claim_uid = testing::CreateAllocatedClaim(*client_, "hami-gpu-1");
  ASSERT_TRUE(claim_uid) << claim_uid.error();
  const std::string uid = *claim_uid;

  DraTestKubelet kubelet;
  ASSERT_TRUE(kubelet.Register(agent.server()->registration_socket()));
  auto prepared = kubelet.Prepare({DraTestKubelet::MakeClaim("default", uid, "c")});
  ASSERT_TRUE(prepared) << prepared.error();
  const auto& answer = prepared->claims().at(uid);
  ASSERT_EQ(answer.error(), "");
  ASSERT_EQ(answer.devices_size(), 1);
  EXPECT_EQ(answer.devices(0).device_name(), "hami-gpu-1");
  std::ifstream spec_file(dir_ + "/cdi/hami-core-gpu.project-hami.io-claim_" + uid + ".json");
  std::stringstream text;
  text << spec_file.rdbuf();
  Json spec = Json::parse(text.str());
  EXPECT_EQ(spec["containerEdits"]["env"][0], "NVIDIA_VISIBLE_DEVICES=GPU-b");
  EXPECT_EQ(spec["containerEdits"]["env"][1], "CUDA_DEVICE_MEMORY_LIMIT_0=3000m");
  agent.Stop();
  EXPECT_TRUE(Slices().empty());
}

// The MIG driver says GPU 0 is in MIG mode: it publishes its MIG placements instead of the
// shareable device, and a claim for one gets the instance the driver creates.
TEST_F(DraAgentTest, AGpuInMigModePublishesPlacementsAndPreparesAMigClaim) {
  testing::FakeMigDriver driver;
  driver.AddGpu(0, true);
  driver.AddGpu(1, false);
  AgentOptions o = Options();
  std::ofstream(o.discovery.device_inventory)
      << "devices:\n- {uuid: GPU-a, model: NVIDIA A100-SXM4-80GB, memory: 81920}\n"
         "- {uuid: GPU-b, model: NVIDIA A100-SXM4-80GB, memory: 81920}\n";
  o.mig_driver = &driver;
  o.mig_lock_path = dir_ + "/hami-mig-apply.lock";
  DraAgent agent(o, client_.get(), RealClock());
  ASSERT_TRUE(agent.Start());
  std::vector<std::string> names;
  for (const Json& s : Slices()) {
    for (const Json& d : s["spec"].value("devices", Json::array())) names.push_back(d["name"]);
  }
  EXPECT_EQ(std::count(names.begin(), names.end(), "hami-gpu-1"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "hami-gpu-0"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "hami-gpu-0-mig-1g-10gb-3"), 1);

  auto claim_uid = testing::CreateAllocatedClaim(*client_, "hami-gpu-0-mig-1g-10gb-3");
  ASSERT_TRUE(claim_uid) << claim_uid.error();
  DraTestKubelet kubelet;
  ASSERT_TRUE(kubelet.Register(agent.server()->registration_socket()));
  auto prepared = kubelet.Prepare({DraTestKubelet::MakeClaim("default", *claim_uid, "c")});
  ASSERT_TRUE(prepared) << prepared.error();
  const auto& answer = prepared->claims().at(*claim_uid);
  ASSERT_EQ(answer.error(), "");
  ASSERT_EQ(driver.instances(0).size(), 1u);
  EXPECT_EQ(driver.instances(0)[0].placement, (protocol::MigPlacement{3, 1}));
  EXPECT_EQ(answer.devices(0).cdi_device_ids(1),
            "nvidia.com/gpu=" + driver.instances(0)[0].mig_uuid);
  auto undone = kubelet.Unprepare({DraTestKubelet::MakeClaim("default", *claim_uid, "c")});
  ASSERT_TRUE(undone) << undone.error();
  EXPECT_EQ(undone->claims().at(*claim_uid).error(), "");
  EXPECT_TRUE(driver.instances(0).empty());
  agent.Stop();
}

// A GPU in MIG mode whose profiles the allowlist does not name is not published at all (it cannot
// be shared); one whose mode cannot be read is shared.
TEST(WithMigProfiles, LeavesOutAMigGpuWithoutAllowlistedProfiles) {
  testing::FakeMigDriver driver;
  driver.AddGpu(0, true);
  driver.AddGpu(1, true);
  GpuFacts a, b, c;
  a.gpu = {0, "GPU-a", "NVIDIA A100-SXM4-80GB", 81920};
  b.gpu = {1, "GPU-b", "NVIDIA Unknown", 81920};
  c.gpu = {2, "GPU-c", "NVIDIA A10", 24576};  // the driver does not know it
  std::vector<std::string> notes;
  auto out = WithMigProfiles({a, b, c}, driver, deviceplugin::PluginConfig{}.mig_profile_allowlist,
                             &notes);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].gpu.uuid, "GPU-a");
  EXPECT_FALSE(out[0].gpu.mig_profiles.empty());
  EXPECT_EQ(out[1].gpu.uuid, "GPU-c");
  EXPECT_TRUE(out[1].gpu.mig_profiles.empty());
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(
      notes[0],
      R"(GPU "GPU-b" (NVIDIA Unknown): in MIG mode, offers no profile of migProfileAllowlist: not published)");
  EXPECT_EQ(notes[1].rfind(R"(GPU "GPU-c" (NVIDIA A10): MIG mode unknown ()", 0), 0u) << notes[1];
}

TEST_F(DraAgentTest, ANodeInDevicePluginModeIsRefused) {
  AgentOptions o = Options();
  fs::create_directories(dir_ + "/device-plugins");
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, o.device_plugin_socket.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  DraAgent agent(o, client_.get(), RealClock());
  auto started = agent.Start();
  ::close(fd);
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().find("is in device-plugin mode"), std::string::npos) << started.error();
  EXPECT_TRUE(Slices().empty());
  // A stale socket file (the device plugin gone) does not count.
  DraAgent again(o, client_.get(), RealClock());
  EXPECT_TRUE(again.Start());
}

}  // namespace
}  // namespace hami::draplugin
