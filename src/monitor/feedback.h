// The priority feedback HAMi's monitor runs every 5 s over a node's regions
// (docs/MONITOR.md#priority-feedback): a container whose recent_kernel is > 0 has it decremented,
// and while it is still > 0 afterwards (libvgpu writes 2 at each launch, so "launched within the
// last period") it counts as active on each of its GPUs at its priority (0 = high, 1 = low). Then
// each container is blocked (recent_kernel = -1) while a higher-priority (lower number) container
// is active on one of its GPUs, unblocked (-1 -> 0) otherwise, and gets utilization_switch = 1
// while a higher-priority container or another one of its own priority is active on one of its
// GPUs, 0 otherwise.
#ifndef HAMI_MONITOR_FEEDBACK_H_
#define HAMI_MONITOR_FEEDBACK_H_

#include <cstdint>
#include <string>
#include <vector>

namespace hami::monitor {

// HAMi's two priority levels (CUDA_TASK_PRIORITY, from nvidia.com/priority). The monitor counts
// a region's priority outside them as the nearest one.
inline constexpr int32_t kHighestPriority = 0;
inline constexpr int32_t kLowestPriority = 1;

struct FeedbackState {
  std::vector<std::string> uuids;  // the container's GPUs (empty uuids are ignored)
  int32_t priority = 0;
  int32_t recent_kernel = 0;       // in and out
  int32_t utilization_switch = 0;  // in and out
};

// One feedback pass over every container of the node, in place.
void PriorityFeedback(std::vector<FeedbackState>& containers);

}  // namespace hami::monitor

#endif  // HAMI_MONITOR_FEEDBACK_H_
