// The hami-dra-plugin binary under the chart's RBAC (charts/hami with dra.enabled; docs/DRA.md
// "Deploying"): the sim API server enforces the rendered ServiceAccount, ClusterRole and binding,
// the binary runs as that ServiceAccount from an inventory with every path flag in a temp
// directory, publishes its pool, prepares a claim the test kubelet hands it, and withdraws the
// pool on SIGTERM. Any request RBAC denies fails the test. Skipped without helm.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "draplugin/agent.h"
#include "draplugin/dra_test_kubelet.h"
#include "draplugin/sim_claims.h"
#include "k8s/client.h"
#include "k8s/kubeconfig.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/store.h"

namespace hami::draplugin {
namespace {

namespace fs = std::filesystem;
using testing::DraTestKubelet;

#ifdef HAMI_DRA_PLUGIN_BIN

// ctest runs from the source root; a direct run finds it from this file's path.
fs::path SourceRoot() {
  if (fs::exists("charts/hami")) return fs::absolute(".");
  return fs::path(__FILE__).parent_path().parent_path().parent_path();
}

std::string HelmPath() {
  if (const char* env = std::getenv("HAMI_HELM"); env != nullptr && *env != '\0') return env;
  return (SourceRoot() / ".tools/bin/helm").string();
}

// `helm template hami charts/hami -n kube-system --set dra.enabled=true`, or "" when helm cannot
// run.
std::string RenderChart() {
  const std::string helm = HelmPath();
  if (access(helm.c_str(), X_OK) != 0) return "";
  const std::string cmd = "'" + helm + "' template hami '" +
                          (SourceRoot() / "charts/hami").string() +
                          "' -n kube-system --set dra.enabled=true 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  return pclose(p) == 0 ? out : "";
}

// A rendered object as JSON (the RBAC objects hold strings only: every scalar is one).
Json ToJson(const YAML::Node& node) {
  if (node.IsScalar()) return node.as<std::string>();
  if (node.IsSequence()) {
    Json out = Json::array();
    for (const YAML::Node& item : node) out.push_back(ToJson(item));
    return out;
  }
  if (node.IsMap()) {
    Json out = Json::object();
    for (const auto& kv : node) out[kv.first.as<std::string>()] = ToJson(kv.second);
    return out;
  }
  return nullptr;
}

// The ServiceAccounts, roles and bindings of a rendered chart.
std::vector<Json> RbacObjects(const std::string& rendered) {
  std::vector<Json> out;
  for (const YAML::Node& doc : YAML::LoadAll(rendered)) {
    if (!doc || !doc.IsMap() || !doc["kind"]) continue;
    const std::string kind = doc["kind"].as<std::string>();
    if (kind == "ServiceAccount" || kind == "ClusterRole" || kind == "ClusterRoleBinding" ||
        kind == "Role" || kind == "RoleBinding") {
      out.push_back(ToJson(doc));
    }
  }
  return out;
}

class DraChartRbacTest : public ::testing::Test {
 protected:
  DraChartRbacTest() {
    sim::ApiServerOptions options;
    options.rbac = true;
    server_ = std::make_unique<sim::ApiServer>(std::move(options));
  }
  ~DraChartRbacTest() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    admin_.reset();
    server_->Stop();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void SetUp() override {
    char tmpl[] = "/tmp/hami-dra-chart-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(server_->Start());
    ASSERT_TRUE(server_->WriteKubeconfig(dir_ + "/admin.kubeconfig"));
    auto rest = k8s::LoadConfig(dir_ + "/admin.kubeconfig");
    ASSERT_TRUE(rest) << rest.error();
    admin_ = std::make_unique<k8s::Client>(*rest);
  }

  // The node's slices, read as the admin.
  std::vector<Json> Slices() {
    auto got = admin_->ListAll(k8s::resources::kResourceSlices, "", {});
    EXPECT_TRUE(got) << (got ? "" : got.error().ToString());
    return got ? got->items : std::vector<Json>{};
  }

