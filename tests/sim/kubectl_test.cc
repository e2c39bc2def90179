// kubectl against the sim apiserver on 127.0.0.1. Each test gets its own HOME (kubectl caches
// discovery there) and kubeconfig. Skipped when kubectl is not on PATH.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "k8s/object.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/store.h"

extern char** environ;

namespace hami::sim {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

bool HaveKubectl() { return std::system("command -v kubectl >/dev/null 2>&1") == 0; }

struct Output {
  int rc = -1;
  std::string text;  // stdout and stderr together
};

// A kubectl process with its output on a pipe.
class Kubectl {
 public:
  Kubectl(const fs::path& home, const std::vector<std::string>& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<std::string> env = {"HOME=" + home.string(),
                                    "KUBECONFIG=" + (home / "kubeconfig").string(),
                                    "PATH=" + std::string(getenv("PATH") ? getenv("PATH") : "")};
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_s = {"kubectl"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "kubectl", &actions, nullptr, argv.data(), envp.data()) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    fd_ = fds[0];
  }
  ~Kubectl() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  // Reads until `want` appears in the output or `timeout` passes.
  bool WaitFor(const std::string& want, milliseconds timeout = milliseconds(30000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out_.find(want) == std::string::npos) {
      auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !ReadSome(static_cast<int>(left.count()))) break;
    }
    return out_.find(want) != std::string::npos;
  }

  Output Finish() {
    while (ReadSome(60000)) {
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return Output{WIFEXITED(status) ? WEXITSTATUS(status) : -1, out_};
  }

  const std::string& output() const { return out_; }

 private:
  bool ReadSome(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) return false;
    out_.append(buf, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
};

class KubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveKubectl()) GTEST_SKIP() << "kubectl not on PATH";
    home_ = fs::temp_directory_path() /
            ("hami-kubectl-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(home_);
    fs::create_directories(home_);
    server_ = std::make_unique<ApiServer>(ApiServerOptions{});
    ASSERT_TRUE(server_->Start());
    ASSERT_TRUE(server_->WriteKubeconfig((home_ / "kubeconfig").string()));
  }
  void TearDown() override {
    server_.reset();
    if (!home_.empty()) fs::remove_all(home_);
  }

  Output Run(std::vector<std::string> args) { return Kubectl(home_, args).Finish(); }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(home_ / name) << text;
    return (home_ / name).string();
  }

  Json Pod(const std::string& name) {
    auto r = server_->store().Get(*FindResourceType("", "v1", "pods"), "default", name);
    return r ? (*r)->json : Json();
  }

  fs::path home_;
  std::unique_ptr<ApiServer> server_;
};

constexpr const char* kPodYaml = R"(apiVersion: v1
kind: Pod
metadata:
  name: p1
  labels: {app: web, tier: gpu}
spec:
  containers:
  - name: c
    image: busybox
)";

TEST_F(KubectlTest, CreateAndGet) {
  auto created = Run({"create", "-f", WriteFile("pod.yaml", kPodYaml)});
  ASSERT_EQ(created.rc, 0) << created.text;
  EXPECT_NE(created.text.find("pod/p1 created"), std::string::npos) << created.text;

  auto table = Run({"get", "pods"});
  ASSERT_EQ(table.rc, 0) << table.text;
  EXPECT_NE(table.text.find("p1"), std::string::npos) << table.text;

  auto json = Run({"get", "pod", "p1", "-o", "json"});
  ASSERT_EQ(json.rc, 0) << json.text;
  Json obj = Json::parse(json.text, nullptr, false);
  ASSERT_TRUE(obj.is_object()) << json.text;
  EXPECT_EQ(k8s::Labels(obj)["tier"], "gpu");

  auto jp = Run({"get", "pod", "p1", "-o", "jsonpath={.spec.containers[0].image}"});
  EXPECT_EQ(jp.text, "busybox");

  EXPECT_NE(Run({"get", "pods", "-l", "tier=gpu", "-o", "name"}).text.find("pod/p1"),
            std::string::npos);
  EXPECT_EQ(Run({"get", "pods", "-l", "tier in (cpu)", "-o", "name"}).text.find("pod/p1"),
            std::string::npos);
  EXPECT_NE(Run({"get", "pods", "--field-selector", "status.phase=Pending", "-o", "name"})
                .text.find("pod/p1"),
            std::string::npos);
  EXPECT_EQ(Run({"get", "pods", "-A", "--field-selector", "spec.nodeName=n1", "-o", "name"})
                .text.find("pod/p1"),
            std::string::npos);
  auto ns = Run({"get", "namespaces", "-o", "name"});
  EXPECT_NE(ns.text.find("namespace/kube-system"), std::string::npos) << ns.text;
}

