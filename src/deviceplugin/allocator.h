// Allocate and GetPreferredAllocation against the API server
// (docs/protocol.md#device-plugin-api-and-allocate): find the pod being bound to this node, plan
// the answer (allocate.h), consume the served entries of `hami.io/vgpu-devices-to-allocate`, and
// after the pod's last container set `hami.io/bind-phase: success` and release the node lock. On
// any error after the pod is known: `bind-phase: failed` and the lock released, so no path leaves a
// pod `allocating`.
#ifndef HAMI_DEVICEPLUGIN_ALLOCATOR_H_
#define HAMI_DEVICEPLUGIN_ALLOCATOR_H_

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "deviceplugin/allocate.h"
#include "k8s/object.h"

namespace hami::k8s {
class Client;
}

namespace hami::deviceplugin {

class MigManager;
struct RealisedMig;

// The pending pod on `node` (docs/protocol.md#device-plugin-api-and-allocate): the owner named by
// the node lock when there is one (trusted as is); else the first pod with spec.nodeName = node,
// phase Pending, a bind-time, bind-phase allocating or success, and vgpu-node = node. A malformed
// lock is an error. `lock`, when given, receives the node's hami.io/mutex.lock value as read (""
// when none). Each read is retried on a transient API error, as Allocate's writes are.
Result<k8s::Json> FindPendingPod(k8s::Client& client, std::string_view node,
                                 std::string* lock = nullptr);

// The pod's containers in annotation order (init containers, then containers), with
// CUDA_DISABLE_CONTROL read from each container's literal env and each container's request
// limit (ContainerInfo::limit) from its NVIDIA resources under `config`'s memoryFactor and
// defaults.
PodView PodViewFromJson(const k8s::Json& pod, const PluginConfig& config = {});

// A random RFC 4122 version-4 UUID (the shared cache file name).
std::string RandomUuid();

class Allocator {
 public:
  // `client` must outlive the allocator. `new_cache_id` defaults to RandomUuid.
  Allocator(k8s::Client* client, std::string node, AllocateEnv env,
            std::function<std::string()> new_cache_id = RandomUuid);

  // One kubelet Allocate call: `requests` are the device ID lists of its container requests.
  // Serialised (one at a time per plugin). Errors name the pod and the reason.
  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests);

  // GetPreferredAllocation (see PreferReplicas); without a pending pod, the first IDs.
  std::vector<std::vector<std::string>> Prefer(
      const std::vector<std::vector<std::string>>& available, const std::vector<int32_t>& sizes);

  const AllocateEnv& env() const { return env_; }

  // MIG mode (docs/MIG.md "Device plugin"): with a manager, Allocate creates or reuses each
  // container's reserved instances, answers their MIG UUIDs and writes the runtime ids into
  // hami.io/vgpu-mig-allocations with the consumed entries; on a later failure the instances it
  // created are destroyed again. Without one (hami-sim's inventory nodes) a MIG node answers as
  // hami-core. `mig` must outlive the allocator; set before serving.
  void set_mig_manager(MigManager* mig) { mig_ = mig; }

 private:
  Result<std::string> ApplyMig(const k8s::Json& pod_json, const PodView& pod, AllocationPlan* plan,
                               std::vector<RealisedMig>* realised);
  Status Fail(const PodView& pod, const std::string& reason, std::string_view lock);
  Status PrepareHostDirs(const PodView& pod, const AllocationPlan& plan);

  k8s::Client* client_;
  const std::string node_;
  const AllocateEnv env_;
  std::function<std::string()> new_cache_id_;
  MigManager* mig_ = nullptr;
  std::mutex mu_;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_ALLOCATOR_H_
