// Where the client finds its API server and credentials: a kubeconfig file (the --kubeconfig
// flag, then $KUBECONFIG), else the in-cluster service account, else ~/.kube/config.
#ifndef HAMI_K8S_KUBECONFIG_H_
#define HAMI_K8S_KUBECONFIG_H_

#include <chrono>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hami::k8s {

struct RestConfig {
  std::string server;  // "https://host:port", no trailing '/'
  std::string ca_pem;  // trusted CA certificates (PEM); empty = system store
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;
  bool insecure_skip_tls_verify = false;
  std::string ns = "default";  // the context's namespace
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

// The pod's service account: $KUBERNETES_SERVICE_HOST/_PORT and the token, CA and namespace
// files under `sa_dir`.
Result<RestConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// client-go's order: `kubeconfig_flag` if set, else the first path in $KUBECONFIG, else
// in-cluster when $KUBERNETES_SERVICE_HOST is set, else $HOME/.kube/config.
Result<RestConfig> LoadConfig(const std::string& kubeconfig_flag);

}  // namespace hami::k8s

#endif  // HAMI_K8S_KUBECONFIG_H_
