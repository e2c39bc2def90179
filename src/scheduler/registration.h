// The registration pass (spec hami.md §5, seed "Health Checks"): per node and per backend with a
// handshake key, the handshake verdict (protocol::CheckHandshake: write Requesting_<now> when no
// Requesting value is pending; 60 s window; an expired Requesting with a positive allocatable
// count is tolerated), then the node's devices go into the usage index. A register annotation
// that does not decode skips the node with a warning Event; an unhealthy verdict takes the node's
// devices out of scheduling and deletes the handshake key. The server runs a pass every 15 s, on
// node add and at start; the clock is injected. NVIDIA also follows the node's allocatable
// nvidia.com/gpu count: a count that drops to 0 after being positive takes the devices out.
//
// Also the pod side of the usage index: OnPod/OnPodDeleted keep the index equal to the allocated
// annotations of live pods (a pod leaves on Succeeded, Failed or deletion).
#ifndef HAMI_SCHEDULER_REGISTRATION_H_
#define HAMI_SCHEDULER_REGISTRATION_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "common/time_format.h"
#include "device/device.h"
#include "device/usage_index.h"
#include "k8s/client.h"

namespace hami::scheduler {

struct RegistrationOptions {
  std::string node_label_selector{};  // --node-label-selector ("k=v,k2=v2")
  Zone zone = Zone::Local();          // handshake timestamps are local wall-clock times
  std::string component = "hami-scheduler";
  bool record_events = true;
};

// Thread-safe as far as the index is; passes should not overlap (the server runs one loop).
class Registrar {
 public:
  // Everything referenced must outlive the registrar.
  Registrar(const device::Registry& registry, device::UsageIndex& index, k8s::Client& client,
            const Clock& clock, RegistrationOptions options);

  // Lists the nodes (label selector) and registers each; nodes gone since the last pass leave
  // the index. Returns how many nodes are registered, or the list error.
  Result<size_t> RunOnce();
  // One node object (e.g. from a node-add event); true when its devices are in the index.
  bool RegisterNode(const nlohmann::json& node);

  // Pod informer handlers.
  void OnPod(const nlohmann::json& pod);
  void OnPodDeleted(const nlohmann::json& pod);

 private:
  const device::Registry& registry_;
  device::UsageIndex& index_;
  k8s::Client& client_;
  const Clock& clock_;
  const RegistrationOptions options_;

  std::mutex mu_;
  // NVIDIA: the node's allocatable nvidia.com/gpu count at the last pass.
  std::map<std::string, int64_t> last_allocatable_;
};

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_REGISTRATION_H_
