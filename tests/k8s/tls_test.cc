// The client over HTTPS against `--tls`: a CA generated at run time, then client-certificate
// and bearer-token authentication; no credentials get 401, a wrong CA fails the handshake.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "k8s/client.h"
#include "k8s/kubeconfig.h"
#include "sim/apiserver/apiserver.h"

namespace hami::k8s {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hami-tls-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    sim::ApiServerOptions o;
    o.tls = true;
    o.cert_dir = dir_.string();
    o.token = "s3cret";
    server_ = std::make_unique<sim::ApiServer>(o);
    ASSERT_TRUE(server_->Start());
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  RestConfig Base() {
    RestConfig cfg;
    cfg.server = server_->url();
    cfg.ca_pem = Slurp(server_->ca_file());
    cfg.timeout = std::chrono::milliseconds(5000);
    return cfg;
  }

  fs::path dir_;
  std::unique_ptr<sim::ApiServer> server_;
};

TEST_F(TlsTest, ClientCertificateAuth) {
  RestConfig cfg = Base();
  cfg.client_cert_pem = Slurp(server_->client_cert_file());
  cfg.client_key_pem = Slurp(server_->client_key_file());
  Client client(cfg);
  auto created = client.Create(resources::kConfigMaps, "default",
                               Json{{"metadata", {{"name", "c"}}}, {"data", {{"a", "b"}}}});
  ASSERT_TRUE(created) << created.error().ToString();
  auto got = client.Get(resources::kConfigMaps, "default", "c");
  ASSERT_TRUE(got);
  EXPECT_EQ((*got)["data"]["a"], "b");
  int events = 0;
  auto st = client.Watch(resources::kConfigMaps, "default", WatchOptions{},
                         [&](const WatchEvent& e) { return e.type == "ADDED" && ++events < 1; });
  EXPECT_TRUE(st) << st.error().ToString();
  EXPECT_EQ(events, 1);
}

TEST_F(TlsTest, TokenAuth) {
  RestConfig cfg = Base();
  cfg.token = "s3cret";
  Client client(cfg);
  auto list = client.List(resources::kNamespaces, "", {});
  ASSERT_TRUE(list) << list.error().ToString();
  EXPECT_EQ(list->items.size(), 4u);

  cfg.token = "wrong";
  Client bad_token(cfg);
  auto denied = bad_token.List(resources::kNamespaces, "", {});
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, 401);
}

TEST_F(TlsTest, NoCredentialsOrUntrustedServerFail) {
  Client anonymous(Base());
  auto r = anonymous.Get(resources::kNamespaces, "", "default");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 401);

  RestConfig untrusted = Base();
  untrusted.ca_pem.clear();  // system store: does not know our CA
  untrusted.token = "s3cret";
  auto handshake = Client(untrusted).Get(resources::kNamespaces, "", "default");
  ASSERT_FALSE(handshake);
  EXPECT_EQ(handshake.error().code, 0);
}

// tls-server-name: the certificate (SANs 127.0.0.1 and localhost) is checked against it, while
// the connection still goes to server's address.
TEST_F(TlsTest, TlsServerNameAndInsecureSkipVerify) {
  RestConfig cfg = Base();
  cfg.token = "s3cret";
  cfg.tls_server_name = "localhost";
  auto ok = Client(cfg).Get(resources::kNamespaces, "", "default");
  ASSERT_TRUE(ok) << ok.error().ToString();
  cfg.tls_server_name = "api.other.example";
  auto wrong = Client(cfg).Get(resources::kNamespaces, "", "default");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, 0) << wrong.error().ToString();
  // Connected (to 127.0.0.1), then refused the certificate: not a name lookup failure.
  EXPECT_NE(wrong.error().message.find("SSL"), std::string::npos) << wrong.error().ToString();
  RestConfig insecure = Base();
  insecure.ca_pem.clear();
  insecure.token = "s3cret";
  insecure.insecure_skip_tls_verify = true;
  auto skipped = Client(insecure).Get(resources::kNamespaces, "", "default");
  ASSERT_TRUE(skipped) << skipped.error().ToString();
}

// An exec plugin (here /bin/cat of a prepared ExecCredential) whose status carries a client
// certificate and key; a plugin whose token the server refuses is run again once after the 401.
TEST_F(TlsTest, ExecPluginCredentials) {
  Json cred = {{"apiVersion", "client.authentication.k8s.io/v1beta1"},
               {"kind", "ExecCredential"},
               {"status",
                {{"clientCertificateData", Slurp(server_->client_cert_file())},
                 {"clientKeyData", Slurp(server_->client_key_file())}}}};
  std::string file = (dir_ / "cred.json").string();
  std::ofstream(file) << cred.dump();
  RestConfig cfg = Base();
  cfg.exec = ExecConfig{};
  cfg.exec->api_version = "client.authentication.k8s.io/v1beta1";
  cfg.exec->command = "/bin/cat";
  cfg.exec->args = {file};
  Client client(cfg);
  auto list = client.List(resources::kNamespaces, "", {});
  ASSERT_TRUE(list) << list.error().ToString();
  int events = 0;
  auto st = client.Watch(resources::kNamespaces, "", WatchOptions{},
                         [&](const WatchEvent&) { return ++events < 1; });
  EXPECT_TRUE(st) << st.error().ToString();

  // The first run prints a revoked token, the next ones the right one.
  std::string count = (dir_ / "count").string();
  cfg.exec->command = "/bin/sh";
  cfg.exec->args = {"-c",
                    "n=$(cat \"$1\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$1\"; "
                    "t=s3cret; [ $n = 1 ] && t=revoked; "
                    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":"
                    "\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' $t",
                    "sh", count};
  Client retried(cfg);
  auto got = retried.Get(resources::kNamespaces, "", "default");
  ASSERT_TRUE(got) << got.error().ToString();
  auto again = retried.Get(resources::kNamespaces, "", "kube-system");
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_EQ(Slurp(count), "2\n");  // revoked, then one good token for both calls
}

TEST_F(TlsTest, WrittenKubeconfigLoadsAndWorks) {
  std::string path = (dir_ / "kubeconfig").string();
  ASSERT_TRUE(server_->WriteKubeconfig(path));
  auto cfg = LoadKubeconfigFile(path);
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->server, server_->url());
  Client client(*cfg);
  auto ns = client.Get(resources::kNamespaces, "", "kube-system");
  ASSERT_TRUE(ns) << ns.error().ToString();
}

}  // namespace
}  // namespace hami::k8s
