#include "k8s/kubeconfig.h"

#include <cstdlib>
#include <fstream>

#include <yaml-cpp/yaml.h>

#include "common/strings.h"
#include "k8s/base64.h"

namespace hami::k8s {
namespace {

// Credentials and kubeconfigs are small; the cap keeps a path like /dev/zero from eating memory.
constexpr size_t kMaxFileBytes = 4 << 20;

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{what + " " + Quote(path) + ": cannot read"};
  std::string out(kMaxFileBytes + 1, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  if (in.bad()) return Error{what + " " + Quote(path) + ": cannot read"};
  out.resize(static_cast<size_t>(in.gcount()));
  if (out.size() > kMaxFileBytes) {
    return Error{what + " " + Quote(path) + ": larger than " + std::to_string(kMaxFileBytes) +
                 " bytes"};
  }
  return out;
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

// The entry of list `section` (clusters/users/contexts) named `name`, or an undefined node.
YAML::Node FindNamed(const YAML::Node& root, const char* section, const std::string& name,
                     const char* inner) {
  const YAML::Node list = root[section];
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& entry : list) {
    if (entry["name"] && entry["name"].as<std::string>("") == name) return entry[inner];
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::string Str(const YAML::Node& node, const char* key) {
  if (!node || !node.IsMap() || !node[key] || !node[key].IsScalar()) return "";
  return node[key].as<std::string>("");
}

// Reads `<key>-data` (base64) or `<key>` (a file path) into `out`.
Status DataOrFile(const YAML::Node& node, const std::string& where, const std::string& key,
                  const std::string& base_dir, std::string& out) {
  std::string data = Str(node, (key + "-data").c_str());
  if (!data.empty()) {
    auto decoded = Base64Decode(data);
    if (!decoded) return Error{where + "." + key + "-data: not base64"};
    out = std::move(*decoded);
    return OkStatus();
  }
  std::string file = Str(node, key.c_str());
  if (file.empty()) return OkStatus();
  auto content = ReadFile(Resolve(base_dir, file), where + "." + key);
  if (!content) return std::move(content).take_error();
  out = std::move(*content);
  return OkStatus();
}

Result<RestConfig> FromYaml(const YAML::Node& root, const std::string& base_dir,
                            std::string_view context) {
  std::string ctx_name = context.empty() ? Str(root, "current-context") : std::string(context);
  if (ctx_name.empty()) return Error{"current-context: not set and no context given"};
  YAML::Node ctx = FindNamed(root, "contexts", ctx_name, "context");
  if (!ctx) return Error{"contexts[" + ctx_name + "]: not found"};
  std::string cluster_name = Str(ctx, "cluster");
  YAML::Node cluster = FindNamed(root, "clusters", cluster_name, "cluster");
  if (!cluster) return Error{"clusters[" + cluster_name + "]: not found"};
  RestConfig cfg;
  cfg.server = Str(cluster, "server");
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  if (cfg.server.empty()) return Error{"clusters[" + cluster_name + "].server: empty"};
  cfg.insecure_skip_tls_verify =
      ParseBool(Str(cluster, "insecure-skip-tls-verify")).value_or(false);
  std::string where = "clusters[" + cluster_name + "]";
  if (auto st = DataOrFile(cluster, where, "certificate-authority", base_dir, cfg.ca_pem); !st) {
    return std::move(st).take_error();
  }
  std::string ns = Str(ctx, "namespace");
  if (!ns.empty()) cfg.ns = ns;
  std::string user_name = Str(ctx, "user");
  YAML::Node user = FindNamed(root, "users", user_name, "user");
  if (!user || !user.IsMap()) return cfg;  // anonymous
  where = "users[" + user_name + "]";
  if (auto st = DataOrFile(user, where, "client-certificate", base_dir, cfg.client_cert_pem); !st) {
    return std::move(st).take_error();
  }
  if (auto st = DataOrFile(user, where, "client-key", base_dir, cfg.client_key_pem); !st) {
    return std::move(st).take_error();
  }
  cfg.token = Str(user, "token");
  std::string token_file = Str(user, "tokenFile");
  if (cfg.token.empty() && !token_file.empty()) {
    auto token = ReadFile(Resolve(base_dir, token_file), where + ".tokenFile");
    if (!token) return std::move(token).take_error();
    cfg.token = std::string(Trim(*token));
  }
  return cfg;
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

Result<RestConfig> ParseKubeconfig(std::string_view yaml_text, const std::string& base_dir,
                                   std::string_view context) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Error{std::string("kubeconfig: not YAML: ") + e.what()};
  }
  if (!root.IsMap()) return Error{"kubeconfig: not a YAML map"};
  try {
    return FromYaml(root, base_dir, context);
  } catch (const YAML::Exception& e) {
    return Error{std::string("kubeconfig: unexpected shape: ") + e.what()};
  }
}

Result<RestConfig> LoadKubeconfigFile(const std::string& path, std::string_view context) {
  auto text = ReadFile(path, "kubeconfig");
  if (!text) return std::move(text).take_error();
  auto cfg = ParseKubeconfig(*text, DirOf(path), context);
  if (!cfg) return Error{"kubeconfig " + Quote(path) + ": " + cfg.error()};
  return cfg;
}

Result<RestConfig> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || !*host || !*port) {
    return Error{"in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"};
  }
  RestConfig cfg;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  cfg.server = "https://" + h + ":" + port;
  auto token = ReadFile(sa_dir + "/token", "in-cluster token");
  if (!token) return std::move(token).take_error();
  cfg.token = std::string(Trim(*token));
  auto ca = ReadFile(sa_dir + "/ca.crt", "in-cluster CA");
  if (!ca) return std::move(ca).take_error();
  cfg.ca_pem = std::move(*ca);
  if (auto ns = ReadFile(sa_dir + "/namespace", "in-cluster namespace"); ns) {
    cfg.ns = std::string(Trim(*ns));
  }
  return cfg;
}

Result<RestConfig> LoadConfig(const std::string& kubeconfig_flag) {
  if (!kubeconfig_flag.empty()) return LoadKubeconfigFile(kubeconfig_flag);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env) {
    std::string first(Split(env, ':')[0]);
    return LoadKubeconfigFile(first);
  }
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host != nullptr && *host) {
    return InClusterConfig();
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr) return Error{"no kubeconfig: --kubeconfig, KUBECONFIG and HOME unset"};
  return LoadKubeconfigFile(std::string(home) + "/.kube/config");
}

}  // namespace hami::k8s
