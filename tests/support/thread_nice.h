// The threads of a process by name (/proc/<pid>/task/<tid>/comm) with their nice values (field
// 19 of .../stat), for tests of which threads a component lowers (common/thread.h).
#ifndef HAMI_TESTS_SUPPORT_THREAD_NICE_H_
#define HAMI_TESTS_SUPPORT_THREAD_NICE_H_

#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace hami::testing {

// name -> the nice value of each thread of that name.
inline std::map<std::string, std::vector<int>> ThreadNices(pid_t pid = getpid()) {
  std::map<std::string, std::vector<int>> out;
  std::error_code ec;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    std::ifstream statf(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(statf)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');  // the name may hold spaces: fields follow the ')'
    if (name.empty() || close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    int nice = 0;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
      if (i == 19) nice = std::stoi(field);
    }
    out[name].push_back(nice);
  }
  return out;
}

}  // namespace hami::testing

#endif  // HAMI_TESTS_SUPPORT_THREAD_NICE_H_
