// Per-thread settings for a server's background threads: a name that `top -H`, `ps -L` and
// /proc/<pid>/task/<tid>/comm show, and a lower CPU priority (a higher nice value) for work that
// may wait while a latency-critical thread (hami-scheduler's /filter loop) runs. Raising a
// thread's nice value needs no privilege; lowering it again would (CAP_SYS_NICE), so it is only
// ever raised.
#ifndef HAMI_COMMON_THREAD_H_
#define HAMI_COMMON_THREAD_H_

#include <string_view>

#include "common/result.h"

namespace hami {

// Names the calling thread; Linux keeps the first 15 bytes.
void NameThisThread(std::string_view name);

// Adds `increment` (0-19) to the calling thread's nice value, capped at 19. 0 does nothing.
Status LowerThisThreadPriority(int increment);

// The calling thread's nice value.
int ThisThreadNice();

}  // namespace hami

#endif  // HAMI_COMMON_THREAD_H_
