// kubeconfig merging ($KUBECONFIG=a:b), the user fields (exec, basic auth, tls-server-name,
// proxy-url), and exec credential plugins: ExecCredential parsing, the cache until
// status.expirationTimestamp on a fake clock, interactiveMode, KUBERNETES_EXEC_INFO, and a real
// plugin run through RunExecPlugin.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "k8s/exec_credential.h"
#include "k8s/kubeconfig.h"

namespace hami::k8s {
namespace {

using std::chrono::seconds;

const char* kV1 = "client.authentication.k8s.io/v1";

TEST(KubeconfigMerge, FirstFileNamingAnEntryWinsAndCurrentContextFromTheFirstSettingIt) {
  // a: no current-context; its cluster "c" and user "u" shadow b's.
  std::string a = R"(clusters:
- name: c
  cluster: {server: "https://a:6443"}
users:
- name: u
  user: {token: from-a}
contexts:
- name: only-a
  context: {cluster: c, user: u, namespace: ns-a}
)";
  std::string b = R"(current-context: ctx
clusters:
- name: c
  cluster: {server: "https://b:6443"}
- name: c2
  cluster: {server: "https://b2:6443"}
users:
- name: u
  user: {token: from-b}
contexts:
- name: ctx
  context: {cluster: c, user: u}
- name: only-a
  context: {cluster: c2, user: u}
)";
  std::string c = "current-context: only-a\n";
  auto cfg = ParseKubeconfigs({{a, "/a"}, {b, "/b"}, {c, "/c"}});
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->server, "https://a:6443");  // ctx from b, cluster c from a
  EXPECT_EQ(cfg->token, "from-a");
  EXPECT_EQ(cfg->ns, "default");
  auto other = ParseKubeconfigs({{a, "/a"}, {b, "/b"}}, "only-a");
  ASSERT_TRUE(other) << other.error();
  EXPECT_EQ(other->ns, "ns-a");  // a's only-a, not b's
  EXPECT_EQ(other->server, "https://a:6443");
  // Order matters: b first.
  auto swapped = ParseKubeconfigs({{b, "/b"}, {a, "/a"}});
  ASSERT_TRUE(swapped) << swapped.error();
  EXPECT_EQ(swapped->server, "https://b:6443");
  EXPECT_EQ(swapped->token, "from-b");
  // An empty file merges as nothing.
  auto empty = ParseKubeconfigs({{"", "/e"}, {b, "/b"}});
  ASSERT_TRUE(empty) << empty.error();
  EXPECT_EQ(empty->server, "https://b:6443");
}

TEST(KubeconfigMerge, RelativePathsResolveAgainstTheirOwnFileAndMissingFilesAreSkipped) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("hami-merge-" + std::to_string(getpid()));
  fs::create_directories(dir / "one");
  fs::create_directories(dir / "two");
  std::ofstream(dir / "two" / "tok") << "tok-two\n";
  std::ofstream(dir / "one" / "config") << "current-context: x\n";
  std::ofstream(dir / "two" / "config") << R"(clusters:
- name: c
  cluster: {server: "https://s"}
users:
- name: u
  user: {tokenFile: tok}
contexts:
- name: x
  context: {cluster: c, user: u}
)";
  auto cfg = LoadKubeconfigFiles({(dir / "missing").string(), (dir / "one" / "config").string(),
                                  (dir / "two" / "config").string()});
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->token, "tok-two");
  auto none = LoadKubeconfigFiles({(dir / "missing").string()});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no such file"), std::string::npos) << none.error();
  // $KUBECONFIG with several files, through LoadConfig.
  setenv("KUBECONFIG",
         ((dir / "one" / "config").string() + ":" + (dir / "two" / "config").string()).c_str(), 1);
  auto env = LoadConfig("");
  unsetenv("KUBECONFIG");
  ASSERT_TRUE(env) << env.error();
  EXPECT_EQ(env->server, "https://s");
  fs::remove_all(dir);
}

