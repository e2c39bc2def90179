// kubeconfig parsing, in-cluster config, base64, and the QPS/burst limiter (on a fake clock).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "k8s/base64.h"
#include "k8s/client_flags.h"
#include "k8s/kubeconfig.h"
#include "k8s/rate_limiter.h"

namespace hami::k8s {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

TEST(Base64, RoundTripsAndRejectsGarbage) {
  for (const std::string& s : std::vector<std::string>{"", "f", "fo", "foo", "foob", "fooba",
                                                       "foobar", std::string("\0\xff", 2)}) {
    auto back = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(back) << s;
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(*Base64Decode("Zm9v\nYmFy"), "foobar");
  EXPECT_FALSE(Base64Decode("Zm9"));
  EXPECT_FALSE(Base64Decode("Zm=v"));
  EXPECT_FALSE(Base64Decode("Zm9v!"));
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hami-k8s-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

using Kubeconfig = TempDir;

TEST_F(Kubeconfig, InlineDataAndCurrentContext) {
  std::string yaml = R"(apiVersion: v1
kind: Config
clusters:
- name: a
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: )" +
                     Base64Encode("CA PEM") + R"(
- name: b
  cluster: {server: "http://b:80", insecure-skip-tls-verify: true}
users:
- name: admin
  user:
    client-certificate-data: )" +
                     Base64Encode("CERT") + R"(
    client-key-data: )" +
                     Base64Encode("KEY") + R"(
- name: bot
  user: {token: abc}
contexts:
- name: ctx-a
  context: {cluster: a, user: admin, namespace: gpu}
- name: ctx-b
  context: {cluster: b, user: bot}
current-context: ctx-a
)";
  auto cfg = ParseKubeconfig(yaml, "");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg->ca_pem, "CA PEM");
  EXPECT_EQ(cfg->client_cert_pem, "CERT");
  EXPECT_EQ(cfg->client_key_pem, "KEY");
  EXPECT_EQ(cfg->ns, "gpu");
  auto b = ParseKubeconfig(yaml, "", "ctx-b");
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->server, "http://b:80");
  EXPECT_TRUE(b->insecure_skip_tls_verify);
  EXPECT_EQ(b->token, "abc");
  EXPECT_EQ(b->ns, "default");
}

TEST_F(Kubeconfig, FilesResolveAgainstTheKubeconfigDirectory) {
  Write("ca.crt", "CA FILE");
  Write("token", "tok-from-file\n");
  std::string path = Write("config", R"(clusters:
- name: c
  cluster: {server: "https://h:1", certificate-authority: ca.crt}
users:
- name: u
  user: {tokenFile: token}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
)");
  auto cfg = LoadKubeconfigFile(path);
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->ca_pem, "CA FILE");
  EXPECT_EQ(cfg->token, "tok-from-file");

  ::setenv("KUBECONFIG", path.c_str(), 1);
  auto via_env = LoadConfig("");
  ::unsetenv("KUBECONFIG");
  ASSERT_TRUE(via_env) << via_env.error();
  EXPECT_EQ(via_env->server, "https://h:1");
}

TEST_F(Kubeconfig, ErrorsNameTheField) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  const Case cases[] = {
      {"[1, 2]", "not a YAML map"},
      {"a: [", "not YAML"},
      {"clusters: []", "current-context"},
      {"current-context: x", "contexts[x]: not found"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]", "clusters[c]"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
       "clusters: [{name: c, cluster: {server: 'http://h'}}]\n"
       "users: [{name: u, user: {client-key-data: '!!'}}]",
       "users[u].client-key-data: not base64"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
       "clusters: [{name: c, cluster: {server: 'http://h', certificate-authority: /nope}}]",
       "clusters[c].certificate-authority \"/nope\": cannot read"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
       "clusters: [{name: c, cluster: {server: 'http://h', certificate-authority: /dev/zero}}]",
       "larger than"},
  };
  for (const auto& c : cases) {
    auto cfg = ParseKubeconfig(c.yaml, "");
    ASSERT_FALSE(cfg) << c.yaml;
    EXPECT_NE(cfg.error().find(c.want), std::string::npos) << cfg.error();
  }
}

