#include "scheduler/cert_reloader.h"

#include <utility>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "common/strings.h"

namespace hami::scheduler {

// One loaded certificate chain and its key; freed when the last handshake using it is done
// (SSL_use_cert_and_key takes its own references).
struct CertReloader::Pair {
  X509* leaf = nullptr;
  STACK_OF(X509) * chain = nullptr;
  EVP_PKEY* key = nullptr;
  ~Pair() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
  }
};

namespace {

// A PEM file's contents through a BIO; nullptr when it cannot be opened.
BIO* OpenPem(const std::string& path) { return BIO_new_file(path.c_str(), "r"); }

}  // namespace

CertReloader::CertReloader(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

CertReloader::~CertReloader() = default;

Result<std::unique_ptr<CertReloader>> CertReloader::Create(std::string cert_file,
                                                           std::string key_file) {
  std::unique_ptr<CertReloader> r(new CertReloader(std::move(cert_file), std::move(key_file)));
  auto ids = r->Identify();
  Result<std::shared_ptr<Pair>> pair = r->LoadPair();
  if (!pair) return std::move(pair).take_error();
  r->current_ = std::move(*pair);
  r->loaded_ids_ = ids;
  return r;
}

std::pair<CertFileId, CertFileId> CertReloader::Identify() const {
  auto id = [](const std::string& path) {
    CertFileId f;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return f;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    f.size = st.st_size;
    f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return f;
  };
  return {id(cert_file_), id(key_file_)};
}

Result<std::shared_ptr<CertReloader::Pair>> CertReloader::LoadPair() const {
  // This runs inside a handshake: errors left on the thread's OpenSSL queue (the chain loop
  // always ends with a "no start line" one) would fail that handshake, so clear them on return.
  struct ClearErrors {
    ~ClearErrors() { ERR_clear_error(); }
  } clear_errors;
  auto pair = std::make_shared<Pair>();
  BIO* cert = OpenPem(cert_file_);
  if (cert == nullptr) return Error{"--cert_file: cannot open " + Quote(cert_file_)};
  pair->leaf = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr);
  pair->chain = sk_X509_new_null();
  while (X509* extra = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr)) {
    sk_X509_push(pair->chain, extra);
  }
  BIO_free(cert);
  if (pair->leaf == nullptr) {
    return Error{"--cert_file: no PEM certificate in " + Quote(cert_file_)};
  }
  BIO* key = OpenPem(key_file_);
  if (key == nullptr) return Error{"--key_file: cannot open " + Quote(key_file_)};
  pair->key = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
  BIO_free(key);
  if (pair->key == nullptr) return Error{"--key_file: no PEM private key in " + Quote(key_file_)};
  if (X509_check_private_key(pair->leaf, pair->key) != 1) {
    return Error{"--key_file: " + Quote(key_file_) + " does not match --cert_file " +
                 Quote(cert_file_)};
  }
  return pair;
}

bool CertReloader::Refresh() {
  auto ids = Identify();
  std::lock_guard<std::mutex> lock(mu_);
  if (ids == loaded_ids_) return false;
  Result<std::shared_ptr<Pair>> pair = LoadPair();
  if (!pair) {
    // Most likely caught mid-replacement: keep serving the old pair, retry next handshake.
    HAMI_VLOG(2, "certificate reload: {}", pair.error().c_str());
    return false;
  }
  current_ = std::move(*pair);
  loaded_ids_ = ids;
  reloads_.fetch_add(1);
  HAMI_INFO("certificate reloaded from {}", cert_file_.c_str());
  return true;
}

int CertReloader::OnCertificate(SSL* ssl, void* arg) {
  auto* self = static_cast<CertReloader*>(arg);
  self->Refresh();
  std::shared_ptr<Pair> pair;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    pair = self->current_;
  }
  return SSL_use_cert_and_key(ssl, pair->leaf, pair->key, pair->chain, 1) == 1 ? 1 : 0;
}

void CertReloader::Install(SSL_CTX* ctx) { SSL_CTX_set_cert_cb(ctx, &OnCertificate, this); }

}  // namespace hami::scheduler