  std::string Log() {
    std::ifstream in(dir_ + "/plugin.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::unique_ptr<sim::ApiServer> server_;
  std::unique_ptr<k8s::Client> admin_;
  std::string dir_;
  pid_t pid_ = -1;
};

TEST_F(DraChartRbacTest, ThePluginRunsUnderTheChartsRbacWithNothingForbidden) {
  const std::string rendered = RenderChart();
  if (rendered.empty()) GTEST_SKIP() << "helm not found at " << HelmPath();
  // The chart's RBAC objects, as helm install creates them (kube-system exists).
  bool has_dra_role = false;
  for (const Json& obj : RbacObjects(rendered)) {
    const sim::ResourceType* type = nullptr;
    for (const sim::ResourceType& t : sim::ResourceTypes()) {
      if (t.kind == obj.value("kind", "") && t.ApiVersion() == obj.value("apiVersion", "")) {
        type = &t;
      }
    }
    ASSERT_NE(type, nullptr) << obj.dump();
    const std::string ns = type->namespaced ? obj["metadata"].value("namespace", "") : "";
    auto created = server_->store().Create(*type, ns, obj);
    ASSERT_TRUE(created) << obj.dump() << ": " << created.error().ToString();
    if (obj.value("kind", "") == "ClusterRole" && obj["metadata"]["name"] == "hami-dra-plugin") {
      has_dra_role = true;
    }
  }
  ASSERT_TRUE(has_dra_role) << "the chart rendered no ClusterRole hami-dra-plugin";

  // The DaemonSet's ServiceAccount, its token in the plugin's kubeconfig.
  const std::string sa_token =
      server_->IssueToken(sim::rbac::ServiceAccountUser("kube-system", "hami-dra-plugin"));
  std::string kubeconfig = server_->Kubeconfig();
  const std::string admin_line = "token: " + server_->token();
  const size_t at = kubeconfig.find(admin_line);
  ASSERT_NE(at, std::string::npos) << kubeconfig;
  kubeconfig.replace(at, admin_line.size(), "token: " + sa_token);
  std::ofstream(dir_ + "/sa.kubeconfig") << kubeconfig;
  std::ofstream(dir_ + "/inventory.yaml")
      << "devices:\n- {uuid: GPU-a, model: NVIDIA A10, memory: 24576}\n"
         "- {uuid: GPU-b, model: NVIDIA A10, memory: 24576}\n";
  for (const char* d : {"plugins_registry", "plugins", "cdi", "hook/vgpu", "device-plugins"}) {
    fs::create_directories(dir_ + "/" + d);
  }
  std::vector<std::string> args = {
      HAMI_DRA_PLUGIN_BIN,
      "--kubeconfig=" + dir_ + "/sa.kubeconfig",
      "--node-name=node-1",
      "--device-inventory=" + dir_ + "/inventory.yaml",
      "--hook-path=" + dir_ + "/hook",
      "--cdi-root=" + dir_ + "/cdi",
      "--kubelet-registrar-directory-path=" + dir_ + "/plugins_registry",
      "--kubelet-plugins-directory-path=" + dir_ + "/plugins",
      "--device-plugin-socket=" + dir_ + "/device-plugins/nvidia-gpu.sock",
  };
  // Everything the child needs is made before fork (the server's threads may hold malloc's
  // lock): it only dup2s and execs.
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = open((dir_ + "/plugin.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(log_fd, 0);
  pid_ = fork();
  ASSERT_GE(pid_, 0);
  if (pid_ == 0) {
    if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);

  // The pool appears (the plugin lists and creates its slices as the ServiceAccount), and the
  // registration socket with it.
  const std::string reg_socket = dir_ + "/plugins_registry/hami-core-gpu.project-hami.io-reg.sock";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((Slices().empty() || !fs::exists(reg_socket)) &&
         std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(waitpid(pid_, nullptr, WNOHANG), 0) << "hami-dra-plugin exited:\n" << Log();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto slices = Slices();
  ASSERT_EQ(slices.size(), 1u) << Log();
  EXPECT_EQ(slices[0]["spec"]["nodeName"], "node-1");
  ASSERT_TRUE(fs::exists(reg_socket)) << Log();

  // A claim allocated on the node, prepared through the test kubelet: the plugin gets it.
  auto claim_uid = testing::CreateAllocatedClaim(*admin_, "hami-gpu-0");
  ASSERT_TRUE(claim_uid) << claim_uid.error();
  const std::string uid = *claim_uid;
  {
    DraTestKubelet kubelet;
    ASSERT_TRUE(kubelet.Register(reg_socket));
    auto prepared = kubelet.Prepare({DraTestKubelet::MakeClaim("default", uid, "c")});
    ASSERT_TRUE(prepared) << prepared.error();
    EXPECT_EQ(prepared->claims().at(uid).error(), "") << Log();
    EXPECT_EQ(prepared->claims().at(uid).devices_size(), 1);
  }
  EXPECT_TRUE(fs::exists(dir_ + "/cdi/hami-core-gpu.project-hami.io-claim_" + uid + ".json"));

  // SIGTERM: the pool is withdrawn (list and delete) and the plugin exits 0.
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid_, &status, 0), pid_);
  pid_ = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << Log();
  EXPECT_TRUE(Slices().empty()) << Log();

  std::string denied;
  for (const sim::ForbiddenRequest& f : server_->ForbiddenRequests()) {
    denied +=
        "  " + f.user + " " + f.verb + " " + f.resource + " " + f.subresource + " " + f.ns + "\n";
  }
  EXPECT_EQ(server_->forbidden_count(), 0u) << denied << Log();

  // RBAC was on: the same ServiceAccount may not list nodes.
  auto rest = k8s::LoadConfig(dir_ + "/sa.kubeconfig");
  ASSERT_TRUE(rest) << rest.error();
  k8s::Client sa(*rest);
  EXPECT_FALSE(sa.ListAll(k8s::resources::kNodes, "", {}));
  EXPECT_EQ(server_->forbidden_count(), 1u);
}

#endif  // HAMI_DRA_PLUGIN_BIN

}  // namespace
}  // namespace hami::draplugin
