// Fuzzes the node lock parser and LockNode decision: never crashes; whatever parses re-formats
// to a value that parses to the same instant (to the second), offset and owner.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/node_lock.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  hami::protocol::LockRequest req{"node", in, "ns", "pod", hami::SystemTime{}, hami::Zone::Utc()};
  req.owner_exists = size % 2 == 0;
  (void)hami::protocol::DecideNodeLock(req);
  auto lock = hami::protocol::ParseNodeLock(in);
  if (!lock) return 0;
  auto again = hami::protocol::ParseNodeLock(hami::protocol::FormatNodeLock(*lock));
  if (!again) std::abort();
  if (again->time.instant != std::chrono::floor<std::chrono::seconds>(lock->time.instant) ||
      again->time.offset_seconds != lock->time.offset_seconds || again->owner != lock->owner) {
    std::abort();
  }
  return 0;
}
