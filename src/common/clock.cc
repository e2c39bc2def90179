#include "common/clock.h"

namespace hami {
namespace {
class SystemClock : public Clock {
 public:
  SystemTime Now() const override { return std::chrono::system_clock::now(); }
};
}  // namespace

const Clock& RealClock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace hami