using InCluster = TempDir;

TEST_F(InCluster, ReadsServiceAccountFiles) {
  Write("token", "sa-token\n");
  Write("ca.crt", "SA CA");
  Write("namespace", "hami-system");
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = InClusterConfig(dir_.string());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->token, "sa-token");
  EXPECT_EQ(cfg->ca_pem, "SA CA");
  EXPECT_EQ(cfg->ns, "hami-system");
  EXPECT_FALSE(InClusterConfig(dir_.string()));  // env unset now
}

TEST(RateLimiter, BurstThenQps) {
  FakeClock clock;
  RateLimiter limiter(10, 3, clock);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Reserve().count(), 0) << i;
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(limiter.Reserve()), milliseconds(100));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(limiter.Reserve()), milliseconds(200));
  clock.Advance(milliseconds(200));  // pays back the two borrowed tokens
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(limiter.Reserve()), milliseconds(100));
  clock.Advance(std::chrono::seconds(10));  // refills to the burst, not beyond
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Reserve().count(), 0) << i;
  EXPECT_GT(limiter.Reserve().count(), 0);
}

TEST(RateLimiter, ZeroQpsIsUnlimited) {
  FakeClock clock;
  RateLimiter limiter(0, 1, clock);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(limiter.Reserve().count(), 0);
}

TEST(ParseGoDuration, Table) {
  using std::chrono::nanoseconds;
  EXPECT_EQ(ParseGoDuration("30s"), nanoseconds(30'000'000'000));
  EXPECT_EQ(ParseGoDuration("1m30s"), nanoseconds(90'000'000'000));
  EXPECT_EQ(ParseGoDuration("250ms"), nanoseconds(250'000'000));
  EXPECT_EQ(ParseGoDuration("2h"), nanoseconds(7200'000'000'000));
  EXPECT_EQ(ParseGoDuration("0"), nanoseconds(0));
  for (const char* bad : {"", "s", "10", "10x", "-1s", "1.5s", "ms10"}) {
    EXPECT_FALSE(ParseGoDuration(bad)) << bad;
  }
}

TEST_F(Kubeconfig, ClientFlagsApplyLimits) {
  std::string path = Write("config", R"(clusters: [{name: c, cluster: {server: "http://h:1"}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)");
  ClientFlags flags;
  flags.kubeconfig = path;
  flags.qps = 7;
  flags.burst = 9;
  flags.timeout = "1500ms";
  auto cfg = flags.Load();
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->qps, 7);
  EXPECT_EQ(cfg->burst, 9);
  EXPECT_EQ(cfg->timeout, milliseconds(1500));
  flags.timeout = "soon";
  ASSERT_FALSE(flags.Load());
  EXPECT_NE(flags.Load().error().find("--kube-timeout \"soon\""), std::string::npos);
  // HAMi's form: whole seconds, 0 its default (ours stays 30s).
  flags.timeout = "45";
  ASSERT_TRUE(flags.Load());
  EXPECT_EQ(flags.Load()->timeout, milliseconds(45000));
  flags.timeout = "0";
  ASSERT_TRUE(flags.Load());
  EXPECT_EQ(flags.Load()->timeout, milliseconds(30000));
  for (const char* bad : {"0s", "-5", "99999999999999999999", "5 ", ""}) {
    flags.timeout = bad;
    EXPECT_FALSE(flags.Load()) << bad;
  }
  flags.timeout = "1s";
  flags.burst = 0;
  EXPECT_NE(flags.Load().error().find("--kube-burst"), std::string::npos);
}

}  // namespace
}  // namespace hami::k8s
