// The hami-device-plugin binary: --help, --print-register (seed inventory and fake NVML), and a
// full run against the in-process sim apiserver that ends cleanly on SIGTERM, also with the
// flags HAMi's chart v2.10.0 renders (Go-style -v=4, --mig-strategy, --disable-core-limit).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "fake_kubelet.h"
#include "k8s/client.h"
#include "sim/apiserver/apiserver.h"

extern char** environ;

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;

// Runs a shell command, returns its stdout and sets *status to its exit code.
std::string RunShell(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = WEXITSTATUS(pclose(p));
  return out;
}

const std::string kBin = HAMI_DEVICE_PLUGIN_BIN;

TEST(Binary, HelpExplainsEveryFlag) {
  int status = -1;
  std::string help = RunShell(kBin + " --help", &status);
  EXPECT_EQ(status, 0);
  for (const char* flag :
       {"--kubeconfig", "--node-name", "NODE_NAME", "--config-file", "CONFIG_FILE",
        "--node-config-file", "--kubelet-socket", "HOOK_PATH", "--device-list-strategy",
        "--device-inventory", "-v", "--print-register", "--mig-strategy",
        // HAMi's flags accepted and ignored (its chart renders --disable-core-limit)
        "Accepted for HAMi compatibility (ignored)", "--disable-core-limit", "--device-split-count",
        "--fail-on-init-error", "--logtostderr", "--report-node-capacity"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

TEST(Binary, PrintRegisterFromTheSeedInventory) {
  int status = -1;
  std::string out = RunShell(kBin +
                                 " --print-register --node-config-file /nonexistent "
                                 "--device-inventory examples/inventory/two-v100.yaml 2>/dev/null",
                             &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out,
            R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,)"
            R"("devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core",)"
            R"("health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,)"
            R"("count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB",)"
            R"("numa":1,"mode":"hami-core","health":true}])"
            "\n");
}

// HAMi v2.11's chart passes --report-node-capacity (charts/hami devicePlugin.reportNodeCapacity):
// accepted and ignored, the register is unchanged.
TEST(Binary, AcceptsHamiReportNodeCapacity) {
  int status = -1;
  const std::string base = kBin +
                           " --print-register --node-config-file /nonexistent "
                           "--device-inventory examples/inventory/two-v100.yaml";
  const std::string plain = RunShell(base + " 2>/dev/null", &status);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(RunShell(base + " --report-node-capacity=true 2>/dev/null", &status), plain);
  EXPECT_EQ(status, 0);
}

TEST(Binary, PrintRegisterFromNvmlWithConfig) {
  const fs::path dir = fs::temp_directory_path() / ("hami-dp-bin-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sys/bus/pci/devices/0000:3b:00.0");
  std::ofstream(dir / "sys/bus/pci/devices/0000:3b:00.0/numa_node") << "1\n";
  std::ofstream(dir / "config.yaml")
      << "nvidia:\n  deviceSplitCount: 4\n  deviceMemoryScaling: 2\n";
  int status = -1;
  std::string out =
      RunShell("HAMI_FAKE_NVML_DEVICES='GPU-a|NVIDIA A10|24576|00000000:3B:00.0' " + kBin +
                   " --print-register --node-config-file /nonexistent --config-file " +
                   (dir / "config.yaml").string() + " --nvml-library " + HAMI_FAKE_NVML_PATH +
                   " --sysfs-root " + (dir / "sys").string() + " 2>/dev/null",
               &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, R"([{"id":"GPU-a","count":4,"devmem":49152,"devcore":100,"type":"NVIDIA A10",)"
                 R"("numa":1,"mode":"hami-core","health":true}])"
                 "\n");
  std::string err =
      RunShell(kBin + " --print-register --nvml-library /nonexistent.so 2>&1", &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("dlopen"), std::string::npos) << err;
  fs::remove_all(dir);
}

// Runs the plugin with `flags` (after its kubeconfig, kubelet socket and, when `inventory`, the
// seed inventory) until it has registered with kubelet and published the node annotation; then
// SIGTERM ends it with status 0. `after_exit` runs once the plugin has exited, before the
// directory is removed, with the published hami.io/node-nvidia-register value.
void ServeUntilSigterm(const std::vector<std::string>& flags,
                       const std::function<void(const std::string&)>& after_exit = nullptr,
                       bool inventory = true) {
  const std::string dir = "/tmp/hami-dp-sig-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir + "/plugins");
  sim::ApiServer server{sim::ApiServerOptions{}};
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(server.WriteKubeconfig(dir + "/kubeconfig"));
  k8s::RestConfig cfg;
  cfg.server = server.url();
  k8s::Client client(cfg);
  k8s::Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}};
  ASSERT_TRUE(client.Create(k8s::resources::kNodes, "", node));
  testing::FakeKubelet kubelet(dir + "/plugins");
  ASSERT_TRUE(kubelet.Start());

  std::vector<std::string> args = {kBin, "--kubeconfig=" + dir + "/kubeconfig",
                                   "--kubelet-socket=" + kubelet.socket()};
  if (inventory) args.push_back("--device-inventory=examples/inventory/two-v100.yaml");
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, kBin.c_str(), nullptr, nullptr, argv.data(), environ), 0);

  EXPECT_TRUE(testing::WaitFor([&] { return !kubelet.requests().empty(); }));
  std::string published;
  EXPECT_TRUE(testing::WaitFor([&] {
    auto n = client.Get(k8s::resources::kNodes, "", "n1");
    published = n ? k8s::Annotation(*n, "hami.io/node-nvidia-register").value_or("") : "";
    return !published.empty();
  }));
  EXPECT_TRUE(fs::exists(dir + "/plugins/nvidia-gpu.sock"));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  EXPECT_FALSE(fs::exists(dir + "/plugins/nvidia-gpu.sock"));
  if (after_exit) after_exit(published);
  kubelet.Stop();
  server.Stop();
  fs::remove_all(dir);
}

