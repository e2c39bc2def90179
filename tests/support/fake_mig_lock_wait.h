// A MigLockWait (deviceplugin/mig_apply_lock.h) on a FakeClock for the tests of the bounded wait
// for the MIG apply lock: 1000 ms polled every 100 ms; each sleep counts in *sleeps, runs
// `on_sleep` with that count (when set) and then advances the clock instead of sleeping.
#ifndef HAMI_TESTS_SUPPORT_FAKE_MIG_LOCK_WAIT_H_
#define HAMI_TESTS_SUPPORT_FAKE_MIG_LOCK_WAIT_H_

#include <chrono>
#include <functional>

#include "common/clock.h"
#include "deviceplugin/mig_apply_lock.h"

namespace hami::testing {

inline deviceplugin::MigLockWait FakeMigLockWait(FakeClock* clock, int* sleeps,
                                                 std::function<void(int)> on_sleep = {}) {
  return {std::chrono::milliseconds(1000), std::chrono::milliseconds(100), clock,
          [clock, sleeps, on_sleep](std::chrono::milliseconds d) {
            ++*sleeps;
            if (on_sleep) on_sleep(*sleeps);
            clock->Advance(d);
          }};
}

}  // namespace hami::testing

#endif  // HAMI_TESTS_SUPPORT_FAKE_MIG_LOCK_WAIT_H_
