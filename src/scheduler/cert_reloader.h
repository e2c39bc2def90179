// The serving certificate of --cert_file/--key_file with hot reload (HAMi v2.10
// cmd/scheduler/main.go: HTTPS with a hot-reloading certificate watcher): every TLS handshake first
// checks whether either file was replaced (device, inode, size or mtime changed) and, if so, loads
// the pair again. A pair that does not load, or whose key does not match the certificate (e.g.
// caught half-written), is ignored and the last good pair keeps being served; the next handshake
// tries again.
#ifndef HAMI_SCHEDULER_CERT_RELOADER_H_
#define HAMI_SCHEDULER_CERT_RELOADER_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <openssl/ssl.h>

#include "common/result.h"

namespace hami::scheduler {

// What tells a replaced file apart: device, inode, size and modification time.
struct CertFileId {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const CertFileId&) const = default;
};

class CertReloader {
 public:
  // Loads the pair once; an error names the file that does not load.
  static Result<std::unique_ptr<CertReloader>> Create(std::string cert_file, std::string key_file);
  ~CertReloader();
  CertReloader(const CertReloader&) = delete;
  CertReloader& operator=(const CertReloader&) = delete;

  // Makes every handshake on `ctx` serve the current pair. The reloader must outlive `ctx`.
  void Install(SSL_CTX* ctx);
  // Checks the files and reloads when they changed; returns whether the served pair changed.
  bool Refresh();
  // How many times a changed pair was loaded (the initial load not counted).
  uint64_t reloads() const { return reloads_.load(); }

 private:
  struct Pair;
  CertReloader(std::string cert_file, std::string key_file);
  static int OnCertificate(SSL* ssl, void* self);
  Result<std::shared_ptr<Pair>> LoadPair() const;
  std::pair<CertFileId, CertFileId> Identify() const;

  const std::string cert_file_;
  const std::string key_file_;
  std::mutex mu_;
  std::shared_ptr<Pair> current_;
  std::pair<CertFileId, CertFileId> loaded_ids_;
  std::atomic<uint64_t> reloads_{0};
};

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_CERT_RELOADER_H_
