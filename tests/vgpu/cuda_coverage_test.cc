// Coverage by construction (issue 29): every driver entry point CUDA 13's cuda.h declares (all
// versions and _ptsz/_ptds variants, data/cuda13_entry_points.txt) is hooked by libvgpu.so or
// passed through deliberately, with the reason in data/cuda_passthrough.tsv. The committed list
// is checked against /usr/local/cuda/include/cuda.h when present. And cuGetProcAddress never
// hands out a driver entry point libvgpu hooks, at cudaVersion 2000, 3020, 11000, 12000, 13000,
// with and without the per-thread-default-stream flag (mem_app `resolver`).
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/vgpu/test_env.h"

namespace hami::vgpu {
namespace {

constexpr char kCudaHeader[] = "/usr/local/cuda/include/cuda.h";

std::string DataPath(const char* name) { return std::string(VGPU_DATA_DIR) + "/" + name; }

std::set<std::string> ReadList(const std::string& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') names.insert(line);
  }
  return names;
}

std::map<std::string, std::string> ReadTable(const std::string& path) {
  std::map<std::string, std::string> table;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto tab = line.find('\t');
    table[line.substr(0, tab)] = tab == std::string::npos ? "" : line.substr(tab + 1);
  }
  return table;
}

bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The entry points cuda.h declares: `CUresult CUDAAPI <name>(` mapped through the header's
// `#define <name> <target>` / `__CUDA_API_PTDS(<target>)` / `__CUDA_API_PTSZ(<target>)` (a
// per-thread target is exported both plain and with its suffix); declarations after "CUDA API
// versioning support" are the pre-13 names, taken literally.
std::set<std::string> ExtractEntryPoints(const std::string& raw) {
  // A declaration may break the line after CUDAAPI: joined first.
  std::string text;
  text.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    text += raw[i];
    if (raw.compare(i, 7, "CUDAAPI") == 0) {
      text += raw.substr(i + 1, 6);
      i += 7;
      while (i < raw.size() && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n')) ++i;
      text += ' ';
      --i;
    }
  }
  std::map<std::string, std::pair<std::string, std::string>> defines;
  std::set<std::string> names;
  std::istringstream in(text);
  bool versioning = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("CUDA API versioning support") != std::string::npos) versioning = true;
    std::size_t p = line.find_first_not_of(" \t");
    if (!versioning && p != std::string::npos && line.compare(p, 7, "#define") == 0) {
      std::istringstream fields(line.substr(p + 7));
      std::string name, expr;
      fields >> name >> expr;
      if (name.rfind("cu", 0) != 0 || expr.empty()) continue;
      for (const char* macro : {"__CUDA_API_PTDS(", "__CUDA_API_PTSZ("}) {
        if (expr.rfind(macro, 0) == 0 && expr.back() == ')') {
          std::string target = expr.substr(std::strlen(macro));
          target.pop_back();
          defines[name] = {target, macro[13] == 'D' ? "_ptds" : "_ptsz"};
        }
      }
      if (expr.rfind("cu", 0) == 0 &&
          std::all_of(expr.begin(), expr.end(), [](char c) { return IdentChar(c); })) {
        defines[name] = {expr, ""};
      }
      continue;
    }
    const std::string marker = "CUresult CUDAAPI ";
    for (std::size_t at = line.find(marker); at != std::string::npos;
         at = line.find(marker, at + 1)) {
      std::size_t b = at + marker.size(), e = b;
      while (e < line.size() && IdentChar(line[e])) ++e;
      std::size_t paren = line.find_first_not_of(" \t", e);
      if (e == b || paren == std::string::npos || line[paren] != '(') continue;
      std::string name = line.substr(b, e - b);
      auto d = defines.find(name);
      if (versioning || d == defines.end()) {
        names.insert(name);
      } else {
        names.insert(d->second.first);
        if (!d->second.second.empty()) names.insert(d->second.first + d->second.second);
      }
    }
  }
  return names;
}