TEST(KubeconfigFields, UserAndClusterFields) {
  std::string yaml = R"(current-context: x
clusters:
- name: c
  cluster:
    server: "https://10.0.0.1:6443"
    tls-server-name: api.example
    proxy-url: "socks5://proxy:1080"
users:
- name: u
  user:
    username: alice
    password: s3cret
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/plugin
      args: [get-token, --cluster, c]
      env: [{name: FOO, value: bar}]
      interactiveMode: Never
      provideClusterInfo: true
      installHint: install the plugin
contexts:
- name: x
  context: {cluster: c, user: u}
)";
  auto cfg = ParseKubeconfig(yaml, "/kube");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->tls_server_name, "api.example");
  EXPECT_EQ(cfg->proxy_url, "socks5://proxy:1080");
  EXPECT_EQ(cfg->username, "alice");
  EXPECT_EQ(cfg->password, "s3cret");
  ASSERT_TRUE(cfg->exec);
  EXPECT_EQ(cfg->exec->command, "/kube/./bin/plugin");
  EXPECT_EQ(cfg->exec->args, (std::vector<std::string>{"get-token", "--cluster", "c"}));
  ASSERT_EQ(cfg->exec->env.size(), 1u);
  EXPECT_EQ(cfg->exec->env[0].first, "FOO");
  EXPECT_EQ(cfg->exec->interactive_mode, "Never");
  EXPECT_TRUE(cfg->exec->provide_cluster_info);
  auto info = nlohmann::json::parse(ExecInfo(*cfg->exec, false));
  EXPECT_EQ(info["apiVersion"], kV1);
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://10.0.0.1:6443");
  EXPECT_EQ(info["spec"]["cluster"]["tls-server-name"], "api.example");

  // v1 requires interactiveMode; a bare command stays a PATH lookup; bad apiVersion is named.
  std::string v1_no_mode = R"(current-context: x
clusters: [{name: c, cluster: {server: "https://s"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}}}]
)";
  auto bad = ParseKubeconfig(v1_no_mode, "/kube");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("users[u].exec.interactiveMode"), std::string::npos) << bad.error();
  std::string beta = v1_no_mode;
  beta.replace(beta.find("/v1,"), 4, "/v1beta1,");
  auto ok = ParseKubeconfig(beta, "/kube");
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->exec->command, "aws");
  std::string alpha = v1_no_mode;
  alpha.replace(alpha.find("/v1,"), 4, "/v1alpha1,");
  auto a = ParseKubeconfig(alpha, "/kube");
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().find("users[u].exec.apiVersion \"client.authentication.k8s.io/v1alpha1\""),
            std::string::npos)
      << a.error();
}

ExecConfig Config(const std::string& mode = "Never") {
  ExecConfig c;
  c.api_version = kV1;
  c.command = "plugin";
  c.interactive_mode = mode;
  return c;
}

std::string Credential(const std::string& token, const std::string& expiry) {
  nlohmann::json st = {{"token", token}};
  if (!expiry.empty()) st["expirationTimestamp"] = expiry;
  return nlohmann::json{{"apiVersion", kV1}, {"kind", "ExecCredential"}, {"status", st}}.dump();
}

TEST(ExecCredential, Parses) {
  auto t = ParseExecCredential(Credential("abc", "2023-11-14T22:13:30Z"), Config());
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->token, "abc");
  ASSERT_TRUE(t->expiry);
  EXPECT_EQ(t->expiry->time_since_epoch(), seconds(1700000010));
  auto cert = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"CERT","clientKeyData":"KEY"}})",
      Config());
  ASSERT_TRUE(cert) << cert.error();
  EXPECT_EQ(cert->client_cert_pem, "CERT");
  EXPECT_EQ(cert->client_key_pem, "KEY");
  EXPECT_FALSE(cert->expiry);
  struct Bad {
    std::string json, want;
  } cases[] = {
      {"not json", "exec plugin \"plugin\": output is"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"x"}})",
       "apiVersion \"client.authentication.k8s.io/v1beta1\": want"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod"})", "kind \"Pod\""},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})",
       "status: missing"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}})",
       "no token"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"C"}})",
       "want both"},
      {Credential("x", "tomorrow"), "status.expirationTimestamp \"tomorrow\": not RFC 3339"},
  };
  for (const auto& c : cases) {
    auto r = ParseExecCredential(c.json, Config());
    ASSERT_FALSE(r) << c.json;
    EXPECT_NE(r.error().find(c.want), std::string::npos) << r.error();
  }
}

