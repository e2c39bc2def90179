#include "draplugin/state.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace hami::draplugin {
namespace {

namespace fs = std::filesystem;

class PreparedClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-dra-state-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_.hook_path = dir_ + "/hook";
    env_.cdi_dir = dir_ + "/cdi";
    checkpoint_ = dir_ + "/plugin/checkpoint.json";
    fs::create_directories(dir_ + "/plugin");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::vector<GpuFacts> Gpus() {
    GpuFacts g;
    g.gpu.uuid = "GPU-0";
    g.gpu.memory_mib = 16384;
    g.attributes.minor = 0;
    return {g};
  }
  static ClaimAllocation Claim(const std::string& uid = "u-1") {
    return {uid, "ml", "c", {{"gpu", "node-a", "hami-gpu-0", "s1", 3000LL << 20, 30}}};
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_, checkpoint_;
  PrepareEnv env_;
};

// Kubelet retries, and calls Prepare again for a second pod of a shared claim: the same answer,
// and the region a running container uses is not truncated.
TEST_F(PreparedClaimsTest, PrepareIsIdempotentAndKeepsTheRegion) {
  PreparedClaims claims(checkpoint_, env_);
  ASSERT_TRUE(claims.Load());
  auto first = claims.Prepare(Claim(), Gpus());
  ASSERT_TRUE(first) << first.error();
  const std::string region = env_.hook_path + "/vgpu/claims/u-1/u-1.cache";
  struct stat st {};
  ASSERT_EQ(stat(region.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  std::ofstream(region) << "in use";
  ASSERT_TRUE(fs::exists(env_.cdi_dir + "/hami-core-gpu.project-hami.io-claim_u-1.json"));
  auto again = claims.Prepare(Claim(), Gpus());
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(Read(region), "in use");
  EXPECT_EQ(claims.size(), 1u);
}

// The plugin restarts between Prepare and Unprepare: the checkpoint remembers the claim; a
// missing file is made again; Unprepare removes exactly what Prepare made.
TEST_F(PreparedClaimsTest, ARestartedPluginUnpreparesWhatItPrepared) {
  std::vector<PreparedDevice> devices;
  {
    PreparedClaims claims(checkpoint_, env_);
    ASSERT_TRUE(claims.Load());
    auto prepared = claims.Prepare(Claim(), Gpus());
    ASSERT_TRUE(prepared) << prepared.error();
    devices = *prepared;
  }
  const std::string limits = env_.hook_path + "/vgpu/claim-limits/u-1.limits";
  ASSERT_TRUE(fs::remove(limits));
  std::ofstream(env_.hook_path + "/vgpu/claims/u-1/written-by-the-app") << "x";
  fs::create_directories(env_.hook_path + "/vgpu/claims/other");  // another claim's: kept
  PreparedClaims restarted(checkpoint_, env_);
  ASSERT_TRUE(restarted.Load());
  EXPECT_TRUE(restarted.Has("u-1"));
  auto again = restarted.Prepare(Claim(), Gpus());
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, devices);
  EXPECT_NE(Read(limits).find("CUDA_DEVICE_MEMORY_LIMIT_0=3000m"), std::string::npos);
  ASSERT_TRUE(restarted.Unprepare("u-1"));
  EXPECT_FALSE(fs::exists(limits));
  EXPECT_FALSE(fs::exists(env_.hook_path + "/vgpu/claims/u-1"));
  EXPECT_FALSE(fs::exists(env_.cdi_dir + "/hami-core-gpu.project-hami.io-claim_u-1.json"));
  EXPECT_TRUE(fs::exists(env_.hook_path + "/vgpu/claims/other"));
  EXPECT_FALSE(restarted.Has("u-1"));
  EXPECT_TRUE(restarted.Unprepare("u-1"));  // kubelet retries: done already
  PreparedClaims reloaded(checkpoint_, env_);
  ASSERT_TRUE(reloaded.Load());
  EXPECT_EQ(reloaded.size(), 0u);
}

TEST_F(PreparedClaimsTest, BadInputIsAnErrorThatNamesIt) {
  std::ofstream(checkpoint_) << "{not json";
  PreparedClaims claims(checkpoint_, env_);
  auto loaded = claims.Load();
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error(), "checkpoint \"" + checkpoint_ + "\": not JSON");
  std::ofstream(checkpoint_) << R"({"version":1,"claims":{"../../etc":{}}})";
  loaded = claims.Load();
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().find(R"(claim uid: want letters, digits and '-', got "../../etc")"),
            std::string::npos)
      << loaded.error();
  PreparedClaims fresh(dir_ + "/none.json", env_);
  ASSERT_TRUE(fresh.Load());
  auto traversal = fresh.Prepare(Claim("../x"), Gpus());
  ASSERT_FALSE(traversal);
  EXPECT_FALSE(fs::exists(env_.hook_path));
  auto unknown =
      fresh.Prepare({"u-2", "ml", "c", {{"gpu", "node-a", "hami-gpu-9", "s1", -1, -1}}}, Gpus());
  ASSERT_FALSE(unknown);
  EXPECT_EQ(fresh.size(), 0u);
}

}  // namespace
}  // namespace hami::draplugin
