// charts/hami's admission webhook through helm: selectors and policies, the webhook turned off,
// the certificate Helm makes (one CA in Secret and caBundle, verified with OpenSSL), cert-manager
// instead, and a custom URL.
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>

#include "render.h"

namespace hami::chart_test {
namespace {

TEST_F(ChartTest, WebhookDisabledServesPlainHttpAndRendersNoWebhook) {
  const Rendered r = RenderChecked("--set scheduler.admissionWebhook.enabled=false");
  EXPECT_TRUE(r.OfKind("MutatingWebhookConfiguration").empty());
  EXPECT_TRUE(r.OfKind("Secret").empty());
  const auto cmd = r.SchedulerCommand();
  EXPECT_TRUE(Contains(cmd, "--http_bind=0.0.0.0:80"));
  EXPECT_FALSE(Contains(cmd, "--cert_file=/tls/tls.crt"));
  const YAML::Node ext = r.SchedulerConfig()["extenders"][0];
  EXPECT_EQ(ext["urlPrefix"].as<std::string>(), "http://127.0.0.1:80");
  EXPECT_FALSE(ext["enableHTTPS"].as<bool>());
  EXPECT_FALSE(ext["tlsConfig"]);
  const YAML::Node pod = r.Get("Deployment", "hami-scheduler")["spec"]["template"]["spec"];
  EXPECT_FALSE(Named(pod["volumes"], "tls-config"));
  EXPECT_EQ(
      Named(pod["containers"], "vgpu-scheduler-extender")["readinessProbe"]["httpGet"]["scheme"]
          .as<std::string>(),
      "HTTP");
  EXPECT_EQ(r.Get("Service", "hami-scheduler")["spec"]["ports"][0]["targetPort"].as<int>(), 80);
}

TEST_F(ChartTest, WebhookSelectorsAndPolicies) {
  const Rendered r = RenderChecked();
  const YAML::Node hook = r.Get("MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0];
  ASSERT_TRUE(hook);
  EXPECT_EQ(hook["failurePolicy"].as<std::string>(), "Ignore");
  EXPECT_EQ(hook["reinvocationPolicy"].as<std::string>(), "Never");
  EXPECT_EQ(hook["clientConfig"]["service"]["name"].as<std::string>(), "hami-scheduler");
  EXPECT_EQ(hook["clientConfig"]["service"]["path"].as<std::string>(), "/webhook");
  // Pods and namespaces labelled hami.io/webhook=ignore are skipped (the scheduler's own pod is).
  for (const char* selector : {"objectSelector", "namespaceSelector"}) {
    const YAML::Node e = hook[selector]["matchExpressions"][0];
    EXPECT_EQ(e["key"].as<std::string>(), "hami.io/webhook") << selector;
    EXPECT_EQ(e["operator"].as<std::string>(), "NotIn") << selector;
    EXPECT_EQ(Strings(e["values"]), std::vector<std::string>{"ignore"}) << selector;
  }
  EXPECT_EQ(r.Get("Deployment",
                  "hami-scheduler")["spec"]["template"]["metadata"]["labels"]["hami.io/webhook"]
                .as<std::string>(),
            "ignore");

  const Rendered over = RenderChecked(
      "--set scheduler.admissionWebhook.failurePolicy=Fail "
      "--set scheduler.admissionWebhook.reinvocationPolicy=IfNeeded "
      "--set 'scheduler.admissionWebhook.whitelistNamespaces={team-a,team-b}' "
      "--set scheduler.admissionWebhook.objectSelector.matchLabels.gpu=yes");
  const YAML::Node h = over.Get("MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0];
  EXPECT_EQ(h["failurePolicy"].as<std::string>(), "Fail");
  EXPECT_EQ(h["reinvocationPolicy"].as<std::string>(), "IfNeeded");
  const YAML::Node ns = h["namespaceSelector"]["matchExpressions"][1];
  EXPECT_EQ(ns["key"].as<std::string>(), "kubernetes.io/metadata.name");
  EXPECT_EQ(Strings(ns["values"]), (std::vector<std::string>{"team-a", "team-b"}));
  EXPECT_EQ(h["objectSelector"]["matchLabels"]["gpu"].as<std::string>(), "yes");

  const Rendered unmanaged =
      RenderChecked("--set scheduler.admissionWebhook.manageNamespaceSelector=false");
  EXPECT_FALSE(unmanaged.Get("MutatingWebhookConfiguration",
                             "hami-webhook")["webhooks"][0]["namespaceSelector"]);
}

std::unique_ptr<X509, decltype(&X509_free)> ParseCert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  return {PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free};
}

std::string Base64Decode(const std::string& in) {
  std::string out(in.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return {};
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '\0') out.pop_back();  // padding
  return out;
}

TEST_F(ChartTest, HelmMadeCertificateIsOneCaForSecretAndWebhook) {
  const Rendered r = RenderChecked();
  const YAML::Node secret = r.Get("Secret", "hami-scheduler-tls");
  ASSERT_TRUE(secret);
  EXPECT_EQ(secret["type"].as<std::string>(), "kubernetes.io/tls");
  const std::string ca_b64 = secret["data"]["ca.crt"].as<std::string>();
  const YAML::Node hook = r.Get("MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0];
  EXPECT_EQ(hook["clientConfig"]["caBundle"].as<std::string>(), ca_b64);

  auto ca = ParseCert(Base64Decode(ca_b64));
  auto leaf = ParseCert(Base64Decode(secret["data"]["tls.crt"].as<std::string>()));
  ASSERT_TRUE(ca && leaf);
  // The leaf verifies against the CA, for the name kube-apiserver dials.
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), &X509_STORE_free);
  X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                      &X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr);
  X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx.get()),
                              "hami-scheduler.kube-system.svc", 0);
  EXPECT_EQ(X509_verify_cert(ctx.get()), 1)
      << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
  EXPECT_EQ(
      X509_check_host(leaf.get(), "hami-scheduler.kube-system.svc.cluster.local", 0, 0, nullptr),
      1);
  EXPECT_EQ(X509_check_host(leaf.get(), "evil.example", 0, 0, nullptr), 0);
  // The key belongs to the certificate.
  const std::string key_pem = Base64Decode(secret["data"]["tls.key"].as<std::string>());
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  ASSERT_TRUE(key);
  EXPECT_EQ(X509_check_private_key(leaf.get(), key.get()), 1);
  // The scheduler reads it from the Secret as files; no ServiceAccount reads Secrets.
  const YAML::Node pod = r.Get("Deployment", "hami-scheduler")["spec"]["template"]["spec"];
  EXPECT_EQ(Named(pod["volumes"], "tls-config")["secret"]["secretName"].as<std::string>(),
            "hami-scheduler-tls");
}