TEST(Binary, ServesUntilSigterm) {
  ServeUntilSigterm({"--node-name=n1", "--node-config-file=/nonexistent"});
}

// HAMi v2.10.0's chart: `--config-file=/device-config.yaml --mig-strategy=none
// --disable-core-limit=false` then devicePlugin.extraArgs (`-v=4`); NODE_NAME from the pod (here
// Go's single-dash -node-name).
TEST(Binary, ServesWithTheFlagsHamisChartRenders) {
  const std::string config = "/tmp/hami-dp-hami-config-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(config) << "nvidia:\n  resourceCountName: nvidia.com/gpu\n"
                           "  deviceSplitCount: 10\n";
  ServeUntilSigterm({"-node-name=n1", "--node-config-file=/nonexistent", "--config-file=" + config,
                     "--mig-strategy=none", "--disable-core-limit=false", "-v=4"});
  fs::remove(config);
}

// operatingmode mig (config.json): the register JSON carries the GPU's MIG profiles from NVML.
TEST(Binary, PrintRegisterInMigMode) {
  const std::string config = "/tmp/hami-dp-mig-config-" + std::to_string(getpid()) + ".json";
  std::ofstream(config) << R"({"nodeconfig":[{"name":"n1","operatingmode":"mig"}]})";
  int status = -1;
  std::string out = RunShell(
      "HAMI_FAKE_NVML_DEVICES='GPU-a|NVIDIA A100-SXM4-40GB|40960|0:0:0.0' HAMI_FAKE_NVML_MIG=all " +
          kBin + " --print-register --node-name n1 --node-config-file " + config +
          " --nvml-library " + HAMI_FAKE_NVML_PATH + " 2>/dev/null",
      &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(
      out.rfind(R"([{"id":"GPU-a","count":7,"devmem":40960,"devcore":100,)"
                R"("type":"NVIDIA A100-SXM4-40GB","mode":"mig",)"
                R"("migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,)",
                0),
      0u)
      << out;
  // Not in MIG mode: the GPU is not registered (its mode is never changed).
  out = RunShell("HAMI_FAKE_NVML_DEVICES='GPU-a|NVIDIA A100-SXM4-40GB|40960|0:0:0.0' " + kBin +
                     " --print-register --node-name n1 --node-config-file " + config +
                     " --nvml-library " + HAMI_FAKE_NVML_PATH + " 2>&1",
                 &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("\"GPU-a\" is not in MIG mode"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.rfind('\n', out.size() - 2) + 1), "[]\n") << out;
  fs::remove(config);
}

