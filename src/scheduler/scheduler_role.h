// The hami.io/scheduler-role pod label (docs/protocol.md#leader-election): the leader labels the
// scheduler pods of its namespace, those selected by app.kubernetes.io/component=hami-scheduler,
// with `leader` (its own pod, $POD_NAME) or `follower` (every other one). Only pods whose label
// differs are patched, so a steady state costs one list per pass.
#ifndef HAMI_SCHEDULER_SCHEDULER_ROLE_H_
#define HAMI_SCHEDULER_SCHEDULER_ROLE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"
#include "k8s/client.h"
#include "protocol/keys.h"

namespace hami::scheduler {

// The label key and values are protocol's (protocol/keys.h), the one place keys are spelled.
inline constexpr std::string_view kSchedulerRoleLabel = protocol::kSchedulerRoleLabelKey;
inline constexpr std::string_view kSchedulerComponentSelector =
    "app.kubernetes.io/component=hami-scheduler";

// Run by the leader: labels the pods of `pod_namespace` matching the selector; `self` (the
// leader's own pod name) gets "leader", the others "follower". Returns how many pods were
// patched, or the first API error (the list, or a patch; later pods are then not visited).
Result<size_t> LabelSchedulerPods(k8s::Client& client, const std::string& pod_namespace,
                                  const std::string& self);

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_SCHEDULER_ROLE_H_