TEST(ExecCredential, CachedUntilExpiryAndRerunAfterInvalidate) {
  FakeClock clock;  // 1700000000
  int runs = 0;
  std::string last_info;
  auto runner = [&](const ExecConfig&, const std::string& info, bool) -> Result<std::string> {
    ++runs;
    last_info = info;
    // Each run's token names the run; valid 60 s.
    return Credential("t" + std::to_string(runs),
                      runs == 1 ? "2023-11-14T22:14:20Z" : "2023-11-14T22:20:00Z");
  };
  ExecAuthenticator auth(Config(), clock, runner, false);
  auto a = auth.Get();
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->token, "t1");
  clock.Advance(seconds(59));
  EXPECT_EQ(auth.Get()->token, "t1");
  EXPECT_EQ(runs, 1);
  clock.Advance(seconds(1));  // at expiry: expired
  EXPECT_EQ(auth.Get()->token, "t2");
  EXPECT_EQ(runs, 2);
  // A 401 with an old credential does not drop a newer one.
  auth.Invalidate(*a);
  EXPECT_EQ(auth.Get()->token, "t2");
  EXPECT_EQ(runs, 2);
  auto b = auth.Get();
  auth.Invalidate(*b);
  EXPECT_EQ(auth.Get()->token, "t3");
  EXPECT_EQ(auth.runs(), 3);
  EXPECT_EQ(nlohmann::json::parse(last_info)["spec"]["interactive"], false);
  EXPECT_FALSE(nlohmann::json::parse(last_info)["spec"].contains("cluster"));
}

TEST(ExecCredential, NoExpiryCachesUntilInvalidatedAndFailuresAreNotCached) {
  FakeClock clock;
  int runs = 0;
  auto runner = [&](const ExecConfig&, const std::string&, bool) -> Result<std::string> {
    if (++runs == 1) return Error{"exec plugin \"plugin\": exited 1"};
    return Credential("t", "");
  };
  ExecAuthenticator auth(Config(), clock, runner, false);
  EXPECT_FALSE(auth.Get());
  EXPECT_TRUE(auth.Get());
  clock.Advance(std::chrono::hours(1000));
  EXPECT_TRUE(auth.Get());
  EXPECT_EQ(runs, 2);
}

TEST(ExecCredential, InteractiveMode) {
  FakeClock clock;
  bool interactive_seen = false;
  auto runner = [&](const ExecConfig&, const std::string& info, bool interactive) {
    interactive_seen = interactive;
    EXPECT_EQ(nlohmann::json::parse(info)["spec"]["interactive"], interactive);
    return Result<std::string>(Credential("t", ""));
  };
  ExecAuthenticator always_no_tty(Config("Always"), clock, runner, false);
  auto r = always_no_tty.Get();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("interactiveMode Always needs a terminal"), std::string::npos);
  EXPECT_EQ(always_no_tty.runs(), 0);
  ExecAuthenticator always_tty(Config("Always"), clock, runner, true);
  ASSERT_TRUE(always_tty.Get());
  EXPECT_TRUE(interactive_seen);
  ExecAuthenticator never_tty(Config("Never"), clock, runner, true);
  ASSERT_TRUE(never_tty.Get());
  EXPECT_FALSE(interactive_seen);
  ExecAuthenticator if_available(Config("IfAvailable"), clock, runner, true);
  ASSERT_TRUE(if_available.Get());
  EXPECT_TRUE(interactive_seen);
}

TEST(ExecCredential, RunExecPluginPassesArgsEnvAndExecInfo) {
  ExecConfig c = Config();
  c.command = "/bin/sh";
  c.args = {"-c", R"(printf '%s|%s|%s' "$1" "$FOO" "$KUBERNETES_EXEC_INFO")", "sh", "arg1"};
  c.env = {{"FOO", "bar"}};
  auto out = RunExecPlugin(c, "INFO", false);
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(*out, "arg1|bar|INFO");
  c.args = {"-c", "exit 3"};
  auto failed = RunExecPlugin(c, "", false);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().find("exec plugin \"/bin/sh\": exited 3"), std::string::npos);
  c.command = "/nonexistent/hami-plugin";
  c.install_hint = "install it from example.com";
  auto missing = RunExecPlugin(c, "", false);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("install it from example.com"), std::string::npos)
      << missing.error();
}

}  // namespace
}  // namespace hami::k8s
