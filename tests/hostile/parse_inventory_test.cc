// Issue 19 item 5 against the real hami-device-plugin: an inventory file with a value the
// register annotation cannot carry, a typo'd key, a duplicate index or a UUID holding the pod
// annotation's separators ends the plugin with status 1 and a message naming the field, and
// nothing is published on the node; a socket it cannot serve on names the OS error, exits 1 and
// publishes nothing either. Each run is bounded by `timeout` (status 124 when it hangs).
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "k8s/client.h"
#include "k8s/object.h"
#include "sim/apiserver/apiserver.h"

namespace hami {
namespace {

namespace fs = std::filesystem;

class ParseInventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/hami-hostile-inv-" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/plugins");
    api_ = std::make_unique<sim::ApiServer>(sim::ApiServerOptions{});
    ASSERT_TRUE(api_->Start());
    ASSERT_TRUE(api_->WriteKubeconfig(dir_ + "/kubeconfig"));
    k8s::RestConfig cfg;
    cfg.server = api_->url();
    cfg.qps = 0;
    client_ = std::make_unique<k8s::Client>(cfg);
    nlohmann::json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}};
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", node).ok());
  }
  void TearDown() override {
    api_->Stop();
    fs::remove_all(dir_);
  }

  // Runs the plugin on `inventory` (written to a file) until it exits; returns its exit status
  // and sets *out to its output.
  int Run(const std::string& inventory, std::string* out, const std::string& kubelet_socket = "") {
    std::ofstream(dir_ + "/inventory.yaml") << inventory;
    std::string cmd = "timeout 20 " + std::string(HAMI_DEVICE_PLUGIN_BIN) +
                      " --kubeconfig=" + dir_ + "/kubeconfig --node-name=n1" +
                      " --node-config-file=/nonexistent --kubelet-socket=" +
                      (kubelet_socket.empty() ? dir_ + "/plugins/kubelet.sock" : kubelet_socket) +
                      " --device-inventory=" + dir_ + "/inventory.yaml 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return -1;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out->append(buf.data(), n);
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  bool Published() {
    auto node = client_->Get(k8s::resources::kNodes, "", "n1");
    return node.ok() && k8s::Annotation(*node, "hami.io/node-nvidia-register").has_value();
  }

  std::string dir_;
  std::unique_ptr<sim::ApiServer> api_;
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(ParseInventoryTest, BadFilesExitOneNamingTheFieldAndPublishNothing) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  for (const Case& c : {
           Case{"devices:\n- {uuid: GPU-a, model: V100, memory: 4294967296}\n",
                "devices[0].memory: want an integer from 1 to 2147483647"},
           Case{"devices:\n- {uuid: GPU-a, model: V100, memory: 1000, index: 99999999999}\n",
                "devices[0].index: want an integer from 0 to 2147483647"},
           Case{"device:\n- {uuid: GPU-a, model: V100, memory: 1000}\n",
                "inventory: unknown key \"device\""},
           Case{"devices:\n- {uuid: GPU-a, model: V100, memory: 1000, index: 0}\n"
                "- {uuid: GPU-b, model: V100, memory: 1000, index: 0}\n",
                "devices[1].index: duplicate 0"},
           Case{"devices:\n- {uuid: 'GPU-a,NVIDIA,1,0:', model: V100, memory: 1000}\n",
                "devices[0].uuid: must not contain"},
       }) {
    std::string out;
    EXPECT_EQ(Run(c.yaml, &out), 1) << c.yaml << out;
    EXPECT_NE(out.find(c.want), std::string::npos) << out;
    EXPECT_FALSE(Published()) << c.yaml;
  }
}

TEST_F(ParseInventoryTest, CannotServeNamesTheOsErrorAndPublishesNothing) {
  std::string out;
  std::string socket = dir_ + "/no-such-dir/kubelet.sock";
  EXPECT_EQ(Run("devices:\n- {uuid: GPU-a, model: V100, memory: 1000}\n", &out, socket), 1) << out;
  EXPECT_NE(out.find("cannot serve on " + dir_ +
                     "/no-such-dir/nvidia-gpu.sock: "
                     "No such file or directory"),
            std::string::npos)
      << out;
  EXPECT_FALSE(Published());
}

}  // namespace
}  // namespace hami