// operatingmode mps with a control binary: one daemon per GPU at start, `quit` to each on
// SIGTERM (a fake binary that records its calls).
TEST(Binary, MpsModeStartsTheDaemonsAndQuitsThemOnSigterm) {
  const fs::path dir = fs::temp_directory_path() / ("hami-dp-mps-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string control = (dir / "mps-control").string();
  const std::string record = (dir / "record").string();
  std::ofstream(control) << "#!/bin/sh\n"
                            "if [ \"$1\" = -d ]; then echo \"launch $CUDA_VISIBLE_DEVICES\" >> "
                         << record
                         << "; exit 0; fi\n"
                            "read cmd; echo \"$cmd $CUDA_VISIBLE_DEVICES\" >> "
                         << record << "\n[ \"$cmd\" = quit ]\n";
  fs::permissions(control, fs::perms::owner_all);
  std::ofstream(dir / "config.json") << R"({"nodeconfig":[{"name":"n1","operatingmode":"mps"}]})";
  ServeUntilSigterm({"--node-name=n1", "--node-config-file=" + (dir / "config.json").string(),
                     "--mps-control=" + control, "--mps-root=" + (dir / "mps").string()},
                    [&](const std::string&) {
                      std::ifstream in(record);
                      std::stringstream lines;
                      lines << in.rdbuf();
                      // Start asks each daemon first (none answers), then launches it.
                      EXPECT_EQ(lines.str(),
                                "get_default_active_thread_percentage "
                                "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec\n"
                                "launch GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec\n"
                                "get_default_active_thread_percentage "
                                "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448\n"
                                "launch GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448\n"
                                "quit GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec\n"
                                "quit GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448\n");
                    });
  fs::remove_all(dir);
}

// operatingmode mig served from NVML (the fake): the start-up pass destroys the instance no pod
// of the node references, and the published register carries the GPU's MIG profiles.
TEST(Binary, MigModeResetsUnreferencedInstancesAtStart) {
  const fs::path dir = fs::temp_directory_path() / ("hami-dp-mig-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string state = (dir / "mig.state").string();
  std::ofstream(state) << "serial 1\n0 1 0 6 1 0 MIG-00000001-0000-4000-8000-000000000001\n";
  std::ofstream(dir / "config.json") << R"({"nodeconfig":[{"name":"n1","operatingmode":"mig"}]})";
  setenv("HAMI_FAKE_NVML_DEVICES", "GPU-a|NVIDIA A100-SXM4-40GB|40960|0:0:0.0", 1);
  setenv("HAMI_FAKE_NVML_MIG", "all", 1);
  setenv("HAMI_FAKE_NVML_MIG_STATE", state.c_str(), 1);
  ServeUntilSigterm(
      {"--node-name=n1", "--node-config-file=" + (dir / "config.json").string(),
       std::string("--nvml-library=") + HAMI_FAKE_NVML_PATH},
      [&](const std::string& published) {
        EXPECT_EQ(published.rfind(R"([{"id":"GPU-a","count":7,"devmem":40960,"devcore":100,)"
                                  R"("type":"NVIDIA A100-SXM4-40GB","mode":"mig","migProfiles":[)",
                                  0),
                  0u)
            << published;
        std::ifstream in(state);
        std::stringstream text;
        text << in.rdbuf();
        EXPECT_EQ(text.str(), "serial 1\n");
      },
      false);
  for (const char* v :
       {"HAMI_FAKE_NVML_DEVICES", "HAMI_FAKE_NVML_MIG", "HAMI_FAKE_NVML_MIG_STATE"}) {
    unsetenv(v);
  }
  fs::remove_all(dir);
}

TEST(Binary, GoStyleFlagErrorsStillFail) {
  for (const char* args :
       {" --mig-strategy=bogus", " -v=four", " -no-such-flag=1", " --disable-core-limit=maybe"}) {
    int status = -1;
    const std::string out = RunShell(kBin + args + " --print-register 2>&1", &status);
    EXPECT_NE(status, 0) << args << ": " << out;
  }
  int status = -1;
  const std::string out = RunShell(kBin + " --mig-strategy=bogus 2>&1", &status);
  EXPECT_NE(out.find("--mig-strategy"), std::string::npos) << out;
}

}  // namespace
}  // namespace hami::deviceplugin
