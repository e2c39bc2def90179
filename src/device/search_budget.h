// The work a search over device combinations may do (docs/SECURITY.md#the-filters-work-budget).
// A step is one pair score added or compared. A node's exact search is allowed
// kNodeSearchSteps; every node of one Schedule call (one /filter) draws from one SearchBudget of
// ScheduleOptions::search_steps, so a filter's search work is bounded whatever the pod asks.
#ifndef HAMI_DEVICE_SEARCH_BUDGET_H_
#define HAMI_DEVICE_SEARCH_BUDGET_H_

#include <cstdint>

namespace hami::device {

// One node's exhaustive search (about 1 ms); a larger one is replaced by a greedy pick.
inline constexpr uint64_t kNodeSearchSteps = uint64_t{1} << 20;
// One Schedule call over all its candidate nodes (about 30 ms).
inline constexpr uint64_t kFilterSearchSteps = uint64_t{1} << 25;

// Steps left to spend. Not thread-safe: one per Schedule call.
class SearchBudget {
 public:
  explicit SearchBudget(uint64_t steps) : left_(steps) {}
  uint64_t left() const { return left_; }
  // Spends `steps` when that many are left and says so; otherwise spends nothing.
  bool TrySpend(uint64_t steps) {
    if (steps > left_) return false;
    left_ -= steps;
    return true;
  }

 private:
  uint64_t left_;
};

}  // namespace hami::device

#endif  // HAMI_DEVICE_SEARCH_BUDGET_H_
