// Run-time TLS material for `hami-sim apiserver --tls`: a self-signed CA, a server certificate
// for 127.0.0.1/localhost and a client certificate (CN system:admin, O system:masters), all
// signed by that CA. Nothing is committed; every start makes fresh keys.
#ifndef HAMI_SIM_CERTS_H_
#define HAMI_SIM_CERTS_H_

#include <string>

#include "common/result.h"

namespace hami::sim {

struct TlsFiles {
  std::string ca_cert;  // paths of PEM files
  std::string server_cert;
  std::string server_key;
  std::string client_cert;
  std::string client_key;
};

// Writes ca.crt, server.crt/.key, client.crt/.key into `dir` (created if missing).
Result<TlsFiles> GenerateTlsFiles(const std::string& dir);

}  // namespace hami::sim

#endif  // HAMI_SIM_CERTS_H_
