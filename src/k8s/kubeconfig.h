// Where the client finds its API server and credentials: a kubeconfig file (the --kubeconfig
// flag, then the files of $KUBECONFIG merged as kubectl merges them), else the in-cluster service
// account, else ~/.kube/config (docs/KUBECTL_HAMI.md#credentials).
#ifndef HAMI_K8S_KUBECONFIG_H_
#define HAMI_K8S_KUBECONFIG_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "k8s/exec_credential.h"

namespace hami::k8s {

struct RestConfig {
  std::string server;  // "https://host:port", no trailing '/'
  std::string ca_pem;  // trusted CA certificates (PEM); empty = system store
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;
  std::string username;  // basic auth, with password
  std::string password;
  std::optional<ExecConfig> exec;  // a credential plugin (k8s/exec_credential.h)
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // the name the server's certificate is checked against (and SNI)
  std::string proxy_url;        // http(s):// or socks5:// proxy for every request
  std::string ns = "default";   // the context's namespace
  // Client-side limits (--kube-qps, --kube-burst, --kube-timeout). qps <= 0: unlimited.
  double qps = 50;
  int burst = 100;
  std::chrono::milliseconds timeout{30000};  // per request; watches are exempt
};

// Parses kubeconfig YAML. Relative file paths (certificate-authority, client-certificate,
// client-key, tokenFile) resolve against `base_dir`. `context` "" = current-context. Errors
// name the field: `users[admin].client-key-data: not base64`.
Result<RestConfig> ParseKubeconfig(std::string_view yaml_text, const std::string& base_dir,
                                   std::string_view context = "");
Result<RestConfig> LoadKubeconfigFile(const std::string& path, std::string_view context = "");

// One file of a merged kubeconfig: its text and the directory its relative paths resolve against.
struct KubeconfigText {
  std::string yaml;
  std::string base_dir;
};
// kubectl's merge of several files ($KUBECONFIG=a:b:c): a cluster, user or context comes from
// the first file that names it, current-context from the first file that sets it.
Result<RestConfig> ParseKubeconfigs(const std::vector<KubeconfigText>& files,
                                    std::string_view context = "");
// The files of a $KUBECONFIG-style list merged; files that do not exist are skipped (as kubectl
// does), and an error if none exists.
Result<RestConfig> LoadKubeconfigFiles(const std::vector<std::string>& paths,
                                       std::string_view context = "");

// The pod's service account: $KUBERNETES_SERVICE_HOST/_PORT and the token, CA and namespace
// files under `sa_dir`.
Result<RestConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// client-go's order: `kubeconfig_flag` if set, else the files of $KUBECONFIG merged, else
// in-cluster when $KUBERNETES_SERVICE_HOST is set (and no `context` is asked for), else
// $HOME/.kube/config. `context` "" = current-context.
Result<RestConfig> LoadConfig(const std::string& kubeconfig_flag, std::string_view context = "");

}  // namespace hami::k8s

#endif  // HAMI_K8S_KUBECONFIG_H_
