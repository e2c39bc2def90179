#include "k8s/kubeconfig.h"

#include <cstdlib>
#include <fstream>
#include <map>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <yaml-cpp/yaml.h>

#include "common/strings.h"
#include "k8s/base64.h"

namespace hami::k8s {
namespace {

using Json = nlohmann::json;

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

// The named entries of one section (clusters/users/contexts) of the merged files: the first file
// naming an entry wins, and the entry keeps the directory of its file.
struct Entry {
  YAML::Node node;  // the inner map (cluster/user/context)
  std::string base_dir;
};
struct Merged {
  std::string current_context;
  std::map<std::string, Entry> clusters, users, contexts;
};

void MergeSection(const YAML::Node& root, const char* section, const char* inner,
                  const std::string& base_dir, std::map<std::string, Entry>& into) {
  const YAML::Node list = root[section];
  if (!list || !list.IsSequence()) return;
  for (const auto& entry : list) {
    if (!entry.IsMap() || !entry["name"] || !entry["name"].IsScalar()) continue;
    into.emplace(entry["name"].as<std::string>(""), Entry{entry[inner], base_dir});
  }
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

Result<ExecConfig> ParseExec(const YAML::Node& exec, const std::string& where,
                             const std::string& base_dir) {
  if (!exec.IsMap()) return Error{where + ": not a map"};
  ExecConfig e;
  e.api_version = Str(exec, "apiVersion");
  if (e.api_version != "client.authentication.k8s.io/v1" &&
      e.api_version != "client.authentication.k8s.io/v1beta1") {
    return Error{where + ".apiVersion " + Quote(e.api_version) +
                 ": want client.authentication.k8s.io/v1 or /v1beta1"};
  }
  e.command = Str(exec, "command");
  if (e.command.empty()) return Error{where + ".command: empty"};
  // As client-go: a relative path with a '/' is relative to the kubeconfig's directory; a bare
  // name is looked up on PATH.
  if (e.command.find('/') != std::string::npos) e.command = Resolve(base_dir, e.command);
  if (const YAML::Node args = exec["args"]; args && args.IsSequence()) {
    for (const auto& a : args) e.args.push_back(a.as<std::string>(""));
  }
  if (const YAML::Node env = exec["env"]; env && env.IsSequence()) {
    for (const auto& kv : env) {
      std::string name = Str(kv, "name");
      if (name.empty()) return Error{where + ".env: an entry without a name"};
      e.env.emplace_back(name, Str(kv, "value"));
    }
  }
  e.interactive_mode = Str(exec, "interactiveMode");
  if (e.interactive_mode.empty() && e.api_version == "client.authentication.k8s.io/v1") {
    return Error{where +
                 ".interactiveMode: required by client.authentication.k8s.io/v1 "
                 "(Never, IfAvailable or Always)"};
  }
  if (!e.interactive_mode.empty() && e.interactive_mode != "Never" &&
      e.interactive_mode != "IfAvailable" && e.interactive_mode != "Always") {
    return Error{where + ".interactiveMode " + Quote(e.interactive_mode) +
                 ": want Never, IfAvailable or Always"};
  }
  e.provide_cluster_info = ParseBool(Str(exec, "provideClusterInfo")).value_or(false);
  e.install_hint = Str(exec, "installHint");
  return e;
}

Result<RestConfig> FromMerged(const Merged& m, std::string_view context) {
  std::string ctx_name = context.empty() ? m.current_context : std::string(context);
  if (ctx_name.empty()) return Error{"current-context: not set and no context given"};
  auto ctx_it = m.contexts.find(ctx_name);
  if (ctx_it == m.contexts.end() || !ctx_it->second.node) {
    return Error{"contexts[" + ctx_name + "]: not found"};
  }
  const YAML::Node& ctx = ctx_it->second.node;
  std::string cluster_name = Str(ctx, "cluster");
  auto cluster_it = m.clusters.find(cluster_name);
  if (cluster_it == m.clusters.end() || !cluster_it->second.node) {
    return Error{"clusters[" + cluster_name + "]: not found"};
  }
  const YAML::Node& cluster = cluster_it->second.node;
  RestConfig cfg;
  cfg.server = Str(cluster, "server");
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  if (cfg.server.empty()) return Error{"clusters[" + cluster_name + "].server: empty"};
  cfg.insecure_skip_tls_verify =
      ParseBool(Str(cluster, "insecure-skip-tls-verify")).value_or(false);
  cfg.tls_server_name = Str(cluster, "tls-server-name");
  cfg.proxy_url = Str(cluster, "proxy-url");
  std::string where = "clusters[" + cluster_name + "]";
  if (auto st = DataOrFile(cluster, where, "certificate-authority", cluster_it->second.base_dir,
                           cfg.ca_pem);
      !st) {
    return std::move(st).take_error();
  }
  std::string ns = Str(ctx, "namespace");
  if (!ns.empty()) cfg.ns = ns;
  std::string user_name = Str(ctx, "user");
  auto user_it = m.users.find(user_name);
  if (user_it == m.users.end() || !user_it->second.node.IsMap()) return cfg;  // anonymous
  const YAML::Node& user = user_it->second.node;
  const std::string& base_dir = user_it->second.base_dir;
  where = "users[" + user_name + "]";
  if (auto st = DataOrFile(user, where, "client-certificate", base_dir, cfg.client_cert_pem); !st) {
    return std::move(st).take_error();
  }
  if (auto st = DataOrFile(user, where, "client-key", base_dir, cfg.client_key_pem); !st) {
    return std::move(st).take_error();
  }
  if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty()) {
    return Error{where + ": client-certificate and client-key must both be set"};
  }
  cfg.token = Str(user, "token");
  std::string token_file = Str(user, "tokenFile");
  if (cfg.token.empty() && !token_file.empty()) {
    auto token = ReadFile(Resolve(base_dir, token_file), where + ".tokenFile");
    if (!token) return std::move(token).take_error();
    cfg.token = std::string(Trim(*token));
  }
  cfg.username = Str(user, "username");
  cfg.password = Str(user, "password");
  if (const YAML::Node exec = user["exec"]; exec && !exec.IsNull()) {
    auto e = ParseExec(exec, where + ".exec", base_dir);
    if (!e) return std::move(e).take_error();
    Json info = {{"server", cfg.server},
                 {"insecure-skip-tls-verify", cfg.insecure_skip_tls_verify}};
    if (!cfg.ca_pem.empty()) info["certificate-authority-data"] = Base64Encode(cfg.ca_pem);
    if (!cfg.tls_server_name.empty()) info["tls-server-name"] = cfg.tls_server_name;
    if (!cfg.proxy_url.empty()) info["proxy-url"] = cfg.proxy_url;
    e->cluster_json = info.dump();
    cfg.exec = std::move(*e);
  }
  return cfg;
}

Result<YAML::Node> LoadYaml(std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Error{std::string("kubeconfig: not YAML: ") + e.what()};
  }
  if (root.IsNull()) return YAML::Node(YAML::NodeType::Map);  // an empty file merges as nothing
  if (!root.IsMap()) return Error{"kubeconfig: not a YAML map"};
  return root;
}

void Merge(Merged& m, const YAML::Node& root, const std::string& base_dir) {
  if (m.current_context.empty()) m.current_context = Str(root, "current-context");
  MergeSection(root, "clusters", "cluster", base_dir, m.clusters);
  MergeSection(root, "users", "user", base_dir, m.users);
  MergeSection(root, "contexts", "context", base_dir, m.contexts);
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

Result<RestConfig> ParseKubeconfigs(const std::vector<KubeconfigText>& files,
                                    std::string_view context) {
  try {
    Merged m;
    for (const auto& f : files) {
      auto root = LoadYaml(f.yaml);
      if (!root) return std::move(root).take_error();
      Merge(m, *root, f.base_dir);
    }
    return FromMerged(m, context);
  } catch (const YAML::Exception& e) {
    return Error{std::string("kubeconfig: unexpected shape: ") + e.what()};
  }
}

Result<RestConfig> ParseKubeconfig(std::string_view yaml_text, const std::string& base_dir,
                                   std::string_view context) {
  return ParseKubeconfigs({KubeconfigText{std::string(yaml_text), base_dir}}, context);
}

Result<RestConfig> LoadKubeconfigFile(const std::string& path, std::string_view context) {
  auto text = ReadFile(path, "kubeconfig");
  if (!text) return std::move(text).take_error();
  auto cfg = ParseKubeconfig(*text, DirOf(path), context);
  if (!cfg) return Error{"kubeconfig " + Quote(path) + ": " + cfg.error()};
  return cfg;
}

Result<RestConfig> LoadKubeconfigFiles(const std::vector<std::string>& paths,
                                       std::string_view context) {
  std::vector<KubeconfigText> files;
  for (const auto& path : paths) {
    if (path.empty() || access(path.c_str(), F_OK) != 0) continue;
    auto text = ReadFile(path, "kubeconfig");
    if (!text) return std::move(text).take_error();
    files.push_back({std::move(*text), DirOf(path)});
  }
  std::string list = Join(paths, ":");
  if (files.empty()) return Error{"kubeconfig " + Quote(list) + ": no such file"};
  auto cfg = ParseKubeconfigs(files, context);
  if (!cfg) return Error{"kubeconfig " + Quote(list) + ": " + cfg.error()};
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

Result<RestConfig> LoadConfig(const std::string& kubeconfig_flag, std::string_view context) {
  if (!kubeconfig_flag.empty()) return LoadKubeconfigFile(kubeconfig_flag, context);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env) {
    std::vector<std::string> paths;
    for (auto p : Split(env, ':')) paths.emplace_back(p);
    return LoadKubeconfigFiles(paths, context);
  }
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
      context.empty() && host != nullptr && *host) {
    return InClusterConfig();
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr) return Error{"no kubeconfig: --kubeconfig, KUBECONFIG and HOME unset"};
  return LoadKubeconfigFile(std::string(home) + "/.kube/config", context);
}

}  // namespace hami::k8s