TEST_F(ChartTest, CertManagerOptionMakesNoSecretAndInjectsTheCa) {
  const Rendered r = RenderChecked("--set scheduler.certManager.enabled=true");
  EXPECT_FALSE(r.Get("Secret", "hami-scheduler-tls"));
  const YAML::Node issuer = r.Get("Issuer", "hami-scheduler-selfsigned-issuer");
  ASSERT_TRUE(issuer);
  const YAML::Node cert = r.Get("Certificate", "hami-scheduler-serving-cert");
  ASSERT_TRUE(cert);
  EXPECT_EQ(cert["spec"]["secretName"].as<std::string>(), "hami-scheduler-tls");
  EXPECT_TRUE(Contains(Strings(cert["spec"]["dnsNames"]), "hami-scheduler.kube-system.svc"));
  EXPECT_EQ(cert["spec"]["issuerRef"]["name"].as<std::string>(),
            "hami-scheduler-selfsigned-issuer");
  const YAML::Node mwc = r.Get("MutatingWebhookConfiguration", "hami-webhook");
  EXPECT_EQ(mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].as<std::string>(),
            "kube-system/hami-scheduler-serving-cert");
  EXPECT_FALSE(mwc["webhooks"][0]["clientConfig"]["caBundle"]);
}

TEST_F(ChartTest, CustomUrlWebhookCertificateCoversTheHost) {
  const Rendered r = RenderChecked(
      "--set scheduler.admissionWebhook.customURL.enabled=true "
      "--set scheduler.admissionWebhook.customURL.host=10.0.0.5");
  const YAML::Node hook = r.Get("MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0];
  EXPECT_EQ(hook["clientConfig"]["url"].as<std::string>(), "https://10.0.0.5:31998/webhook");
  EXPECT_FALSE(hook["clientConfig"]["service"]);
  auto leaf = ParseCert(
      Base64Decode(r.Get("Secret", "hami-scheduler-tls")["data"]["tls.crt"].as<std::string>()));
  ASSERT_TRUE(leaf);
  EXPECT_EQ(X509_check_ip_asc(leaf.get(), "10.0.0.5", 0), 1);
}

}  // namespace
}  // namespace hami::chart_test
