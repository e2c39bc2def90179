// The registration pass (docs/protocol.md#node-registration-and-the-handshake): per node and per
// backend with a handshake key, a health verdict (healthy, need_update). The generic handshake
// (protocol::CheckHandshake) writes Requesting_<now> when no Requesting value is pending, allows
// 60 s for an answer and tolerates an expired Requesting while the node still has allocatable
// devices; each backend may refine that verdict (device::Device::CheckHealth, e.g. NVIDIA's
// allocatable-count and register-string checks). Unhealthy and cached: the handshake key is deleted
// and the vendor's devices leave scheduling. Healthy without need_update: the cached devices stay
// as they are (a node not cached yet is not added). Otherwise the freshly parsed devices are
// stored. A register annotation that does not decode skips the node with a warning Event. The clock
// is injected.
//
// Also the pod side of the usage index: OnPod/OnPodDeleted keep the index equal to the allocated
// annotations of live pods (a pod leaves on Succeeded, Failed or deletion).
#ifndef HAMI_SCHEDULER_REGISTRATION_H_
#define HAMI_SCHEDULER_REGISTRATION_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <vector>
#include "common/clock.h"
#include "common/result.h"

#include "common/time_format.h"
#include "device/device.h"
#include "device/usage_index.h"
#include "k8s/client.h"

namespace hami::scheduler {

// A backend's health verdict for one node (docs/protocol.md#node-registration-and-the-handshake).
struct Health {
  bool healthy = true;
  bool need_update = false;
  bool operator==(const Health&) const = default;
};

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
  // the index. Returns how many nodes are registered, or the list error. The handshake writes
  // the verdicts call for (Requesting_<now>, clean-ups) are made after every node's row is in
  // the index, and `rows_ready` (when given) is called in between with the count: at 5,000
  // nodes those writes are 5,000 throttled PATCHes (100 s at --kube-qps 50), and filters need
  // only the rows.
  Result<size_t> RunOnce(const std::function<void(size_t)>& rows_ready = nullptr);
  // One node object; true when its devices are in the index afterwards. Its handshake writes are
  // made before it returns.
  bool RegisterNode(const nlohmann::json& node);
  // A deleted node: leaves the index, its per-node bookkeeping is dropped.
  void ForgetNode(const std::string& name);

  // Pod informer handlers.
  void OnPod(const nlohmann::json& pod);
  void OnPodDeleted(const nlohmann::json& pod);
  // Keys ("ns/name") of the pods the informer saw holding devices, sorted (for metrics).
  std::vector<std::string> PodKeys() const;

  // Shutting down: a pass under way makes no further handshake write (at 10,000 nodes a pass's
  // writes take minutes at --kube-qps 50, past any termination grace period); the next leader's
  // pass makes them. Passes after it make none.
  void Cancel() { cancelled_ = true; }

 private:
  const device::Registry& registry_;
  device::UsageIndex& index_;
  k8s::Client& client_;
  const Clock& clock_;
  const RegistrationOptions options_;

  // The handshake annotation patch the verdicts call for on one node.
  struct Write {
    std::string node;
    nlohmann::json patch;
    const char* what;  // "handshake", "cleanup" or both, for the log
  };
  // Sets annotation `key` to `value` (null deletes it) in `node`'s write.
  static void AddWrite(const std::string& node, const std::string& key, nlohmann::json value,
                       const char* what, std::vector<Write>* writes);
  // The verdict of `dev` for `node`; the Requesting_<now> or clean-up it decides on is added to
  // `writes`. The verdict assumes the write will land; one that fails is logged and the next
  // pass decides again.
  Health CheckBackend(const device::Device& dev, const nlohmann::json& node, bool cached,
                      std::vector<Write>* writes);
  bool RegisterNode(const nlohmann::json& node, std::vector<Write>* writes);
  void MakeWrites(const std::vector<Write>& writes);

  mutable std::mutex mu_;
  std::set<std::string> pod_keys_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_REGISTRATION_H_
