// The hami-dra-plugin binary: --prepare-claim prepares a claim file with the node's GPUs (an
// inventory here) and prints kubelet's answer; bad input is an error naming it.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace hami::draplugin {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Ran {
  int status = -1;
  std::string out;
};

// Runs the binary with `args` (shell words), NODE_NAME unset and `env` (VAR=value words) set;
// stdout and stderr together.
Ran RunBinary(const std::string& args, const std::string& env = "") {
  Ran r;
  const std::string command =
      "env -u NODE_NAME " + env + " " + std::string(HAMI_DRA_PLUGIN_BIN) + " " + args;
  std::FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  r.status = ::pclose(p);
  return r;
}

class DraPluginBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-dra-bin-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/inventory.yaml")
        << "devices:\n- {uuid: GPU-a, model: NVIDIA A10, memory: 24576}\n"
           "- {uuid: GPU-b, model: NVIDIA A10, memory: 24576}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Flags() const {
    return "--device-inventory " + dir_ + "/inventory.yaml --hook-path " + dir_ +
           "/hook --cdi-root " + dir_ + "/cdi --kubelet-plugins-directory-path " + dir_ +
           "/plugins --device-plugin-socket none";
  }
  std::string dir_;
};

TEST_F(DraPluginBinaryTest, PrepareClaimPrintsKubeletsAnswerAndWritesTheCdiSpec) {
  std::ofstream(dir_ + "/claim.json") << R"({"apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ml", "uid": "u-1"},
    "status": {"allocation": {"devices": {"results": [{"request": "gpu",
      "driver": "hami-core-gpu.project-hami.io", "pool": "gpu-node", "device": "hami-gpu-1",
      "shareID": "s1", "consumedCapacity": {"memory": "3000Mi", "cores": "30"}}]}}}})";
  Ran r = RunBinary("--prepare-claim " + dir_ + "/claim.json " + Flags());
  ASSERT_EQ(r.status, 0) << r.out;
  Json answer = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(answer["claim"], "ml/c");
  EXPECT_EQ(answer["cdiSpec"], dir_ + "/cdi/hami-core-gpu.project-hami.io-claim_u-1.json");
  EXPECT_EQ(answer["devices"][0]["deviceName"], "hami-gpu-1");
  EXPECT_EQ(answer["devices"][0]["cdiDeviceIDs"][1], "nvidia.com/gpu=GPU-b");
  std::ifstream spec(answer["cdiSpec"].get<std::string>());
  std::stringstream text;
  text << spec.rdbuf();
  Json cdi = Json::parse(text.str());
  EXPECT_EQ(cdi["containerEdits"]["env"][1], "CUDA_DEVICE_MEMORY_LIMIT_0=3000m");
  EXPECT_TRUE(fs::exists(dir_ + "/hook/vgpu/claim-limits/u-1.limits"));
}

TEST_F(DraPluginBinaryTest, BadInputNamesTheFileAndField) {
  std::ofstream(dir_ + "/claim.json") << R"({"metadata": {"name": "c", "uid": "u-1"}})";
  Ran r = RunBinary("--prepare-claim " + dir_ + "/claim.json " + Flags());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("status.allocation.devices.results: not allocated"), std::string::npos)
      << r.out;
  std::ofstream(dir_ + "/claim.json") << "{";
  r = RunBinary("--prepare-claim " + dir_ + "/claim.json " + Flags());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("claim.json: not JSON"), std::string::npos) << r.out;
  r = RunBinary("--kubeconfig /nonexistent " + Flags());
  EXPECT_EQ(WEXITSTATUS(r.status), 2);
  EXPECT_NE(r.out.find("--node-name (or NODE_NAME) is required"), std::string::npos) << r.out;
}

#ifdef HAMI_FAKE_NVML_DIR
// NVML (the fake libnvidia-ml.so.1) with GPU 0 in MIG mode: its 1g.5gb placement 6 is prepared
// by creating that instance through NVML; a second prepare of the claim creates nothing.
TEST_F(DraPluginBinaryTest, PrepareClaimOfAMigDeviceCreatesItsInstanceThroughNvml) {
  const std::string state = dir_ + "/mig.state";
  const std::string env = std::string("LD_LIBRARY_PATH=") + HAMI_FAKE_NVML_DIR +
                          " HAMI_FAKE_NVML_DEVICES='GPU-a|NVIDIA A100-SXM4-40GB|40960|0:0:0.0'"
                          " HAMI_FAKE_NVML_MIG=all HAMI_FAKE_NVML_MIG_STATE=" +
                          state;
  std::ofstream(dir_ + "/claim.json") << R"({"apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ml", "uid": "u-1"},
    "status": {"allocation": {"devices": {"results": [{"request": "gpu",
      "driver": "hami-core-gpu.project-hami.io", "pool": "gpu-node",
      "device": "hami-gpu-0-mig-1g-5gb-6"}]}}}})";
  const std::string flags = "--hook-path " + dir_ + "/hook --cdi-root " + dir_ +
                            "/cdi --kubelet-plugins-directory-path " + dir_ +
                            "/plugins --device-plugin-socket none";
  auto instances = [&] {
    std::ifstream in(state);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("serial", 0) != 0) out.push_back(line);
    }
    return out;
  };
  Ran r = RunBinary("--prepare-claim " + dir_ + "/claim.json " + flags, env);
  ASSERT_EQ(r.status, 0) << r.out;
  // The log lines (stderr) hold braces too: the answer is the indented JSON.
  Json answer = Json::parse(r.out.substr(r.out.find("{\n")), nullptr, false);
  ASSERT_FALSE(answer.is_discarded()) << r.out;
  const std::string id = answer["devices"][0]["cdiDeviceIDs"][1];
  ASSERT_EQ(id.rfind("nvidia.com/gpu=MIG-", 0), 0u) << r.out;
  const std::string mig_uuid = id.substr(id.find('=') + 1);
  auto lines = instances();
  ASSERT_EQ(lines.size(), 1u);
  // "gpu gi profile start size ci uuid": a 1g (profile 0) at slice 6 with its compute instance.
  EXPECT_EQ(lines[0].substr(lines[0].find(' ', 2)), " 0 6 1 0 " + mig_uuid) << lines[0];
  r = RunBinary("--prepare-claim " + dir_ + "/claim.json " + flags, env);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(instances(), lines);
}
#endif

TEST_F(DraPluginBinaryTest, HelpExplainsEveryFlag) {
  Ran r = RunBinary("--help");
  ASSERT_EQ(r.status, 0);
  for (const char* flag :
       {"--node-name", "--kubelet-registrar-directory-path", "--kubelet-plugins-directory-path",
        "--cdi-root", "--hook-path", "--device-inventory", "--nvidia-cdi-kind",
        "--device-plugin-socket", "--refresh-period", "--prepare-claim", "--config-file"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace hami::draplugin
