// Finding and running helm in tests. scripts/bootstrap installs helm v3.17.3 at
// <source root>/.tools/bin/helm; $HAMI_HELM overrides that path. Tests run with the source root
// as their working directory (hami_add_module_tests). Header-only.
#ifndef HAMI_TESTS_CHART_HELM_H_
#define HAMI_TESTS_CHART_HELM_H_

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace hami::chart_test {

// The helm binary to use, or "" when there is none (tests then GTEST_SKIP with SkipReason()).
inline std::string FindHelm() {
  if (const char* env = std::getenv("HAMI_HELM"); env != nullptr && *env != '\0') {
    return ::access(env, X_OK) == 0 ? std::string(env) : std::string();
  }
  const std::string bundled = std::filesystem::absolute(".tools/bin/helm").string();
  return ::access(bundled.c_str(), X_OK) == 0 ? bundled : std::string();
}

inline std::string SkipReason() {
  return "helm not found (.tools/bin/helm or $HAMI_HELM): run scripts/bootstrap to install it; "
         "the chart checks are SKIPPED, not passed";
}

// Quotes one shell word.
inline std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `command` with /bin/sh, capturing stdout and stderr apart.
inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  char err_path[] = "/tmp/hami-chart-test-XXXXXX";
  const int fd = ::mkstemp(err_path);
  if (fd < 0) return result;
  ::close(fd);
  FILE* pipe = ::popen((command + " 2>" + ShellQuote(err_path)).c_str(), "r");
  if (pipe != nullptr) {
    std::array<char, 65536> buf{};
    size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.out.append(buf.data(), n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::ifstream err(err_path);
  std::stringstream ss;
  ss << err.rdbuf();
  result.err = ss.str();
  std::remove(err_path);
  return result;
}

}  // namespace hami::chart_test

#endif  // HAMI_TESTS_CHART_HELM_H_