// kubectl validates a List against /openapi/v2 (protobuf) before it sends the items one by one.
TEST_F(KubectlTest, CreateListValidates) {
  auto created = Run({"create", "-f", WriteFile("list.yaml", R"(apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}, data: {k: v}}
- {apiVersion: v1, kind: Pod, metadata: {name: p2}, spec: {containers: [{name: c, image: i}]}}
)")});
  ASSERT_EQ(created.rc, 0) << created.text;
  EXPECT_NE(created.text.find("configmap/a created"), std::string::npos) << created.text;
  EXPECT_EQ(Pod("p2")["spec"]["containers"][0]["image"], "i");
}

TEST_F(KubectlTest, ApplyCreatesThenUpdates) {
  std::string file = WriteFile("pod.yaml", kPodYaml);
  auto first = Run({"apply", "-f", file});
  ASSERT_EQ(first.rc, 0) << first.text;
  EXPECT_NE(first.text.find("pod/p1 created"), std::string::npos) << first.text;
  std::string changed = kPodYaml;
  changed.replace(changed.find("busybox"), 7, "nginx");
  auto second = Run({"apply", "-f", WriteFile("pod.yaml", changed)});
  ASSERT_EQ(second.rc, 0) << second.text;
  EXPECT_NE(second.text.find("pod/p1 configured"), std::string::npos) << second.text;
  Json pod = Pod("p1");
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "nginx");
  EXPECT_TRUE(k8s::Annotation(pod, "kubectl.kubernetes.io/last-applied-configuration"));
  auto again = Run({"apply", "-f", file.c_str()});
  EXPECT_EQ(again.rc, 0) << again.text;
}

TEST_F(KubectlTest, AnnotateLabelPatch) {
  ASSERT_EQ(Run({"create", "-f", WriteFile("pod.yaml", kPodYaml)}).rc, 0);
  auto a = Run({"annotate", "pod", "p1", "hami.io/vgpu-node=n1"});
  ASSERT_EQ(a.rc, 0) << a.text;
  auto l = Run({"label", "pod", "p1", "gpu=true"});
  ASSERT_EQ(l.rc, 0) << l.text;
  auto sp =
      Run({"patch", "pod", "p1", "-p", R"({"spec":{"containers":[{"name":"c","image":"cuda"}]}})"});
  ASSERT_EQ(sp.rc, 0) << sp.text;
  auto jp = Run({"patch", "pod", "p1", "--type=json", "-p",
                 R"([{"op":"add","path":"/metadata/labels/j","value":"1"}])"});
  ASSERT_EQ(jp.rc, 0) << jp.text;
  auto mp =
      Run({"patch", "pod", "p1", "--type=merge", "-p", R"({"metadata":{"labels":{"m":"2"}}})"});
  ASSERT_EQ(mp.rc, 0) << mp.text;
  Json pod = Pod("p1");
  EXPECT_EQ(k8s::Annotation(pod, "hami.io/vgpu-node"), "n1");
  auto labels = k8s::Labels(pod);
  EXPECT_EQ(labels["gpu"], "true");
  EXPECT_EQ(labels["j"], "1");
  EXPECT_EQ(labels["m"], "2");
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "cuda");
  EXPECT_EQ(pod["spec"]["containers"][0]["name"], "c");
  auto overwrite = Run({"label", "pod", "p1", "gpu=false"});
  EXPECT_NE(overwrite.rc, 0) << "kubectl refuses to overwrite without --overwrite";
}

TEST_F(KubectlTest, ReplaceWithStaleResourceVersionIsRefused) {
  ASSERT_EQ(Run({"create", "-f", WriteFile("pod.yaml", kPodYaml)}).rc, 0);
  auto yaml = Run({"get", "pod", "p1", "-o", "yaml"});
  ASSERT_EQ(yaml.rc, 0);
  std::string stale = WriteFile("stale.yaml", yaml.text);
  ASSERT_EQ(Run({"label", "pod", "p1", "moved=on"}).rc, 0);
  auto replaced = Run({"replace", "-f", stale});
  EXPECT_NE(replaced.rc, 0);
  EXPECT_NE(replaced.text.find("Conflict"), std::string::npos) << replaced.text;
  EXPECT_EQ(k8s::Labels(Pod("p1"))["moved"], "on");
  auto fresh = Run({"get", "pod", "p1", "-o", "yaml"});
  auto ok = Run({"replace", "-f", WriteFile("fresh.yaml", fresh.text)});
  EXPECT_EQ(ok.rc, 0) << ok.text;
}

TEST_F(KubectlTest, DeleteAndNotFound) {
  ASSERT_EQ(Run({"create", "-f", WriteFile("pod.yaml", kPodYaml)}).rc, 0);
  auto del = Run({"delete", "pod", "p1"});
  ASSERT_EQ(del.rc, 0) << del.text;
  EXPECT_NE(del.text.find("pod \"p1\" deleted"), std::string::npos) << del.text;
  EXPECT_TRUE(Pod("p1").is_null());
  auto missing = Run({"get", "pod", "p1"});
  EXPECT_NE(missing.rc, 0);
  EXPECT_NE(missing.text.find("NotFound"), std::string::npos) << missing.text;
}

TEST_F(KubectlTest, GetWatchSeesUpdates) {
  ASSERT_EQ(Run({"create", "-f", WriteFile("pod.yaml", kPodYaml)}).rc, 0);
  Kubectl watch(home_, {"get", "pod", "p1", "-w", "--no-headers", "-o",
                        "custom-columns=STEP:.metadata.labels.step"});
  ASSERT_TRUE(watch.WaitFor("<none>")) << watch.output();
  ASSERT_EQ(Run({"label", "pod", "p1", "step=two"}).rc, 0);
  EXPECT_TRUE(watch.WaitFor("two")) << watch.output();
  ASSERT_EQ(Run({"label", "pod", "p1", "--overwrite", "step=three"}).rc, 0);
  EXPECT_TRUE(watch.WaitFor("three")) << watch.output();
}

}  // namespace
}  // namespace hami::sim
