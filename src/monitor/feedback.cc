#include "monitor/feedback.h"

#include <limits>
#include <map>
#include <utility>

namespace hami::monitor {
namespace {

// Active containers per (GPU uuid, priority).
using Active = std::map<std::pair<std::string, int32_t>, int>;

int Count(const Active& active, const std::string& uuid, int32_t priority) {
  auto it = active.find({uuid, priority});
  return it == active.end() ? 0 : it->second;
}

// Walks the active entries of each GPU below the container's priority, never the range of
// priority values: the container writes its priority (2^31-1 used to loop 2^31 times a pass).
bool HigherActive(const Active& active, const FeedbackState& c) {
  for (const std::string& uuid : c.uuids) {
    for (auto it = active.lower_bound({uuid, std::numeric_limits<int32_t>::min()});
         it != active.end() && it->first.first == uuid && it->first.second < c.priority; ++it) {
      if (it->second > 0) return true;
    }
  }
  return false;
}

bool SharedWithPeerOrHigher(const Active& active, const FeedbackState& c) {
  if (HigherActive(active, c)) return true;
  for (const std::string& uuid : c.uuids) {
    if (Count(active, uuid, c.priority) > 1) return true;
  }
  return false;
}

}  // namespace

void PriorityFeedback(std::vector<FeedbackState>& containers) {
  Active active;
  for (FeedbackState& c : containers) {
    if (c.recent_kernel <= 0) continue;
    --c.recent_kernel;
    if (c.recent_kernel <= 0) continue;
    for (const std::string& uuid : c.uuids) {
      if (!uuid.empty()) ++active[{uuid, c.priority}];
    }
  }
  for (FeedbackState& c : containers) {
    if (HigherActive(active, c)) {
      if (c.recent_kernel >= 0) c.recent_kernel = -1;
    } else if (c.recent_kernel < 0) {
      c.recent_kernel = 0;
    }
    c.utilization_switch = SharedWithPeerOrHigher(active, c) ? 1 : 0;
  }
}

}  // namespace hami::monitor