TEST(CudaCoverageTest, CommittedEntryPointListMatchesCudaH) {
  std::ifstream header(kCudaHeader);
  if (!header) GTEST_SKIP() << kCudaHeader << " absent: the committed list is used as it is";
  std::stringstream text;
  text << header.rdbuf();
  std::set<std::string> extracted = ExtractEntryPoints(text.str());
  std::set<std::string> committed = ReadList(DataPath("cuda13_entry_points.txt"));
  ASSERT_GT(extracted.size(), 600u);
  std::string missing, extra;
  for (const auto& n : extracted) {
    if (committed.count(n) == 0) missing += " " + n;
  }
  for (const auto& n : committed) {
    if (extracted.count(n) == 0) extra += " " + n;
  }
  EXPECT_TRUE(missing.empty() && extra.empty())
      << "tests/vgpu/data/cuda13_entry_points.txt is stale against " << kCudaHeader
      << "\n  declared but not listed:" << missing << "\n  listed but not declared:" << extra;
}

TEST(CudaCoverageTest, EveryEntryPointIsHookedOrPassedDeliberately) {
  std::set<std::string> names = ReadList(DataPath("cuda13_entry_points.txt"));
  std::map<std::string, std::string> table = ReadTable(DataPath("cuda_passthrough.tsv"));
  ASSERT_GT(names.size(), 600u);
  void* lib = dlopen(testing::LibPath().c_str(), RTLD_LAZY | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  Dl_info self{};
  ASSERT_NE(dladdr(dlsym(lib, "cuMemAlloc_v2"), &self), 0);
  std::string uncovered, doubly, reasonless;
  int hooked = 0;
  for (const auto& name : names) {
    void* fn = dlsym(lib, name.c_str());
    Dl_info where{};
    bool is_hook = fn != nullptr && dladdr(fn, &where) != 0 && where.dli_fbase == self.dli_fbase;
    auto listed = table.find(name);
    if (is_hook) ++hooked;
    if (!is_hook && listed == table.end()) uncovered += " " + name;
    if (is_hook && listed != table.end()) doubly += " " + name;
    if (listed != table.end() && listed->second.size() < 10) reasonless += " " + name;
  }
  std::string stale;
  for (const auto& [name, why] : table) {
    if (names.count(name) == 0) stale += " " + name;
  }
  EXPECT_TRUE(uncovered.empty()) << "neither hooked nor in data/cuda_passthrough.tsv:" << uncovered;
  EXPECT_TRUE(doubly.empty()) << "hooked but listed as passed through:" << doubly;
  EXPECT_TRUE(reasonless.empty()) << "passed through without a reason:" << reasonless;
  EXPECT_TRUE(stale.empty()) << "listed but not a CUDA 13 entry point:" << stale;
  std::printf("%zu entry points: %d hooked, %zu passed through deliberately\n", names.size(),
              hooked, table.size());
  dlclose(lib);
}

// Runs mem_app `resolver` under LD_PRELOAD (plain and with the driver's internal aliases).
TEST(CudaCoverageTest, GetProcAddressNeverHandsOutAHookedDriverEntry) {
  char tmpl[] = "/tmp/vgpu_cov_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  for (const char* aliases : {"0", "1"}) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string lib = testing::LibPath();
      std::vector<std::string> env = {
          "LD_PRELOAD=" + lib,
          "LD_LIBRARY_PATH=" + testing::FakesDir(),
          "VGPU_LIB_PATH=" + lib,
          "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir + "/vgpu.cache",
          "CUDA_DEVICE_MEMORY_LIMIT=1g",
          std::string("FAKE_CUDA_PROC_ALIASES=") + aliases,
          "VGPU_ENTRY_POINTS=" + DataPath("cuda13_entry_points.txt"),
      };
      std::vector<std::string> argv = {VGPU_MEM_APP_FILE, "resolver", "1073741824"};
      std::vector<char*> cargv, cenv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      for (auto& e : env) cenv.push_back(e.data());
      cenv.push_back(nullptr);
      execve(cargv[0], cargv.data(), cenv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "aliases=" << aliases << " status " << status;
  }
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace hami::vgpu
