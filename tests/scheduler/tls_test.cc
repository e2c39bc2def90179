// HTTPS with --cert_file/--key_file and reload without a restart: two certificate sets, each
// signed by its own CA; after the files are replaced, new connections verify against the second
// CA and no longer against the first.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

#include "device/config.h"
#include "k8s/client.h"
#include "scheduler/cert_reloader.h"
#include "scheduler/server.h"
#include "sim/apiserver/apiserver.h"
#include "sim/apiserver/certs.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Replaces `path` atomically (write aside, rename over), as a cert manager or kubelet does.
void Replace(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".new";
  std::ofstream(tmp) << content;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0) << path;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hami-sched-tls-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    auto a = sim::GenerateTlsFiles(dir_ + "/a");
    auto b = sim::GenerateTlsFiles(dir_ + "/b");
    ASSERT_TRUE(a.ok() && b.ok());
    a_ = *a;
    b_ = *b;
    cert_ = dir_ + "/tls.crt";
    key_ = dir_ + "/tls.key";
    Replace(cert_, ReadFile(a_.server_cert));
    Replace(key_, ReadFile(a_.server_key));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // GET /healthz over HTTPS on a new connection, verifying the server against `ca`.
  int Healthz(int port, const std::string& ca) {
    httplib::SSLClient c("127.0.0.1", port);
    c.set_ca_cert_path(ca.c_str());
    c.enable_server_certificate_verification(true);
    auto res = c.Get("/healthz");
    return res ? res->status : -1;
  }

  std::string dir_, cert_, key_;
  sim::TlsFiles a_, b_;
};

TEST_F(TlsTest, ServesHttpsAndReloadsAReplacedCertificate) {
  testing::SimEnv env = testing::StartSim();
  ASSERT_TRUE(env.client);
  k8s::Client& client = *env.client;
  ServerOptions opts;
  opts.http_bind = "127.0.0.1:0";
  opts.metrics_bind = "";
  opts.cert_file = cert_;
  opts.key_file = key_;
  Server server(client, device::DefaultDeviceConfig(), opts);
  ASSERT_TRUE(server.Start().ok());

  EXPECT_EQ(Healthz(server.port(), a_.ca_cert), 200);
  EXPECT_EQ(Healthz(server.port(), b_.ca_cert), -1);  // not trusted
  EXPECT_EQ(server.cert_reloads(), 0u);

  // Key first: until the certificate follows, the pair does not match and the old one stays.
  Replace(key_, ReadFile(b_.server_key));
  EXPECT_EQ(Healthz(server.port(), a_.ca_cert), 200);
  Replace(cert_, ReadFile(b_.server_cert));
  EXPECT_EQ(Healthz(server.port(), b_.ca_cert), 200);
  EXPECT_EQ(Healthz(server.port(), a_.ca_cert), -1);
  EXPECT_EQ(server.cert_reloads(), 1u);
  server.Stop();
}

TEST_F(TlsTest, BadFilesAreRefusedAtStart) {
  EXPECT_FALSE(CertReloader::Create(dir_ + "/missing.crt", key_).ok());
  EXPECT_FALSE(CertReloader::Create(cert_, dir_ + "/missing.key").ok());
  // A key that does not belong to the certificate.
  auto mismatched = CertReloader::Create(cert_, b_.server_key);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.error().find("does not match"), std::string::npos) << mismatched.error();
  auto ok = CertReloader::Create(cert_, key_);
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_FALSE((*ok)->Refresh());  // unchanged files: nothing to do
}

}  // namespace
}  // namespace hami::scheduler
