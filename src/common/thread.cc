#include "common/thread.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace hami {

void NameThisThread(std::string_view name) {
  std::string n(name.substr(0, 15));
  pthread_setname_np(pthread_self(), n.c_str());
}

int ThisThreadNice() {
  return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));  // Linux: per thread
}

Status LowerThisThreadPriority(int increment) {
  if (increment < 0 || increment > 19) {
    return Error{"nice increment " + std::to_string(increment) + ": want 0 to 19"};
  }
  if (increment == 0) return OkStatus();
  const int target = std::min(ThisThreadNice() + increment, 19);
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), target) != 0) {
    return Error{"setpriority(" + std::to_string(target) + "): " + std::strerror(errno)};
  }
  return OkStatus();
}

}  // namespace hami
