// A signal handler that allocates while its thread is inside the allocation table (issue 29,
// finding 9) is refused at once instead of spinning on a lock its own thread holds.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "vgpu/alloc_table.h"

namespace hami::vgpu {
namespace {

AllocTable* g_table = nullptr;
volatile sig_atomic_t g_handler_inserted = -1;
volatile sig_atomic_t g_handler_erased = -1;

void Handler(int) {
  AllocEntry out{};
  g_handler_inserted = g_table->Insert(AllocEntry{0x9000, 1, 0, 0}) ? 1 : 0;
  g_handler_erased = g_table->Erase(0x1000, &out) ? 1 : 0;
}

// The predicate runs with the table locked: the signal arrives inside the table.
bool RaiseInside(const AllocEntry&, const void*) {
  raise(SIGUSR1);
  return false;
}

TEST(AllocTableSignalTest, HandlerReenteringTheTableIsRefusedNotDeadlocked) {
  EXPECT_EXIT(
      {
        alarm(10);  // a self-deadlock fails by SIGALRM instead of hanging
        AllocTable table;
        if (!table.Init(16)) _exit(3);
        g_table = &table;
        struct sigaction sa {};
        sa.sa_handler = Handler;
        sigaction(SIGUSR1, &sa, nullptr);
        table.Insert(AllocEntry{0x1000, 1, 0, 0});
        table.EraseWhere(
            RaiseInside, nullptr, [](const AllocEntry&, void*) {}, nullptr);
        // Refused inside; the table still works afterwards.
        AllocEntry out{};
        bool ok = g_handler_inserted == 0 && g_handler_erased == 0 &&
                  table.Insert(AllocEntry{0x9000, 1, 0, 0}) && table.Erase(0x1000, &out);
        _exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace hami::vgpu
