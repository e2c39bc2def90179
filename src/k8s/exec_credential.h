// kubeconfig `exec` credential plugins (client.authentication.k8s.io v1 and v1beta1
// ExecCredential; docs/KUBECTL_HAMI.md#credentials): the plugin runs with KUBERNETES_EXEC_INFO set,
// prints an ExecCredential, and its status (a bearer token, or a client certificate and key) is
// cached until status.expirationTimestamp. After a 401 the client drops the cached credential and
// runs the plugin once more (as client-go's exec authenticator does).
#ifndef HAMI_K8S_EXEC_CREDENTIAL_H_
#define HAMI_K8S_EXEC_CREDENTIAL_H_

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace hami::k8s {

// users[].user.exec of a kubeconfig.
struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  std::string command;      // a relative path with '/' is resolved against the kubeconfig's dir
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string interactive_mode;  // Never, IfAvailable, Always ("" = IfAvailable, v1beta1 only)
  bool provide_cluster_info = false;
  std::string install_hint;
  // With provide_cluster_info: spec.cluster of KUBERNETES_EXEC_INFO (server,
  // certificate-authority-data, insecure-skip-tls-verify, tls-server-name, proxy-url), as JSON.
  std::string cluster_json;
};

// What a plugin's ExecCredential status carries.
struct ExecCredentialStatus {
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::optional<SystemTime> expiry;  // nullopt: valid until a 401
};

// Parses a plugin's stdout. The kind must be ExecCredential and the apiVersion `api_version`;
// status must carry a token or both clientCertificateData and clientKeyData. Errors name the
// field: `exec plugin "aws": status.expirationTimestamp "x": not RFC 3339`.
Result<ExecCredentialStatus> ParseExecCredential(std::string_view json, const ExecConfig& config);

// The KUBERNETES_EXEC_INFO value: an ExecCredential with spec.interactive and, with
// provide_cluster_info, spec.cluster.
std::string ExecInfo(const ExecConfig& config, bool interactive);

// Runs the plugin: `command args...` with the process environment plus config.env and
// KUBERNETES_EXEC_INFO=`exec_info`; stdin is the terminal when `interactive`, else /dev/null;
// stderr passes through. Returns its stdout; a non-zero exit is an error naming the command (and
// the install hint when the command is not found).
Result<std::string> RunExecPlugin(const ExecConfig& config, const std::string& exec_info,
                                  bool interactive);

class ExecAuthenticator {
 public:
  using Runner = std::function<Result<std::string>(const ExecConfig&, const std::string& exec_info,
                                                   bool interactive)>;
  // `stdin_is_terminal`: whether an interactive plugin could talk to a user (isatty(0) by
  // default). interactiveMode Always without one is an error, before the plugin runs.
  ExecAuthenticator(ExecConfig config, const Clock& clock, Runner runner = RunExecPlugin,
                    std::optional<bool> stdin_is_terminal = std::nullopt);

  // The cached credential while it has not expired, else the plugin's new one. Thread-safe: one
  // plugin run at a time.
  Result<ExecCredentialStatus> Get();
  // A request made with `used` got 401: forget it, unless a newer credential replaced it already.
  void Invalidate(const ExecCredentialStatus& used);
  int runs() const;  // how often the plugin ran

 private:
  ExecConfig config_;
  const Clock& clock_;
  Runner runner_;
  bool terminal_;
  mutable std::mutex mu_;
  std::optional<ExecCredentialStatus> cached_;
  int runs_ = 0;
};

}  // namespace hami::k8s

#endif  // HAMI_K8S_EXEC_CREDENTIAL_H_
