#include "k8s/exec_credential.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "k8s/base64.h"

extern char** environ;

namespace hami::k8s {
namespace {

using Json = nlohmann::json;

// A credential is small; the cap keeps a runaway plugin from eating memory.
constexpr size_t kMaxOutputBytes = 1 << 20;

std::string Where(const ExecConfig& config) { return "exec plugin " + Quote(config.command); }

std::string StringField(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

Result<ExecCredentialStatus> ParseExecCredential(std::string_view json, const ExecConfig& config) {
  const std::string where = Where(config);
  Result<Json> parsed = hami::ParseJson<Json>(json, 16);
  if (!parsed) return Error{where + ": output is " + parsed.error()};
  const Json& j = *parsed;
  if (!j.is_object()) return Error{where + ": output is not a JSON object"};
  if (StringField(j, "kind") != "ExecCredential") {
    return Error{where + ": kind " + Quote(StringField(j, "kind")) + ": want ExecCredential"};
  }
  if (std::string v = StringField(j, "apiVersion"); v != config.api_version) {
    return Error{where + ": apiVersion " + Quote(v) + ": want " + Quote(config.api_version) +
                 " (the kubeconfig's exec.apiVersion)"};
  }
  auto st = j.find("status");
  if (st == j.end() || !st->is_object()) return Error{where + ": status: missing"};
  ExecCredentialStatus out;
  out.token = StringField(*st, "token");
  out.client_cert_pem = StringField(*st, "clientCertificateData");
  out.client_key_pem = StringField(*st, "clientKeyData");
  if (out.client_cert_pem.empty() != out.client_key_pem.empty()) {
    return Error{where + ": status.clientCertificateData and status.clientKeyData: want both"};
  }
  if (out.token.empty() && out.client_cert_pem.empty()) {
    return Error{where + ": status: no token and no clientCertificateData"};
  }
  if (auto e = st->find("expirationTimestamp"); e != st->end() && !e->is_null()) {
    std::string text = e->is_string() ? e->get<std::string>() : e->dump();
    auto t = ParseRfc3339(text);
    if (!t) return Error{where + ": status.expirationTimestamp " + Quote(text) + ": not RFC 3339"};
    out.expiry = t->instant;
  }
  return out;
}

std::string ExecInfo(const ExecConfig& config, bool interactive) {
  Json spec = {{"interactive", interactive}};
  if (config.provide_cluster_info && !config.cluster_json.empty()) {
    spec["cluster"] = Json::parse(config.cluster_json, nullptr, false);
  }
  return Json{{"apiVersion", config.api_version}, {"kind", "ExecCredential"}, {"spec", spec}}
      .dump();
}

Result<std::string> RunExecPlugin(const ExecConfig& config, const std::string& exec_info,
                                  bool interactive) {
  const std::string where = Where(config);
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    std::string_view key = kv.substr(0, kv.find('='));
    bool overridden = key == "KUBERNETES_EXEC_INFO";
    for (const auto& [k, v] : config.env) overridden = overridden || key == k;
    if (!overridden) env_strings.emplace_back(kv);
  }
  for (const auto& [k, v] : config.env) env_strings.push_back(k + "=" + v);
  env_strings.push_back("KUBERNETES_EXEC_INFO=" + exec_info);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings{config.command};
  argv_strings.insert(argv_strings.end(), config.args.begin(), config.args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Error{where + ": pipe: " + std::strerror(errno)};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  if (!interactive)
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, config.command.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    std::string msg = where + ": cannot run: " + std::strerror(rc);
    if (!config.install_hint.empty()) msg += "; " + config.install_hint;
    return Error{msg};
  }
  std::string out;
  char buf[4096];
  bool too_big = false;
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() + static_cast<size_t>(n) > kMaxOutputBytes) {
      too_big = true;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (too_big) return Error{where + ": output larger than " + std::to_string(kMaxOutputBytes)};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                                        : "killed by signal " + std::to_string(WTERMSIG(status));
    std::string msg = where + ": " + how;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !config.install_hint.empty()) {
      msg += "; " + config.install_hint;
    }
    return Error{msg};
  }
  return out;
}

ExecAuthenticator::ExecAuthenticator(ExecConfig config, const Clock& clock, Runner runner,
                                     std::optional<bool> stdin_is_terminal)
    : config_(std::move(config)),
      clock_(clock),
      runner_(std::move(runner)),
      terminal_(stdin_is_terminal.value_or(isatty(STDIN_FILENO) == 1)) {}

Result<ExecCredentialStatus> ExecAuthenticator::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_ && (!cached_->expiry || clock_.Now() < *cached_->expiry)) return *cached_;
  cached_.reset();
  const std::string& mode = config_.interactive_mode;
  if (mode == "Always" && !terminal_) {
    return Error{Where(config_) +
                 ": interactiveMode Always needs a terminal on stdin, and there is none "
                 "(run it in a terminal, or use a plugin mode that works without one)"};
  }
  const bool interactive = mode != "Never" && terminal_;
  ++runs_;
  auto out = runner_(config_, ExecInfo(config_, interactive), interactive);
  if (!out) return std::move(out).take_error();
  auto cred = ParseExecCredential(*out, config_);
  if (!cred) return cred;
  cached_ = *cred;
  return cred;
}

void ExecAuthenticator::Invalidate(const ExecCredentialStatus& used) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_ && cached_->token == used.token && cached_->client_cert_pem == used.client_cert_pem) {
    cached_.reset();
  }
}

int ExecAuthenticator::runs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_;
}

}  // namespace hami::k8s
