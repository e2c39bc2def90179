#include "scheduler/scheduler_role.h"

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "k8s/object.h"

namespace hami::scheduler {

Result<size_t> LabelSchedulerPods(k8s::Client& client, const std::string& pod_namespace,
                                  const std::string& self) {
  k8s::ListOptions opts;
  opts.label_selector = std::string(kSchedulerComponentSelector);
  auto pods = client.List(k8s::resources::kPods, pod_namespace, opts);
  if (!pods) {
    return Error{"list scheduler pods in " + Quote(pod_namespace) + ": " + pods.error().ToString()};
  }
  const std::string label(kSchedulerRoleLabel);
  size_t patched = 0;
  for (const nlohmann::json& pod : pods->items) {
    const std::string name = k8s::Name(pod);
    const std::string want(name == self ? protocol::kSchedulerRoleLeader
                                        : protocol::kSchedulerRoleFollower);
    k8s::StringMap labels = k8s::Labels(pod);
    auto it = labels.find(label);
    if (it != labels.end() && it->second == want) continue;
    nlohmann::json patch = {{"metadata", {{"labels", {{label, want}}}}}};
    auto r =
        client.Patch(k8s::resources::kPods, pod_namespace, name, k8s::PatchType::kMerge, patch);
    if (!r) return Error{"label pod " + Quote(name) + ": " + r.error().ToString()};
    ++patched;
  }
  return patched;
}

}  // namespace hami::scheduler
