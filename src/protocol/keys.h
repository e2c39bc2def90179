// Annotation and label keys on pods and nodes that are not tied to one vendor
// (docs/protocol.md#pod-annotations). Vendor-specific keys (register, handshake, to-allocate,
// allocated, type/uuid selection) live in vendor.h.
#ifndef HAMI_PROTOCOL_KEYS_H_
#define HAMI_PROTOCOL_KEYS_H_

#include <string_view>

namespace hami::protocol {

// Pod annotations written by the scheduler's Bind and updated by the device plugin (bind.h).
inline constexpr std::string_view kBindPhaseKey = "hami.io/bind-phase";
inline constexpr std::string_view kBindTimeKey = "hami.io/bind-time";
// Pod annotation *and* label: the node chosen by Filter (the monitor selects pods by the label).
inline constexpr std::string_view kVgpuNodeKey = "hami.io/vgpu-node";
// Pod annotation: Unix seconds (decimal) of the Filter decision.
inline constexpr std::string_view kVgpuTimeKey = "hami.io/vgpu-time";
// Pod annotation (MIG only): JSON placement list.
inline constexpr std::string_view kVgpuMigAllocationsKey = "hami.io/vgpu-mig-allocations";

// Node annotation: the node lock, one key shared by every vendor (node_lock.h).
inline constexpr std::string_view kNodeLockKey = "hami.io/mutex.lock";
// Node annotation (admin): CSV of device UUIDs rejected for new pods.
inline constexpr std::string_view kDeviceCordonKey = "hami.io/device-cordon";
// Node annotation: NVIDIA pair scores (JSON).
inline constexpr std::string_view kNodeNvidiaScoreKey = "hami.io/node-nvidia-score";

// Pod annotations a user may set.
inline constexpr std::string_view kDeviceScoringWeightsKey = "hami.io/device-scoring-weights";
inline constexpr std::string_view kNodeSchedulerPolicyKey = "hami.io/node-scheduler-policy";
inline constexpr std::string_view kGpuSchedulerPolicyKey = "hami.io/gpu-scheduler-policy";
inline constexpr std::string_view kNumaBindKey = "nvidia.com/numa-bind";
inline constexpr std::string_view kVgpuModeKey = "nvidia.com/vgpu-mode";

// Label on pods and namespaces; value "ignore" keeps the webhook away.
inline constexpr std::string_view kWebhookLabelKey = "hami.io/webhook";
inline constexpr std::string_view kWebhookIgnoreValue = "ignore";
// Label the leader scheduler puts on scheduler pods: "leader" or "follower".
inline constexpr std::string_view kSchedulerRoleLabelKey = "hami.io/scheduler-role";
inline constexpr std::string_view kSchedulerRoleLeader = "leader";
inline constexpr std::string_view kSchedulerRoleFollower = "follower";

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_KEYS_H_
