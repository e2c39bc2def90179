#include "sim/apiserver/certs.h"

#include <sys/stat.h>

#include <memory>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "common/strings.h"

namespace hami::sim {
namespace {

struct Deleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free_all(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter>;
using CertPtr = std::unique_ptr<X509, Deleter>;
using BioPtr = std::unique_ptr<BIO, Deleter>;

KeyPtr NewKey() { return KeyPtr(EVP_EC_gen("P-256")); }

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

enum class Role { kCa, kServer, kClient };

// A certificate for `key`, signed by `issuer`/`issuer_key` (self-signed when issuer is null).
CertPtr MakeCert(EVP_PKEY* key, const char* cn, const char* org, X509* issuer, EVP_PKEY* issuer_key,
                 Role role, long serial) {
  CertPtr cert(X509_new());
  if (!cert) return nullptr;
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (org != nullptr) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(org),
                               -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  bool ok = true;
  switch (role) {
    case Role::kCa:
      ok = AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE") &&
           AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
           AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash");
      break;
    case Role::kServer:
      ok = AddExtension(cert.get(), signer, NID_basic_constraints, "CA:FALSE") &&
           AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth") &&
           AddExtension(cert.get(), signer, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
      break;
    case Role::kClient:
      ok = AddExtension(cert.get(), signer, NID_basic_constraints, "CA:FALSE") &&
           AddExtension(cert.get(), signer, NID_ext_key_usage, "clientAuth");
      break;
  }
  if (!ok || X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

bool WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  BioPtr bio(BIO_new_file(path.c_str(), "w"));
  if (!bio) return false;
  if (cert != nullptr) return PEM_write_bio_X509(bio.get(), cert) == 1;
  return PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
}

}  // namespace

Result<TlsFiles> GenerateTlsFiles(const std::string& dir) {
  if (dir.empty()) return Error{"cert dir: empty (TLS needs a directory for its certificates)"};
  mkdir(dir.c_str(), 0700);  // may already exist; the writes below report real failures
  KeyPtr ca_key = NewKey(), server_key = NewKey(), client_key = NewKey();
  if (!ca_key || !server_key || !client_key) return Error{"cert dir: key generation failed"};
  CertPtr ca = MakeCert(ca_key.get(), "hami-sim-ca", nullptr, nullptr, ca_key.get(), Role::kCa, 1);
  if (!ca) return Error{"cert dir: CA certificate failed"};
  CertPtr server =
      MakeCert(server_key.get(), "127.0.0.1", nullptr, ca.get(), ca_key.get(), Role::kServer, 2);
  CertPtr client = MakeCert(client_key.get(), "system:admin", "system:masters", ca.get(),
                            ca_key.get(), Role::kClient, 3);
  if (!server || !client) return Error{"cert dir: leaf certificate failed"};
  TlsFiles f{dir + "/ca.crt", dir + "/server.crt", dir + "/server.key", dir + "/client.crt",
             dir + "/client.key"};
  bool ok = WritePem(f.ca_cert, ca.get(), nullptr) &&
            WritePem(f.server_cert, server.get(), nullptr) &&
            WritePem(f.server_key, nullptr, server_key.get()) &&
            WritePem(f.client_cert, client.get(), nullptr) &&
            WritePem(f.client_key, nullptr, client_key.get());
  if (!ok) return Error{"cert dir " + Quote(dir) + ": cannot write the PEM files"};
  return f;
}

}  // namespace hami::sim
