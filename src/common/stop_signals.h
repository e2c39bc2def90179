// SIGTERM and SIGINT as every long-running binary handles them: blocked in all threads (so no
// thread is interrupted by one) and taken by the main thread's sigwait, which then stops the
// components in order (graceful shutdown).
#ifndef HAMI_COMMON_STOP_SIGNALS_H_
#define HAMI_COMMON_STOP_SIGNALS_H_

#include <signal.h>

namespace hami {

// Blocks SIGTERM and SIGINT in the calling thread and returns the set. Call it before any thread
// starts: threads inherit the mask.
sigset_t BlockStopSignals();

// Waits for a signal of `set` and returns it.
int WaitForStopSignal(const sigset_t& set);

}  // namespace hami

#endif  // HAMI_COMMON_STOP_SIGNALS_H_
