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
