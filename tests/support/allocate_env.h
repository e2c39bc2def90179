// Shared by the tests and the benchmark around the device plugin's Allocate (tests/deviceplugin,
// tests/nodelock, tests/integration/e2e_test.cc, bench/deviceplugin): the node and the seed's two
// GPUs, an unthrottled client for the sim API server, the pod the scheduler leaves bound to the
// node, and the node lock it holds. Wire strings are spelled out here rather than taken from
// src/protocol, so a changed key fails the tests. Include as "support/allocate_env.h".
#ifndef HAMI_TESTS_SUPPORT_ALLOCATE_ENV_H_
#define HAMI_TESTS_SUPPORT_ALLOCATE_ENV_H_

#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/time_format.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "protocol/node_lock.h"

namespace hami::test_support {

// The node, and the seed's two V100s on it (examples/inventory/two-v100.yaml).
inline constexpr const char* kNode = "node-1";
inline constexpr const char* kGpu0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
inline constexpr const char* kGpu1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";

// The node lock annotation, and its value when default/demo holds it (taken at a fixed time).
inline constexpr const char* kLockKey = "hami.io/mutex.lock";
inline constexpr const char* kDemoLock = "2026-08-21T10:00:05Z,default,demo";

// A node with nothing but its name.
inline k8s::Json BareNode(const std::string& name = kNode) {
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
}

// A client for the server at `url` (sim::ApiServer::url()) without client-side throttling.
inline std::unique_ptr<k8s::Client> NewClient(const std::string& url) {
  k8s::RestConfig cfg;
  cfg.server = url;
  cfg.qps = 0;
  return std::make_unique<k8s::Client>(cfg);
}

// Sets the node lock annotation on `node` to `value`, or removes it (nullopt). Answers the
// patched node.
inline k8s::ApiResult<k8s::Json> SetNodeLock(k8s::Client& client,
                                             const std::optional<std::string>& value,
                                             const std::string& node = kNode) {
  k8s::Json patch;
  patch["metadata"]["annotations"][kLockKey] = value ? k8s::Json(*value) : k8s::Json(nullptr);
  return client.Patch(k8s::resources::kNodes, "", node, k8s::PatchType::kMerge, patch);
}

// The node lock annotation on `node` (nullopt when absent), or the error reading the node.
inline k8s::ApiResult<std::optional<std::string>> NodeLock(k8s::Client& client,
                                                           const std::string& node = kNode) {
  auto n = client.Get(k8s::resources::kNodes, "", node);
  if (!n) return std::move(n).take_error();
  return k8s::Annotation(*n, kLockKey);
}

// default/<name> as the scheduler leaves it after Filter and Bind on `node`: bind-phase `phase`,
// a bind-time, vgpu-node, and `to_allocate` as both the allocated and the to-allocate devices;
// one container "main" with the CUDA_TASK_PRIORITY env the webhook sets from nvidia.com/priority.
inline k8s::Json BoundPod(const std::string& name, const std::string& to_allocate,
                          const std::string& phase = "allocating",
                          const std::string& node = kNode) {
  k8s::Json ctr = {{"name", "main"}, {"image", "cuda"}};
  ctr["env"] = k8s::Json::array({{{"name", "CUDA_TASK_PRIORITY"}, {"value", "0"}}});
  k8s::Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}};
  pod["metadata"]["annotations"] = {{"hami.io/bind-phase", phase},
                                    {"hami.io/bind-time", "1716199325"},
                                    {"hami.io/vgpu-node", node},
                                    {"hami.io/vgpu-devices-allocated", to_allocate},
                                    {"hami.io/vgpu-devices-to-allocate", to_allocate}};
  pod["spec"] = {{"nodeName", node}, {"containers", k8s::Json::array({ctr})}};
  return pod;
}

// Creates BoundPod(name, to_allocate, phase) and, when `lock`, the node lock the pod holds (taken
// at `now`, in UTC). Answers the created pod, or the first API error.
inline k8s::ApiResult<k8s::Json> CreateBoundPod(k8s::Client& client, const std::string& name,
                                                const std::string& to_allocate, bool lock = true,
                                                const std::string& phase = "allocating",
                                                SystemTime now = RealClock().Now()) {
  auto created =
      client.Create(k8s::resources::kPods, "default", BoundPod(name, to_allocate, phase));
  if (!created || !lock) return created;
  auto locked = SetNodeLock(client, protocol::NodeLockValue(now, Zone::Utc(), "default", name));
  if (!locked) return std::move(locked).take_error();
  return created;
}

}  // namespace hami::test_support

#endif  // HAMI_TESTS_SUPPORT_ALLOCATE_ENV_H_
